"""`layerlab export onnx|torch|project|preprocessed MODEL -o PATH [options]`, and the export request the
designer's export dialog shares with it (same options, same code path, same command line). Imports no Qt.

    layerlab export onnx MODEL -o OUT.onnx [--placeholders] [--fp16 [--fp32-compute]] [--explicit-sizes]
    layerlab export torch MODEL -o OUT_DIR [--stubs]                     (alias: pytorch)
    layerlab export project MODEL -o DIR --builder NAME [--package NAME] [--no-sample] [--no-pyproject]
                                                         [--format auto]
    layerlab export preprocessed MODEL -o OUT.lnet [--format fp32 nchw] [--no-weights]

Every exporter also takes --weights DIR (default: the seeded random weights of --seed N) and
--fusing-rules on|off|FILE (default on; off for torch, whose module then mirrors the design)."""
from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from typing import Any, TextIO

from app.cli_common import seed_value

KINDS = ("onnx", "torch", "project", "preprocessed")
TITLES = {"onnx": "ONNX Model", "torch": "PyTorch Module", "project": "Standalone Project",
          "preprocessed": "Preprocessed Model"}
DEFAULT_FUSING = {"onnx": "on", "torch": "off", "project": "on", "preprocessed": "on"}
#: a project's builder runs by default in the backend's default format (engine.run); the preprocessed model's
#: fusing rules are applied for one format, fp32 nchw unless asked
DEFAULT_FORMAT = {"project": "auto", "preprocessed": "fp32 nchw"}


@dataclass
class ExportRequest:
    """One export, as the CLI flags or the export dialog describe it."""

    kind: str
    output: str
    weights: str | None = None
    seed: int = 0
    fusing: str | None = None  # None: the exporter's default (DEFAULT_FUSING)
    placeholders: bool = False
    fp16: bool = False
    explicit_sizes: bool = False
    fp32_compute: bool = False
    stubs: bool = False
    builder: str = "build_network"
    package: str | None = None
    sample: bool = True
    pyproject: bool = True
    tensor_format: str | None = None  # None: the exporter's default (DEFAULT_FORMAT)
    write_weights: bool = True

    @property
    def fusing_rules(self) -> str:
        return self.fusing or DEFAULT_FUSING[self.kind]

    @property
    def format_text(self) -> str:
        """The tensor format of a project or preprocessed export (its default when none is set)."""
        return self.tensor_format or DEFAULT_FORMAT.get(self.kind, "fp32 nchw")

    def argv(self, model_path: str) -> list[str]:
        """The ``layerlab`` arguments doing this export of the model file ``model_path``."""
        args = ["export", self.kind, model_path, "-o", self.output]
        if self.kind == "onnx":
            args += [flag for flag, on in (("--placeholders", self.placeholders), ("--fp16", self.fp16),
                                           ("--explicit-sizes", self.explicit_sizes),
                                           ("--fp32-compute", self.fp32_compute)) if on]
        elif self.kind == "torch" and self.stubs:
            args.append("--stubs")
        elif self.kind == "project":
            args += ["--builder", self.builder] + (["--package", self.package] if self.package else [])
            args += ["--no-sample"] * (not self.sample) + ["--no-pyproject"] * (not self.pyproject)
            args += ["--format", *self.format_text.split()]
        elif self.kind == "preprocessed":
            args += ["--format", *self.format_text.split()] + ["--no-weights"] * (not self.write_weights)
        if self.kind != "preprocessed" or self.write_weights:
            args += ["--weights", self.weights] if self.weights else ["--seed", str(self.seed)] if self.seed else []
        if self.fusing_rules != DEFAULT_FUSING[self.kind]:
            args += ["--fusing-rules", self.fusing_rules]
        return args

    def command_line(self, model_path: str) -> str:
        """The equivalent ``layerlab export ...`` command, quoted for a POSIX shell."""
        return " ".join(shlex.quote(a) for a in ["layerlab", *self.argv(model_path)])


def run_export(request: ExportRequest, model: Any, registry: Any) -> Any:
    """Do the export; returns the ``engine.export.ExportResult``. Raises LayerLabError for user errors."""
    from engine.errors import LayerLabError
    from engine.export import (
        OnnxOptions,
        ProjectOptions,
        TorchOptions,
        export_onnx,
        export_preprocessed,
        export_project,
        export_torch,
    )
    from engine.run import RunSpec, open_weights, with_model_weights
    from engine.tensor import TensorFormat

    if request.kind not in KINDS:
        raise LayerLabError(f"unknown exporter {request.kind!r}: expected one of {', '.join(KINDS)}")
    if not request.output:
        raise LayerLabError("no output path given")
    weights = open_weights(with_model_weights(RunSpec(weights=request.weights, seed=request.seed), model), model)
    fusing = request.fusing_rules
    if request.kind == "onnx":
        if request.fp32_compute and not request.fp16:
            raise LayerLabError("--fp32-compute goes with --fp16 (a float32 export computes in float32 anyway)")
        opts = OnnxOptions(request.placeholders, request.fp16, request.explicit_sizes, request.fp32_compute)
        return export_onnx(model, registry, request.output, opts, weights, request.seed, fusing)
    if request.kind == "torch":
        return export_torch(model, registry, request.output, TorchOptions(request.stubs), weights, request.seed, fusing)
    if request.kind == "project":
        if fusing not in ("on", "off"):
            raise LayerLabError("a project export takes --fusing-rules on or off (the project applies the rules itself)")
        opts = ProjectOptions(request.builder, request.package, request.sample, request.pyproject, request.format_text,
                              fusing)
        return export_project(model, registry, request.output, opts, weights, request.seed)
    fmt = TensorFormat.parse(request.format_text)
    return export_preprocessed(model, registry, request.output, fmt, fusing, weights, request.seed,
                               request.write_weights)


def add_export_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``export`` (with its four exporters) to the ``layerlab`` subparsers; ``parents`` (the common
    flags) go to each exporter's parser."""
    e = sub.add_parser("export", help="export to ONNX, PyTorch, a standalone project or the preprocessed model",
                       description="Export a model file: an ONNX model, a PyTorch module, a standalone Python project "
                                   "running on the LayerLab engine, or the preprocessed model (templates expanded, "
                                   "fusing rules applied).")
    kinds = e.add_subparsers(dest="exporter", metavar="{onnx,torch,project,preprocessed}", parser_class=type(e))
    kinds.required = True

    def common(name: str, help_text: str, output: str, aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
        p = kinds.add_parser(name, parents=parents, help=help_text, description=help_text, aliases=list(aliases))
        p.set_defaults(exporter=name)
        p.add_argument("model", help="model file (.lnet)")
        p.add_argument("--output", "-o", required=True, metavar="PATH", help=output)
        p.add_argument("--weights", "-w", metavar="PATH", help="weights folder (NAME_WEIGHT.npy files) or .safetensors file")
        p.add_argument("--seed", type=seed_value, default=0, help="seed of the random weights used without --weights (default 0)")
        p.add_argument("--fusing-rules", default=None, metavar="on|off|FILE",
                       help=f"fusing rules applied before export (default {DEFAULT_FUSING[name]})")
        return p

    o = common("onnx", "Write an ONNX model (opset 17) with the weights as initializers.", "ONNX file to write")
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
    t = common("torch", "Write a PyTorch module (one nn.Module class) and its weights (.npz).",
               "folder to write NAME.py and NAME_weights.npz into", aliases=("pytorch",))
    t.add_argument("--stubs", action="store_true",
                   help="write stub classes with a TODO for layers without a PyTorch equivalent (else: fail listing them)")
    p = common("project", "Write a standalone Python project that builds and runs the network on the LayerLab engine.",
               "project folder")
    p.add_argument("--builder", required=True, metavar="NAME", help="name of the network builder function")
    p.add_argument("--package", metavar="NAME", help="package name (default: the network name)")
    p.add_argument("--no-sample", action="store_true", help="no command-line sample (__main__.py)")
    p.add_argument("--no-pyproject", action="store_true", help="no pyproject.toml")
    p.add_argument("--format", "-f", nargs="+", default=["auto"], metavar="TOKEN",
                   help="the builder's default tensor format (default auto: fp16 nhwc on cupy, fp32 nhwc on numpy)")
    r = common("preprocessed", "Write the model after the preprocessor (.lnet: template instances expanded into their "
                               "layers, fusing rules applied) and its weights folder.",
               "model file to write (.lnet)")
    r.add_argument("--format", "-f", nargs="+", default=["fp32", "nchw"], metavar="TOKEN",
                   help="tensor format the fusing rules are applied for (default fp32 nchw)")
    r.add_argument("--no-weights", action="store_true", help="do not write the weights folder")
    return e


def request_from_args(args: argparse.Namespace) -> ExportRequest:
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


def cmd_export(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``layerlab export ...``: print what was written and any warning."""
    import sys

    from app.cli_common import load_model, open_registry

    request = request_from_args(args)
    registry = open_registry(args)
    model = load_model(args.model, registry)
    result = run_export(request, model, registry)
    for w in result.warnings:
        print(f"layerlab: warning: {w}", file=sys.stderr)
    print(result.summary, file=out)
    return 0
