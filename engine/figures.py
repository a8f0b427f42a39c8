"""Per-layer figures shown on the canvas: which figure (a profile's share of time, a precision comparison's drift, a
report comparison's change against its base), each layer's value and its text, the sums a group of layers shows, the
colour scale with its range and unit, and the lines of a layer's tooltip. Plain data and plain functions (Qt-free):
the canvas draws what these say, the designer feeds them its reports and comparisons."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.analysis import DriftResult, drift_colour
from engine.report import human_rate, kernel_lines, layer_figures

Figures = dict[str, dict[str, Any]]
Rename = Callable[[str], "str | None"]

TIME, DRIFT, DIFF = "time", "drift", "diff"


@dataclass(frozen=True)
class FigureKind:
    """One figure the canvas can show: its key, menu text and the unit of its scale."""

    key: str
    text: str
    unit: str


KINDS: dict[str, FigureKind] = {
    TIME: FigureKind(TIME, "Profile: Share of Time", "% of the layers' time"),
    DRIFT: FigureKind(DRIFT, "Precision: Drift", "relative error"),
    DIFF: FigureKind(DIFF, "Report Comparison: Change", "ms against the base"),
}

#: summed over a group's layers (the rest: the largest, or the layers' own)
SUMMED = ("time_ms", "share", "device_ms", "gap_ms", "diff_ms", "base_ms", "params", "flops")
KERNELS_SHOWN = 8  # kernels listed in a tooltip (the slowest first)


def _merge(figures: Figures, rename: Rename | None) -> Figures:
    """Figures of network layers re-keyed to the canvas layers showing them (``rename``: None drops a layer); several
    network layers of one canvas layer (a template instance's) are combined."""
    if rename is None:
        return figures
    grouped: dict[str, list[dict[str, Any]]] = {}
    for name, fig in figures.items():
        target = rename(name)
        if target is not None:
            grouped.setdefault(target, []).append(fig)
    return {name: figs[0] if len(figs) == 1 else combine(figs) for name, figs in grouped.items()}


def profile_figures(report: dict[str, Any], base: dict[str, Any] | None = None, rename: Rename | None = None) -> Figures:
    """A report's figures per canvas layer (``engine.report.layer_figures``), with ``base``: ``diff_ms`` and ``base_ms``
    against it."""
    figures = layer_figures(report, base)
    for fig in figures.values():
        if fig.get("diff_ms") is not None:
            fig["base_ms"] = fig["time_ms"] - fig["diff_ms"]
    return _merge(figures, rename)


def drift_figures(result: DriftResult, rename: Rename | None = None) -> Figures:
    """A precision comparison's figures per canvas layer: ``drift`` (relative error), ``max_abs``, ``threshold``,
    ``nonfinite``, and the two variants compared."""
    figures = {d.name: {"type": d.type, "drift": d.rel_error, "max_abs": d.max_abs, "nonfinite": d.nonfinite,
                        "threshold": result.threshold, "reference": result.reference, "candidate": result.candidate}
               for d in result.layers}
    return _merge(figures, rename)


def combine(figs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures of several layers as one (a group, a template instance): times, shares, changes, parameters and
    FLOPs summed, drift the largest, kernels together; a figure none of them has stays absent."""
    figs = list(figs)
    out: dict[str, Any] = {"layers": sum(f.get("layers", 1) for f in figs)}
    for key in SUMMED:
        values = [f[key] for f in figs if f.get(key) is not None]
        if values:
            out[key] = sum(values)
    drifts = [f["drift"] for f in figs if f.get("drift") is not None]
    if drifts:
        out["drift"] = max(drifts, key=lambda v: v if not math.isnan(v) else math.inf)
        out["threshold"] = next(f["threshold"] for f in figs if f.get("threshold") is not None)
    kernels = [k for f in figs for k in f.get("kernels") or []]
    if kernels:
        out["kernels"] = sorted(kernels, key=lambda k: -k.get("ms", 0.0))
    return out


def value(kind: str, fig: Mapping[str, Any] | None) -> float | None:
    """The number a layer (or group) is coloured by: its share of the time (0-1), its drift, or its change in ms."""
    if not fig:
        return None
    key = {TIME: "share", DRIFT: "drift", DIFF: "diff_ms"}[kind]
    v = fig.get(key)
    return None if v is None else float(v)


def value_text(kind: str, fig: Mapping[str, Any]) -> str:
    """The short text written on a node: ``1.23 ms · 4.5%``, ``drift 2.1e-03``, ``+0.120 ms (+12%)``."""
    v = value(kind, fig)
    if v is None:
        return ""
    if kind == TIME:
        return f"{_ms(fig.get('time_ms'))} · {100 * v:.1f}%"
    if kind == DRIFT:
        return f"drift {v:.1e}"
    base = fig.get("base_ms")
    pct = f" ({100 * v / base:+.0f}%)" if base else ""
    return f"{v:+.3f} ms{pct}"


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.3f} ms" if v < 100 else f"{v:.0f} ms"


def _share(fig: Mapping[str, Any], template: str) -> str:
    """A group's or layer's share of the time in percent, written into ``template``; empty where it has none."""
    return template.format(100 * fig["share"]) if fig.get("share") is not None else ""


def summary_text(fig: Mapping[str, Any]) -> list[str]:
    """A group's figures as short texts: parameters, FLOPs, time and share, change, drift (those it has)."""
    out = []
    if fig.get("params") is not None:
        out.append(f"{human_rate(fig['params'], '').strip()} params")
    if fig.get("flops") is not None:
        out.append(human_rate(fig["flops"], "FLOP"))
    if fig.get("time_ms") is not None:
        out.append(f"{_ms(fig['time_ms'])}{_share(fig, ' ({:.1f}%)')}")
    if fig.get("diff_ms") is not None:
        out.append(f"{fig['diff_ms']:+.3f} ms vs base")
    if fig.get("drift") is not None:
        out.append(f"drift ≤ {fig['drift']:.1e}")
    return out


def tooltip_lines(name: str, kind: str, fig: Mapping[str, Any]) -> list[str]:
    """What hovering a layer (or a group) shows: its name, every figure it has, and its kernels (time, name, launch
    shape, candidate), the slowest first."""
    what = f"{fig['layers']} layers" if fig.get("layers", 1) > 1 else fig.get("type", "")
    lines = [f"{name}  ({what})" if what else name]
    if fig.get("time_ms") is not None:
        share = _share(fig, ", {:.1f}% of the layers' time")
        lines.append(f"time {fig['time_ms']:.4f} ms (mean){share}")
    if fig.get("device_ms") is not None:
        lines.append(f"kernels {fig['device_ms']:.4f} ms, gaps before them {fig.get('gap_ms') or 0.0:.4f} ms")
    if fig.get("base_ms") is not None:
        ratio = f", ×{fig['time_ms'] / fig['base_ms']:.2f}" if fig["base_ms"] else ""
        lines.append(f"change {fig['diff_ms']:+.4f} ms against the base's {fig['base_ms']:.4f} ms{ratio}")
    elif kind == DIFF and fig.get("time_ms") is not None:
        lines.append("not in the base report")
    if fig.get("drift") is not None:
        over = "over" if not fig["drift"] <= fig.get("threshold", math.inf) else "within"
        vs = f" ({fig['candidate']} against {fig['reference']})" if fig.get("candidate") else ""
        lines.append(f"drift {fig['drift']:.3e}{vs}, {over} the threshold {fig.get('threshold', 0):g}")
        if fig.get("max_abs") is not None:
            lines.append(f"largest difference {fig['max_abs']:.3e}" + (f", {fig['nonfinite']} non-finite values"
                                                                        if fig.get("nonfinite") else ""))
    if fig.get("params") is not None or fig.get("flops") is not None:
        lines.append(" · ".join(t for t in summary_text({"params": fig.get("params"), "flops": fig.get("flops")})))
    if fig.get("above_roof"):
        lines.append("above the roofline's measured roof")
    if fig.get("candidates"):
        lines.append("served by " + ", ".join(fig["candidates"]))
    if fig.get("kernels"):
        lines.append("kernels:")
        lines += kernel_lines(fig, "  ", KERNELS_SHOWN)
    return lines


# ---- colour scales ------------------------------------------------------------------------------------------
_SEQUENTIAL = [(0.0, (45, 75, 150)), (0.35, (40, 155, 170)), (0.7, (235, 195, 45)), (1.0, (225, 45, 35))]
_DIVERGING = [(0.0, (40, 170, 90)), (0.5, (125, 130, 140)), (1.0, (225, 45, 35))]


def _interpolate(stops: list[tuple[float, tuple[int, int, int]]], t: float) -> tuple[int, int, int]:
    t = min(1.0, max(0.0, t))
    for (t0, c0), (t1, c1) in zip(stops, stops[1:]):
        if t <= t1:
            f = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
            return tuple(round(a + (b - a) * f) for a, b in zip(c0, c1))  # type: ignore[return-value]
    return stops[-1][1]


@dataclass(frozen=True)
class Scale:
    """The colour scale of one figure over the values drawn: ``lo``/``hi`` its range (symmetric around 0 for a
    change; drift on a log axis, coloured against ``threshold`` as in the analysis overview)."""

    kind: str
    lo: float
    hi: float
    threshold: float = 0.0

    @classmethod
    def over(cls, kind: str, values: Iterable[float], threshold: float = 0.0) -> Scale:
        """The scale covering ``values`` (finite ones; a change's range is symmetric, a share's starts at 0)."""
        vals = [v for v in values if v is not None and math.isfinite(v)]
        if kind == DIFF:
            top = max((abs(v) for v in vals), default=0.0)
            return cls(kind, -top, top)
        if kind == DRIFT:
            pos = [v for v in vals if v > 0]
            return cls(kind, min(pos, default=1e-12), max(pos, default=1e-12), threshold)
        return cls(kind, 0.0, max(vals, default=0.0))

    @property
    def unit(self) -> str:
        unit = KINDS[self.kind].unit
        return f"{unit} (threshold {self.threshold:g})" if self.kind == DRIFT and self.threshold else unit

    def position(self, v: float) -> float:
        """Where ``v`` lies on the scale, 0 (``lo``) to 1 (``hi``)."""
        if self.kind == DRIFT:
            if not math.isfinite(v):
                return 1.0
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            return 0.5 if hi <= lo else (math.log10(max(v, 1e-300)) - lo) / (hi - lo)
        return 0.5 if self.hi <= self.lo else (v - self.lo) / (self.hi - self.lo)

    def colour(self, v: float) -> tuple[int, int, int]:
        """The RGB colour of value ``v``."""
        if self.kind == DRIFT:
            return drift_colour(v, self.threshold or self.hi)
        stops = _DIVERGING if self.kind == DIFF else _SEQUENTIAL
        return _interpolate(stops, self.position(v))

    def at(self, t: float) -> tuple[int, int, int]:
        """The colour at position ``t`` (0-1) along the scale (the legend's gradient)."""
        if self.kind == DRIFT and self.hi > self.lo:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            return self.colour(10 ** (lo + t * (hi - lo)))
        return self.colour(self.lo + t * (self.hi - self.lo))

    def label(self, v: float) -> str:
        """A value of the scale as the legend writes it."""
        if self.kind == TIME:
            return f"{100 * v:.1f}%"
        if self.kind == DRIFT:
            return f"{v:.1e}"
        return f"{v:+.3f} ms"
