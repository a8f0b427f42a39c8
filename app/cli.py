"""The `layerlab` command line: runs, checks and lists without a screen. Imports no Qt (the `gui`
command imports the designer only when it is asked for)."""
from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from app.cli_drift import add_drift_parser, cmd_drift
from app.cli_export import add_export_parser, cmd_export
from app.cli_import import add_import_parser, cmd_import

USER_ERROR = 2


class CliError(Exception):
    """A user error found by the command line itself (bad flag value, missing file)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2, no usage dump
        raise CliError(f"{message} (see '{self.prog} --help')")


def _pairs(values: Sequence[str] | None) -> list[tuple[str | None, str]]:
    """'NAME=PATH' -> (NAME, PATH); a bare 'PATH' -> (None, PATH)."""
    from engine.descriptors import is_identifier

    out: list[tuple[str | None, str]] = []
    for v in values or []:
        name, sep, path = v.partition("=")
        if sep and is_identifier(name):
            out.append((name, path))
        else:
            out.append((None, v))
    return out


def _resolve_names(pairs: list[tuple[str | None, str]], names: list[str], what: str) -> list[tuple[str, str]]:
    resolved = []
    for name, path in pairs:
        if name is None:
            if len(names) != 1:
                raise CliError(f"the network has {len(names)} {what} layers ({', '.join(names)}): "
                               f"use --{what} NAME=PATH")
            name = names[0]
        if name not in names:
            raise CliError(f"no {what} layer named {name!r} (the network has: {', '.join(names) or 'none'})")
        resolved.append((name, path))
    return resolved


def _load(model_path: str, registry):
    from engine.importers import load_model_any

    model, imported = load_model_any(model_path, registry)
    model.weights_source = imported
    for w in model.load_warnings:
        print(f"layerlab: warning: {w}", file=sys.stderr)
    return model


def _registry(args: argparse.Namespace):
    from engine.plugins import load_plugins

    reg = load_plugins(args.plugins or [])
    for f in reg.failures:
        print(f"layerlab: warning: {f}", file=sys.stderr)
    return reg


def _format(tokens: Sequence[str] | None, backend_name: str):
    from engine.tensor import TensorFormat

    text = " ".join(tokens or [])
    if not text or text == "auto":
        return TensorFormat.parse("fp16 nhwc" if backend_name == "cupy" else "fp32 nchw")
    return TensorFormat.parse(text)


def _prepare(args: argparse.Namespace):
    """Registry, model, backend, format and network for the run options shared by infer and profile."""
    from engine.backends import get_backend
    from engine.network import Network
    from engine.weights import weights_for

    if args.iterations < 1:
        raise CliError(f"--iterations must be at least 1, got {args.iterations}")
    if args.warmup < 0:
        raise CliError(f"--warmup must be 0 or more, got {args.warmup}")
    reg = _registry(args)
    model = _load(args.model, reg)
    backend = get_backend(args.backend, notice=sys.stderr)
    fmt = _format(args.format, backend.name)
    weights = weights_for(model, args.weights, args.seed)
    net = Network(model, reg, backend, fmt, weights=weights, seed=args.seed, fusing=args.fusing_rules)
    if net.fused is not None:
        for rule, inner, outer, fused in net.fused.applied:
            print(f"layerlab: fusing rule {rule}: {inner} + {outer} -> {fused}", file=sys.stderr)
    inputs = _resolve_names(_pairs(args.input), net.input_names, "input")
    return model, backend, fmt, net, inputs


def _image_options(net, name: str):
    from engine.io import ImageOptions

    p = net.layer(name).p
    return ImageOptions(p["scale"], p["shift"], p["min_channels"], p["tiling"])


def _set_still_inputs(net, inputs: list[tuple[str, str]], layout: str) -> None:
    from engine.io import kind_of, read_input

    for name, path in inputs:
        if kind_of(path) != "video":
            net.set_input(name, read_input(path, _image_options(net, name), layout))


def _progress(out: TextIO):
    """A progress callback: a bar on a terminal, plain lines otherwise."""
    tty = hasattr(out, "isatty") and out.isatty()

    def show(i: int, n: int) -> None:
        if tty:
            filled = int(30 * i / n)
            out.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] iteration {i}/{n}")
            if i == n:
                out.write("\n")
            out.flush()
        else:
            print(f"iteration {i}/{n}", file=out)
    return show


def cmd_infer(args: argparse.Namespace, out: TextIO) -> int:
    import numpy as np

    from engine.io import VideoReader, VideoWriter, kind_of, write_output

    model, backend, fmt, net, inputs = _prepare(args)
    outputs = _resolve_names(_pairs(args.output), net.output_names, "output")
    if not outputs and args.output_dir:
        outputs = [(n, str(Path(args.output_dir) / f"{n}.npy")) for n in net.output_names]
    video = [(n, p) for n, p in inputs if kind_of(p) == "video"]
    _set_still_inputs(net, inputs, args.input_layout)

    def timed_run() -> float:
        for n in net.input_names:
            net.mark_affected(n)
        backend.synchronize()
        t0 = time.perf_counter()
        net.run()
        backend.synchronize()
        return (time.perf_counter() - t0) * 1e3

    print(f"network {model.name} {model.version}: {len(net.order)} layers, backend {backend.name} "
          f"({backend.device_name}), format {fmt}", file=out)
    if video:
        if len(video) > 1:
            raise CliError("only one video input at a time is supported")
        vname, vpath = video[0]
        reader = VideoReader(vpath, _image_options(net, vname))
        writers = {n: VideoWriter(p, reader.fps) for n, p in outputs if kind_of_safe(p) == "video"}
        times, frame_no = [], 0
        try:
            for frame in reader:
                net.set_input(vname, frame)
                times.append(timed_run())
                for n, p in outputs:
                    if n in writers:
                        writers[n].write(net.output(n))
                    else:
                        stem = Path(p)
                        write_output(stem.with_name(f"{stem.stem}_{frame_no:05d}{stem.suffix}"), net.output(n))
                frame_no += 1
        finally:
            reader.close()
            for w in writers.values():
                w.close()
        if not times:
            raise CliError(f"{vpath}: the video has no frames")
        print(f"{frame_no} frames, average time per frame: {np.mean(times):.3f} ms", file=out)
    else:
        for _ in range(args.warmup):
            timed_run()
        times = [timed_run() for _ in range(args.iterations)]
        print(f"average time per iteration: {np.mean(times):.3f} ms over {args.iterations} iterations "
              f"(min {np.min(times):.3f} ms, peak tensor memory {net.peak_memory_bytes / 2**20:.2f} MiB)", file=out)
        for name, path in outputs:
            for f in write_output(path, net.output(name)):
                print(f"wrote {name} to {f}", file=out)
    for name in net.output_names:
        y = net.output(name)
        print(f"output {name}: {'x'.join(map(str, y.shape))} min {y.min():.4g} max {y.max():.4g} "
              f"mean {y.mean():.4g}", file=out)
        if not np.all(np.isfinite(y)):
            print(f"layerlab: warning: output {name} contains NaN or infinite values", file=sys.stderr)
    return 0


def profile_command_line(args: argparse.Namespace) -> str:
    """The `layerlab profile ...` command line that reproduces a run (quoted for a POSIX shell)."""
    import shlex

    parts = ["layerlab", "profile", args.model]
    for v in args.input or []:
        parts += ["--input", v]
    if args.format:
        parts += ["--format", *args.format]
    parts += ["--iterations", str(args.iterations), "--warmup", str(args.warmup), "--backend", args.backend,
              "--seed", str(args.seed), "--fusing-rules", args.fusing_rules]
    if args.weights:
        parts += ["--weights", args.weights]
    if getattr(args, "report", None):
        parts += ["--report", args.report]
    return " ".join(shlex.quote(p) for p in parts)


def cmd_profile(args: argparse.Namespace, out: TextIO) -> int:
    from engine import report as rep
    from engine.io import kind_of
    from engine.profiling import profile

    model, backend, fmt, net, inputs = _prepare(args)
    if any(kind_of(p) == "video" for _, p in inputs):
        raise CliError("profile takes images or .npy tensors, not videos (use infer for videos)")
    _set_still_inputs(net, inputs, args.input_layout)
    result = profile(net, args.iterations, args.warmup, progress=_progress(sys.stderr))
    doc = rep.build_report(result, model_name=model.name, model_version=model.version, model_path=args.model,
                           backend=backend.name, device=backend.device_name, fmt=str(fmt),
                           iterations=args.iterations, warmup=args.warmup, seed=args.seed,
                           fusing=bool(net.fused and net.fused.applied),
                           notes=["per-layer timing synchronises after every layer on the CPU"
                                  if backend.name == "numpy" else "per-layer times from CUDA events",
                                  *rep.execution_notes(net)])
    print(rep.summary(doc), file=out)
    print("", file=out)
    print(rep.layer_table(doc), file=out)
    json_path, html_path = rep.report_paths(args.report or f"{model.name}_report")
    rep.write_json(doc, json_path)
    rep.write_html(doc, html_path)
    print(f"\nwrote {json_path} and {html_path}", file=out)
    return 0


def cmd_compare(args: argparse.Namespace, out: TextIO) -> int:
    from engine import report as rep

    docs = [rep.load(p) for p in args.reports]
    labels = [f"{Path(p).name}: {d['model']['name']} {d['run']['backend']} {d['run']['format']}"
              for p, d in zip(args.reports, docs)]
    c = rep.compare(docs, labels, args.base)
    print(rep.comparison_text(c), file=out)
    if args.html:
        Path(args.html).write_text(rep.comparison_html(c), encoding="utf-8")
        print(f"wrote {args.html}", file=out)
    return 0


def kind_of_safe(path: str) -> str:
    from engine.io import VIDEO_EXTS

    return "video" if Path(path).suffix.lower() in VIDEO_EXTS else "file"


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    from engine.typecheck import ERROR, check

    reg = _registry(args)
    model = _load(args.model, reg)
    diags = check(model, reg)
    for d in diags:
        print(str(d), file=out)
    n_err = sum(d.severity == ERROR for d in diags)
    n_warn = len(diags) - n_err
    print(f"{args.model}: {len(model.layers)} layers, {n_err} error(s), {n_warn} warning(s)", file=out)
    return 1 if n_err else 0


def cmd_layers(args: argparse.Namespace, out: TextIO) -> int:
    reg = _registry(args)
    for info in reg.plugins.values():
        m = info.meta
        print(f"{m.name} {m.version} by {m.author}: {m.description}", file=out)
        if info.layers:
            print("  layers:", file=out)
            width = max(len(n) for n in info.layers)
            for n in sorted(info.layers):
                print(f"    {n:<{width}}  {reg.find_layer(n).summary}", file=out)
        if info.activations:
            print("  activations:", file=out)
            width = max(len(n) for n in info.activations)
            for n in sorted(info.activations):
                print(f"    {n:<{width}}  {reg.find_activation(n).summary}", file=out)
        if info.fusing_rules:
            print("  fusing rules:", file=out)
            for r in info.fusing_rules:
                print(f"    {r}", file=out)
    for f in reg.failures:
        print(f"FAILED {f}", file=out)
    return 0


def cmd_gui(args: argparse.Namespace, out: TextIO) -> int:
    if args.model and not Path(args.model).is_file():
        raise CliError(f"{args.model}: no such model file")
    try:
        from app import gui  # noqa: PLC0415 - Qt only when the designer is asked for
    except ImportError as exc:
        raise CliError(f"the designer cannot start: {exc} (install LayerLab with its GUI dependencies)") from None
    return int(gui.run(args.model))


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", "-v", action="store_true", help="show Python tracebacks for errors")
    common.add_argument("--version", action="version", version=f"layerlab {_version()}")
    common.add_argument("--plugins", action="append", metavar="DIR", help="also load plugins from DIR (repeatable)")

    p = _Parser(prog="layerlab", description="Design, run, check and profile convolutional networks.",
                parents=[common])
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    run_opts = argparse.ArgumentParser(add_help=False)
    run_opts.add_argument("model", help="model file (.lnet, or .onnx imported in memory)")
    run_opts.add_argument("--input", "-i", action="append", metavar="[NAME=]PATH",
                          help="input file for input layer NAME: image (PNG/JPG), video (MP4/AVI/MKV/...) or .npy")
    run_opts.add_argument("--input-layout", choices=("nchw", "nhwc"), default="nchw", help="layout of .npy inputs")
    run_opts.add_argument("--output", "-o", action="append", metavar="[NAME=]PATH",
                          help="write output layer NAME to PATH (.npy, .png/.jpg, or a video for video inputs)")
    run_opts.add_argument("--output-dir", metavar="DIR", help="write every output as DIR/NAME.npy")
    run_opts.add_argument("--format", "-f", nargs="+", metavar="TOKEN",
                          help="tensor format: fp32|fp16 and nchw|nhwc, e.g. '--format fp16 nhwc' "
                               "(default: fp16 nhwc on cupy, fp32 nchw on numpy)")
    run_opts.add_argument("--iterations", "-n", type=int, default=10, help="timed iterations (default 10)")
    run_opts.add_argument("--warmup", type=int, default=1, help="untimed warm-up iterations (default 1)")
    run_opts.add_argument("--weights", "-w", metavar="PATH",
                          help="weights folder (NAME_WEIGHT.npy files) or .safetensors file (default: the model's)")
    run_opts.add_argument("--backend", "-b", default="auto", choices=("auto", "numpy", "cupy"))
    run_opts.add_argument("--seed", type=int, default=0, help="seed of random weights and inputs (default 0)")
    run_opts.add_argument("--fusing-rules", default="on", metavar="on|off|FILE",
                          help="apply the plugins' and the model's enabled fusing rules (on, default), none (off), "
                               "or the rules in FILE (one per line)")

    sub.add_parser("infer", parents=[common, run_opts], help="run a network and write its outputs",
                   description="Run a network, print the average time per iteration and write outputs.")
    pr = sub.add_parser("profile", parents=[common, run_opts], help="time every layer and write a report",
                        description="Profile every layer; write a JSON and an HTML report and print the layer table.")
    pr.add_argument("--report", "-r", metavar="PATH", help="report path (PATH.json and PATH.html; default MODELNAME_report)")
    cp = sub.add_parser("compare", parents=[common], help="compare inference reports",
                        description="Compare reports layer by layer (matched by name and type).")
    cp.add_argument("reports", nargs="+", metavar="REPORT", help="report JSON files")
    cp.add_argument("--base", type=int, default=0, help="index of the base report (default 0)")
    cp.add_argument("--html", metavar="PATH", help="also write an HTML comparison")
    c = sub.add_parser("check", parents=[common], help="type-check a model",
                       description="Print the type-check diagnostics; exit status 1 if there is any error.")
    c.add_argument("model")
    sub.add_parser("layers", parents=[common], help="list plugins, layers and activations")
    g = sub.add_parser("gui", parents=[common], help="open the designer")
    g.add_argument("model", nargs="?")
    add_export_parser(sub, [common])
    add_drift_parser(sub, [common])
    add_import_parser(sub, [common])
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("layerlab")
    except PackageNotFoundError:
        return "(source tree)"


COMMANDS = {"drift": cmd_drift, "export": cmd_export, "infer": cmd_infer, "profile": cmd_profile, "compare": cmd_compare,
            "check": cmd_check, "layers": cmd_layers, "gui": cmd_gui}
COMMANDS["import"] = cmd_import


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the `layerlab` console script. Returns the exit status."""
    from engine.errors import LayerLabError

    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv or "-v" in argv
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            args = build_parser().parse_args(["gui", *argv])
        return COMMANDS[args.command](args, out)
    except (CliError, LayerLabError) as exc:
        if verbose:
            traceback.print_exc()
        print(f"layerlab: error: {exc}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        print("layerlab: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: say so in one line, the traceback with --verbose
        if verbose:
            traceback.print_exc()
        print(f"layerlab: internal error: {type(exc).__name__}: {exc} (run with --verbose for details)",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
