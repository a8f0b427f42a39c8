"""`layerlab batch MODEL --inputs ... --output-dir DIR`: run a network over a whole dataset, resumably, on
this machine or on a Ray cluster (see ``engine.batch``). Imports no Qt."""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from app.cli.common import CliError, add_png_compression_option, seed_value
from engine.batch.stages import SAVE_AS

DESCRIPTION = ("Run a network over every image, video and .npy file of a dataset and write the outputs under the "
               "output folder with the same relative names. Inputs of the same size run in batches; nothing is "
               "resized. A manifest in the output folder records every finished output, so running the same command "
               "again resumes an interrupted run. Exit status 1 when some inputs failed (the summary lists them with "
               "their reasons).")


def add_arguments(b: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The model, the dataset, the output folder, the run's settings and the engine (local or Ray)."""
    b.add_argument("model", help="model file (.lnet)")
    b.add_argument("--inputs", nargs="+", action="extend", required=True, metavar="DIR|GLOB|LIST.txt",
                   help="folders (searched recursively), glob patterns (quote them), .txt lists of paths, or files")
    b.add_argument("--output-dir", required=True, metavar="DIR", help="output folder (created if needed)")
    b.add_argument("--batch-size", type=int, default=8, help="inputs of one size run together (default 8)")
    b.add_argument("--every", type=int, default=1, metavar="K", help="keep every K-th video frame (default 1: all)")
    b.add_argument("--save-as", choices=SAVE_AS, default="same",
                   help="output file type of still inputs: same as the input (default), npy, png or jpg; "
                        "videos stay videos")
    b.add_argument("--format", "-f", nargs="+", metavar="TOKEN",
                   help="tensor format: fp32|fp16 and nchw|nhwc (default: fp16 nhwc on cupy, fp32 nhwc on numpy)")
    b.add_argument("--backend", "-b", default="auto", choices=("auto", "numpy", "cupy"))
    b.add_argument("--weights", "-w", metavar="PATH", help="weights folder (NAME_WEIGHT.npy files) or .safetensors file")
    b.add_argument("--seed", type=seed_value, default=0, help="seed of random weights (default 0)")
    b.add_argument("--fusing-rules", default="on", metavar="on|off|FILE", help="fusing rules, as for infer")
    b.add_argument("--input-layout", choices=("nchw", "nhwc"), default="nchw", help="layout of .npy inputs")
    add_png_compression_option(b)
    b.add_argument("--workers", type=int, default=1, metavar="N",
                   help="networks run side by side: on the CPU N worker processes (local) or N actors (ray); "
                        "with cupy N worker processes, one per GPU (local; default: two networks on the current GPU) "
                        "or one actor per GPU of the cluster (ray)")
    b.add_argument("--engine", choices=("local", "ray"), default="local", help="local pipeline (default) or Ray")
    b.add_argument("--ray-address", metavar="ADDRESS",
                   help="attach to this Ray cluster ('auto' or HOST:PORT); default: start a local Ray for the run")
    b.add_argument("--ray-cpus", type=int, metavar="N", help="CPUs of the local Ray instance (default: all)")
    b.add_argument("--overwrite", action="store_true",
                   help="start again: forget the manifest and rewrite every output")
    b.add_argument("--summary", metavar="PATH", help="also write the JSON summary here "
                                                    "(it is always written as DIR/layerlab-summary.json)")


class _Bar:
    """Progress: a tqdm bar (rate, time left) on a terminal, a plain line every few seconds otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.bar: Any = None
        self.last = 0.0
        self.latest: Any = None

    def __call__(self, p: Any) -> None:
        self.latest = p
        if self.tty:
            from tqdm import tqdm

            if self.bar is None:
                self.bar = tqdm(total=p.total, unit="input", file=self.stream, dynamic_ncols=True)
            self.bar.total = p.total
            self.bar.set_postfix(failed=p.failed, refresh=False)
            self.bar.update(p.done - self.bar.n)
            return
        if time.monotonic() - self.last >= 2.0:
            self._line(p)

    def _line(self, p: Any) -> None:
        self.last = time.monotonic()
        print(f"batch: {p.done}/{p.total} inputs, {p.failed} failed, {p.rate:.2f} inputs/s", file=self.stream,
              flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.latest is not None:
            self._line(self.latest)


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Run the batch; print where the outputs and the summary are; exit status 1 when inputs failed."""
    from engine.batch import BatchJob, BatchOptions, NetworkSpec, run_job
    from engine.batch.manifest import write_json_atomic
    from engine.importers import is_importable
    from engine.weights import is_weights_path

    # failed inputs are reported with their reasons in the summary: keep OpenCV's own decoder warnings quiet
    # (read when OpenCV is first imported, here and in worker processes)
    os.environ.setdefault("OPENCV_LOG_LEVEL", "FATAL")

    model = Path(args.model)
    if not model.is_file():
        raise CliError(f"{args.model}: no such model file")
    if is_importable(model):
        raise CliError(f"{args.model}: a batch run takes a .lnet model; import it first (layerlab import {args.model})")
    if args.ray_address and args.engine != "ray":
        raise CliError("--ray-address needs --engine ray")
    spec = NetworkSpec(model.read_text(encoding="utf-8", errors="replace"), str(model), args.backend,
                       " ".join(args.format or ["auto"]), args.weights, args.seed, args.fusing_rules,
                       tuple(args.plugins or ()))
    if args.weights and not is_weights_path(args.weights):
        raise CliError(f"{args.weights}: no such weights folder or .safetensors file")
    if args.summary:  # before the run: a long run must not end in a summary that cannot be written
        from engine.atomic import check_output_file

        check_output_file(args.summary, "summary")
    options = BatchOptions(tuple(args.inputs), args.output_dir, args.batch_size, args.every, args.save_as,
                           args.overwrite, args.input_layout, args.workers, args.png_compression)
    job = BatchJob(spec, options)
    print(f"batch: {len(job.units)} inputs, {job.skipped} already finished, {len(job.todo)} chunks to run "
          f"on the {args.engine} engine", file=out)
    bar = _Bar(sys.stderr)
    ray_options = {"address": args.ray_address, "num_cpus": args.ray_cpus} if args.engine == "ray" else {}
    cancel = threading.Event()
    try:
        summary = run_job(job, args.engine, bar, cancel, **ray_options)
    finally:
        bar.close()
    if args.summary:
        write_json_atomic(Path(args.summary), summary, "summary")
    items = summary["items"]
    print(f"batch: {items['finished']} of {items['total']} inputs finished ({items['skipped']} from before), "
          f"{items['failed']} failed, {summary['throughput']['frames_per_s']} inputs/s; outputs in {args.output_dir}, "
          f"summary in {Path(args.output_dir) / 'layerlab-summary.json'}", file=out)
    for f in summary["failures"][:20]:
        print(f"failed: {f['input']}: {f['reason']}", file=out)
    if len(summary["failures"]) > 20:
        print(f"... and {len(summary['failures']) - 20} more failures (see the summary)", file=out)
    if items["failed"]:
        print(f"layerlab: {items['failed']} input(s) failed", file=sys.stderr)
        return 1
    return 0
