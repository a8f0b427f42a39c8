"""``layerlab export onnx|torch|project|preprocessed MODEL -o PATH [options]``: the flags make an
``app.services.export.ExportRequest``, which ``run_export`` does, as the designer's export dialog does. Imports no Qt."""
from __future__ import annotations

import argparse
import sys
from typing import TextIO

from app.cli.common import load_model, open_registry, seed_value
from app.services.export import DEFAULT_FUSING, ExportRequest, run_export

DESCRIPTION = ("Export a model file: an ONNX model, a PyTorch module, a standalone Python project running on the "
               "LayerLab engine, or the preprocessed model (templates expanded, fusing rules applied).")


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The four exporters, each a subcommand of ``export`` taking the ``common`` flags."""
    kinds = parser.add_subparsers(dest="exporter", metavar="{onnx,torch,project,preprocessed}",
                                  parser_class=type(parser))
    kinds.required = True

    def exporter(name: str, help_text: str, output: str, aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
        p = kinds.add_parser(name, parents=[common], help=help_text, description=help_text, aliases=list(aliases))
        p.set_defaults(exporter=name)
        p.add_argument("model", help="model file (.lnet)")
        p.add_argument("--output", "-o", required=True, metavar="PATH", help=output)
        p.add_argument("--weights", "-w", metavar="PATH", help="weights folder (NAME_WEIGHT.npy files) or .safetensors file")
        p.add_argument("--seed", type=seed_value, default=0, help="seed of the random weights used without --weights (default 0)")
        p.add_argument("--fusing-rules", default=None, metavar="on|off|FILE",
                       help=f"fusing rules applied before export (default {DEFAULT_FUSING[name]})")
        return p

    o = exporter("onnx", "Write an ONNX model (opset 17) with the weights as initializers.", "ONNX file to write")
    o.add_argument("--placeholders", action="store_true",
                   help="write layers without an ONNX equivalent as layerlab.placeholders nodes (else: fail listing them)")
    o.add_argument("--fp16", action="store_true",
                   help="compute in fp16 as the engine does: FLOAT16 tensors and weights, layers pinned to fp32 in "
                        "FLOAT between explicit Cast nodes")
    o.add_argument("--fp32-compute", action="store_true",
                   help="with --fp16: FLOAT16 inputs, outputs and weights, but compute in float32 (for runtimes "
                        "without float16 kernels)")
    o.add_argument("--explicit-sizes", action="store_true",
                   help="write tensor sizes (else N, H and W are dimension names: resolution-independent)")
    t = exporter("torch", "Write a PyTorch module (one nn.Module class) and its weights (.npz).",
                 "folder to write NAME.py and NAME_weights.npz into", aliases=("pytorch",))
    t.add_argument("--stubs", action="store_true",
                   help="write stub classes with a TODO for layers without a PyTorch equivalent (else: fail listing them)")
    p = exporter("project", "Write a standalone Python project that builds and runs the network on the LayerLab "
                            "engine.", "project folder")
    p.add_argument("--builder", required=True, metavar="NAME", help="name of the network builder function")
    p.add_argument("--package", metavar="NAME", help="package name (default: the network name)")
    p.add_argument("--no-sample", action="store_true", help="no command-line sample (__main__.py)")
    p.add_argument("--no-pyproject", action="store_true", help="no pyproject.toml")
    p.add_argument("--format", "-f", nargs="+", default=["auto"], metavar="TOKEN",
                   help="the builder's default tensor format (default auto: fp16 nhwc on cupy, fp32 nhwc on numpy)")
    r = exporter("preprocessed", "Write the model after the preprocessor (.lnet: template instances expanded into "
                                 "their layers, fusing rules applied) and its weights folder.",
                 "model file to write (.lnet)")
    r.add_argument("--format", "-f", nargs="+", default=["fp32", "nchw"], metavar="TOKEN",
                   help="tensor format the fusing rules are applied for (default fp32 nchw)")
    r.add_argument("--no-weights", action="store_true", help="do not write the weights folder")


def request_from_args(args: argparse.Namespace) -> ExportRequest:
    """The export request the parsed ``export`` flags describe."""
    kind = "torch" if args.exporter == "pytorch" else args.exporter
    req = ExportRequest(kind, args.output, args.weights, args.seed, args.fusing_rules)
    if kind == "onnx":
        req.placeholders, req.fp16, req.explicit_sizes = args.placeholders, args.fp16, args.explicit_sizes
        req.fp32_compute = args.fp32_compute
    elif kind == "torch":
        req.stubs = args.stubs
    elif kind == "project":
        req.builder, req.package = args.builder, args.package
        req.sample, req.pyproject = not args.no_sample, not args.no_pyproject
        req.tensor_format = " ".join(args.format)
    else:
        req.tensor_format, req.write_weights = " ".join(args.format), not args.no_weights
    return req


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``layerlab export ...``: print what was written and any warning."""
    request = request_from_args(args)
    registry = open_registry(args)
    model = load_model(args.model, registry)
    result = run_export(request, model, registry)
    for w in result.warnings:
        print(f"layerlab: warning: {w}", file=sys.stderr)
    print(result.summary, file=out)
    return 0
