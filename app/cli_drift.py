"""`layerlab drift MODEL ...`: run the same inputs in two precisions (or on two backends) and report,
layer by layer, the relative error of the candidate against the reference, naming the first layer
whose error exceeds the threshold. Imports no Qt."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, TextIO

from app.cli_common import seed_value


def add_drift_parser(sub: Any, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``drift`` subcommand to the ``layerlab`` subparsers."""
    d = sub.add_parser(
        "drift", parents=parents, help="find the first layer whose output drifts in fp16 (or on another backend)",
        description="Run the same inputs and weights twice, as a reference (default fp32 on NumPy) and a candidate "
                    "(default fp16), compare every layer's output (relative L2 error) and name the first layer "
                    "over the threshold. Exit status 1 when some layer is over it. Fusing rules are off so that "
                    "every layer of the model is compared.")
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
    return d


def cmd_drift(args: argparse.Namespace, out: TextIO) -> int:
    """Print the per-layer drift table; exit status 1 when a layer exceeds the threshold."""
    from app.cli_common import CliError, load_model, open_registry
    from app.cli_custom import require_custom_consent
    from engine.analysis import Variant, compare_precision
    from engine.run import RunSpec, open_network, open_weights, parse_named, read_inputs, with_model_weights

    if not (args.threshold > 0 and math.isfinite(args.threshold)):
        raise CliError(f"--threshold must be a positive number, got {args.threshold}")
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
    result = compare_precision(model, reg, inputs.arrays, reference, candidate, weights=weights, seed=args.seed,
                               threshold=args.threshold, device=args.device)
    print(result.table(), file=out)
    if args.json:
        first = result.first_over
        doc = {
            "model": model.name, "reference": result.reference, "candidate": result.candidate,
            "threshold": result.threshold, "first_over": first.name if first else None,
            "layers": [{"name": d.name, "type": d.type, "rel_error": _num(d.rel_error), "max_abs": _num(d.max_abs),
                        "nonfinite": d.nonfinite} for d in result.layers],
        }
        Path(args.json).write_text(json.dumps(doc, indent=2), encoding="utf-8")
        print(f"wrote {args.json}", file=out)
    return 1 if result.first_over is not None else 0


def _num(v: float) -> float | str:
    return v if math.isfinite(v) else "inf"
