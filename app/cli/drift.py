"""`layerlab drift MODEL ...`: run the same inputs in two precisions (or on two backends) and report,
layer by layer, the relative error of the candidate against the reference, naming the first layer
whose error exceeds the threshold. Imports no Qt."""
from __future__ import annotations

import argparse
import json
import math
from typing import Any, TextIO

from app.cli.common import (
    CliError,
    add_layer_format_option,
    layer_formats_of,
    load_model,
    open_registry,
    progress_printer,
    seed_value,
)
from app.cli.trust import require_custom_consent

DESCRIPTION = ("Run the same inputs and weights twice, as a reference (default fp32 on NumPy) and a candidate "
               "(default fp16), compare every layer's output (relative L2 error) and name the first layer over the "
               "threshold. Exit status 1 when some layer is over it. Fusing rules are off so that every layer of the "
               "model is compared.")


def add_arguments(d: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """Inputs, weights, the reference and candidate runs, the threshold, and ``--fix`` with its flags."""
    d.add_argument("model", help="model file (.lnet)")
    d.add_argument("--input", "-i", action="append", metavar="[NAME=]PATH",
                   help="input file for input layer NAME: image, .npy, or a video (its first frame)")
    d.add_argument("--input-layout", choices=("nchw", "nhwc"), default="nchw", help="layout of .npy inputs")
    d.add_argument("--weights", "-w", metavar="PATH", help="weights folder (NAME_WEIGHT.npy files) or .safetensors file")
    d.add_argument("--seed", type=seed_value, default=0, help="seed of random weights and inputs (default 0)")
    d.add_argument("--reference", default="numpy:fp32|nchw", metavar="[BACKEND:]FORMAT",
                   help="reference run, e.g. 'fp32', 'numpy:fp32|nchw' (default)")
    d.add_argument("--candidate", "--compare", default="numpy:fp16|nchw", metavar="[BACKEND:]FORMAT",
                   help="run compared with the reference, e.g. 'fp16', 'cupy:fp16|nhwc', 'cupy:fp32' "
                        "(default numpy:fp16|nchw)")
    d.add_argument("--threshold", "-t", type=float, default=1e-2,
                   help="relative error above which a layer has drifted (default 0.01)")
    d.add_argument("--json", metavar="PATH", help="also write the per-layer errors as JSON")
    d.add_argument("--device", type=int, metavar="N", help="the GPU of the cupy runs (CUDA ordinal; default 0)")
    add_layer_format_option(d)
    d.add_argument("--fix", action="store_true",
                   help="find a small set of layers to pin to fp32 so that every network output stays within the "
                        "threshold (greedy from the first drifting layer, then unneeded pins removed); prints the "
                        "set, the error and the time of the mixed network against all-fp16 and all-fp32")
    d.add_argument("--write", action="store_true", help="with --fix: store the pins in the model file (atomically)")
    d.add_argument("--iterations", "-n", type=int, default=10, help="with --fix: timed iterations (default 10)")
    d.add_argument("--backend", "-b", default=None, choices=("auto", "numpy", "cupy"),
                   help="with --fix: backend of the timings (default: the candidate's)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Print the per-layer drift table; exit status 1 when a layer exceeds the threshold."""
    from engine.analysis import Variant, compare_precision
    from engine.atomic import atomic_write_text, check_output_file
    from engine.run import RunSpec, open_network, open_weights, parse_named, read_inputs, with_model_weights

    if not (args.threshold > 0 and math.isfinite(args.threshold)):
        raise CliError(f"--threshold must be a positive number, got {args.threshold}")
    if args.write and not args.fix:
        raise CliError("--write stores the pins --fix finds: give --fix too")
    if args.json:  # before the runs: they must not end in a file that cannot be written
        check_output_file(args.json, "drift JSON")
    if args.iterations < 1:
        raise CliError(f"--iterations must be at least 1, got {args.iterations}")
    pins = layer_formats_of(args)
    spec = RunSpec(backend="numpy", format="fp32 nchw", weights=args.weights, seed=args.seed,
                   inputs=tuple(parse_named(args.input)), input_layout=args.input_layout, fusing="off")
    reg = open_registry(args)
    model = load_model(args.model, reg)
    require_custom_consent(args, model)
    reference, candidate = Variant.parse(args.reference), Variant.parse(args.candidate)
    spec = with_model_weights(spec, model)  # no --weights: the model's weights setting, if any
    weights = open_weights(spec, model)
    probe = open_network(model, spec, reg, weights=weights)  # input names and image options: nothing is computed
    inputs = read_inputs(probe, spec)  # a video gives its first frame
    inputs.close()
    if args.fix:
        if pins:
            raise CliError("--fix finds the layer formats itself: leave out --layer-format")
        return _fix(args, out, model, reg, inputs.arrays, reference, candidate, weights, spec)
    result = compare_precision(model, reg, inputs.arrays, reference, candidate, weights=weights, seed=args.seed,
                               threshold=args.threshold, device=args.device,
                               layer_formats=dict(pins))
    print(result.table(), file=out)
    if args.json:
        first = result.first_over
        doc = {
            "model": model.name, "reference": result.reference, "candidate": result.candidate,
            "threshold": result.threshold, "first_over": first.name if first else None,
            "layers": [{"name": d.name, "type": d.type, "rel_error": _num(d.rel_error), "max_abs": _num(d.max_abs),
                        "nonfinite": d.nonfinite} for d in result.layers],
        }
        atomic_write_text(args.json, json.dumps(doc, indent=2), "drift JSON")
        print(f"wrote {args.json}", file=out)
    return 1 if result.first_over is not None else 0


def _fix(args: argparse.Namespace, out: TextIO, model: Any, reg: Any, inputs: dict[str, Any], reference: Any,
         candidate: Any, weights: Any, spec: Any) -> int:
    """``drift --fix``: the search, its timings, and with ``--write`` the pins stored in the model file."""
    from dataclasses import replace

    from engine.atomic import atomic_write_text
    from engine.errors import LayerLabError
    from engine.modelfile import save
    from engine.precision import fix_precision, format_times, time_mixed, with_pins

    bar = progress_printer(out) if hasattr(out, "isatty") and out.isatty() else None
    fix = fix_precision(model, reg, inputs, reference, candidate, weights=weights, seed=args.seed,
                        threshold=args.threshold, progress=(lambda f, _m: bar(int(100 * f), 100)) if bar else None)
    print(fix.summary(), file=out)
    timing = replace(spec, backend=args.backend or candidate.backend, format=str(candidate.fmt), fusing="on",
                     iterations=args.iterations, warmup=1)
    print(f"time per inference ({timing.backend}, {args.iterations} iterations, median):", file=out)
    print(format_times(time_mixed(model, reg, fix.pins, timing, weights=weights)), file=out)
    if args.json:
        doc = {"model": model.name, "reference": fix.reference, "candidate": fix.candidate,
               "threshold": fix.threshold, "pins": fix.pins, "satisfied": fix.satisfied,
               "outputs_before": {k: _num(v) for k, v in fix.before.outputs.items()},
               "outputs_after": {k: _num(v) for k, v in fix.after.outputs.items()}}
        atomic_write_text(args.json, json.dumps(doc, indent=2), "drift JSON")
        print(f"wrote {args.json}", file=out)
    if args.write:
        if not fix.satisfied:
            print("layerlab: the threshold cannot be met by pinning layers: the model file is left unchanged", file=out)
            return 1
        try:
            save(with_pins(model, fix.pins), args.model)
        except (OSError, LayerLabError) as exc:  # engine.atomic's OutputError names the model file already
            reason = exc.strerror or exc if isinstance(exc, OSError) else str(exc).removeprefix(f"{args.model}: ")
            raise CliError(f"cannot write the pins to {args.model}: {reason}") from None
        print(f"wrote the pins to {args.model}", file=out)
    return 0 if fix.satisfied else 1


def _num(v: float) -> float | str:
    return v if math.isfinite(v) else "inf"
