"""An export request and the one function that does it: the designer's export dialog and ``layerlab export``
(``app.cli.export``) both describe an export as an ``ExportRequest`` and run it with ``run_export``, so they share
options, code path and command line. Imports no Qt. The command line of a request:

    layerlab export onnx MODEL -o OUT.onnx [--placeholders] [--fp16 [--fp32-compute]] [--explicit-sizes]
    layerlab export torch MODEL -o OUT_DIR [--stubs]                     (alias: pytorch)
    layerlab export project MODEL -o DIR --builder NAME [--package NAME] [--no-sample] [--no-pyproject]
                                                         [--format auto]
    layerlab export preprocessed MODEL -o OUT.lnet [--format fp32 nchw] [--no-weights]

Every exporter also takes --weights DIR (default: the seeded random weights of --seed N) and
--fusing-rules on|off|FILE (default on; off for torch, whose module then mirrors the design)."""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

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
