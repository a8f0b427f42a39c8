"""Batch throughput of `layerlab batch --engine local` against the engine alone.

    python -m tests.bench.bench_batch [--backend numpy|cupy] [--images N] [--batch-size B] [--size HxW]

GPU: ``--backend cupy`` (defaults: 256 frames of 1080x1920, batches of 8).
CPU: ``--backend numpy`` (defaults: 48 frames of 240x320, batches of 4: the NumPy denoiser is slow at 1080p).

Writes N generated PNG frames (noisy gradients, about 4 MB each at 1080p), then measures, for the denoiser sample:
- engine on device: the batch already on the device, run + synchronize: the network's own rate;
- engine only: set_input of a float32 batch already in host memory + run + synchronize (no decoding, no
  download, no encoding): the rate the network allows fed from the host, as a script feeding it NumPy arrays gets
  (the reference of the target);
- engine host-to-host: the same plus the download of the float32 outputs (into fresh pageable memory, and into
  page-locked memory: ``Network.output(..., pinned=True)``, what a batch run does for NPY outputs on the GPU);
- engine 8-bit host-to-host: what a batch run does on the network's side: 8-bit images uploaded and made into
  the tensor on the device (``Network.set_input_images``), run, the outputs made into 8-bit images there and
  downloaded (``Network.output_images``);
- reading and writing capacity: the frames decoded (and the outputs encoded, synced and hashed, as a batch run
  writes them) by the batch engine's thread pool alone, as images per second, and both in one pool: the most the
  CPU side allows;
- batch: the whole local pipeline over the folder (decode, upload, run, download, encode, manifest), overall
  (from the start of the run: opening the networks and filling the pipeline included) and at steady state (from
  the chunk that completes the first tenth of the images to the last; the overall rate when too few chunks
  remain after it), with the thread time per image of each stage.
The steady-state rate is also given over the CPU side's capacity, the 8-bit host path and the network alone; the last
line is ``batch/engine ratio: X`` (steady-state batch rate over the engine-only rate; target on the GPU: 0.8 or more)."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from engine.batch import BatchJob, BatchOptions, NetworkSpec, run_job  # noqa: E402
from engine.batch.dataset import Unit  # noqa: E402
from engine.batch.local import opencv_threads, pool_threads  # noqa: E402
from engine.batch.runner import network_io, open_network_for  # noqa: E402
from engine.batch.stages import Group, Layout, Plan, write_still  # noqa: E402
from engine.io import decode_image  # noqa: E402
from resources import SAMPLES  # noqa: E402

MODEL = SAMPLES / "denoiser.lnet"
DEFAULTS = {"cupy": {"images": 256, "batch_size": 8, "size": "1080x1920"},
            "numpy": {"images": 48, "batch_size": 4, "size": "240x320"}}


def make_frames(folder: Path, n: int, h: int, w: int, ext: str = "png") -> list[Path]:
    """N noisy gradient frames as image files of type ``ext`` (``png``, or ``jpg`` at OpenCV's default quality
    95, as cameras write photographs), written in parallel."""
    folder.mkdir(parents=True, exist_ok=True)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([(xx * 255 // max(1, w - 1)), (yy * 255 // max(1, h - 1)), ((xx + yy) % 256)], -1).astype(np.int16)

    def one(i: int) -> Path:
        noise = np.random.default_rng(i).integers(-12, 13, base.shape)
        path = folder / f"frame_{i:05d}.{ext}"
        cv2.imwrite(str(path), np.clip(base + noise, 0, 255).astype(np.uint8))
        return path

    with ThreadPoolExecutor(pool_threads()) as pool:
        return list(pool.map(one, range(n)))


def engine_rates(spec: NetworkSpec, batch: int, frames: list[Path], repeat: int) -> dict[str, float]:
    """Images per second of the network alone, fed from host memory (see the module documentation)."""
    net = open_network_for(spec, notice=None)
    io = network_io(spec)
    images = [decode_image(p) for p in frames[:batch]]
    x = np.random.default_rng(1).random((batch, 3, *images[0].shape[:2]), dtype=np.float32)

    def float32(download: str) -> None:
        net.set_input("input", x)
        net.run()
        net.backend.synchronize()
        if download:
            net.output("output", pinned=download == "pinned")

    def on_device(_download: str) -> None:
        net.mark_affected("input")
        net.run()
        net.backend.synchronize()

    def uint8(_download: str) -> None:
        net.set_input_images("input", images, io.image_options)
        net.run()
        net.output_images("output")

    rates = {}
    net.set_input("input", x)
    for key, fn, download in (("engine on device", on_device, ""), ("engine only", float32, ""),
                              ("engine host-to-host", float32, "pageable"),
                              ("engine host-to-host pinned", float32, "pinned"),
                              ("engine 8-bit host-to-host", uint8, "pinned")):
        fn(download)  # warm-up (plans, kernels, CUDA graph capture on the second run)
        fn(download)
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn(download)
        rates[key] = batch * repeat / (time.perf_counter() - t0)
    return rates


def io_capacity(frames: list[Path], out: Path, save_as: str = "same", png_level: int = 1) -> tuple[float, float]:
    """Images per second the batch engine's thread pool decodes, and encodes + writes (as ``save_as``, synced and
    hashed, as a batch run writes its outputs), with nothing else running."""
    threads = pool_threads()
    with opencv_threads(1), ThreadPoolExecutor(threads) as pool:  # as a batch run sets OpenCV up
        t0 = time.perf_counter()
        images = list(pool.map(decode_image, frames))
        read = len(frames) / (time.perf_counter() - t0)
        plan = Plan(Layout(str(out), ("output",), save_as, png_level), "input")
        outs = {"output": np.stack(images)}
        group = Group([(p.name, None) for p in frames], outputs=outs, as_images=True)
        units = [Unit(str(p), p.name, "image") for p in frames]
        t0 = time.perf_counter()
        done = list(pool.map(lambda i: write_still(group, i, units[i], plan), range(len(frames))))
        written = len(frames) / (time.perf_counter() - t0)
    assert not any(d.reason for d in done), [d.reason for d in done if d.reason][:1]
    return read, written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="numpy", choices=("numpy", "cupy"))
    ap.add_argument("--format", default="auto", help="tensor format (default: fp16 nhwc on cupy, fp32 nchw on numpy)")
    ap.add_argument("--images", type=int, help="frames (default: 256 on cupy, 48 on numpy)")
    ap.add_argument("--batch-size", type=int, help="default: 8 on cupy, 4 on numpy")
    ap.add_argument("--size", help="HxW of the frames (default: 1080x1920 on cupy, 240x320 on numpy)")
    ap.add_argument("--repeat", type=int, default=20, help="timed batches of each engine-only measurement")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--save-as", default="same", choices=("same", "npy", "png", "jpg"))
    ap.add_argument("--input-format", default="png", choices=("png", "jpg"),
                    help="type of the generated frames (png: lossless frames; jpg: photographs)")
    ap.add_argument("--png-compression", type=int, default=1, help="zlib level of PNG outputs (as the command's flag)")
    a = ap.parse_args(argv)
    d = DEFAULTS[a.backend]
    n, bs, size = a.images or d["images"], a.batch_size or d["batch_size"], a.size or d["size"]
    h, w = (int(v) for v in size.lower().split("x"))
    spec = NetworkSpec(MODEL.read_text(encoding="utf-8"), str(MODEL), a.backend, a.format)
    root = Path(tempfile.mkdtemp(prefix="layerlab_bench_batch_"))
    try:
        frames = make_frames(root / "in", n, h, w, a.input_format)
        rates = engine_rates(spec, bs, frames, a.repeat)
        read, written = io_capacity(frames, root / "io", a.save_as, a.png_compression)
        job = BatchJob(spec, BatchOptions((str(root / "in"),), str(root / "out"), bs, save_as=a.save_as,
                                          workers=a.workers, png_compression=a.png_compression))
        marks: list[tuple[float, int]] = []
        t0 = time.perf_counter()
        summary = run_job(job, progress=lambda p: marks.append((time.perf_counter(), p.done)))
        t1 = time.perf_counter()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    done = summary["items"]["frames_this_run"]
    overall = done / (t1 - t0)
    # steady state: from the first progress mark with a tenth of the images done, when at least half of them and
    # four more marks follow it
    first = next(((t, k) for t, k in marks if k >= max(1, done // 10)), None)
    last = marks[-1] if marks else None
    ok = (first is not None and last is not None and last[1] - first[1] >= done // 2 and last[0] > first[0]
          and sum(1 for m in marks if m[0] > first[0]) >= 4)
    steady = (last[1] - first[1]) / (last[0] - first[0]) if ok else overall  # type: ignore[index]
    stages = summary["stages_s"]
    per_image = {k: f"{1e3 * v / max(1, done):.1f}" for k, v in stages.items()}
    print(f"denoiser {h}x{w}, backend {a.backend}, format {a.format}, batch {bs}, {n} images, workers {a.workers}, "
          f"{a.input_format} inputs, save as {a.save_as}, PNG level {a.png_compression}, {pool_threads()} pool threads")
    for key, rate in rates.items():
        print(f"{key + ':':27s} {rate:8.2f} images/s")
    kind = a.input_format.upper() if a.save_as == "same" else a.save_as.upper()
    print(f"{'reading capacity (pool):':27s} {read:8.2f} images/s  ({a.input_format.upper()} decoding alone)")
    print(f"{'writing capacity (pool):':27s} {written:8.2f} images/s  (8-bit images: {kind} encoding, hash, write, "
          "sync)")
    print(f"{'both, one pool:':27s} {1 / (1 / read + 1 / written):8.2f} images/s  (the most the CPU side allows)")
    print(f"{'layerlab batch local:':27s} {overall:8.2f} images/s overall, {steady:.2f} at steady state "
          f"({done} images, {t1 - t0:.1f} s)")
    print(f"stage thread time per image (ms): {per_image}")
    capacity = 1 / (1 / read + 1 / written)
    print(f"steady state over: the CPU side's capacity {steady / capacity:.2f}, the 8-bit host path "
          f"{steady / rates['engine 8-bit host-to-host']:.2f}, the network alone {steady / rates['engine on device']:.2f}")
    print(f"batch/engine ratio: {steady / rates['engine only']:.2f}")
    return 0 if not summary["items"]["failed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
