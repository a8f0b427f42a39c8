"""Charts of the report viewer and the comparison (pyqtgraph): horizontal bar charts with one category
per layer, and the roofline scatter (log-log) with the device's peak line. Colours shared by both."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

#: one colour per compared report
REPORT_COLOURS = ("#4a8fe0", "#f0a040", "#3cba8a", "#e05a5a", "#a77ee0", "#d8c44a", "#46c3d6", "#e07ab8")
#: one colour per pinned baseline layer (distinct from the plain bars and the selection)
BASELINE_COLOURS = ("#f2d14b", "#5fd6b0", "#e06fd0", "#ff8a65", "#9ccc65", "#7fb2ff", "#c9a0ff", "#ffb74d")
BAR_COLOUR = "#4a7bd0"
SELECTED_COLOUR = "#ffffff"
BACKGROUND = "#202226"
FOREGROUND = "#c8c8c8"
PEAK_COLOUR = "#e05050"


def colour_icon(colour: str, size: int = 12) -> QtGui.QIcon:
    """A filled square of ``colour`` (table swatches, legends)."""
    pix = QtGui.QPixmap(size, size)
    pix.fill(QtGui.QColor(colour))
    return QtGui.QIcon(pix)


class CategoryAxis(pg.AxisItem):
    """An axis labelled with names at 0, 1, 2, ...; shows every k-th name so that labels never overlap."""

    def __init__(self, orientation: str, max_chars: int = 22) -> None:
        super().__init__(orientation)
        self.labels: list[str] = []
        self.max_chars = max_chars

    def set_labels(self, labels: Sequence[str]) -> None:
        self.labels = [s if len(s) <= self.max_chars else s[: self.max_chars - 1] + "…" for s in labels]
        if self.orientation in ("left", "right"):
            fm = QtGui.QFontMetrics(self.style.get("tickFont") or QtGui.QFont())
            self.setWidth(max((fm.horizontalAdvance(s) for s in self.labels), default=20) + 18)
        self.picture = None
        self.update()

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # noqa: N802,N803 (pyqtgraph API)
        if not self.labels or size <= 0:
            return []
        minVal, maxVal = min(minVal, maxVal), max(minVal, maxVal)  # noqa: N806 (an inverted axis gives them swapped)
        lo, hi = max(0, math.ceil(minVal)), min(len(self.labels) - 1, math.floor(maxVal))
        if hi < lo:
            return []
        room = QtGui.QFontMetrics(self.style.get("tickFont") or QtGui.QFont()).height() + 2
        per_label = size / max(maxVal - minVal, 1e-9)
        step = max(1, math.ceil(room / max(per_label, 1e-9)))
        return [(float(step), [float(v) for v in range(lo - lo % step, hi + 1, step) if v >= lo])]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:  # noqa: N802 (pyqtgraph API)
        out = []
        for v in values:
            i = int(round(v))
            out.append(self.labels[i] if 0 <= i < len(self.labels) else "")
        return out


def _style_plot(plot: pg.PlotItem) -> None:
    plot.showGrid(x=True, y=True, alpha=0.18)
    for name in ("left", "bottom"):
        ax = plot.getAxis(name)
        ax.setPen(pg.mkPen(FOREGROUND))
        ax.setTextPen(pg.mkPen(FOREGROUND))


class BarChart(pg.PlotWidget):
    """Horizontal bars, one row per category (top to bottom), one bar per series in each row.

    ``bar_clicked(row)`` is emitted when a row is clicked."""

    bar_clicked = QtCore.Signal(int)

    def __init__(self, title: str, unit: str = "ms", parent: QtWidgets.QWidget | None = None) -> None:
        self.axis = CategoryAxis("left")
        super().__init__(parent, background=BACKGROUND, axisItems={"left": self.axis})
        self.unit = unit
        self.plot = self.getPlotItem()
        self.plot.setTitle(title, color=FOREGROUND, size="10pt")
        self.plot.setLabel("bottom", unit, color=FOREGROUND)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        _style_plot(self.plot)
        self.plot.invertY(True)
        self.plot.getViewBox().setMouseEnabled(x=False, y=True)
        self.items: list[pg.BarGraphItem] = []
        self.rows = 0
        self.values: list[list[float | None]] = []
        self.scene().sigMouseClicked.connect(self._clicked)
        self.setMinimumHeight(160)

    def set_bars(self, labels: Sequence[str], series: Sequence[tuple[Sequence[float | None], Sequence[str] | str]]) -> None:
        """``series``: (values per row, one colour or a colour per row); ``None`` values draw no bar."""
        for item in self.items:
            self.plot.removeItem(item)
        self.items = []
        self.rows = len(labels)
        self.values = [list(v) for v, _ in series]
        self.axis.set_labels(list(labels))
        n = max(1, len(series))
        height = 0.8 / n
        for k, (values, colours) in enumerate(series):
            rows = [i for i, v in enumerate(values) if v is not None]
            if not rows:
                continue
            cols = [colours] * len(values) if isinstance(colours, str) else list(colours)
            y = np.array([i - 0.4 + height * (k + 0.5) for i in rows])
            w = np.array([float(values[i]) for i in rows])  # type: ignore[arg-type]
            brushes = [pg.mkBrush(cols[i]) for i in rows]
            pens = [pg.mkPen("#ffffff", width=1.5) if cols[i] == SELECTED_COLOUR else pg.mkPen(None) for i in rows]
            item = pg.BarGraphItem(x0=np.zeros(len(rows)), y=y, height=height * 0.92, width=w, brushes=brushes, pens=pens)
            self.plot.addItem(item)
            self.items.append(item)
        self.plot.setYRange(-0.6, max(self.rows, 1) - 0.4, padding=0.02)
        top = max((v for vals in self.values for v in vals if v is not None), default=1.0) or 1.0
        self.plot.setXRange(0, top * 1.05, padding=0)

    def _clicked(self, event: object) -> None:
        pos = event.scenePos()  # type: ignore[attr-defined]
        if not self.plot.sceneBoundingRect().contains(pos):
            return
        row = int(round(self.plot.getViewBox().mapSceneToView(pos).y()))
        if 0 <= row < self.rows:
            self.bar_clicked.emit(row)


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def log_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    """Tick marks for a log axis from ``lo`` to ``hi`` (positive): every decade, labelled 10ⁿ (1, 2 and 5 times
    each decade when the range is under two decades), never more labels than fit."""
    lo_e, hi_e = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mantissas = (1, 2, 5) if hi_e - lo_e <= 2 else (1,)
    step = max(1, (hi_e - lo_e) // 8)
    ticks = []
    for e in range(lo_e, hi_e + 1, step):
        for m in mantissas:
            v = m * 10.0 ** e
            if lo <= v <= hi:
                ticks.append((math.log10(v), (f"{m}·" if m != 1 else "") + "10" + str(e).translate(_SUPERSCRIPT)))
    return ticks


def label_without_overlaps(points: Sequence[tuple[float, float, str, float, bool]],
                           x_range: tuple[float, float] | None = None, y_range: tuple[float, float] | None = None,
                           width_px: float = 380.0, height_px: float = 260.0, char_px: float = 7.0,
                           line_px: float = 15.0) -> set[int]:
    """Which points get a name label: (x, y, name, size, selected) in plot coordinates, shown over ``x_range`` x
    ``y_range`` (default: the points' extent) in about ``width_px`` x ``height_px`` pixels; the selected point first,
    then the largest, each only where its label (above-right of the point) does not overlap one already placed."""
    if not points:
        return set()
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_range = x_range or (min(xs), max(xs))
    y_range = y_range or (min(ys), max(ys))
    sx = width_px / max(x_range[1] - x_range[0], 1e-9)
    sy = height_px / max(y_range[1] - y_range[0], 1e-9)
    placed: list[tuple[float, float, float, float]] = []
    chosen: set[int] = set()
    for i in sorted(range(len(points)), key=lambda k: (not points[k][4], -points[k][3])):
        x, y, name = (points[i][0] - x_range[0]) * sx, (points[i][1] - y_range[0]) * sy, points[i][2]
        box = (x, y, x + char_px * len(name), y + line_px)
        if all(box[2] <= b[0] or b[2] <= box[0] or box[3] <= b[1] or b[3] <= box[1] for b in placed):
            placed.append(box)
            chosen.add(i)
    return chosen


class RooflineChart(pg.PlotWidget):
    """Achieved FLOP/s against arithmetic intensity (log-log), with the device's roofline.

    ``point_clicked(index)`` gives the index of the clicked point in the list given to ``set_points``."""

    point_clicked = QtCore.Signal(int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent, background=BACKGROUND)
        self.plot = self.getPlotItem()
        self.plot.setTitle("Roofline", color=FOREGROUND, size="10pt")
        self.plot.setLabel("bottom", "arithmetic intensity (FLOP/byte)", color=FOREGROUND)
        self.plot.setLabel("left", "achieved FLOP/s", color=FOREGROUND)
        self.plot.setLogMode(x=True, y=True)
        for name in ("left", "bottom"):
            self.plot.getAxis(name).enableAutoSIPrefix(False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        _style_plot(self.plot)
        # top left: above the memory roof, where no measured layer can be
        self.legend = self.plot.addLegend(offset=(10, 10), labelTextColor=FOREGROUND, brush=pg.mkBrush(32, 34, 38, 200))
        self.point_index: list[int] = []
        self.labelled: set[int] = set()  # indices (into the drawn points) that have a name label
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setStyle(maxTickLevel=0)  # decades only: minor log labels pile up
        self.setMinimumHeight(160)

    def set_points(self, xs: Sequence[float], ys: Sequence[float], colours: Sequence[str], sizes: Sequence[float],
                   names: Sequence[str], peaks: tuple[float, float] | None, legend: Sequence[tuple[str, str]] = ()) -> None:
        """Points with x, y > 0 are drawn; ``peaks`` = (FLOP/s, bytes/s) draws the roofline;
        ``legend``: (colour, text) entries."""
        self.plot.clear()
        self.legend.clear()
        keep = [i for i, (x, y) in enumerate(zip(xs, ys)) if x > 0 and y > 0]
        self.point_index = keep
        if keep:
            pens = [pg.mkPen("#ffffff" if colours[i] == SELECTED_COLOUR else "#111111", width=1) for i in keep]
            scatter = pg.PlotDataItem([xs[i] for i in keep], [ys[i] for i in keep], pen=None, symbol="o",
                                      symbolBrush=[pg.mkBrush(colours[i]) for i in keep], symbolPen=pens,
                                      symbolSize=[sizes[i] for i in keep], data=list(keep))
            scatter.sigPointsClicked.connect(self._clicked)
            self.plot.addItem(scatter)
            lx = [math.log10(xs[i]) for i in keep]
            ly = [math.log10(ys[i]) for i in keep]
            top = math.log10(peaks[0]) if peaks and peaks[0] > 0 else max(ly)
            ridge = math.log10(peaks[0] / peaks[1]) if peaks and peaks[0] > 0 and peaks[1] > 0 else None
            x_range = (min(lx + ([ridge - 0.9] if ridge is not None else [])) - 0.6,
                       max(lx + ([ridge + 0.9] if ridge is not None else [])) + 0.6)
            self.labelled = label_without_overlaps(
                [(lx[j], ly[j], names[i], sizes[i], colours[i] == SELECTED_COLOUR) for j, i in enumerate(keep)],
                x_range, (min(ly) - 0.1, max(top, max(ly)) + 0.1), max(self.width() - 80, 200), max(self.height() - 70, 120))
            for i, k in enumerate(keep):
                if i in self.labelled:
                    text = pg.TextItem(names[k], color=FOREGROUND, anchor=(0, 1))
                    text.setPos(math.log10(xs[k]), math.log10(ys[k]))
                    self.plot.addItem(text)
        lo_x = min((xs[i] for i in keep), default=0.1) / 4
        hi_x = max((xs[i] for i in keep), default=10.0) * 4
        if peaks and peaks[0] > 0 and peaks[1] > 0:
            ridge = peaks[0] / peaks[1]
            lo_x, hi_x = min(lo_x, ridge / 8), max(hi_x, ridge * 8)
            px = np.array([lo_x, ridge, hi_x])
            py = np.minimum(peaks[0], peaks[1] * px)
            line = pg.PlotDataItem(px, py, pen=pg.mkPen(PEAK_COLOUR, width=2))
            self.plot.addItem(line)
            self.legend.addItem(line, "device peak (measured)")
        for colour, text in legend:
            self.legend.addItem(pg.ScatterPlotItem(symbol="o", size=10, brush=pg.mkBrush(colour), pen=None), text)
        self.plot.enableAutoRange()
        ys_all = [ys[i] for i in keep] + ([peaks[0]] if peaks and peaks[0] > 0 else [])
        if ys_all:
            self.plot.getAxis("left").setTicks([log_ticks(min(ys_all) / 2, max(ys_all) * 2)])
        self.plot.getAxis("bottom").setTicks([log_ticks(lo_x, hi_x)])

    def _clicked(self, _item: object, points: Sequence, *_: object) -> None:
        if len(points):
            self.point_clicked.emit(int(points[0].data()))
