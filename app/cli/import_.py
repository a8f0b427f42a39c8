"""``layerlab import MODEL.onnx -o MODEL.lnet``: import an ONNX model as a LayerLab model plus one
safetensors weights file, with a progress line and a summary. Imports no Qt."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from app.cli.common import CliError, open_registry

DESCRIPTION = ("Import an ONNX model: writes MODEL.lnet and its weights as one .safetensors file next to it "
               "(referenced by the model's weights setting).")


def add_arguments(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The ONNX file, the model and weights files to write, input sizes and the import's options."""
    p.add_argument("model", help="ONNX file to import")
    p.add_argument("--output", "-o", metavar="MODEL.lnet", help="model file to write (default: the ONNX file's name "
                                                                 "with .lnet)")
    p.add_argument("--input-shape", action="append", metavar="NAME=NxCxHxW", default=[],
                   help="sizes of an input with symbolic dimensions (repeatable; default N=1, H=W=224)")
    p.add_argument("--placeholders", action="store_true",
                   help="keep operators without a LayerLab equivalent as placeholder layers instead of failing")
    p.add_argument("--weights-file", metavar="PATH", help="weights file to write (default: MODEL.safetensors next "
                                                          "to the model)")
    p.add_argument("--no-clean", action="store_true", help="skip the graph clean-up (onnxslim) before mapping")
    p.add_argument("--max-nodes", type=int, metavar="N", default=None,
                   help="refuse models of more than N ONNX nodes before any work (default 100,000)")


def _progress(out: TextIO) -> Any:
    """Progress on one line (a terminal) or a line per stage (otherwise)."""
    tty = hasattr(out, "isatty") and out.isatty()
    last: list[str] = [""]

    def show(done: int, total: int, stage: str) -> None:
        if tty:
            out.write(f"\rimporting: {stage} {done}/{total} nodes" if stage == "mapping" else f"\rimporting: {stage}   ")
            if stage == "done":
                out.write("\n")
            out.flush()
        elif stage != last[0]:
            print(f"importing: {stage}", file=out)
        last[0] = stage
    return show


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``layerlab import``: import, write the model and weights atomically, print the summary."""
    from engine.importers.onnx import import_onnx, parse_input_shape

    src = Path(args.model)
    if src.suffix.lower() != ".onnx":
        raise CliError(f"{src}: expected an .onnx file")
    output = Path(args.output) if args.output else src.with_suffix(".lnet")
    if output.suffix.lower() != ".lnet":
        raise CliError(f"--output {output}: the model file must end in .lnet")
    if args.weights_file and Path(args.weights_file).suffix.lower() != ".safetensors":
        raise CliError(f"--weights-file {args.weights_file}: the weights file must end in .safetensors")
    for what, target in (("model", output), ("weights file", Path(args.weights_file) if args.weights_file else output)):
        if not target.parent.is_dir():
            raise CliError(f"{target.parent}: no such folder for the {what}")
    shapes = dict(parse_input_shape(t) for t in args.input_shape)
    reg = open_registry(args)
    result = import_onnx(src, input_shapes=shapes, placeholders=args.placeholders, progress=_progress(sys.stderr),
                         registry=reg, clean=not args.no_clean,
                         **({"max_nodes": args.max_nodes} if args.max_nodes is not None else {}))
    for n in result.notices:
        print(f"layerlab: notice: {n}", file=sys.stderr)
    for r in result.refused:
        print(f"layerlab: warning: placeholder for {r}", file=sys.stderr)
    lnet, wfile = result.write(output, args.weights_file)
    print(f"imported {src}: {result.summary()}", file=out)
    if getattr(args, "verbose", 0):
        for f in result.folded:
            print(f"  folded: {f}", file=out)
    print(f"wrote {lnet} and {wfile}", file=out)
    return 0
