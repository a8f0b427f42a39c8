"""The Channel Inspector: a layer's output (or one of its weights) as a grid of N x C slices mapped
with the red/green colormap (negative red, positive green, zero black), with shift and scale quick
actions, Reset Parameters, the value under the mouse, and per-channel statistics.

The session sends the grid already prepared on the device (engine.frames) with the inspector's mapping
(``mapping_changed`` tells it), and the values behind it for the hover read-out; a mapping changed since,
a weight or a single slice is mapped here off the GUI thread (a thread-pool task maps the latest tensor; a
newer request supersedes an older one, so the GUI never freezes). Double-clicking a slice asks for it at
full resolution."""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from PySide6 import QtCore, QtWidgets

from app.analysis.stats_table import StatsTable
from app.analysis.views import ColourScale, ImageView
from engine.analysis import (
    HEAT_RANKS,
    GridLayout,
    as_nchw,
    auto_scale,
    channel_grid,
    channel_stats,
    fit_slices,
    heat_map,
)
from engine.tensor import Dims

MAX_GRID_PIXELS = 4_000_000


class _Signals(QtCore.QObject):
    ready = QtCore.Signal(int, object, object, object)  # generation, rgb image, GridLayout, heat map range or None


class _GridTask(QtCore.QRunnable):
    def __init__(self, generation: int, tensor: np.ndarray, shift: float, scale: float, fit: bool,
                 signals: _Signals, cols: int | None = None, heat: bool = False) -> None:
        super().__init__()
        self.args = (generation, tensor, shift, scale, fit, cols, heat)
        self.signals = signals

    def run(self) -> None:
        generation, tensor, shift, scale, fit, cols, heat = self.args
        if heat:
            hm = heat_map(tensor, MAX_GRID_PIXELS)
            rgb, layout, scale_range = hm.image, hm.layout, (hm.lo, hm.hi)
        else:
            (rgb, layout), scale_range = channel_grid(tensor, shift, scale, MAX_GRID_PIXELS, cols=cols, fit=fit), None
        try:
            self.signals.ready.emit(generation, rgb, layout, scale_range)
        except RuntimeError:  # the inspector was closed meanwhile: nobody waits for this image
            pass


class ChannelInspector(QtWidgets.QWidget):
    """Shows LayerData from the session. ``channel_requested(layer, n, c)`` asks for a full-resolution
    slice; ``layer_requested(layer)`` is emitted by ``inspect``."""

    #: during playback the statistics table (64 rows: 4 ms to paint) is refilled at most this often
    STATS_INTERVAL_S = 0.25

    channel_requested = QtCore.Signal(str, int, int)
    layer_requested = QtCore.Signal(str)
    mapping_changed = QtCore.Signal(float, float, bool, int)  # shift, scale, fit, grid pixels (display size)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.data: Any = None  # the latest LayerData
        self.single: Any = None  # a full-resolution slice, while shown
        self.shift, self.scale = 0.0, 1.0
        self.layout_: GridLayout | None = None
        self.shown: np.ndarray | None = None  # the tensor behind the image (N x C x h x w)
        self.shown_stride = 1
        self.shown_dims: tuple[int, ...] = ()  # the logical dimensions of what is shown (any rank)
        self.heat = False  # a tensor of rank 2 or 3, shown as a heat map with its colour scale
        self._generation = 0
        self._signals = _Signals()  # no parent: a task still running when the inspector closes can emit
        self._signals.ready.connect(self._ready)
        self.pool = QtCore.QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self.destroyed.connect(self._signals.deleteLater)

        self.toolbar = QtWidgets.QToolBar()
        self.layer_label = QtWidgets.QLabel("  no layer  ")
        self.layer_label.setStyleSheet("font-weight: bold;")
        self.layer_label.setMinimumWidth(50)
        self.layer_label.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
        self.source = QtWidgets.QComboBox()
        self.source.setToolTip("Show the layer's output or one of its weights")
        self.source.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToContents)  # never cut
        self.source.currentIndexChanged.connect(lambda _i: self.refresh())
        header = QtWidgets.QHBoxLayout()  # the layer and what is shown of it, on their own row: never squeezed
        header.setContentsMargins(4, 2, 4, 0)
        header.addWidget(self.layer_label, 1)
        header.addWidget(QtWidgets.QLabel("Show:"))
        header.addWidget(self.source)
        self.act_shift_down = self.toolbar.addAction("Shift −", lambda: self.set_mapping(self.shift - 0.1 / self.scale))
        self.act_shift_up = self.toolbar.addAction("Shift +", lambda: self.set_mapping(self.shift + 0.1 / self.scale))
        self.act_scale_down = self.toolbar.addAction("Scale ÷2", lambda: self.set_mapping(scale=self.scale / 2))
        self.act_scale_up = self.toolbar.addAction("Scale ×2", lambda: self.set_mapping(scale=self.scale * 2))
        self.act_auto = self.toolbar.addAction("Auto", self.auto_mapping)
        self.act_auto.setToolTip("Scale so the largest magnitude is at full intensity")
        self.act_fit = self.toolbar.addAction("Fit Channels")
        self.act_fit.setCheckable(True)
        self.act_fit.setChecked(True)
        self.act_fit.setToolTip("Map each channel by its own range (its largest magnitude at full intensity), then "
                                "apply shift and scale; off: the raw values")
        self.act_fit.toggled.connect(lambda _on: self._mapping_changed())
        self.act_reset = self.toolbar.addAction("Reset Parameters", self.reset_mapping)
        self.act_back = self.toolbar.addAction("Back to Grid", self.back_to_grid)
        self.act_back.setVisible(False)
        self.toolbar.addWidget(QtWidgets.QLabel("  shift "))
        self.shift_box = QtWidgets.QDoubleSpinBox()
        self.shift_box.setRange(-1e9, 1e9)
        self.shift_box.setDecimals(4)
        self.shift_box.setSingleStep(0.1)
        self.shift_box.setMaximumWidth(95)
        self.shift_box.setToolTip("Added to every value before scaling")
        self.shift_box.valueChanged.connect(lambda v: self.set_mapping(shift=v))
        self.toolbar.addWidget(self.shift_box)
        self.toolbar.addWidget(QtWidgets.QLabel(" scale "))
        self.scale_box = QtWidgets.QDoubleSpinBox()
        self.scale_box.setRange(1e-6, 1e9)
        self.scale_box.setDecimals(6)
        self.scale_box.setMaximumWidth(95)
        self.scale_box.setToolTip("(value + shift) × scale is shown; 1 is full green, −1 full red")
        self.scale_box.valueChanged.connect(lambda v: self.set_mapping(scale=v))
        self.toolbar.addWidget(self.scale_box)
        self._hover_at: tuple[int, int] | None = None
        self._pending: dict[int, tuple[np.ndarray, int]] = {}  # generation -> the tensor and stride it shows

        self.view = ImageView(placeholder="select a layer in the Network Overview")
        self.view.hovered.connect(self._hover)
        self.view.double_clicked.connect(self._double_click)
        self.hover = QtWidgets.QLabel(" ")
        self.hover.setStyleSheet("font-family: monospace;")
        self.stats = StatsTable()
        self._stats_at = -math.inf  # when the table was last filled (time.monotonic)
        self._stats_later: Any = None  # statistics to show when the interval is over
        self._stats_timer = QtCore.QTimer(self, singleShot=True, timeout=self._stats_due)
        self.summary = QtWidgets.QLabel(" ")
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        left = QtWidgets.QWidget()
        ll = QtWidgets.QVBoxLayout(left)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.view, 1)
        self.colour_scale = ColourScale()
        self.colour_scale.setVisible(False)
        ll.addWidget(self.colour_scale)
        ll.addWidget(self.hover)
        right = QtWidgets.QWidget()
        rl = QtWidgets.QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.summary)
        rl.addWidget(self.stats, 1)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setSizes([600, 330])
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(header)
        lay.addWidget(self.toolbar)
        lay.addWidget(split, 1)
        self._update_mapping_label()

    # ---- data --------------------------------------------------------------------------------------
    def inspect(self, layer: str) -> None:
        """Ask for a layer (the owner forwards ``layer_requested`` to the session)."""
        self.single = None
        self.mapping_changed.emit(*self.mapping(), self.grid_pixels())  # the grid prepared at today's display size
        self.layer_requested.emit(layer)

    def show_layer(self, data) -> None:  # noqa: ANN001 - app.analysis.live.LayerData
        """Show LayerData (always the latest pass of the inspected layer)."""
        if data.channel is not None:
            self.single = data
            self._show_as(Dims.parse(data.dims))
            self.act_back.setVisible(True)
            self._show_tensor(data.tensor, 1, self._title(data), origin=data.channel)
            return
        keep_source = self.data is not None and self.data.name == data.name
        self.data = data
        current = self.source.currentText() if keep_source else "Output"
        items = ["Output", *[f"Weights: {w}" for w in data.weights]]
        self.source.blockSignals(True)
        if [self.source.itemText(i) for i in range(self.source.count())] != items:  # not every video frame
            self.source.clear()
            self.source.addItems(items)
        self.source.setCurrentText(current if self.source.findText(current) >= 0 else "Output")
        self.source.blockSignals(False)
        if self.single is not None and self.single.name == data.name:
            self.channel_requested.emit(data.name, *self.single.channel)  # follow the frames at full resolution
        else:
            self.single = None
            self.act_back.setVisible(False)
            self.refresh()

    def refresh(self) -> None:
        """Remap the current tensor (after a change of source, shift or scale)."""
        if self.single is not None:
            self._show_as(Dims.parse(self.single.dims))
            self._show_tensor(self.single.tensor, 1, self._title(self.single), origin=self.single.channel)
            return
        d = self.data
        if d is None:
            return
        src = self.source.currentText()
        if src.startswith("Weights: "):
            w = d.weights[src[len("Weights: "):]]
            self._show_as(tuple(w.shape))
            self._show_tensor(w, 1, f"{d.name} ({d.type}) weight {src[9:]} {'x'.join(map(str, w.shape))}", stats=None)
        else:
            self._show_as(Dims.parse(d.dims))
            title = (f"{d.name} ({d.type}) {d.dims}" + (f", shown every {d.stride} pixels" if d.stride > 1 else "")
                     + (", heat map" if self.heat else "")
                     + (" — from the previous pass (not computed yet)" if d.stale else ""))
            if d.image is not None and d.mapping == self.mapping() and not self.heat:
                self._show_prepared(d, title)
            else:
                self._show_tensor(d.tensor, d.stride, title, stats=d.stats,
                                  cols=d.layout.cols if d.layout is not None else None)

    def _show_as(self, dims: tuple[int, ...]) -> None:
        """What the next image shows: a tensor of rank 2 or 3 as a heat map with its colour scale (the red/green
        mapping actions do not apply to it), any other rank as the channel grid."""
        self.shown_dims = tuple(dims)
        self.heat = len(dims) in HEAT_RANKS
        self.colour_scale.setVisible(self.heat)
        for act in (self.act_shift_down, self.act_shift_up, self.act_scale_down, self.act_scale_up, self.act_auto,
                    self.act_fit, self.act_reset):
            act.setEnabled(not self.heat)
        self.shift_box.setEnabled(not self.heat)
        self.scale_box.setEnabled(not self.heat)

    def _title(self, d: Any) -> str:
        return f"{d.name} [n {d.channel[0]}, c {d.channel[1]}] full resolution"

    def back_to_grid(self) -> None:
        self.single = None
        self.act_back.setVisible(False)
        self.refresh()

    def mapping(self) -> tuple[float, float, bool]:
        """(shift, scale, fit) of the images shown."""
        return (self.shift, self.scale, self.act_fit.isChecked())

    def _show_prepared(self, d: Any, title: str) -> None:
        """Show the grid the session prepared (no remapping here). The statistics table of the layer already shown
        (a playing video) is refilled at most ``STATS_INTERVAL_S`` apart, its last values always shown."""
        same = title == self.layer_label.toolTip() and self.stats.rowCount() == d.stats.min.size
        self.layer_label.setText(f"  {title}  ")
        self.layer_label.setToolTip(title)
        if same and time.monotonic() - self._stats_at < self.STATS_INTERVAL_S:
            self._stats_later = d.stats
            if not self._stats_timer.isActive():
                self._stats_timer.start(int(1000 * self.STATS_INTERVAL_S))
        else:
            self._fill_stats(d.stats)
        self._generation += 1  # an image still being mapped here is older
        self._pending = {}
        self.shown, self.shown_stride, self.layout_ = d.tensor, d.stride, d.layout
        self.view.set_image(d.image)
        if self._hover_at is not None:
            self._hover(*self._hover_at)

    def _show_tensor(self, tensor: np.ndarray, stride: int, title: str, stats: Any = None,
                     origin: tuple[int, int] = (0, 0), cols: int | None = None) -> None:
        self.layer_label.setText(f"  {title}  ")
        self.layer_label.setToolTip(title)
        self._fill_stats(stats if stats is not None else channel_stats(tensor), origin)
        self._generation += 1
        self._pending = {self._generation: (tensor, stride)}
        if self.shown is None:
            self.shown, self.shown_stride = tensor, stride
        self.pool.start(_GridTask(self._generation, tensor, self.shift, self.scale, self.act_fit.isChecked(),
                                  self._signals, cols, self.heat))

    def _ready(self, generation: int, rgb: np.ndarray, layout: GridLayout,
               scale_range: tuple[float, float] | None = None) -> None:
        if generation != self._generation:
            return  # a newer image is on its way
        if scale_range is not None:
            self.colour_scale.set_range(*scale_range)
        # the hover read-out reads the tensor of the image on screen, not one still being prepared
        self.shown, self.shown_stride = self._pending.pop(generation, (self.shown, self.shown_stride))
        self.layout_ = layout
        self.view.set_image(rgb)
        if self._hover_at is not None:
            self._hover(*self._hover_at)

    def wait_ready(self, timeout_ms: int = 5000) -> bool:
        """Block until the pending image is prepared (tests, screenshots)."""
        ok = self.pool.waitForDone(timeout_ms)
        QtCore.QCoreApplication.processEvents()
        return ok

    def _stats_due(self) -> None:
        if self._stats_later is not None:
            self._fill_stats(self._stats_later)

    def _fill_stats(self, stats: Any, origin: tuple[int, int] = (0, 0)) -> None:
        self._stats_at, self._stats_later = time.monotonic(), None
        self._stats_timer.stop()
        self.stats.set_stats(stats, origin)
        t = stats.total()
        self.summary.setText(f"min {t['min']:.5g}  max {t['max']:.5g}  NaN {t['nan']}  Inf {t['inf']}")

    # ---- mapping -----------------------------------------------------------------------------------
    def set_mapping(self, shift: float | None = None, scale: float | None = None) -> None:
        """Values map to ``(value + shift) * scale`` before the colormap."""
        if shift is not None and math.isfinite(shift):
            self.shift = float(shift)
        if scale is not None and math.isfinite(scale) and scale > 0:
            self.scale = float(scale)
        self._update_mapping_label()
        self._mapping_changed()

    def grid_pixels(self) -> int:
        """The most pixels a grid needs here: the viewer's device pixels, at least 256 k, at most MAX_GRID_PIXELS
        (zoomed in, a slice at full resolution is a double-click away)."""
        ratio = self.view.devicePixelRatioF()
        shown = self.view.width() * self.view.height() * ratio * ratio
        return int(min(MAX_GRID_PIXELS, max(1 << 18, shown)))

    def _mapping_changed(self) -> None:
        self.mapping_changed.emit(*self.mapping(), self.grid_pixels())
        self.refresh()

    def reset_mapping(self) -> None:
        """Reset Parameters: shift 0, scale 1."""
        self.set_mapping(0.0, 1.0)

    def auto_mapping(self) -> None:
        if self.shown is not None:
            shift, scale = auto_scale(fit_slices(self.shown) if self.act_fit.isChecked() else self.shown)
            self.set_mapping(shift, scale)

    def _update_mapping_label(self) -> None:
        for box, value in ((self.shift_box, self.shift), (self.scale_box, self.scale)):
            with QtCore.QSignalBlocker(box):
                box.setValue(value)

    # ---- hover and zoom ----------------------------------------------------------------------------
    def value_at(self, x: int, y: int) -> tuple[int, int, int, int, float] | None:
        """(n, c, row, column, value) under grid pixel (x, y); row and column in the full tensor."""
        if self.layout_ is None or self.shown is None or x < 0:
            return None
        where = self.layout_.locate(x, y)
        if where is None:
            return None
        n, c, yy, xx = where
        value = float(as_nchw(self.shown)[n, c, yy, xx])
        return n, c, yy * self.shown_stride, xx * self.shown_stride, value

    def _hover(self, x: int, y: int) -> None:
        self._hover_at = (x, y) if x >= 0 else None
        v = self.value_at(x, y)
        self.hover.setText(" " if v is None else self.where_text(*v))

    def where_text(self, n: int, c: int, y: int, x: int, value: float) -> str:
        """The hover read-out in the terms of the tensor's own rank: a heat map's row and column (and batch item),
        a rank-5 or 6 tensor's full index (its leading axes are folded into the grid's rows), else n c y x."""
        rank = len(self.shown_dims)
        if self.heat:
            return f"{f'item {c}  ' if rank == 3 else ''}row {y}  column {x}   value {value:.6g}"
        if rank > 4:
            index = (*np.unravel_index(n, self.shown_dims[:rank - 3]), c, y, x)
            return f"index [{', '.join(str(int(i)) for i in index)}]   value {value:.6g}"
        return f"n {n}  c {c}  y {y}  x {x}   value {value:.6g}"

    def _double_click(self, x: int, y: int) -> None:
        v = self.value_at(x, y)
        if (v is None or self.data is None or self.single is not None or self.heat
                or self.source.currentText() != "Output"):
            return
        self.channel_requested.emit(self.data.name, v[0], v[1])
