"""Live analysis at video rate: frames/s of the per-frame work (``engine.frames``) on a 1080p video with
the denoiser sample, with the output view open and with a 64-channel layer's channel grid open; and, through the
real analysis window (offscreen Qt), the time from a new frame to the views being updated minus the engine's time.
Not collected by the test run.

    python -m tests.bench.bench_frames --device cpu --frames 5            # engine: output view, then + grid
    python -m tests.bench.bench_frames --device gpu --frames 200          # the GPU target: >= 60 frames/s
    python -m tests.bench.bench_frames --device cpu --qt --frames 4       # through the analysis window
    python -m tests.bench.bench_frames --trained                          # denoiser_trained.lnet (16 channels)

The denoiser's layers have 16 channels; ``--channels 64`` (the default, random weights) widens conv1 to 64 so the
grid shows a 64-channel 1080p layer (``--channels 0`` keeps the sample as it is; ``--trained``
always keeps it, its weights fit 16). Columns: ``run`` = the network alone (``time_iteration``: every layer from
the input, synchronised); ``frame`` = the whole per-frame work through ``FramePipeline.step`` (read and decode the
frame, upload, run, prepare the views on the device, copy their bytes to the host); ``host prep`` = the same views
prepared without engine.frames (whole layer outputs copied to the host, prepared there with
NumPy), for comparison. The video's frames are all due (a clock one frame period per step): nothing is dropped.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine import modelfile  # noqa: E402
from engine.analysis import channel_grid, channel_stats, display_tensor  # noqa: E402
from engine.frames import FramePipeline, View  # noqa: E402
from engine.io import tensor_to_image  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.plugins import load_plugins  # noqa: E402
from engine.run import RunSpec, load_inputs, open_network, time_iteration, with_model_weights  # noqa: E402
from resources import SAMPLES  # noqa: E402

GRID_LAYER = "conv1"


def make_video(path: Path, frames: int, width: int, height: int, fps: float = 25.0) -> Path:
    """A moving colour pattern with noise, MJPG, ``frames`` frames."""
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (width, height))
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    for i in range(frames):
        base = np.stack([(xx + 8 * i) % 256, (yy + 4 * i) % 256, (xx + yy) % 256], axis=-1)
        noise = rng.normal(0, 12, (height, width, 3)).astype(np.float32)
        writer.write(np.clip(base + noise, 0, 255).astype(np.uint8))
    writer.release()
    return path


def load_model(trained: bool, channels: int) -> tuple[Model, Any]:
    registry = load_plugins()
    model = modelfile.load(SAMPLES / ("denoiser_trained.lnet" if trained else "denoiser.lnet"), registry)
    if channels and not trained:
        model.layers[GRID_LAYER].params["num_output_channels"] = str(channels)
    return model, registry


def views(grid: bool, grid_pixels: int) -> list[View]:
    """What the analysis session prepares for an open window: the input and output viewers, and the inspector's grid
    (fit channels, the values behind it for the hover read-out and the per-channel statistics)."""
    out = [View("input", "image", max_side=1600), View("output", "image", max_side=1600)]
    if grid:
        out.append(View(GRID_LAYER, "grid", max_pixels=grid_pixels, fit=True, values=True, stats=True))
    return out


def host_prep_ms(net: Any, grid: bool) -> float:
    """The preparation before engine.frames: whole outputs to the host, display images made there."""
    t0 = time.perf_counter()
    for name in ("input", "output"):
        tensor_to_image(display_tensor(net.output(name), 1600))
    if grid:
        full = net.output(GRID_LAYER)
        channel_grid(display_tensor(full, 1 << 16, 8_000_000), fit=True)
        channel_stats(full)
    return (time.perf_counter() - t0) * 1e3


def bench_engine(args: argparse.Namespace, video: Path) -> None:
    model, registry = load_model(args.trained, args.channels)
    spec = with_model_weights(RunSpec(backend="cupy" if args.device == "gpu" else "numpy", format=args.format,
                                      inputs=(("input", str(video)),)), model)
    net = open_network(model, spec, registry, reuse_buffers=False)
    inputs = load_inputs(net, spec)
    print(f"{model.name}: {net.backend.device_name}, format {net.fmt}, input {net.dims('input')}, "
          f"{GRID_LAYER} {net.dims(GRID_LAYER)}; {args.frames} frames")
    print(f"{'views':<16}{'run ms':>9}{'frame ms':>10}{'frames/s':>10}{'read':>8}{'prepare':>9}{'to host':>10}"
          f"{'host prep ms':>14}")
    for grid in (False, True):
        frames = FramePipeline(net, inputs.videos, clock=lambda: 0.0)
        frames.videos["input"].reader.seek(0)
        frames.videos["input"].frame = -1
        fps = frames.videos["input"].reader.fps
        frames.play("input", now=0.0)
        vs = views(grid, args.grid_pixels)
        frames.step(vs, now=1 / fps)  # warm-up: kernels compiled, buffers planned
        steps, runs, preps = [], [], []
        for i in range(args.frames):
            if not frames.playing:
                break
            steps.append(frames.step(vs, now=(i + 2) / fps))
            runs.append(time_iteration(net))
            preps.append(host_prep_ms(net, grid))
        nbytes = sum(p.nbytes for p in steps[-1].views)
        total = statistics.median(s.total_ms for s in steps)
        print(f"{'output' + (' + grid' if grid else ''):<16}{statistics.median(runs):9.1f}{total:10.1f}"
              f"{1000 / total:10.2f}{statistics.median(s.read_ms for s in steps):8.1f}"
              f"{statistics.median(s.prepare_ms for s in steps):9.1f}{nbytes / 1e6:8.2f}MB"
              f"{statistics.median(preps):14.1f}")
    inputs.close()


def bench_qt(args: argparse.Namespace, video: Path) -> None:
    """Through the real analysis window: from the session's frame timer firing to the output view and the inspector
    updated (and repainted) in the GUI thread, minus the time spent in engine.frames (advance, run, prepare)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import QtWidgets

    import app.analysis.live as session_module
    from app.analysis.controller import AnalysisController
    from app.analysis.window import AnalysisWindow

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    model, registry = load_model(args.trained, args.channels)
    spec = with_model_weights(RunSpec(backend="numpy", format=args.format, inputs=(("input", str(video)),)), model)
    ctl = AnalysisController()
    win = AnalysisWindow(ctl)
    win.resize(1600, 1000)
    win.show()
    session = ctl.proxy.session
    engine_ms: dict[int, float] = {}
    starts: dict[int, float] = {}

    def timed(fn: Any, ahead: int = 0) -> Any:
        """``fn`` adding its time to the frame's engine time (``ahead`` 1: called before the run counter moves)."""
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                key = session.runs + ahead
                engine_ms[key] = engine_ms.get(key, 0.0) + (time.perf_counter() - t0) * 1e3
        return wrapper

    session_module.prepare_views = timed(session_module.prepare_views)
    session_module.prepare_view = timed(session_module.prepare_view)
    next_frames = session._next_frames

    def next_frames_timed() -> None:
        starts[session.runs + 1] = time.perf_counter()
        next_frames()

    session._next_frames = next_frames_timed
    done = []
    ran_at: list[tuple[int, float]] = []

    def wait(cond: Any, seconds: float = 600.0) -> None:
        end = time.perf_counter() + seconds
        while not cond() and time.perf_counter() < end:
            app.processEvents()
            time.sleep(0.001)

    ctl.proxy.ran.connect(lambda info: done.append(info))
    ctl.launch(model, registry, spec)
    wait(lambda: bool(done))
    net = session.net
    net.run = timed(net.run)
    session.frames.advance = timed(session.frames.advance, ahead=1)
    print(f"{model.name} through the analysis window (offscreen Qt): {net.backend.device_name}, format {net.fmt}, "
          f"input {net.dims('input')}, {GRID_LAYER} {net.dims(GRID_LAYER)}")
    for grid in (False, True):
        if grid:
            n = len(done)
            ctl.inspect(GRID_LAYER)
            win.show_inspector()
            wait(lambda n=n: len(done) > n or ctl.inspector.data is not None)
        views_ = [*ctl.output.views.values()] + ([ctl.inspector.view] if grid else [])

        def updated(info: Any, views_: list[Any] = views_) -> None:  # after the panels' own slots (connected first)
            for v in views_:
                v.repaint()
            ran_at.append((info.run, time.perf_counter()))

        ctl.proxy.ran.connect(updated)
        ran_at.clear()
        ctl.proxy.send("seek", ("input", 0))
        wait(lambda: len(ran_at) >= 1)
        ran_at.clear()
        ctl.proxy.send("play", "input")
        wait(lambda: bool(session.frames.playing), 30.0)
        wait(lambda: len(ran_at) >= args.frames + 1 or not session.frames.playing, 300.0)
        ctl.proxy.send("pause_video", "input")
        ctl.proxy.ran.disconnect(updated)
        rows = [(1e3 * (t - starts[r]), engine_ms.get(r, 0.0)) for r, t in ran_at[1:] if r in starts]
        if os.environ.get("BENCH_DEBUG"):
            print(ran_at, {r: starts.get(r) for r, _ in ran_at}, rows)
        latency = statistics.median(a for a, _ in rows)
        engine = statistics.median(b for _, b in rows)
        over = statistics.median(a - b for a, b in rows)
        as_sent = ctl.inspector.data is not None and ctl.inspector.view.image is ctl.inspector.data.image
        grid_ok = f", inspector showed the prepared grid: {as_sent}" if grid else ""
        print(f"  output{' + grid' if grid else '':<7}: frame -> views updated {latency:8.1f} ms, engine.frames "
              f"{engine:8.1f} ms, difference {over:6.1f} ms (median of {len(rows)}){grid_ok}")
    ctl.stop()
    ctl.proxy.shutdown()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--frames", type=int, default=5, help="frames measured (default 5)")
    ap.add_argument("--size", default="1920x1080", help="video size WxH (default 1920x1080)")
    ap.add_argument("--channels", type=int, default=64, help="channels of conv1, the grid's layer (0: as the sample)")
    ap.add_argument("--trained", action="store_true", help="denoiser_trained.lnet with its weights")
    ap.add_argument("--format", default="auto", help="tensor format (default: the backend's)")
    ap.add_argument("--grid-pixels", type=int, default=1_000_000,
                    help="pixels of the grid image (the inspector asks for its viewer's; default 1000000)")
    ap.add_argument("--qt", action="store_true", help="through the real analysis window (CPU)")
    args = ap.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        # through the window the video plays in real time: 2 fps and long enough for slow CPU frames
        video = make_video(Path(tmp) / "clip.avi", args.frames + 3 if not args.qt else 10 * (args.frames + 3),
                           width, height, fps=2.0 if args.qt else 25.0)
        (bench_qt if args.qt else bench_engine)(args, video)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
