"""Batch throughput of `layerlab batch --engine local` against the engine alone (issue 22).

    python tests/bench/bench_batch.py [--backend numpy|cupy] [--images N] [--batch-size B] [--size 1080x1920]

Writes N generated PNG frames of the given size, then measures, for the denoiser sample:
- engine only: set_input + run + synchronize on a batch already in host memory (no decoding, no download,
  no encoding): the rate the network itself allows;
- engine host-to-host: the same plus the download of the outputs;
- batch: the whole local pipeline over the folder (decode PNG, upload, run, download, encode PNG, manifest),
  timed from the first chunk to the last recorded output (planning and opening the network excluded).
The last line is ``batch/engine ratio: X`` (target on the GPU: 0.8 or more)."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from engine.batch import BatchJob, BatchOptions, NetworkSpec, run_job  # noqa: E402
from engine.batch.runner import open_network_for  # noqa: E402
from resources import SAMPLES  # noqa: E402

MODEL = SAMPLES / "denoiser.lnet"


def make_frames(folder: Path, n: int, h: int, w: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([(xx * 255 // max(1, w - 1)), (yy * 255 // max(1, h - 1)), ((xx + yy) % 256)], -1).astype(np.int16)
    for i in range(n):
        noisy = np.clip(base + rng.integers(-12, 13, base.shape), 0, 255).astype(np.uint8)
        cv2.imwrite(str(folder / f"frame_{i:05d}.png"), noisy)


def engine_rate(spec: NetworkSpec, batch: int, h: int, w: int, repeat: int) -> tuple[float, float]:
    net = open_network_for(spec, notice=None)
    x = np.random.default_rng(1).random((batch, 3, h, w), dtype=np.float32)

    def once(download: bool) -> None:
        net.set_input("input", x)
        net.run()
        net.backend.synchronize()
        if download:
            net.output("output")

    rates = []
    for download in (False, True):
        once(download)  # warm-up (plans, kernels, CUDA graph capture on the second run)
        once(download)
        t0 = time.perf_counter()
        for _ in range(repeat):
            once(download)
        rates.append(batch * repeat / (time.perf_counter() - t0))
    return rates[0], rates[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="numpy", choices=("numpy", "cupy", "auto"))
    ap.add_argument("--format", default="auto", help="tensor format (default: fp16 nhwc on cupy, fp32 nchw on numpy)")
    ap.add_argument("--images", type=int, default=12)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--size", default="1080x1920", help="HxW of the frames")
    ap.add_argument("--repeat", type=int, default=3, help="timed engine-only batches")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--save-as", default="same", choices=("same", "npy", "png", "jpg"))
    a = ap.parse_args(argv)
    h, w = (int(v) for v in a.size.lower().split("x"))
    spec = NetworkSpec(MODEL.read_text(encoding="utf-8"), str(MODEL), a.backend, a.format)
    root = Path(tempfile.mkdtemp(prefix="layerlab_bench_batch_"))
    try:
        make_frames(root / "in", a.images, h, w)
        only, host = engine_rate(spec, a.batch_size, h, w, a.repeat)
        job = BatchJob(spec, BatchOptions((str(root / "in"),), str(root / "out"), a.batch_size, save_as=a.save_as,
                                          workers=a.workers))
        t0 = time.perf_counter()
        summary = run_job(job)
        batch = summary["items"]["frames_this_run"] / (time.perf_counter() - t0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"denoiser {h}x{w}, backend {a.backend}, format {a.format}, batch {a.batch_size}, {a.images} images, "
          f"workers {a.workers}, save as {a.save_as}")
    print(f"engine only:          {only:8.2f} images/s")
    print(f"engine host-to-host:  {host:8.2f} images/s")
    print(f"layerlab batch local: {batch:8.2f} images/s  (stages, summed over threads: {summary['stages_s']})")
    print(f"batch/engine ratio: {batch / only:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
