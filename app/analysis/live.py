"""The worker side of analysis mode: an AnalysisSession lives in the worker thread, keeps the network
built for the whole session and reruns it whenever something changes (a runtime option, an input file,
a video frame), so a rerun costs only the affected layers.

The GUI sends commands with ``handle(command, payload)`` through a queued connection (the session runs
``cmd_<command>(payload)`` in its thread) and gets results through signals: host copies of images,
downsampled tensors for the channel inspector, the overview, timings. While the network is paused by
the debugger the worker thread is blocked, so those queued commands wait; the calls that must work
while paused are thread-safe methods called directly: the debugger's (``session.debugger``) and
``request_layer``, which the paused worker serves through the debugger.

Video: the per-frame work is engine.frames' (Qt-free): videos play in real time, a frame that falls due
while the network is busy is dropped, not queued (the views show the newest frame), the display images of
the open views (outputs, inputs, the inspected layer's channel grid) are prepared where the outputs live
and only those bytes reach the GUI. A paused network pauses the video (its clock restarts on resume), and
a runtime option changed during playback is in the next frame."""
from __future__ import annotations

import io
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PySide6 import QtCore

from app.commands import dispatch
from engine.analysis import GridLayout, HeatMap, channel_stats, compare_precision, network_overview
from engine.debugger import Debugger, DebugStopped
from engine.errors import InputError, LayerLabError
from engine.frames import FramePipeline, Prepared, View, prepare_view, prepare_views
from engine.io import kind_of
from engine.model import Model
from engine.network import Network
from engine.registry import Registry
from engine.run import RunSpec, VideoInput, load_inputs, open_input, open_network, open_weights

#: the channel inspector's grid has at most this many pixels (H and W are strided down on the device)
MAX_GRID_PIXELS = 4_000_000
MAX_IMAGE_SIDE = 1600
#: a video frame waits at most this long for the GUI to show the previous one (no GUI: playback goes on)
SHOWN_TIMEOUT_S = 2.0


@dataclass
class StartRequest:
    model: Model  # a private copy: the GUI's models are read-only during analysis anyway
    registry: Registry
    config: RunSpec = field(default_factory=RunSpec)  # the model's Network Settings (app.run_config.RunConfig)


@dataclass
class InputFrame:
    """What an input viewer shows: the image of an input tensor and, for video, where it is."""

    layer: str
    image: np.ndarray  # 8-bit H x W (x C) image, downsampled for display
    kind: str  # 'random', 'image', 'npy' or 'video'
    path: str = ""
    frame: int = 0
    frame_count: int = 0
    fps: float = 0.0
    playing: bool = False
    shape: str = ""


@dataclass
class LayerData:
    """A layer's output (and weights) for the channel inspector, strided down when large.

    From the session, ``image`` is the grid already prepared on the device with ``mapping`` (shift, scale,
    fit) and ``layout`` places its slices in ``tensor`` (the cells shown); the inspector shows it as it is
    when its mapping is the same, else remaps ``tensor`` itself."""

    name: str
    type: str
    dims: str
    tensor: np.ndarray  # N x C x h x w float32 host copy (every stride-th pixel)
    stride: int
    weights: dict[str, np.ndarray]
    stats: Any  # engine.analysis.ChannelStats of the full-resolution output
    run: int = 0
    channel: tuple[int, int] | None = None  # one slice (n, c) at full resolution, from inspect_channel
    stale: bool = False  # paused before this layer was recomputed: the values are from the previous pass
    image: np.ndarray | None = None  # the prepared RGB grid
    layout: GridLayout | None = None  # where each slice of ``tensor`` is in ``image``
    mapping: tuple[float, float, bool] | None = None  # (shift, scale, fit) ``image`` was made with


@dataclass
class RunInfo:
    run: int
    executed: list[str]
    ms: float
    stopped: bool = False


def _vector(net: Network, p: Prepared) -> np.ndarray | HeatMap:
    """An output's display image, or for an output of 1 x 1 pixels with many channels (a classifier's scores)
    its values as a vector (first batch item): an image of it would be one pixel; an output of rank 2 or 3: its
    heat map with the range of its colour scale."""
    if p.heat is not None and p.layout is not None:
        return HeatMap(p.image, p.layout, *p.heat)
    if len(p.shape) == 4 and p.shape[2:] == (1, 1) and p.shape[1] > 4:
        return np.asarray(net.output(p.view.layer), dtype=np.float32)[0].reshape(-1)
    return p.image


class AnalysisSession(QtCore.QObject):
    """Owns the analysis network in the worker thread (see the module documentation)."""

    started = QtCore.Signal(object)  # dict: backend, device, format, inputs, outputs
    stopped = QtCore.Signal()
    failed = QtCore.Signal(str, str)  # command, reason
    overview = QtCore.Signal(object)  # list[OverviewItem]
    options = QtCore.Signal(object)  # {layer: [option JSON objects]}
    option_error = QtCore.Signal(str, str, str)  # layer, option, reason
    input_frame = QtCore.Signal(object)  # InputFrame
    outputs = QtCore.Signal(object)  # {output name: 8-bit image}
    layer_data = QtCore.Signal(object)  # LayerData
    ran = QtCore.Signal(object)  # RunInfo, after the run's other signals
    timings = QtCore.Signal(object)  # {layer: ms} of the latest run
    paused = QtCore.Signal(object)  # PauseInfo
    resumed = QtCore.Signal()
    drift = QtCore.Signal(object)  # engine.analysis.DriftResult
    fix_progress = QtCore.Signal(float, str)  # fraction done, what the search does now
    precision_fixed = QtCore.Signal(object)  # engine.precision.PinReport
    _kick = QtCore.Signal()  # queued to itself: run after the commands already queued

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.net: Network | None = None
        self.model: Model | None = None
        self.registry: Registry | None = None
        self.config = RunSpec()
        self.debugger = Debugger(on_pause=self._on_pause, on_resume=self.resumed.emit)
        self.videos: dict[str, VideoInput] = {}
        self.frames: FramePipeline | None = None
        self.mapping: tuple[float, float, bool] = (0.0, 1.0, True)  # the channel inspector's (shift, scale, fit)
        self._was_paused = False
        self._shown = threading.Event()  # the GUI showed the latest run (SessionProxy calls frame_shown)
        self._shown.set()
        self._shown_since = 0.0  # when the latest run was sent
        self._option_pending = False  # a runtime option changed during playback, not run yet
        self.grid_pixels = MAX_GRID_PIXELS  # the channel inspector's grid size (its display size)
        self._weights: dict[str, dict[str, np.ndarray]] = {}
        self.sources: dict[str, tuple[str, str]] = {}  # input layer -> (kind, path)
        self.inspected: str | None = None
        self.profile_timings = False
        self.runs = 0
        self.builds = 0
        self._timer: QtCore.QTimer | None = None
        self._run_pending = False
        self._layer_times: dict[str, float] = {}
        self._t0: dict[str, float] = {}
        self._kick.connect(self._pending_run, QtCore.Qt.ConnectionType.QueuedConnection)

    # ---- dispatch ----------------------------------------------------------------------------------
    @QtCore.Slot(str, object)
    def handle(self, command: str, payload: object = None) -> None:
        """Run ``cmd_<command>(payload)``; user errors become ``failed`` signals, never exceptions."""
        dispatch(self, "analysis", command, payload, self.failed.emit)

    @property
    def active(self) -> bool:
        return self.net is not None

    def _need_net(self) -> Network:
        if self.net is None:
            raise LayerLabError("analysis is not running (Launch Analysis first)")
        return self.net

    # ---- thread-safe calls ---------------------------------------------------------------------------
    def request_layer(self, name: str | None) -> bool:
        """From any thread, while the network is paused: send ``layer_data`` for ``name`` (a layer
        already computed in this inference). Returns False when not paused (queue ``inspect`` then)."""
        if name is None or not self.debugger.paused:
            return False
        self.inspected = name
        fut = self.debugger.submit(lambda: self._emit_layer(name))
        return not (fut.done() and fut.exception() is not None)

    def frame_shown(self) -> None:
        """From the GUI thread: the views show the latest run; the next video frame may be prepared."""
        self._shown.set()

    # ---- lifecycle -----------------------------------------------------------------------------------
    def cmd_start(self, req: StartRequest) -> None:
        """Build the network, load the configured inputs and run once."""
        self.cmd_stop(quiet=True)
        cfg = req.config
        notice = io.StringIO()
        net = open_network(req.model, cfg, req.registry, notice=notice, reuse_buffers=False,
                           protected=self.debugger.breakpoints)
        self.net, self.model, self.registry, self.config = net, req.model, req.registry, cfg
        self.builds += 1
        self.debugger.attach(net)
        net.hooks.before_layer.append(self._before_layer)
        net.hooks.after_layer.insert(0, self._after_layer)  # timed before the debugger may pause there
        inputs = load_inputs(net, cfg)
        self.sources, self.videos = inputs.sources, inputs.videos
        self.frames = FramePipeline(net, self.videos)
        self._weights = {}
        backend = net.backend
        self.started.emit({"backend": backend.name, "device": backend.device_name, "format": str(net.fmt),
                           "inputs": list(net.input_names), "outputs": list(net.output_names),
                           "notice": notice.getvalue().strip()})
        self.options.emit(net.runtime_options())
        self._run()

    @QtCore.Slot()
    def stop_now(self) -> None:
        """Stop without a signal (for a blocking call at shutdown)."""
        self.cmd_stop(quiet=True)

    def cmd_stop(self, _payload: object = None, quiet: bool = False) -> None:
        """Leave analysis: close videos, drop the network."""
        if self._timer is not None:
            self._timer.stop()
        for v in self.videos.values():
            v.close()
        self.videos.clear()
        if self.net is not None:
            self.debugger.detach()
        self.net = None
        self.frames = None
        self.inspected = None
        if not quiet:
            self.stopped.emit()

    # ---- inputs --------------------------------------------------------------------------------------
    def _open(self, name: str, path: str) -> None:
        net = self._need_net()
        data, video = open_input(net, name, path, self.config.input_layout)
        old = self.videos.pop(name, None)
        if old is not None:
            old.close()
        if video is not None:
            self.videos[name] = video
        net.set_input(name, data)
        self.sources[name] = (kind_of(path), path)
        self._schedule_run()

    def cmd_open_input(self, payload: tuple[str, str]) -> None:
        """(input layer, file): an image, a .npy tensor or a video; reruns the network."""
        name, path = payload
        if not Path(path).is_file():
            raise InputError(f"{path}: no such file")
        self._open(name, path)

    def cmd_play(self, name: str) -> None:
        video = self._video(name)
        if video.frame + 1 >= video.reader.frame_count > 0:
            self.cmd_seek((name, 0))  # at the end: play again from the start
        assert self.frames is not None
        self.frames.play(name)
        self._shown.set()
        self._ensure_timer().start(self._frame_delay())

    def cmd_pause_video(self, name: str) -> None:
        self._video(name)
        assert self.frames is not None
        self.frames.pause(name)
        self._emit_input(name)
        if self._option_pending:
            self._schedule_run()

    def cmd_seek(self, payload: tuple[str, int]) -> None:
        """(input layer, frame number): show that frame and rerun."""
        name, frame = payload
        video = self._video(name)
        count = video.reader.frame_count
        frame = max(0, min(int(frame), count - 1 if count > 0 else int(frame)))
        data = video.read(frame)
        if data is None:
            raise InputError(f"{video.path}: cannot read frame {frame}")
        self._need_net().set_input(name, data)
        if video.playing and self.frames is not None:
            self.frames.play(name)  # the clock goes on from the frame sought
        self._schedule_run()

    def cmd_step_frame(self, payload: tuple[str, int]) -> None:
        """(input layer, +1 or -1): the next or previous frame."""
        name, delta = payload
        self.cmd_seek((name, self._video(name).frame + int(delta)))

    def _video(self, name: str) -> VideoInput:
        self._need_net()
        video = self.videos.get(name)
        if video is None:
            raise InputError(f"input layer {name} shows no video (open a video file first)")
        return video

    def _frame_delay(self) -> int:
        """Milliseconds until the next frame of a playing video is due."""
        due = self.frames.due_in() if self.frames is not None else None
        return 0 if due is None else int(math.ceil(due * 1000))

    def _ensure_timer(self) -> QtCore.QTimer:
        if self._timer is None:  # created in the worker thread, where it fires
            self._timer = QtCore.QTimer(self)
            self._timer.setSingleShot(True)
            self._timer.timeout.connect(self._next_frames)
        return self._timer

    def _next_frames(self) -> None:
        """The video timer: the newest due frame of every playing video (those that fell due while the network
        was busy are dropped), one run, the views; then the timer waits for the next due frame."""
        if self.net is None or self.frames is None:
            return
        waiting = time.perf_counter() - self._shown_since < SHOWN_TIMEOUT_S
        if waiting and not self._shown.wait(0.002):  # the GUI still shows the previous frame: due ones are dropped
            self._ensure_timer().start(2)
            return
        advance = self.frames.advance()
        for name in advance.ended:  # the end: stop there
            self._emit_input(name)
        if advance.frames or (self._option_pending and not self.frames.playing):  # ended: show the option
            self._run()
        if self._was_paused:  # the time the debugger held the network is not time the video played
            self._was_paused = False
            self.frames.rebase()
        if self.frames is not None and self.frames.playing and self.net is not None:
            self._ensure_timer().start(self._frame_delay())

    # ---- options, inspection, timings, breakpoints ---------------------------------------------------
    def cmd_set_option(self, payload: tuple[str, str, Any]) -> None:
        """(layer, option, value): validated by the layer; the network reruns from that layer."""
        layer, name, value = payload
        net = self._need_net()
        try:
            net.set_runtime_option(layer, name, value)
        except LayerLabError as exc:
            self.option_error.emit(layer, name, str(exc))  # the value stays as it was
            return
        self.options.emit(net.runtime_options())
        if self.frames is not None and self.frames.playing:
            self._option_pending = True  # the next frame runs with the new value
        else:
            self._schedule_run()

    def cmd_inspect_mapping(self, payload: tuple[float, float, bool] | tuple[float, float, bool, int]) -> None:
        """(shift, scale, fit[, grid pixels]) of the channel inspector: the grids of the following runs are
        prepared so, at most that many pixels (the inspector's display size; at most MAX_GRID_PIXELS)."""
        shift, scale, fit, *pixels = payload
        self.mapping = (float(shift), float(scale), bool(fit))
        if pixels:
            self.grid_pixels = max(1, min(int(pixels[0]), MAX_GRID_PIXELS))

    def cmd_inspect(self, name: str | None) -> None:
        """Follow ``name`` in the channel inspector: its data is sent now and after every run."""
        self.inspected = name
        if name is not None and self.net is not None:
            self._emit_layer(name)

    def cmd_inspect_channel(self, payload: tuple[str, int, int]) -> None:
        """(layer, n, c): one slice at full resolution (``layer_data`` with N = C = 1, stride 1)."""
        name, n, c = payload
        net = self._need_net()
        one = prepare_view(net, View(name, "channel", channel=(int(n), int(c)), values=True)).values  # the slice only
        assert one is not None
        self.layer_data.emit(LayerData(name, net.layer(name).desc.name, str(net.dims(name)), one, 1, {},
                                       channel_stats(one), self.runs, (n, c)))

    def cmd_profile_timings(self, on: bool) -> None:
        """Measure every layer's time in the following runs (Tools > Profile Layer Timings)."""
        self.profile_timings = bool(on)
        if not on:
            self.timings.emit({})

    def cmd_rerun(self, _payload: object = None) -> None:
        """Run every layer again (the Rerun action)."""
        net = self._need_net()
        for name in net.input_names:
            net.mark_affected(name)
        self._run()

    def cmd_break_at(self, payload: str | tuple[str, int]) -> None:
        """Add a breakpoint and stop there now: the whole network runs again (Step then goes through every layer
        in order). ``payload``: the layer, or (layer, its hits when asked): a pass that reached it since (one
        running when it was added) already stopped there, and no second pass starts."""
        layer, seen = (payload, None) if isinstance(payload, str) else payload
        net = self._need_net()
        self.debugger.add_breakpoint(layer)
        if seen is not None and self.debugger.hits(layer) > seen:
            return
        for name in net.input_names:
            net.mark_affected(name)
        self._run()

    def cmd_compare_precision(self, payload: tuple[str, float]) -> None:
        """(candidate variant, threshold): the current inputs run in fp32 and in the candidate."""
        candidate, threshold = payload
        net = self._need_net()
        assert self.model is not None and self.registry is not None
        inputs = {n: net.output(n) for n in net.input_names}
        self.drift.emit(compare_precision(self.model, self.registry, inputs, "numpy:fp32|nchw", candidate,
                                          weights=open_weights(self.config, self.model), seed=self.config.seed,
                                          threshold=float(threshold)))

    def cmd_fix_precision(self, payload: tuple[str, float]) -> None:
        """(candidate variant, threshold): "Pin diverging layers to fp32" on the current inputs: the search, the
        comparison re-run with its pins (``drift``) and the times (``precision_fixed``), progress on the way."""
        from engine.precision import pin_and_compare  # noqa: PLC0415

        candidate, threshold = payload
        net = self._need_net()
        assert self.model is not None and self.registry is not None
        inputs = {n: net.output(n) for n in net.input_names}
        report = pin_and_compare(self.model, self.registry, inputs, candidate, weights=open_weights(self.config),
                                 seed=self.config.seed, threshold=float(threshold),
                                 progress=lambda f, m: self.fix_progress.emit(f, m))
        self.drift.emit(report.after)
        self.precision_fixed.emit(report)

    # ---- running -------------------------------------------------------------------------------------
    def _schedule_run(self) -> None:
        """Run once the queued commands are handled (slider drags coalesce into one run)."""
        if not self._run_pending:
            self._run_pending = True
            self._kick.emit()

    def _pending_run(self) -> None:
        self._run_pending = False
        if self.net is not None:
            self._run()

    def _before_layer(self, net: Network, name: str, _out: Any) -> None:
        if self.profile_timings:
            net.backend.synchronize()
            self._t0[name] = time.perf_counter()

    def _after_layer(self, net: Network, name: str, _out: Any) -> None:
        if self.profile_timings and name in self._t0:
            net.backend.synchronize()
            self._layer_times[name] = (time.perf_counter() - self._t0.pop(name)) * 1e3

    def _run(self) -> None:
        net = self._need_net()
        self.runs += 1
        self._layer_times = {}
        t0 = time.perf_counter()
        try:
            executed = net.run()
        except DebugStopped:
            self.ran.emit(RunInfo(self.runs, self.debugger.computed, self._work_ms(t0), True))
            for video in self.videos.values():
                video.playing = False
            return
        ms = self._work_ms(t0)
        if self.profile_timings:
            self.timings.emit(dict(self._layer_times))
        self.overview.emit(network_overview(net))
        inputs = [n for n in net.input_names if n in executed]
        images = prepare_views(net, [View(n, "image", max_side=MAX_IMAGE_SIDE) for n in (*inputs, *net.output_names)])
        for name, p in zip(inputs, images, strict=False):
            self._emit_input(name, p)
        self.outputs.emit({p.view.layer: _vector(net, p) for p in images[len(inputs):]})
        if self.inspected is not None and self.inspected in net.nodes:
            self._emit_layer(self.inspected)
        self._option_pending = False
        self._shown.clear()
        self._shown_since = time.perf_counter()
        self.ran.emit(RunInfo(self.runs, executed, ms))  # last: everything of this run has been sent

    def _work_ms(self, t0: float) -> float:
        """Milliseconds since ``t0`` that the network worked (time paused in the debugger left out)."""
        return max(0.0, time.perf_counter() - t0 - self.debugger.paused_seconds) * 1e3

    def _pending(self) -> set[str]:
        """While paused: the layers this inference still has to compute (downstream of what it computed)."""
        net = self._need_net()
        done = set(self.debugger.computed)
        out: set[str] = set()
        for name in net.order:
            if name not in done and any(s in done or s in out for s in net.nodes[name].inputs if s):
                out.add(name)
        return out

    def _on_pause(self, info: object) -> None:
        self._was_paused = True
        self.paused.emit(info)

    def _emit_input(self, name: str, prepared: Prepared | None = None) -> None:
        net = self._need_net()
        kind, path = self.sources.get(name, ("random", ""))
        p = prepared or prepare_view(net, View(name, "image", max_side=MAX_IMAGE_SIDE))
        video = self.videos.get(name)
        self.input_frame.emit(InputFrame(
            name, p.image, kind, path, video.frame if video else 0,
            video.reader.frame_count if video else 0, video.reader.fps if video else 0.0,
            bool(video and video.playing), "x".join(map(str, p.shape))))

    def _emit_layer(self, name: str) -> None:
        net = self._need_net()
        shift, scale, fit = self.mapping
        p = prepare_view(net, View(name, "grid", max_pixels=self.grid_pixels, shift=shift, scale=scale, fit=fit,
                                   values=True, stats=True))
        layer = net.layer(name)
        weights = self._weights.get(name)
        if weights is None:  # weights do not change during a session: copied once
            weights = self._weights[name] = {k: net.backend.to_host(v).astype(np.float32)
                                             for k, v in layer.weights.items()}
        stale = self.debugger.paused and name in self._pending()
        assert p.values is not None
        self.layer_data.emit(LayerData(name, layer.desc.name, str(net.dims(name)), p.values, p.stride, weights,
                                       p.stats, self.runs, stale=stale, image=p.image, layout=p.layout,
                                       mapping=self.mapping))
