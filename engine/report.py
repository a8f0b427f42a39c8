"""Inference reports: a versioned JSON document with all the data, a self-contained HTML page,
and the comparison of several reports.

JSON schema (``"schema": "layerlab-report"``, ``"version": 2``)::

    {
      "schema": "layerlab-report", "version": 2,
      "date": ISO-8601 time, "model": {"name", "version", "path"},
      "run": {"backend", "device", "format", "iterations", "warmup", "seed",
              "fusing": bool, "graph_capture": bool, "timing": str, "notes": [str]},
      "network": {"avg_ms", "median_ms", "min_ms", "max_ms", "sum_layers_ms", "device_ms", "gap_ms",
                  "launch_bound": bool, "peak_memory_bytes"},
      "device_peaks": {"flops_per_s", "bytes_per_s", "measured", "trials"} or null,
      "layers": [{"name", "type", "output_dims", "output_bytes", "flops", "bytes_read", "bytes_written",
                  "time_ms": {"median", "mean", "min", "max"}, "share", "achieved_flops_per_s",
                  "achieved_bytes_per_s", "intensity", "bound": "compute" | "memory" | "none", "above_roof": bool,
                  "fused_activation": bool, "bypass": bool, "fused_into": str,
                  "device_ms", "gap_ms", "candidates": [str],
                  "kernels": [{"name", "kind", "ms", "grid", "block", "candidate"}]}]
    }

``run.timing`` says how the layer times were measured (``engine.profiling``'s TIMING_ texts: CUPTI kernel records
of a CUDA-graph replay, host clock per layer on the plain run's path, ...). ``device_ms`` and ``gap_ms`` (null where
not measured: the CPU) split a layer's time into its kernels' time and the device's idle time before them;
``launch_bound`` is set when the gaps exceed the kernels' time. ``kernels`` lists what ran for a layer: a GPU
kernel (``grid`` and ``block`` its launch shape), a memory set or copy, or the CPU call (``kind`` "host"), with its
mean time per iteration and the candidate that served it (empty where unknown). ``above_roof`` flags a layer whose
achieved rate lies above the roofline of the measured ``device_peaks``.

Version 1 reports (without ``timing``, ``device_ms``, ``gap_ms``, ``launch_bound``, ``kernels``, ``candidates``,
``above_roof``) still load; readers use ``.get``. ``fused_into`` (absent in older reports) names the layer a format
conversion was fused into (its time is counted there; the conversion's own row then times nothing). Times are
milliseconds; ``share`` is the layer's mean time over the sum of all layers' mean times."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import html
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text
from engine.errors import LayerLabError
from engine.limits import cut
from engine.profiling import KernelStat, ProfileResult

SCHEMA = "layerlab-report"
VERSION = 2
NAME_COLUMN = 40  # text tables: longer layer names keep their last characters


def execution_notes(net: Any, per_layer: bool = True) -> list[str]:
    """What the timed runs of ``net`` executed, for the report: the fusions the fusing rules made, and whether the
    runs replayed a CUDA graph (``per_layer`` is kept for callers; the profile times the plain run's path)."""
    applied = net.fused.applied if net.fused is not None else []
    if applied:
        rules = ", ".join(sorted({a[0] for a in applied}))
        notes = [f"fusing rules applied: {len(applied)} fusion(s) ({rules}); a fused layer is timed as one layer"]
    else:
        notes = ["fusing rules: none applied (switched off, or nothing matched): every layer is timed unfused"]
    if net.backend.supports_graphs:
        notes.append(f"CUDA graph: {net.graph_status}")
    return notes


def layer_type_text(layer: dict[str, Any]) -> str:
    """A report row's type, with ``(fused into X)`` for a format conversion fused into layer X."""
    into = layer.get("fused_into")
    return f"{layer['type']} (fused into {into})" if into else layer["type"]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _kernel_doc(k: KernelStat) -> dict[str, Any]:
    return {"name": k.name, "kind": k.kind, "ms": k.ms, "grid": list(k.grid) if k.grid else None,
            "block": list(k.block) if k.block else None, "candidate": k.candidate}


def build_report(result: ProfileResult, *, model_name: str, model_version: str, model_path: str | None,
                 backend: str, device: str, fmt: str, iterations: int, warmup: int, seed: int = 0,
                 fusing: bool = False, graph_capture: bool = False, notes: list[str] | None = None) -> dict[str, Any]:
    """The report document (see the module documentation for the schema)."""
    layers = []
    sum_mean = sum(lp.stats()["mean"] for lp in result.layers) or 1e-12
    peaks = result.peaks
    above = []
    for lp in result.layers:
        st = lp.stats()
        sec = st["mean"] / 1e3
        moved = lp.bytes_read + lp.bytes_written
        intensity = lp.intensity
        bound = "none"
        if peaks and moved:
            bound = "compute" if intensity >= peaks.ridge else "memory"
        achieved = lp.achieved_flops_per_s
        over = bool(peaks and lp.above_roof(peaks))
        if over:
            above.append(lp.name)
        layers.append({
            "name": lp.name, "type": lp.type, "output_dims": lp.output_dims, "output_bytes": lp.output_bytes,
            "flops": lp.flops, "bytes_read": lp.bytes_read, "bytes_written": lp.bytes_written,
            "time_ms": st, "share": st["mean"] / sum_mean,
            "achieved_flops_per_s": achieved,
            "achieved_bytes_per_s": moved / sec if sec > 0 else 0.0,
            "intensity": intensity, "bound": bound, "above_roof": over,
            "fused_activation": lp.fused_activation, "bypass": lp.bypass, "fused_into": lp.fused_into,
            "device_ms": _mean(lp.device_ms), "gap_ms": _mean(lp.gap_ms),
            "kernels": [_kernel_doc(k) for k in lp.kernels], "candidates": list(lp.candidates),
        })
    nt = sorted(result.network_times_ms) or [0.0]
    device_ms = sum(x["device_ms"] for x in layers if x["device_ms"] is not None) if any(
        x["device_ms"] is not None for x in layers) else None
    gap_ms = sum(x["gap_ms"] for x in layers if x["gap_ms"] is not None) if device_ms is not None else None
    launch_bound = bool(device_ms is not None and gap_ms is not None and gap_ms > device_ms)
    all_notes = list(notes or [])
    all_notes += [n for n in result.notes if n not in all_notes]
    if launch_bound:
        all_notes.append(f"launch-bound: the device waited {gap_ms:.3f} ms between kernels for "
                         f"{device_ms:.3f} ms of kernel time")
    if above:
        all_notes.append(f"{len(above)} layer(s) above the roofline's measured roof ({', '.join(above[:5])}"
                         f"{', ...' if len(above) > 5 else ''}): the peaks were measured low (a busy machine: "
                         "layerlab profile --measure-peaks measures again) or the layer does less arithmetic than "
                         "its FLOP count (Winograd, a library's shortcut)")
    return {
        "schema": SCHEMA, "version": VERSION,
        "date": _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds"),
        "model": {"name": model_name, "version": model_version, "path": model_path},
        "run": {"backend": backend, "device": device, "format": fmt, "iterations": iterations, "warmup": warmup,
                "seed": seed, "fusing": fusing, "graph_capture": graph_capture, "timing": result.timing,
                "notes": all_notes},
        "network": {"avg_ms": sum(nt) / len(nt), "median_ms": nt[len(nt) // 2], "min_ms": nt[0], "max_ms": nt[-1],
                    "sum_layers_ms": sum(lp.stats()["mean"] for lp in result.layers),
                    "device_ms": device_ms, "gap_ms": gap_ms, "launch_bound": launch_bound,
                    "peak_memory_bytes": result.peak_memory_bytes},
        "device_peaks": {"flops_per_s": peaks.flops_per_s, "bytes_per_s": peaks.bytes_per_s,
                         "measured": peaks.measured, "trials": peaks.trials} if peaks else None,
        "layers": layers,
    }


def validate(doc: Any, source: str = "<report>") -> dict[str, Any]:
    """Check a loaded document against the schema; raises LayerLabError naming what is wrong."""
    def need(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise LayerLabError(f"{source}: not a LayerLab report: missing {where}{key}")
        if not isinstance(obj[key], kind):
            raise LayerLabError(f"{source}: {where}{key} has the wrong type")
        return obj[key]

    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise LayerLabError(f"{source}: not a LayerLab report (schema is not {SCHEMA!r})")
    if need(doc, "version", int, "") > VERSION:
        raise LayerLabError(f"{source}: report version {doc['version']} is newer than this LayerLab reads ({VERSION})")
    for key in ("model", "run", "network"):
        need(doc, key, dict, "")
    need(doc["network"], "avg_ms", (int, float), "network.")
    need(doc["model"], "name", str, "model.")
    for key in ("backend", "format", "device"):
        need(doc["run"], key, str, "run.")
    for i, layer in enumerate(need(doc, "layers", list, "")):
        for key, kind in (("name", str), ("type", str), ("time_ms", dict), ("flops", int)):
            need(layer, key, kind, f"layers[{i}].")
        need(layer["time_ms"], "mean", (int, float), f"layers[{i}].time_ms.")
        if "kernels" in layer:  # version 2
            for j, kernel in enumerate(need(layer, "kernels", list, f"layers[{i}].")):
                need(kernel, "name", str, f"layers[{i}].kernels[{j}].")
                need(kernel, "ms", (int, float), f"layers[{i}].kernels[{j}].")
    return doc


def layer_figures(report: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per layer name, the figures a view can show on the layer (e.g. colour canvas nodes by): ``time_ms`` (mean),
    ``share`` (of the sum of layer times), ``device_ms``/``gap_ms`` (None where not measured), ``kernels`` (the
    report's kernel entries), ``candidates``, ``above_roof``, and with a ``base`` report ``diff_ms`` (this time
    minus the base's; None where the base lacks the layer) and ``ratio`` (this over the base's). Plain data, any
    report version."""
    base_times = {x["name"]: x["time_ms"]["mean"] for x in base["layers"]} if base is not None else {}
    out: dict[str, dict[str, Any]] = {}
    for x in report["layers"]:
        t = x["time_ms"]["mean"]
        fig: dict[str, Any] = {"type": x["type"], "time_ms": t, "share": x.get("share", 0.0),
                               "device_ms": x.get("device_ms"), "gap_ms": x.get("gap_ms"),
                               "kernels": list(x.get("kernels") or []), "candidates": list(x.get("candidates") or []),
                               "above_roof": bool(x.get("above_roof", False)), "bound": x.get("bound", "none")}
        if base is not None:
            b = base_times.get(x["name"])
            fig["diff_ms"] = None if b is None else t - b
            fig["ratio"] = None if not b else t / b
        out[x["name"]] = fig
    return out


def write_json(report: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    atomic_write_text(p, json.dumps(report, indent=2) + "\n", "report")
    return p


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LayerLabError(f"{p}: no such report file") from None
    except IsADirectoryError:
        raise LayerLabError(f"{p}: is a folder, not a report file") from None
    except OSError as exc:
        raise LayerLabError(f"{p}: cannot read the report: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LayerLabError(f"{p}: not valid JSON ({cut(str(exc), 120)})") from None
    except RecursionError:  # the decoder recurses once per nesting level
        raise LayerLabError(f"{p}: not a LayerLab report: the JSON is nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise LayerLabError(f"{p}: not a LayerLab report: {cut(str(exc), 120)}") from None
    return validate(doc, str(p))


def report_paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(json, html) paths for a --report argument (with or without an extension)."""
    p = Path(path)
    base = p.with_suffix("") if p.suffix.lower() in (".json", ".html", ".htm") else p
    return base.with_suffix(".json"), base.with_suffix(".html")


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def human_rate(n: float, unit: str) -> str:
    for prefix in ("", "K", "M", "G", "T", "P"):
        if abs(n) < 1000 or prefix == "P":
            return f"{n:.3g} {prefix}{unit}"
        n /= 1000
    return str(n)


def layer_table(report: dict[str, Any], limit: int | None = None) -> str:
    """The layers sorted by mean time, as aligned text."""
    rows = sorted(report["layers"], key=lambda r: -r["time_ms"]["mean"])[:limit]
    w = max(12, _name_width([r["name"] for r in rows]))
    head = f"{'layer':<{w}} {'type':<20} {'output':<16} {'mean ms':>9} {'median':>9} {'share':>7} {'FLOPs':>10} {'FLOP/s':>11}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{_tail(r['name'], w):<{w}} {layer_type_text(r)[:20]:<20} {r['output_dims']:<16} "
                     f"{r['time_ms']['mean']:>9.4f} {r['time_ms']['median']:>9.4f} {100 * r['share']:>6.1f}% "
                     f"{human_rate(r['flops'], ''):>10} "
                     f"{human_rate(r['achieved_flops_per_s'], 'FLOP/s'):>11}")
    return "\n".join(lines)


def summary(report: dict[str, Any]) -> str:
    r, n, m = report["run"], report["network"], report["model"]
    lines = [
        f"model {m['name']} {m['version']}  |  {r['backend']} on {r['device']}  |  format {r['format']}",
        f"average {n['avg_ms']:.4f} ms per iteration (median {n['median_ms']:.4f}, min {n['min_ms']:.4f}, "
        f"max {n['max_ms']:.4f}) over {r['iterations']} iterations; sum of layers {n['sum_layers_ms']:.4f} ms",
        f"peak tensor memory {human_bytes(n['peak_memory_bytes'])}",
    ]
    if r.get("timing"):
        lines.append(f"layer times: {r['timing']}")
    if n.get("device_ms") is not None:
        lines.append(f"kernels {n['device_ms']:.4f} ms, gaps between them {n['gap_ms']:.4f} ms per iteration"
                     + ("  (launch-bound)" if n.get("launch_bound") else ""))
    if report.get("device_peaks"):
        p = report["device_peaks"]
        when = f" on {p['measured']}, best of {p.get('trials', 1)}" if p.get("measured") else ""
        lines.append(f"device peaks (measured{when}): {human_rate(p['flops_per_s'], 'FLOP/s')}, "
                     f"{human_rate(p['bytes_per_s'], 'B/s')}")
    lines += [f"note: {x}" for x in r.get("notes", [])]
    return "\n".join(lines)


def kernel_lines(layer: dict[str, Any], indent: str = "    ", limit: int | None = None) -> list[str]:
    """A report row's kernels as text lines: time, name, launch shape, candidate."""
    out = []
    kernels = layer.get("kernels") or []
    for k in kernels[:limit]:
        shape = f" grid {_dims(k.get('grid'))} block {_dims(k.get('block'))}" if k.get("grid") else ""
        served = f"  [{k['candidate']}]" if k.get("candidate") else ""
        out.append(f"{indent}{k['ms']:.4f} ms  {k.get('kind', 'kernel'):<6} {_short(k['name'], 70)}{shape}{served}")
    if limit is not None and len(kernels) > limit:
        out.append(f"{indent}... {len(kernels) - limit} more")
    return out


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "\u2026"


def _tail(text: str, n: int) -> str:
    """``text`` in at most ``n`` characters, keeping its end: the part that tells apart the layers of one block
    (``…denselayer12_conv2_Conv``), where the start is the same for all of them."""
    return text if len(text) <= n else "\u2026" + text[-(n - 1):]


def _name_width(names: list[str]) -> int:
    """The width of a text table's layer column: the longest name, within 12 to NAME_COLUMN characters."""
    return min(max((len(n) for n in names), default=0), NAME_COLUMN) if names else 12


def _dims(d: Any) -> str:
    return "x".join(str(v) for v in d) if d else "-"


def kernel_table(report: dict[str, Any], limit: int | None = 10) -> str:
    """The kernels of the ``limit`` slowest layers, as text (empty when the report has none)."""
    rows = sorted(report["layers"], key=lambda r: -r["time_ms"]["mean"])[:limit]
    lines = []
    for r in rows:
        if r.get("kernels"):
            gap = f", gaps {r['gap_ms']:.4f} ms" if r.get("gap_ms") is not None else ""
            lines.append(f"layer {r['name']} ({layer_type_text(r)}): {r['time_ms']['mean']:.4f} ms{gap}")
            lines += kernel_lines(r)
    return "\n".join(lines)


# ---- HTML ---------------------------------------------------------------------------------------------
_CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}th{cursor:pointer;background:#f3f3f3}
td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
.kv td{text-align:left}svg text{font-size:11px}.bar{fill:#4a7bd0}.mem{fill:#e08a2e}.cmp{fill:#2ea37a}
.wide{overflow-x:auto;max-width:100%}td:first-child{min-width:14em;max-width:24em;overflow-wrap:anywhere}
details{text-align:left}summary{cursor:pointer}table.k{font-size:12px;margin:2px 0}
table.k td,table.k th{border:none;padding:1px 6px;text-align:left;white-space:nowrap}
.warn{color:#b32;font-weight:600}"""

_SORT_JS = """document.querySelectorAll('table.sortable>thead th').forEach((th,i)=>th.addEventListener('click',()=>{
const t=th.closest('table'),b=t.tBodies[0],rows=[...b.rows],asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
rows.sort((x,y)=>{const a=x.cells[i].dataset.v??x.cells[i].textContent,c=y.cells[i].dataset.v??y.cells[i].textContent;
const na=parseFloat(a),nc=parseFloat(c);const r=(!isNaN(na)&&!isNaN(nc))?na-nc:a.localeCompare(c);return asc?r:-r});
rows.forEach(r=>b.appendChild(r))}));"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _bar_chart(items: list[tuple[str, float]], unit: str = "ms", width: int = 720) -> str:
    if not items:
        return "<p>No layers.</p>"
    top = max(v for _, v in items) or 1.0
    row, label_w = 16, 170
    parts = [f'<svg width="{width}" height="{row * len(items) + 10}" role="img">']
    for i, (name, v) in enumerate(items):
        w = (width - label_w - 90) * v / top
        y = i * row + 4
        parts.append(f'<text x="0" y="{y + 11}"><title>{_e(name)}</title>{_e(_tail(name, 26))}</text>'
                     f'<rect class="bar" x="{label_w}" y="{y}" width="{w:.1f}" height="{row - 4}"/>'
                     f'<text x="{label_w + w + 4:.1f}" y="{y + 11}">{v:.4f} {unit}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _roofline(report: dict[str, Any], width: int = 560, height: int = 360) -> str:
    pts = [r for r in report["layers"] if r["flops"] and r["time_ms"]["mean"] > 0 and r["intensity"] > 0]
    peaks = report.get("device_peaks")
    if not pts:
        return "<p>No layer with measurable arithmetic.</p>"
    xs = [r["intensity"] for r in pts]
    ys = [r["achieved_flops_per_s"] for r in pts]
    xmin, xmax = min(xs) / 4, max(xs) * 4
    ymax = max(ys + ([peaks["flops_per_s"]] if peaks else [])) * 2
    ymin = min(ys) / 4
    lx = lambda v: 50 + (width - 60) * (math.log10(v) - math.log10(xmin)) / (math.log10(xmax) - math.log10(xmin))  # noqa: E731
    ly = lambda v: height - 30 - (height - 40) * (math.log10(v) - math.log10(ymin)) / (math.log10(ymax) - math.log10(ymin))  # noqa: E731
    parts = [f'<svg width="{width}" height="{height}" role="img">',
             f'<line x1="50" y1="{height - 30}" x2="{width - 10}" y2="{height - 30}" stroke="#888"/>',
             f'<line x1="50" y1="10" x2="50" y2="{height - 30}" stroke="#888"/>',
             f'<text x="{width / 2 - 80}" y="{height - 8}">arithmetic intensity (FLOP/byte, log)</text>',
             '<text x="0" y="20">FLOP/s (log)</text>']
    if peaks:
        ridge = peaks["flops_per_s"] / peaks["bytes_per_s"]
        xs_line = [xmin, min(max(ridge, xmin), xmax), xmax]
        pts_line = [(x, min(peaks["flops_per_s"], peaks["bytes_per_s"] * x)) for x in xs_line]
        d = " ".join(f"{lx(x):.1f},{ly(max(y, ymin)):.1f}" for x, y in pts_line)
        parts.append(f'<polyline points="{d}" fill="none" stroke="#c33" stroke-width="2"/>')
    for r in pts:
        over = r.get("above_roof", False)
        x, y = lx(r["intensity"]), ly(r["achieved_flops_per_s"])
        title = (f'<title>{_e(r["name"])} ({_e(r["type"])}): {r["time_ms"]["mean"]:.4f} ms, '
                 f'{human_rate(r["achieved_flops_per_s"], "FLOP/s")}{" (above the roof)" if over else ""}</title>')
        if over:  # a point above its roof: a red triangle, not a plain dot
            parts.append(f'<polygon points="{x:.1f},{y - 6:.1f} {x - 5:.1f},{y + 4:.1f} {x + 5:.1f},{y + 4:.1f}" '
                         f'fill="#c33">{title}</polygon>')
        else:
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#4a7bd0">{title}</circle>')
    parts.append("</svg>")
    over = [r["name"] for r in pts if r.get("above_roof")]
    if over:
        parts.append(f"<p class='warn'>&#9650; {len(over)} layer(s) above the measured roof: "
                     f"{_e(', '.join(over[:8]))}{', ...' if len(over) > 8 else ''}. The peaks were measured low "
                     "(a busy machine: <code>layerlab profile --measure-peaks</code> measures again) or the layer "
                     "does less arithmetic than its FLOP count.</p>")
    return "".join(parts)


def _kernels_cell(x: dict[str, Any]) -> str:
    kernels = x.get("kernels") or []
    if not kernels:
        return "<td data-v='0'>-</td>"
    rows = "".join(
        f"<tr><td>{k['ms']:.4f} ms</td><td>{_e(k.get('kind', 'kernel'))}</td><td>{_e(k['name'])}</td>"
        f"<td>{_e(_dims(k.get('grid')) + ' / ' + _dims(k.get('block'))) if k.get('grid') else ''}</td>"
        f"<td>{_e(k.get('candidate', ''))}</td></tr>" for k in kernels)
    label = kernels[0]["name"] if len(kernels) == 1 else f"{len(kernels)} kernels"
    label = _short(label, 28)
    return (f"<td data-v='{len(kernels)}'><details><summary>{_e(label)}</summary><table class='k'>"
            f"<tr><th>time</th><th>kind</th><th>name</th><th>grid / block</th><th>candidate</th></tr>{rows}"
            "</table></details></td>")


def to_html(report: dict[str, Any]) -> str:
    """A self-contained page: summary, sortable layer table, time chart and roofline (inline SVG)."""
    m, r, n = report["model"], report["run"], report["network"]
    kv = [("Model", f"{m['name']} {m['version']}"), ("Date", report["date"]), ("Backend", r["backend"]),
          ("Device", r["device"]), ("Format", r["format"]), ("Iterations", f"{r['iterations']} (+{r['warmup']} warm-up)"),
          ("Average time", f"{n['avg_ms']:.4f} ms"), ("Median time", f"{n['median_ms']:.4f} ms"),
          ("Sum of layer times", f"{n['sum_layers_ms']:.4f} ms"), ("Peak tensor memory", human_bytes(n["peak_memory_bytes"])),
          ("Fusing rules", "on" if r["fusing"] else "off"), ("CUDA graph", "on" if r["graph_capture"] else "off")]
    if r.get("timing"):
        kv.append(("Layer times", r["timing"]))
    if n.get("device_ms") is not None:
        kv.append(("Kernels / gaps", f"{n['device_ms']:.4f} ms on the device, {n['gap_ms']:.4f} ms between kernels"
                   + (" (launch-bound)" if n.get("launch_bound") else "")))
    if report.get("device_peaks"):
        p = report["device_peaks"]
        when = f" (measured {p['measured']}, best of {p.get('trials', 1)})" if p.get("measured") else ""
        kv.append(("Device peaks", f"{human_rate(p['flops_per_s'], 'FLOP/s')}, {human_rate(p['bytes_per_s'], 'B/s')}"
                   + when))
    kv += [("Note", x) for x in r.get("notes", [])]
    rows = []
    for x in report["layers"]:
        t = x["time_ms"]
        rows.append(  # the time, its split and the kernels first: they fit the default window's width
            f"<tr><td>{_e(x['name'])}</td><td>{_e(layer_type_text(x))}</td><td>{t['mean']:.4f}</td>"
            f"<td data-v='{x['share']}'>{100 * x['share']:.1f}%</td><td>{_ms(x.get('device_ms'))}</td>"
            f"<td>{_ms(x.get('gap_ms'))}</td>{_kernels_cell(x)}<td>{_e(x['output_dims'])}</td>"
            f"<td data-v='{x['output_bytes']}'>{human_bytes(x['output_bytes'])}</td>"
            f"<td>{t['median']:.4f}</td><td>{t['min']:.4f}</td><td>{t['max']:.4f}</td>"
            f"<td data-v='{x['flops']}'>{human_rate(x['flops'], '')}</td>"
            f"<td data-v='{x['achieved_flops_per_s']}'>{human_rate(x['achieved_flops_per_s'], 'FLOP/s')}</td>"
            f"<td data-v='{x['achieved_bytes_per_s']}'>{human_rate(x['achieved_bytes_per_s'], 'B/s')}</td>"
            f"<td>{_e(x['bound'])}{' &#9650;' if x.get('above_roof') else ''}</td></tr>")
    heads = ["Layer", "Type", "Mean ms", "Share", "Device ms", "Gaps ms", "Kernels", "Output", "Output size",
             "Median ms", "Min ms", "Max ms", "FLOPs", "FLOP/s", "Bytes/s", "Bound"]
    by_time = sorted(((x["name"], x["time_ms"]["mean"]) for x in report["layers"]), key=lambda a: -a[1])
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>LayerLab report: {_e(m['name'])}</title>"
            f"<style>{_CSS}</style></head><body><h1>Inference report: {_e(m['name'])}</h1>"
            f"<h2>Network summary</h2><table class='kv'>"
            + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in kv)
            + "</table><h2>Layer table</h2><div class='wide'><table id='layers' class='sortable'><thead><tr>"
            + "".join(f"<th>{h}</th>" for h in heads) + "</tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></div>"
            + "<h2>Time per layer</h2>" + _bar_chart(by_time) + "<h2>Roofline</h2>" + _roofline(report)
            + f"<script>{_SORT_JS}</script></body></html>\n")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def write_html(report: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    atomic_write_text(p, to_html(report), "report")
    return p


# ---- comparison ---------------------------------------------------------------------------------------
@dataclass
class Comparison:
    reports: list[dict[str, Any]]
    labels: list[str]
    base: int
    #: (name, type) -> per report: mean ms or None when the layer is missing from that report
    rows: list[tuple[str, str, list[float | None]]]
    #: (name, type) -> per report: the layer's kernel entries (empty where the report has none or lacks the layer)
    kernels: dict[tuple[str, str], list[list[dict[str, Any]]]] = dataclasses.field(default_factory=dict)

    def diff(self, row: list[float | None], i: int) -> float | None:
        a, b = row[i], row[self.base]
        return None if a is None or b is None else a - b


def compare(reports: list[dict[str, Any]], labels: list[str] | None = None, base: int = 0) -> Comparison:
    """Match layers by name and type across reports; a layer absent from a report is None there. Each layer's
    kernels are kept per report (``Comparison.kernels``)."""
    if not reports:
        raise LayerLabError("compare needs at least one report")
    if not 0 <= base < len(reports):
        raise LayerLabError(f"base report {base} does not exist (there are {len(reports)} reports, numbered from 0)")
    keys: dict[tuple[str, str], None] = {}  # in first-seen order
    for rep in reports:
        for layer in rep["layers"]:
            keys.setdefault((layer["name"], layer["type"]), None)
    index = [{(x["name"], x["type"]): x["time_ms"]["mean"] for x in rep["layers"]} for rep in reports]
    rows = [(k[0], k[1], [idx.get(k) for idx in index]) for k in keys]
    by_key = [{(x["name"], x["type"]): list(x.get("kernels") or []) for x in rep["layers"]} for rep in reports]
    kernels = {k: [idx.get(k, []) for idx in by_key] for k in keys}
    labels = labels or [f"{i}: {r['model']['name']} {r['run']['backend']} {r['run']['format']}" for i, r in enumerate(reports)]
    return Comparison(reports, labels, base, rows, kernels)


def comparison_text(c: Comparison, kernels: bool = True) -> str:
    lines = ["reports:"]
    for i, (rep, label) in enumerate(zip(c.reports, c.labels)):
        mark = " (base)" if i == c.base else ""
        lines.append(f"  [{i}] {label}: average {rep['network']['avg_ms']:.4f} ms, device {rep['run']['device']}{mark}")
    w = max(12, _name_width([name for name, _, _ in c.rows]))
    head = f"{'layer':<{w}} {'type':<18}" + "".join(f" {'[' + str(i) + '] ms':>11} {'diff':>9}" for i in range(len(c.reports)))
    lines += ["", head, "-" * len(head)]
    for name, typ, vals in c.rows:
        cells = ""
        for i, v in enumerate(vals):
            d = c.diff(vals, i)
            cells += f" {(f'{v:.4f}') if v is not None else 'missing':>11} {(f'{d:+.4f}') if d is not None else '-':>9}"
        lines.append(f"{_tail(name, w):<{w}} {typ[:18]:<18}{cells}")
        for i, ks in enumerate(c.kernels.get((name, typ), []) if kernels else []):
            if ks:
                lines += kernel_lines({"kernels": ks}, f"    [{i}] ")
    base_avg = c.reports[c.base]["network"]["avg_ms"]
    lines.append("")
    lines.append("network: " + ", ".join(f"[{i}] {r['network']['avg_ms']:.4f} ms ({r['network']['avg_ms'] - base_avg:+.4f})"
                                         for i, r in enumerate(c.reports)))
    return "\n".join(lines)


def comparison_html(c: Comparison) -> str:
    colours = ["#4a7bd0", "#e08a2e", "#2ea37a", "#c33", "#8a5bd0", "#777"]
    summary_rows = "".join(
        f"<tr><td><span style='color:{colours[i % 6]}'>&#9632;</span> [{i}] {_e(l)}</td><td>{_e(r['run']['format'])}</td>"
        f"<td>{_e(r['run']['backend'])}</td><td>{r['network']['avg_ms']:.4f}</td></tr>"
        for i, (r, l) in enumerate(zip(c.reports, c.labels)))
    body = []
    for name, typ, vals in c.rows:
        ks = c.kernels.get((name, typ), [[] for _ in vals])
        cells = "".join(f"<td>{f'{v:.4f}' if v is not None else 'missing'}</td><td>"
                        f"{f'{d:+.4f}' if (d := c.diff(vals, i)) is not None else '-'}</td>"
                        + _kernels_cell({"kernels": ks[i]}) for i, v in enumerate(vals))
        body.append(f"<tr><td>{_e(name)}</td><td>{_e(typ)}</td>{cells}</tr>")
    heads = "".join(f"<th>[{i}] ms</th><th>diff vs [{c.base}]</th><th>[{i}] kernels</th>" for i in range(len(c.reports)))
    top = max((v for _, _, vals in c.rows for v in vals if v is not None), default=1.0) or 1.0
    bars = []
    for j, (name, _, vals) in enumerate(c.rows):
        y0 = j * (len(vals) * 8 + 6)
        bars.append(f"<text x='0' y='{y0 + 9}'><title>{_e(name)}</title>{_e(_tail(name, 26))}</text>")
        for i, v in enumerate(vals):
            if v is not None:
                bars.append(f"<rect x='170' y='{y0 + i * 8}' width='{500 * v / top:.1f}' height='7' fill='{colours[i % 6]}'/>")
    height = len(c.rows) * (len(c.reports) * 8 + 6) + 10
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>LayerLab comparison</title><style>{_CSS}</style>"
            f"</head><body><h1>Report comparison</h1><h2>Summary</h2><table class='kv'><tr><th>Report</th><th>Format</th>"
            f"<th>Backend</th><th>Average ms</th></tr>{summary_rows}</table><h2>Layers</h2>"
            f"<div class='wide'><table class='sortable'><thead><tr><th>Layer</th><th>Type</th>{heads}</tr></thead><tbody>"
            f"{''.join(body)}</tbody></table></div><h2>Time per layer</h2>"
            f"<svg width='720' height='{height}'>{''.join(bars)}</svg>"
            f"<script>{_SORT_JS}</script></body></html>\n")
