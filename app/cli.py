"""The `layerlab` command line: runs, checks and lists without a screen. Imports no Qt (the `gui`
command imports the designer only when it is asked for)."""
from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app.cli_batch import add_batch_parser, cmd_batch
from app.cli_common import (
    PNG_COMPRESSION_HELP,
    USER_ERROR,
    CliError,
    add_log_options,
    add_run_options,
    load_model,
    open_registry,
    png_level,
    progress_printer,
    spec_from_args,
    verbosity,
)
from app.cli_custom import add_trust_option, require_custom_consent
from app.cli_drift import add_drift_parser, cmd_drift
from app.cli_export import add_export_parser, cmd_export
from app.cli_import import add_import_parser, cmd_import
from engine.io import PNG_LEVEL

if TYPE_CHECKING:
    from engine.model import Model
    from engine.network import Network
    from engine.run import RunSpec


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2, no usage dump
        raise CliError(f"{message} (see '{self.prog} --help')")


def _open(args: argparse.Namespace, profiling: bool) -> tuple[RunSpec, Model, Network]:
    """The run's spec, model and network (engine.run), the fusions made printed on stderr."""
    from engine.run import fusing_notes, open_network, with_model_weights

    spec = spec_from_args(args, profiling)
    reg = open_registry(args)
    model = load_model(args.model, reg)
    require_custom_consent(args, model)
    spec = with_model_weights(spec, model)  # no --weights: the model's weights setting, if any
    net = open_network(model, spec, reg, notice=sys.stderr, always_notice=getattr(args, "verbose", 0) > 0)
    for line in fusing_notes(net):
        print(f"layerlab: {line}", file=sys.stderr)
    return spec, model, net


def _planned_outputs(args: argparse.Namespace, net: Any) -> list[tuple[str, str]]:
    """The (output layer, path) pairs that ``--output`` / ``--output-dir`` ask for, each path checked before the
    run: a long run must not end in an output that cannot be written."""
    from engine.atomic import check_output_file, check_output_folder
    from engine.io import check_output_kind, kind_of
    from engine.run import parse_named, resolve_names

    outputs = resolve_names(parse_named(args.output), net.output_names, "output")
    if not outputs and args.output_dir:
        check_output_folder(args.output_dir, "--output-dir folder")
        outputs = [(n, str(Path(args.output_dir) / f"{n}.npy")) for n in net.output_names]
    video_input = any(kind_of(p) == "video" for _, p in parse_named(args.input))
    for _, path in outputs:
        check_output_kind(path)
        if kind_of_safe(path) == "video" and not video_input:
            raise CliError(f"{path}: a video output takes a video input's frames (no input is a video)")
        check_output_file(path)
    return outputs


def cmd_infer(args: argparse.Namespace, out: TextIO) -> int:
    import numpy as np

    from engine.io import VideoWriter, write_output
    from engine.run import format_notes, load_inputs, run_timed, time_iteration

    spec, model, net = _open(args, profiling=False)
    outputs = _planned_outputs(args, net)
    inputs = load_inputs(net, spec)
    print(f"network {model.name} {model.version}: {len(net.order)} layers, backend {net.backend.name} "
          f"({net.backend.device_name}), format {net.fmt}", file=out)
    for note in format_notes(net):
        print(note, file=out)
    if inputs.videos:
        try:
            if len(inputs.videos) > 1:
                raise CliError("only one video input at a time is supported")
            (vname, video), = inputs.videos.items()
            writers = {n: VideoWriter(p, video.reader.fps) for n, p in outputs if kind_of_safe(p) == "video"}
            times, completed = [], False
            try:
                while True:  # the first frame is in the network already
                    times.append(time_iteration(net))
                    for n, p in outputs:
                        if n in writers:
                            writers[n].write(net.output(n))
                        else:
                            stem = Path(p)
                            write_output(stem.with_name(f"{stem.stem}_{video.frame:05d}{stem.suffix}"), net.output(n),
                                         args.png_compression)
                    frame = video.read()
                    if frame is None:
                        break
                    net.set_input(vname, frame)
                completed = True
            finally:
                for w in writers.values():
                    w.close(keep=completed)  # a failed run leaves no half-written video
        finally:
            inputs.close()
        print(f"{len(times)} frames, average time per frame: {np.mean(times):.3f} ms", file=out)
    else:
        times = run_timed(net, spec).network_times_ms
        print(f"average time per iteration: {np.mean(times):.3f} ms over {spec.iterations} iterations "
              f"(min {np.min(times):.3f} ms, peak tensor memory {net.peak_memory_bytes / 2**20:.2f} MiB)", file=out)
        for name, path in outputs:
            for f in write_output(path, net.output(name), args.png_compression):
                print(f"wrote {name} to {f}", file=out)
    for name in net.output_names:
        y = net.output(name)
        print(f"output {name}: {'x'.join(map(str, y.shape))} min {y.min():.4g} max {y.max():.4g} "
              f"mean {y.mean():.4g}", file=out)
        if not np.all(np.isfinite(y)):
            print(f"layerlab: warning: output {name} contains NaN or infinite values", file=sys.stderr)
    return 0


def cmd_profile(args: argparse.Namespace, out: TextIO) -> int:
    from engine import report as rep
    from engine.atomic import check_output_file, safe_stem
    from engine.io import kind_of, write_output
    from engine.run import load_inputs, make_report, parse_named, run_timed

    if any(kind_of(p) == "video" for _, p in parse_named(args.input)):
        raise CliError("profile takes images or .npy tensors, not videos (use infer for videos)")
    spec, model, net = _open(args, profiling=True)
    json_path, html_path = rep.report_paths(args.report or f"{safe_stem(model.name)}_report")
    for path in (json_path, html_path):  # before the run
        check_output_file(path, "report")
    outputs = _planned_outputs(args, net)
    load_inputs(net, spec).close()
    if args.measure_peaks:  # measured again now; the profile then takes them from the cache
        from engine.profiling import network_peaks

        network_peaks(net, remeasure=True)
    result = run_timed(net, spec, progress=progress_printer(sys.stderr))
    doc = make_report(net, result, spec, model=model, model_path=args.model)
    print(rep.summary(doc), file=out)
    print("", file=out)
    print(rep.layer_table(doc), file=out)
    if kernels := rep.kernel_table(doc, args.kernels):
        print(f"\nkernels of the {args.kernels} slowest layers:\n{kernels}", file=out)
    rep.write_json(doc, json_path)
    rep.write_html(doc, html_path)
    print(f"\nwrote {json_path} and {html_path}", file=out)
    for name, path in outputs:  # the outputs of the last profiled iteration, as infer writes them
        for f in write_output(path, net.output(name), args.png_compression):
            print(f"wrote {name} to {f}", file=out)
    return 0


def cmd_compare(args: argparse.Namespace, out: TextIO) -> int:
    from engine import report as rep

    docs = [rep.load(p) for p in args.reports]
    labels = [f"{Path(p).name}: {d['model']['name']} {d['run']['backend']} {d['run']['format']}"
              for p, d in zip(args.reports, docs)]
    c = rep.compare(docs, labels, args.base)
    print(rep.comparison_text(c, kernels=not args.no_kernels), file=out)
    if args.html:
        from engine.atomic import atomic_write_text

        atomic_write_text(args.html, rep.comparison_html(c), "comparison")
        print(f"wrote {args.html}", file=out)
    return 0


def kind_of_safe(path: str) -> str:
    from engine.io import VIDEO_EXTS

    return "video" if Path(path).suffix.lower() in VIDEO_EXTS else "file"


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    from engine.typecheck import ERROR, check, memory_warnings

    reg = open_registry(args)
    model = load_model(args.model, reg)
    diags = check(model, reg)
    if not any(d.severity == ERROR for d in diags):
        diags += memory_warnings(model, reg)
    for d in diags:
        print(str(d), file=out)
    n_err = sum(d.severity == ERROR for d in diags)
    n_warn = len(diags) - n_err
    print(f"{args.model}: {len(model.layers)} layers, {n_err} error(s), {n_warn} warning(s)", file=out)
    return 1 if n_err else 0


def cmd_layers(args: argparse.Namespace, out: TextIO) -> int:
    reg = open_registry(args)
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
    from app.display import display_problem

    problem = display_problem()
    if problem:
        raise CliError(problem)
    try:
        from app import gui  # noqa: PLC0415 - Qt only when the designer is asked for
    except ImportError as exc:
        raise CliError(f"the designer cannot start: {exc} (install LayerLab with its GUI dependencies)") from None
    return int(gui.run(args.model, plugins=list(args.plugins or [])))


def _kernel_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of layers, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more layers, got {n}")
    return n


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_log_options(common)
    common.add_argument("--version", action="version", version=f"layerlab {_version()}")
    common.add_argument("--plugins", action="append", metavar="DIR", help="also load plugins from DIR (repeatable)")
    add_trust_option(common)

    p = _Parser(prog="layerlab", description="Design, run, check and profile convolutional networks.",
                parents=[common])
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    run_opts = argparse.ArgumentParser(add_help=False)
    add_run_options(run_opts)

    inf = sub.add_parser("infer", parents=[common, run_opts], help="run a network and write its outputs",
                         description="Run a network, print the average time per iteration and write outputs.")
    inf.add_argument("--png-compression", type=png_level, default=PNG_LEVEL, metavar="0-9", help=PNG_COMPRESSION_HELP)
    pr = sub.add_parser("profile", parents=[common, run_opts], help="time every layer and write a report",
                        description="Profile every layer; write a JSON and an HTML report and print the layer table.")
    pr.add_argument("--report", "-r", metavar="PATH", help="report path (PATH.json and PATH.html; default MODELNAME_report)")
    pr.add_argument("--png-compression", type=png_level, default=PNG_LEVEL, metavar="0-9", help=PNG_COMPRESSION_HELP)
    pr.add_argument("--measure-peaks", action="store_true",
                    help="measure the device's peaks for the roofline again (they are cached per machine with the date)")
    pr.add_argument("--kernels", type=_kernel_count, default=10, metavar="N",
                    help="print the kernels of the N slowest layers (0: none; default 10)")
    cp = sub.add_parser("compare", parents=[common], help="compare inference reports",
                        description="Compare reports layer by layer (matched by name and type).")
    cp.add_argument("reports", nargs="+", metavar="REPORT", help="report JSON files")
    cp.add_argument("--base", type=int, default=0, help="index of the base report (default 0)")
    cp.add_argument("--html", metavar="PATH", help="also write an HTML comparison")
    cp.add_argument("--no-kernels", action="store_true", help="leave out the kernels listed under each layer")
    c = sub.add_parser("check", parents=[common], help="type-check a model",
                       description="Print the type-check diagnostics; exit status 1 if there is any error.")
    c.add_argument("model")
    sub.add_parser("layers", parents=[common], help="list plugins, layers and activations")
    g = sub.add_parser("gui", parents=[common], help="open the designer")
    g.add_argument("model", nargs="?")
    add_export_parser(sub, [common])
    add_drift_parser(sub, [common])
    add_batch_parser(sub, [common])
    add_import_parser(sub, [common])
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("layerlab")
    except PackageNotFoundError:
        return "(source tree)"


COMMANDS = {"batch": cmd_batch,
            "drift": cmd_drift, "export": cmd_export, "infer": cmd_infer, "profile": cmd_profile, "compare": cmd_compare,
            "check": cmd_check, "layers": cmd_layers, "gui": cmd_gui}
COMMANDS["import"] = cmd_import


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the `layerlab` console script. Returns the exit status."""
    from engine.errors import LayerLabError

    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    level = verbosity(argv)
    verbose = level > 0
    try:
        args = build_parser().parse_args(argv)
        from engine.log import configure  # after parsing: `layerlab --help` imports no engine

        configure(level)
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
    # ``python -m app.cli``: run the one imported ``app.cli`` (as ``python -m app`` does), not this ``__main__`` copy,
    # whose classes and tables the other command modules would not share
    from app.cli import main as _main

    raise SystemExit(_main())
