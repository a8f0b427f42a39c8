"""What the ``layerlab`` commands share: the user-error type and the parser that raises it, the log flags,
loading plugins and models with their warnings, and the run flags and the ``RunSpec`` they make. Imports no Qt and
no other ``app`` module (the designer shares ``app.services`` with the command line, never this)."""
from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the engine is imported when a command needs it: `layerlab --help` stays quick
    from engine.model import Model
    from engine.registry import Registry
    from engine.run import RunSpec

USER_ERROR = 2
log = logging.getLogger("layerlab.app.cli")


def verbosity(argv: Sequence[str]) -> int:
    """The log verbosity the command line asks for: ``-q``/``--quiet`` -1, each ``-v``/``--verbose`` +1 (``-vv``
    counts two), at most 2. Read from the raw arguments, so they count before and after the command's name."""
    level = 0
    for a in argv:
        if a == "--":
            break
        if a in ("-q", "--quiet"):
            level -= 1
        elif a == "--verbose":
            level += 1
        elif len(a) > 1 and a[0] == "-" and a[1] != "-" and set(a[1:]) == {"v"}:
            level += len(a) - 1
    return max(-1, min(2, level))


def add_log_options(parser: argparse.ArgumentParser) -> None:
    """``-v``/``-vv``/``-q``: how much of the log to print (and ``-v`` shows tracebacks of errors)."""
    parser.add_argument("--verbose", "-v", action="count", default=argparse.SUPPRESS,
                        help="print more: -v info (and tracebacks of errors), -vv debug")
    parser.add_argument("--quiet", "-q", action="count", default=argparse.SUPPRESS,
                        help="print errors only (no warnings)")


class CliError(Exception):
    """A user error found by the command line itself (bad flag value, missing file)."""


class Parser(argparse.ArgumentParser):
    """The parser of ``layerlab`` and its commands: a bad argument is one line and exit status 2 (a CliError),
    not a usage dump."""

    def error(self, message: str) -> None:
        raise CliError(f"{message} (see '{self.prog} --help')")


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum`` (argparse names the flag in its error)."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text[:40]!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {'at least 1' if minimum == 1 else f'{minimum} or more'}, "
                                             f"got {value}")
        return value
    return whole_number


#: the argparse type of ``--seed``
seed_value = at_least(0)

#: the help of ``--png-compression``
PNG_COMPRESSION_HELP = ("zlib level of PNG outputs, 0-9 (default 1: fast, OpenCV's own setting; 0: stored, the "
                        "fastest to write and the largest files; 2-9: smaller files, several times slower)")


def png_level(text: str) -> int:
    """An argparse type: a PNG compression level, 0 to 9 (``engine.io.check_png_level``)."""
    from engine.errors import InputError  # noqa: PLC0415
    from engine.io import check_png_level  # noqa: PLC0415

    try:
        return check_png_level(at_least(0)(text))
    except InputError:
        raise argparse.ArgumentTypeError(f"must be from 0 to 9, got {text[:40]}") from None


def add_png_compression_option(parser: argparse.ArgumentParser) -> None:
    """``--png-compression 0-9``: the zlib level of PNG outputs (``infer``, ``profile``, ``batch``)."""
    from engine.io import PNG_LEVEL  # noqa: PLC0415

    parser.add_argument("--png-compression", type=png_level, default=PNG_LEVEL, metavar="0-9",
                        help=PNG_COMPRESSION_HELP)


def open_registry(args: argparse.Namespace) -> Registry:
    """The plugins (built-in, installed, and ``--plugins`` folders); failures are logged as warnings."""
    from engine.plugins import load_plugins  # noqa: PLC0415

    return load_plugins(args.plugins or [])  # failures are logged as warnings (engine.log)


def load_model(model_path: str, registry: Registry) -> Model:
    """The model file ``model_path`` (a ``.lnet``, or an ``.onnx`` imported in memory with its weights as the
    model's ``weights_source``); its load warnings are logged."""
    from engine.importers import load_model_any  # noqa: PLC0415

    model, imported = load_model_any(model_path, registry)
    model.weights_source = imported
    for w in model.load_warnings:
        log.warning("%s", w)
    return model


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The flags of a run (``infer`` and ``profile``): model, inputs and outputs, format, iterations, weights..."""
    parser.add_argument("model", help="model file (.lnet, or .onnx imported in memory)")
    parser.add_argument("--input", "-i", action="append", metavar="[NAME=]PATH",
                        help="input file for input layer NAME: image (PNG/JPG), video (MP4/AVI/MKV/...) or .npy")
    parser.add_argument("--input-layout", choices=("nchw", "nhwc"), default="nchw", help="layout of .npy inputs")
    parser.add_argument("--output", "-o", action="append", metavar="[NAME=]PATH",
                        help="write output layer NAME to PATH (.npy, .png/.jpg, or a video for video inputs)")
    parser.add_argument("--output-dir", metavar="DIR", help="write every output as DIR/NAME.npy")
    parser.add_argument("--format", "-f", nargs="+", metavar="TOKEN",
                        help="tensor format: fp32|fp16 and nchw|nhwc, e.g. '--format fp16 nhwc', or auto "
                             "(default: auto, fp16 nhwc on cupy and fp32 nhwc on numpy)")
    parser.add_argument("--iterations", "-n", type=at_least(1), default=10, help="timed iterations (default 10)")
    parser.add_argument("--warmup", type=at_least(0), default=1, help="untimed warm-up iterations (default 1)")
    parser.add_argument("--weights", "-w", metavar="PATH",
                        help="weights folder (NAME_WEIGHT.npy files) or .safetensors file (default: the model's)")
    parser.add_argument("--backend", "-b", default="auto", choices=("auto", "numpy", "cupy"))
    parser.add_argument("--tf32", action="store_true",
                        help="fp32 on the GPU may use TF32 tensor cores (faster, about 1e-3 relative error; default: strict)")
    parser.add_argument("--seed", type=seed_value, default=0, help="seed of random weights and inputs (default 0)")
    parser.add_argument("--device", type=int, metavar="N",
                        help="the GPU the cupy backend runs on (CUDA ordinal; default 0)")
    parser.add_argument("--fusing-rules", default="on", metavar="on|off|FILE",
                        help="apply the plugins' and the model's enabled fusing rules (on, default), none (off), "
                             "or the rules in FILE (one per line)")
    add_layer_format_option(parser)


def add_layer_format_option(parser: argparse.ArgumentParser) -> None:
    """``--layer-format NAME=FORMAT`` (repeatable): a layer's own format for this run, over the model's."""
    parser.add_argument("--layer-format", action="append", metavar="NAME=FORMAT",
                        help="run layer NAME in its own format: fp32, fp16, nchw, nhwc, or both (fp32,nchw); "
                             "'default' drops the model's own setting; repeatable")


def layer_formats_of(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """The (layer, format) pairs of the ``--layer-format`` flags (raises LayerFormatError for a bad one)."""
    from engine.formats import parse_assignments  # noqa: PLC0415

    return parse_assignments(getattr(args, "layer_format", None))


def spec_from_args(args: argparse.Namespace, profiling: bool) -> RunSpec:
    """The RunSpec of parsed run flags (``profiling``: the ``profile`` command); validated."""
    from engine.run import RunSpec, normalize_format, parse_named  # noqa: PLC0415

    return RunSpec(backend=args.backend, format=normalize_format(" ".join(args.format or [])),
                   iterations=args.iterations, warmup=args.warmup, weights=args.weights, seed=args.seed,
                   inputs=tuple(parse_named(args.input)), input_layout=args.input_layout, fusing=args.fusing_rules,
                   profiling=profiling, plugins=tuple(getattr(args, "plugins", None) or ()),
                   tf32=bool(getattr(args, "tf32", False)), device=getattr(args, "device", None),
                   layer_formats=layer_formats_of(args)).check()


def progress_printer(out: TextIO) -> Callable[[int, int], None]:
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
