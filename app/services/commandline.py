"""The ``layerlab`` command that reproduces a run: the designer shows it beside each run (``app.run_config``),
and the command line parses it back into the same ``RunSpec`` (``app.cli.common.spec_from_args``). Imports no Qt."""
from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the engine is imported when the text is asked for
    from engine.batch.job import BatchOptions
    from engine.batch.runner import NetworkSpec
    from engine.run import RunSpec


def command_line(spec: RunSpec, model_file: str, report: str | None = None) -> str:
    """The ``layerlab profile ...`` command (``layerlab infer ...`` when profiling is off, which times whole
    iterations and writes no report) that runs ``model_file`` as ``spec`` says, quoted for a POSIX shell."""
    from engine.run import AUTO, normalize_format  # noqa: PLC0415

    parts = ["layerlab", "profile" if spec.profiling else "infer", model_file]
    for name, path in spec.inputs:
        parts += ["--input", f"{name}={path}" if name else path]
    if spec.format != AUTO:
        parts += ["--format", *normalize_format(spec.format).split()]
    parts += ["--iterations", str(spec.iterations), "--warmup", str(spec.warmup), "--backend", spec.backend,
              "--seed", str(spec.seed), "--fusing-rules", spec.fusing]
    if spec.weights:
        parts += ["--weights", spec.weights]
    if report and spec.profiling:
        parts += ["--report", report]
    if spec.input_layout != "nchw":
        parts += ["--input-layout", spec.input_layout]
    if spec.tf32:
        parts += ["--tf32"]
    if spec.device is not None:
        parts += ["--device", str(spec.device)]
    for folder in spec.plugins:
        parts += ["--plugins", folder]
    for name, fmt in spec.layer_formats:
        parts += ["--layer-format", f"{name}={fmt.replace(' ', ',') or 'default'}"]
    return " ".join(shlex.quote(p) for p in parts)


def batch_command_line(spec: NetworkSpec, options: BatchOptions, engine: str, model_file: str) -> str:
    """The ``layerlab batch ...`` command that runs ``model_file`` over a dataset as the Run on Dataset dialog's
    ``spec`` and ``options`` say, quoted for a POSIX shell."""
    from engine.run import AUTO, normalize_format  # noqa: PLC0415

    parts = ["layerlab", "batch", model_file, "--inputs", *options.inputs, "--output-dir", options.output_dir,
             "--batch-size", str(options.batch_size), "--every", str(options.every), "--save-as", options.save_as,
             "--png-compression", str(options.png_compression), "--backend", spec.backend, "--seed", str(spec.seed),
             "--fusing-rules", spec.fusing, "--engine", engine]
    if spec.format != AUTO:
        parts += ["--format", *normalize_format(spec.format).split()]
    if spec.weights:
        parts += ["--weights", spec.weights]
    if options.input_layout != "nchw":
        parts += ["--input-layout", options.input_layout]
    if options.overwrite:
        parts.append("--overwrite")
    for folder in spec.plugins:
        parts += ["--plugins", folder]
    return " ".join(shlex.quote(p) for p in parts)
