"""The per-frame work of live analysis, Qt-free: read the newest frame of every playing video, give it to the
network (``Network.set_input`` uploads it as it is and converts on the device), run the affected layers, and
prepare the display images of the open views where the outputs live (on the GPU with the CuPy backend):
downsampled to the view's display size, colour-mapped or tiled into the channel inspector's grid, 8-bit. Only
those images (and, where a view asks, the few values behind them and per-channel statistics) come back to the
host; a layer's whole output never does.

* ``View`` says what a panel shows: a layer, a kind (``image``: an output or input viewer; ``grid``: the channel
  inspector's N x C grid in the red/green colormap; ``channel``: one slice at full resolution), its display size
  and its mapping (shift, scale, per-channel fit).
* ``prepare_view(net, view)`` / ``prepare_views`` make the ``Prepared`` images of the latest run; they equal the
  host-side preparation (``engine.analysis.channel_grid``, ``engine.io.tensor_to_image``) of the host copy.
* ``FramePipeline`` plays videos in real time: frames that fall due while the network is busy are dropped, not
  queued (``advance`` reads the newest due frame and skips the ones before it), so the views always show the
  newest frame and a runtime-option change set between frames is in the very next frame. ``step`` is the whole
  per-frame work (advance, run, prepare) and can be timed without Qt (tests/bench/bench_frames.py)."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from engine.analysis import (
    HEAT_RANKS,
    ChannelStats,
    GridLayout,
    as_nchw,
    channel_grid,
    channel_stats,
    display_stride,
    grid_cells,
    heat_map,
    redgreen,
)
from engine.errors import LayerLabError
from engine.io import tensor_to_image
from engine.network import Network
from engine.run import VideoInput

VIEW_KINDS = ("image", "grid", "channel")


class ViewError(LayerLabError):
    """A view asks for something the layer or the display cannot give (the message names it)."""


@dataclass(frozen=True)
class View:
    """What one open panel shows of a layer's output.

    ``kind``: ``image`` (batch item 0 as an 8-bit gray/RGB image, the longer side at most ``max_side``), ``grid``
    (every N x C slice in the red/green colormap, at most ``max_pixels`` pixels) or ``channel`` (slice
    ``channel`` = (n, c) at full resolution in the colormap). The colormap shows ``(value + shift) * scale``,
    after dividing each slice by its own largest magnitude when ``fit``. ``values``: also bring back the float32
    values behind a grid or channel image (the hover read-out); ``stats``: per-channel statistics of the whole
    full-resolution output."""

    layer: str
    kind: str = "image"
    max_side: int = 1600
    max_pixels: int = 4_000_000
    shift: float = 0.0
    scale: float = 1.0
    fit: bool = False
    channel: tuple[int, int] = (0, 0)
    values: bool = False
    stats: bool = False

    def check(self) -> View:
        """Raise ViewError naming the first invalid field; returns the view."""
        if self.kind not in VIEW_KINDS:
            raise ViewError(f"view of {self.layer}: unknown kind {self.kind!r} (expected {', '.join(VIEW_KINDS)})")
        if self.max_side < 1 or self.max_pixels < 1:
            raise ViewError(f"view of {self.layer}: the display size must be at least 1 pixel")
        if not (math.isfinite(self.shift) and math.isfinite(self.scale)):
            raise ViewError(f"view of {self.layer}: shift and scale must be finite numbers")
        return self


@dataclass
class Prepared:
    """A view's display image of the latest run (host arrays, the only bytes that left the device).

    ``stride``: every stride-th pixel of the output is shown. ``layout`` (grid): where each slice sits in the
    image, relative to ``values`` (their cells, factor 1). ``values``: the float32 values behind the image
    (grid: N x C x cell_h x cell_w; channel: 1 x 1 x H x W), when the view asked. ``shape``: the layer output's
    full N x C x H x W shape."""

    view: View
    image: np.ndarray
    shape: tuple[int, ...]
    stride: int = 1
    layout: GridLayout | None = None
    values: np.ndarray | None = None
    stats: ChannelStats | None = None
    #: an image view of a tensor of rank 2 or 3: the image is a heat map from ``heat[0]`` (its first colour) to
    #: ``heat[1]`` (its last), ``layout`` places its batch items
    heat: tuple[float, float] | None = None

    @property
    def nbytes(self) -> int:
        """Bytes brought to the host for this view."""
        extra = 0 if self.stats is None else sum(getattr(self.stats, f.name).nbytes for f in fields(self.stats))
        return self.image.nbytes + (0 if self.values is None else self.values.nbytes) + extra


def prepare_view(net: Network, view: View) -> Prepared:
    """The display image of ``view`` from the latest run of ``net``, made on the network's device."""
    view.check()
    backend, xp = net.backend, net.xp
    out = as_nchw(net.device_output(view.layer))
    shape = tuple(int(s) for s in out.shape)
    stats = None
    if view.stats:
        dev = channel_stats(out, xp)
        stats = ChannelStats(*(np.asarray(backend.to_host(getattr(dev, f.name))) for f in fields(dev)))
    if view.kind == "image" and len(net.dims(view.layer)) in HEAT_RANKS:  # a matrix or tokens: not an image
        hm = heat_map(out, view.max_side * view.max_side, xp=xp)
        return Prepared(view, backend.to_host(hm.image), shape, hm.layout.factor, hm.layout, stats=stats,
                        heat=(hm.lo, hm.hi))
    if view.kind == "image":
        f = display_stride(shape, view.max_side)
        image = tensor_to_image(out[:1, :, ::f, ::f], 0, xp)
        return Prepared(view, backend.to_host(image), shape, f, stats=stats)
    if view.kind == "channel":
        n, c = view.channel
        if not (0 <= n < shape[0] and 0 <= c < shape[1]):
            raise ViewError(f"layer {view.layer} has no slice n {n}, c {c} (its output is {'x'.join(map(str, shape))})")
        one = xp.ascontiguousarray(out[n:n + 1, c:c + 1], dtype=xp.float32)
        mapped = one / _slice_peak(one, xp) if view.fit else one
        image = redgreen(mapped[0, 0], view.shift, view.scale, xp)
        return Prepared(view, backend.to_host(image), shape, 1,
                        values=backend.to_host(one) if view.values else None, stats=stats)
    rgb, layout = channel_grid(out, view.shift, view.scale, view.max_pixels, fit=view.fit, xp=xp)
    cells = GridLayout(layout.n, layout.c, layout.cell_h, layout.cell_w, layout.rows, layout.cols, 1, layout.gap)
    values = backend.to_host(grid_cells(out, layout, xp)) if view.values else None
    return Prepared(view, backend.to_host(rgb), shape, layout.factor, cells, values, stats)


def _slice_peak(one: Any, xp: Any) -> Any:
    peak = xp.where(xp.isfinite(one), xp.abs(one), xp.float32(0)).max()
    return xp.where(peak > 0, peak, xp.float32(1))


def prepare_views(net: Network, views: Iterable[View]) -> list[Prepared]:
    """``prepare_view`` of every view, in order."""
    return [prepare_view(net, v) for v in views]


@dataclass
class Advance:
    """What ``FramePipeline.advance`` did: the frame now in the network per input layer that got one, how many
    frames were dropped (fell due while the network was busy) and the videos that reached their end."""

    frames: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    ended: list[str] = field(default_factory=list)


@dataclass
class FrameResult:
    """One ``FramePipeline.step``: the advance, the layers computed, the prepared views and the times (ms)."""

    advance: Advance
    executed: list[str]
    views: list[Prepared]
    read_ms: float
    run_ms: float
    prepare_ms: float

    @property
    def total_ms(self) -> float:
        return self.read_ms + self.run_ms + self.prepare_ms


class FramePipeline:
    """Plays the videos of a network's input layers in real time (see the module documentation).

    Each playing video has a clock: the frame due at time ``t`` is ``f0 + floor((t - t0) * fps)`` from where it
    started or was re-based. ``clock`` is the time source in seconds (``time.perf_counter``; tests pass their
    own)."""

    def __init__(self, net: Network, videos: dict[str, VideoInput] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.net = net
        self.videos = videos if videos is not None else {}
        self.clock = clock
        self._anchor: dict[str, tuple[float, int]] = {}
        self.dropped = 0  # frames dropped since the pipeline was made

    def play(self, name: str, now: float | None = None) -> None:
        """Start playing input ``name``'s video from its current frame (its next frame is due in 1/fps)."""
        video = self._video(name)
        video.playing = True
        self._anchor[name] = (self.clock() if now is None else now, video.frame)

    def pause(self, name: str) -> None:
        self._video(name).playing = False
        self._anchor.pop(name, None)

    def rebase(self, now: float | None = None) -> None:
        """Restart the clocks of the playing videos at their current frames (after the network was paused by the
        debugger: the time paused is not time the video played)."""
        for name in self.playing:
            self.play(name, now)

    @property
    def playing(self) -> list[str]:
        return [n for n, v in self.videos.items() if v.playing]

    def _video(self, name: str) -> VideoInput:
        video = self.videos.get(name)
        if video is None:
            raise LayerLabError(f"input layer {name} shows no video")
        return video

    def _due_frame(self, name: str, now: float) -> int:
        video = self.videos[name]
        if name not in self._anchor:
            self._anchor[name] = (now, video.frame)
        t0, f0 = self._anchor[name]
        return f0 + int(math.floor((now - t0) * max(video.reader.fps, 1e-3) + 1e-9))

    def due_in(self, now: float | None = None) -> float | None:
        """Seconds until the next frame of a playing video is due (0: now), None when nothing plays."""
        now = self.clock() if now is None else now
        waits = []
        for name in self.playing:
            video = self.videos[name]
            self._due_frame(name, now)
            t0, f0 = self._anchor[name]
            waits.append(t0 + (video.frame + 1 - f0) / max(video.reader.fps, 1e-3) - now)
        return max(0.0, min(waits)) if waits else None

    def advance(self, now: float | None = None) -> Advance:
        """Give the network the newest due frame of every playing video; the frames between it and the one shown
        before are dropped (skipped unread). A video past its end stops playing (``ended``)."""
        now = self.clock() if now is None else now
        result = Advance()
        for name in self.playing:
            video = self.videos[name]
            target = self._due_frame(name, now)
            count = video.reader.frame_count
            if count > 0 and target > count - 1:
                target = count - 1 if video.frame < count - 1 else count
            if target <= video.frame:
                continue  # not due yet
            skip = target - video.frame - 1
            if skip:
                skipped = video.reader.skip(skip)
                video.frame += skipped
                result.dropped[name] = skipped
                self.dropped += skipped
            img = video.read_image()
            if img is None:
                video.playing = False
                self._anchor.pop(name, None)
                result.ended.append(name)
                continue
            video.to_network(self.net, name, img)
            result.frames[name] = video.frame
        return result

    def step(self, views: Iterable[View], now: float | None = None) -> FrameResult:
        """The whole per-frame work: ``advance``, run the affected layers, ``prepare_views``. The times are wall
        times; the backend is synchronised by the copies to the host."""
        t0 = time.perf_counter()
        adv = self.advance(now)
        t1 = time.perf_counter()
        executed = self.net.run()
        t2 = time.perf_counter()
        prepared = prepare_views(self.net, views)
        t3 = time.perf_counter()
        return FrameResult(adv, executed, prepared, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3)


__all__ = ["Advance", "FramePipeline", "FrameResult", "Prepared", "View", "ViewError", "prepare_view",
           "prepare_views"]
