"""``layerlab infer MODEL ...``: run a network, print the time per iteration (or per video frame) and a line per
output, and write the outputs asked for. Imports no Qt."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from app.cli.common import CliError, add_png_compression_option, add_run_options
from app.cli.running import is_video_path, open_run, planned_outputs

DESCRIPTION = "Run a network, print the average time per iteration and write outputs."


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The run flags and ``--png-compression``."""
    add_run_options(parser)
    add_png_compression_option(parser)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``layerlab infer``; a warning on stderr for an output holding NaN or infinite values."""
    import numpy as np

    from engine.io import VideoWriter, write_output
    from engine.run import format_notes, load_inputs, run_timed, time_iteration

    spec, model, net = open_run(args, profiling=False)
    outputs = planned_outputs(args, net)
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
            writers = {n: VideoWriter(p, video.reader.fps) for n, p in outputs if is_video_path(p)}
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
