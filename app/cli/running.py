"""What the commands that run a network (``infer``, ``profile``) share: opening the run (spec, model, network,
through ``engine.run``) and checking the outputs asked for before the run. Imports no Qt."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import CliError, load_model, open_registry, spec_from_args
from app.cli.trust import require_custom_consent

if TYPE_CHECKING:
    from engine.model import Model
    from engine.network import Network
    from engine.run import RunSpec


def open_run(args: argparse.Namespace, profiling: bool) -> tuple[RunSpec, Model, Network]:
    """The run's spec, model and network (engine.run), the fusions made printed on stderr (not when profiling: the
    profile's notes list them with the layer table)."""
    from engine.run import fusing_notes, open_network, with_model_weights

    spec = spec_from_args(args, profiling)
    reg = open_registry(args)
    model = load_model(args.model, reg)
    require_custom_consent(args, model)
    spec = with_model_weights(spec, model)  # no --weights: the model's weights setting, if any
    net = open_network(model, spec, reg, notice=sys.stderr, always_notice=getattr(args, "verbose", 0) > 0)
    for line in [] if profiling else fusing_notes(net):
        print(f"layerlab: {line}", file=sys.stderr)
    return spec, model, net


def planned_outputs(args: argparse.Namespace, net: Any) -> list[tuple[str, str]]:
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
        if is_video_path(path) and not video_input:
            raise CliError(f"{path}: a video output takes a video input's frames (no input is a video)")
        check_output_file(path)
    return outputs


def is_video_path(path: str) -> bool:
    """Whether ``path`` names a video by its extension (it need not exist)."""
    from engine.io import VIDEO_EXTS

    return Path(path).suffix.lower() in VIDEO_EXTS
