"""The report viewer: an inference report (engine.report JSON) as a document tab.

Network Summary at the top; the sortable Layer Table; charts of the time per layer and the roofline;
the metrics of the selected layer next to the pinned baselines. "Add Baseline" pins the selected layer
with its own colour in every chart; "Clear Baselines" removes them. The view emits ``layer_selected``
when the user selects a layer (table row or chart), so the main window can select it on the canvas;
``select_layer`` does the reverse without echoing."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.charts import BAR_COLOUR, BASELINE_COLOURS, SELECTED_COLOUR, BarChart, RooflineChart, colour_icon
from engine.report import human_bytes, human_rate, layer_type_text

SORT_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1
NAME_ROLE = QtCore.Qt.ItemDataRole.UserRole + 2
COLUMNS = ("Layer", "Type", "Output", "Output size", "Avg ms", "Share", "FLOPs", "FLOP/s", "Bytes/s", "Bound")
SHARE_COLUMN = COLUMNS.index("Share")


class ShareDelegate(QtWidgets.QStyledItemDelegate):
    """Draws the share of total time as a bar behind the percentage."""

    def paint(self, painter: QtGui.QPainter, option: QtWidgets.QStyleOptionViewItem, index: QtCore.QModelIndex) -> None:
        share = index.data(SORT_ROLE) or 0.0
        rect = option.rect.adjusted(2, 3, -2, -3)
        painter.save()
        painter.fillRect(QtCore.QRectF(rect.left(), rect.top(), rect.width() * max(0.0, min(1.0, float(share))),
                                       rect.height()), QtGui.QColor(74, 123, 208, 110))
        painter.restore()
        super().paint(painter, option, index)


def _item(text: str, sort: Any = None, align_right: bool = False) -> QtGui.QStandardItem:
    it = QtGui.QStandardItem(text)
    it.setEditable(False)
    it.setData(text if sort is None else sort, SORT_ROLE)
    if align_right:
        it.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
    return it


def summary_pairs(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The Network Summary as (label, value) pairs."""
    m, r, n = report["model"], report["run"], report["network"]
    pairs = [("Model", f"{m['name']} {m['version']}"), ("Date", report.get("date", "")),
             ("Average time", f"{n['avg_ms']:.4f} ms / iteration"),
             ("Backend", r["backend"]), ("Device", r["device"]), ("Format", r["format"]),
             ("Median (min – max)", f"{n['median_ms']:.4f} ms ({n['min_ms']:.4f} – {n['max_ms']:.4f})"),
             ("Sum of layer times", f"{n['sum_layers_ms']:.4f} ms"),
             ("Peak tensor memory", human_bytes(n["peak_memory_bytes"])),
             ("Iterations", f"{r['iterations']} (+{r['warmup']} warm-up)"),
             ("Fusing rules", "applied" if r.get("fusing") else "none applied"),
             ("Layers", str(len(report["layers"])))]
    peaks = report.get("device_peaks")
    pairs.append(("Device peaks", f"{human_rate(peaks['flops_per_s'], 'FLOP/s')}, {human_rate(peaks['bytes_per_s'], 'B/s')}"
                  if peaks else "not measured"))
    return pairs


class ReportView(QtWidgets.QWidget):
    """One report. ``doc_id`` links it to the open model it was run from (None: match by model path)."""

    layer_selected = QtCore.Signal(str)
    layer_activated = QtCore.Signal(str)  # double-click: show the layer on the canvas
    compare_requested = QtCore.Signal(str)  # the report's JSON path

    def __init__(self, report: dict[str, Any], path: str | None = None, doc_id: int | None = None,
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.report: dict[str, Any] = report
        self.path = path
        self.doc_id = doc_id
        self.baselines: list[str] = []
        self._syncing = False

        self.title = QtWidgets.QLabel()
        self.title.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary = QtWidgets.QWidget()
        self.summary_grid = QtWidgets.QGridLayout(self.summary)
        self.summary_grid.setContentsMargins(0, 0, 0, 0)
        self.summary_grid.setHorizontalSpacing(14)
        self.summary_grid.setVerticalSpacing(2)
        self.notes = QtWidgets.QLabel()
        self.notes.setWordWrap(True)
        self.notes.setStyleSheet("color: #9aa4b0;")

        self.add_baseline_button = QtWidgets.QPushButton("Add Baseline")
        self.add_baseline_button.setToolTip("Pin the selected layer with its own colour in every chart")
        self.clear_baselines_button = QtWidgets.QPushButton("Clear Baselines")
        self.compare_button = QtWidgets.QPushButton("Compare…")
        self.compare_button.setToolTip("Compare this report with other reports")
        self.open_html_button = QtWidgets.QPushButton("Open HTML")
        self.open_html_button.setToolTip("Open the HTML report in the web browser")
        self.baseline_legend = QtWidgets.QLabel()
        self.add_baseline_button.clicked.connect(lambda: self.add_baseline())
        self.clear_baselines_button.clicked.connect(self.clear_baselines)
        self.compare_button.clicked.connect(lambda: self.compare_requested.emit(self.path or ""))
        self.open_html_button.clicked.connect(self.open_html)

        self.table_model = QtGui.QStandardItemModel(0, len(COLUMNS), self)
        self.table_model.setHorizontalHeaderLabels(list(COLUMNS))
        self.proxy = QtCore.QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.table_model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = QtWidgets.QTableView()
        self.table.setModel(self.proxy)
        self.table.horizontalHeader().setSortIndicator(-1, QtCore.Qt.SortOrder.AscendingOrder)  # network order first
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setItemDelegateForColumn(SHARE_COLUMN, ShareDelegate(self.table))
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.selectionModel().selectionChanged.connect(self._row_changed)
        self.table.doubleClicked.connect(lambda idx: self.layer_activated.emit(idx.data(NAME_ROLE) or ""))

        self.metrics = QtWidgets.QTextBrowser()
        self.metrics.setOpenLinks(False)
        self.time_chart = BarChart("Time per layer (mean)", "ms")
        self.roofline = RooflineChart()
        self.time_chart.bar_clicked.connect(lambda row: self.select_layer(self._names[row], emit=True))
        self.roofline.point_clicked.connect(lambda i: self.select_layer(self._names[i], emit=True))

        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.title, 1)
        for b in (self.add_baseline_button, self.clear_baselines_button, self.compare_button, self.open_html_button):
            top.addWidget(b)
        summary_box = QtWidgets.QGroupBox("Network Summary")
        sb = QtWidgets.QVBoxLayout(summary_box)
        sb.addWidget(self.summary)
        sb.addWidget(self.notes)
        table_box = QtWidgets.QGroupBox("Layer Table")
        tb = QtWidgets.QVBoxLayout(table_box)
        tb.addWidget(self.table)
        metrics_box = QtWidgets.QGroupBox("Selected Layer")
        mb = QtWidgets.QVBoxLayout(metrics_box)
        mb.addWidget(self.baseline_legend)
        mb.addWidget(self.metrics)
        left = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        left.addWidget(table_box)
        left.addWidget(metrics_box)
        left.setSizes([420, 220])
        right = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        right.addWidget(self.time_chart)
        right.addWidget(self.roofline)
        self.splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setSizes([600, 400])
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addLayout(top)
        lay.addWidget(summary_box)
        lay.addWidget(self.splitter, 1)
        # long texts are cut (their tooltips hold them) rather than widening the tab: opening a report never
        # makes the main window grow
        for w in (self.title, self.summary, self.notes, self.baseline_legend, summary_box):
            w.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, w.sizePolicy().verticalPolicy())
            w.setMinimumWidth(120)
        self.html_message: QtWidgets.QMessageBox | None = None
        self.set_report(report, path)

    # ---- content ---------------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return str(self.report["model"]["name"])

    @property
    def model_path(self) -> str | None:
        return self.report["model"].get("path")

    @property
    def tab_title(self) -> str:
        stamp = Path(self.path).stem if self.path else self.report.get("date", "")[11:19]
        return f"{self.model_name} report {stamp}"

    def set_report(self, report: dict[str, Any], path: str | None = None) -> None:
        """Show ``report`` (the selection and the baselines are kept for layers it still has)."""
        previous = self.selected_layer()
        self.report, self.path = report, path
        self._layers = {x["name"]: x for x in report["layers"]}
        self._names = [x["name"] for x in report["layers"]]
        self.baselines = [b for b in self.baselines if b in self._layers]
        m, r, n = report["model"], report["run"], report["network"]
        self.title.setText(f"<b style='font-size:13pt'>Inference report: {html.escape(m['name'])}</b> "
                           f"&nbsp; {n['avg_ms']:.3f} ms per iteration · {html.escape(r['backend'])} · "
                           f"{html.escape(r['format'])}")
        while self.summary_grid.count():
            w = self.summary_grid.takeAt(0).widget()
            if w is not None:
                w.deleteLater()
        per_col = 5
        for i, (k, v) in enumerate(summary_pairs(report)):
            key = QtWidgets.QLabel(f"<span style='color:#9aa4b0'>{html.escape(k)}</span>")
            val = QtWidgets.QLabel(v)
            val.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # shown as written ("->" stays "->")
            val.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
            self.summary_grid.addWidget(key, i % per_col, 2 * (i // per_col))
            self.summary_grid.addWidget(val, i % per_col, 2 * (i // per_col) + 1)
        self.summary_grid.setColumnStretch(2 * ((len(summary_pairs(report)) - 1) // per_col) + 1, 1)
        self.summary.setToolTip("\n".join(f"{k}: {v}" for k, v in summary_pairs(report)))
        self.title.setToolTip(f"Inference report: {m['name']}, {n['avg_ms']:.3f} ms per iteration, {r['backend']}, "
                              f"{r['format']}")
        notes = list(r.get("notes", []))
        if path:
            notes.append(f"file: {path}")
        self.notes.setTextFormat(QtCore.Qt.TextFormat.PlainText)  # escaped text would show "&gt;" literally
        self.notes.setText(" · ".join(notes))
        self.notes.setToolTip("\n".join(notes))
        self.notes.setVisible(bool(notes))
        self._fill_table()
        self.open_html_button.setEnabled(bool(path and Path(path).with_suffix(".html").is_file()))
        self.compare_button.setEnabled(bool(path))
        if previous in self._layers:
            self.select_layer(previous)
        else:
            self._refresh()

    def _fill_table(self) -> None:
        self.table.setSortingEnabled(False)
        self.table_model.removeRows(0, self.table_model.rowCount())
        for x in self.report["layers"]:
            t = x["time_ms"]["mean"]
            row = [_item(x["name"]), _item(layer_type_text(x)), _item(x["output_dims"]),
                   _item(human_bytes(x["output_bytes"]), x["output_bytes"], True), _item(f"{t:.4f}", t, True),
                   _item(f"{100 * x['share']:.1f}%", x["share"], True), _item(human_rate(x["flops"], ""), x["flops"], True),
                   _item(human_rate(x["achieved_flops_per_s"], "FLOP/s"), x["achieved_flops_per_s"], True),
                   _item(human_rate(x["achieved_bytes_per_s"], "B/s"), x["achieved_bytes_per_s"], True),
                   _item(x["bound"])]
            for it in row:
                it.setData(x["name"], NAME_ROLE)
            self.table_model.appendRow(row)
        self.table.setSortingEnabled(True)
        self.table.resizeColumnsToContents()
        self._update_swatches()

    # ---- selection -------------------------------------------------------------------------------
    def layer_names(self) -> list[str]:
        return list(self._names)

    def selected_layer(self) -> str | None:
        rows = self.table.selectionModel().selectedRows() if hasattr(self, "table") else []
        return rows[0].data(NAME_ROLE) if rows else None

    def select_layer(self, name: str | None, emit: bool = False) -> bool:
        """Select ``name``'s row (None clears); ``emit``: also announce it as the user's selection."""
        if name is not None and name not in self._layers:
            return False
        self._syncing = not emit
        try:
            sel = self.table.selectionModel()
            if name is None:
                sel.clearSelection()
            else:
                for r in range(self.proxy.rowCount()):
                    idx = self.proxy.index(r, 0)
                    if idx.data(NAME_ROLE) == name:
                        sel.select(idx, QtCore.QItemSelectionModel.SelectionFlag.ClearAndSelect
                                   | QtCore.QItemSelectionModel.SelectionFlag.Rows)
                        self.table.scrollTo(idx)
                        break
        finally:
            self._syncing = False
        self._refresh()
        return True

    def _row_changed(self, *_: object) -> None:
        self._refresh()
        name = self.selected_layer()
        if name is not None and not self._syncing:
            self.layer_selected.emit(name)

    # ---- baselines -------------------------------------------------------------------------------
    def baseline_colour(self, name: str) -> str:
        return BASELINE_COLOURS[self.baselines.index(name) % len(BASELINE_COLOURS)]

    def add_baseline(self, name: str | None = None) -> str | None:
        """Pin ``name`` (default: the selected layer) as a baseline; returns its colour."""
        name = name or self.selected_layer()
        if name is None or name not in self._layers:
            return None
        if name not in self.baselines:
            self.baselines.append(name)
        self._update_swatches()
        self._refresh()
        return self.baseline_colour(name)

    def clear_baselines(self) -> None:
        self.baselines.clear()
        self._update_swatches()
        self._refresh()

    def _update_swatches(self) -> None:
        for r in range(self.table_model.rowCount()):
            it = self.table_model.item(r, 0)
            name = it.data(NAME_ROLE)
            it.setIcon(colour_icon(self.baseline_colour(name)) if name in self.baselines else QtGui.QIcon())
        self.table.resizeColumnToContents(0)  # room for the swatches
        self.clear_baselines_button.setEnabled(bool(self.baselines))
        self.baseline_legend.setText("Baselines: " + " ".join(
            f"<span style='color:{self.baseline_colour(b)}'>■</span> {html.escape(b)}" for b in self.baselines)
            if self.baselines else "<span style='color:#9aa4b0'>No baselines: select a layer and press Add Baseline "
                                   "to pin it in every chart.</span>")

    # ---- charts and metrics ----------------------------------------------------------------------
    def layer_colour(self, name: str) -> str:
        """The colour of a layer in the charts: selected, a baseline's colour, or the plain bar colour."""
        if name == self.selected_layer():
            return SELECTED_COLOUR
        if name in self.baselines:
            return self.baseline_colour(name)
        return BAR_COLOUR

    def _refresh(self) -> None:
        layers = self.report["layers"]
        colours = [self.layer_colour(x["name"]) for x in layers]
        self.time_chart.set_bars(self._names, [([x["time_ms"]["mean"] for x in layers], colours)])
        marked = set(self.baselines) | {self.selected_layer()}
        peaks = self.report.get("device_peaks")
        self.roofline.set_points(
            [x["intensity"] for x in layers], [x["achieved_flops_per_s"] for x in layers], colours,
            [13 if x["name"] in marked else 8 for x in layers],
            [x["name"] if x["name"] in marked else "" for x in layers],
            (peaks["flops_per_s"], peaks["bytes_per_s"]) if peaks else None,
            [(self.baseline_colour(b), f"baseline {b}") for b in self.baselines])
        self.add_baseline_button.setEnabled(self.selected_layer() is not None)
        self._show_metrics()

    def _show_metrics(self) -> None:
        sel = self.selected_layer()
        shown = ([sel] if sel else []) + [b for b in self.baselines if b != sel]
        if not shown:
            self.metrics.setHtml("<p style='color:#9aa4b0'>Select a layer in the table or a chart to see its metrics.</p>")
            return
        peaks = self.report.get("device_peaks")

        def pct(v: float, peak_key: str) -> str:
            return f" ({100 * v / peaks[peak_key]:.1f}% of peak)" if peaks and peaks.get(peak_key) else ""

        rows: list[tuple[str, Any]] = [
            ("Type", layer_type_text), ("Output", lambda x: x["output_dims"]),
            ("Output size", lambda x: human_bytes(x["output_bytes"])),
            ("Mean time", lambda x: f"{x['time_ms']['mean']:.4f} ms"),
            ("Median time", lambda x: f"{x['time_ms']['median']:.4f} ms"),
            ("Min – max", lambda x: f"{x['time_ms']['min']:.4f} – {x['time_ms']['max']:.4f} ms"),
            ("Share of total", lambda x: f"{100 * x['share']:.1f}%"),
            ("FLOPs", lambda x: human_rate(x["flops"], "")),
            ("Bytes read", lambda x: human_bytes(x["bytes_read"])),
            ("Bytes written", lambda x: human_bytes(x["bytes_written"])),
            ("Intensity", lambda x: f"{x['intensity']:.3g} FLOP/B"),
            ("Achieved FLOP/s", lambda x: human_rate(x["achieved_flops_per_s"], "FLOP/s") + pct(x["achieved_flops_per_s"],
                                                                                                  "flops_per_s")),
            ("Achieved bytes/s", lambda x: human_rate(x["achieved_bytes_per_s"], "B/s") + pct(x["achieved_bytes_per_s"],
                                                                                               "bytes_per_s")),
            ("Bound", lambda x: x["bound"]),
            ("Activation fused", lambda x: "yes" if x.get("fused_activation") else "no"),
            ("Bypass (no copy)", lambda x: "yes" if x.get("bypass") else "no"),
        ]
        head = "".join(
            f"<th style='text-align:left;padding:2px 10px;color:{self.layer_colour(n) if n != sel else '#ffffff'}'>"
            f"{'■ ' if n in self.baselines else ''}{html.escape(n)}{' (selected)' if n == sel else ''}</th>" for n in shown)
        body = "".join(
            f"<tr><td style='color:#9aa4b0;padding:1px 10px 1px 0'>{label}</td>"
            + "".join(f"<td style='padding:1px 10px'>{html.escape(str(fn(self._layers[n])))}</td>" for n in shown) + "</tr>"
            for label, fn in rows)
        self.metrics.setHtml(f"<table cellspacing='0'><tr><th></th>{head}</tr>{body}</table>")

    # ---- actions ---------------------------------------------------------------------------------
    def open_html(self) -> bool:
        """Open the HTML report in the web browser; where it is missing or no browser starts, say so in a
        (non-blocking) message that gives the file's path to copy."""
        if not self.path:
            return False
        page = Path(self.path).with_suffix(".html")
        if not page.is_file():
            self._html_problem(f"There is no HTML report next to this report: {page} does not exist.", page)
            return False
        if QtGui.QDesktopServices.openUrl(QtCore.QUrl.fromLocalFile(str(page))):
            return True
        self._html_problem("No web browser could be started to show the HTML report. Open this file in a browser:",
                           page)
        return False

    def _html_problem(self, text: str, page: Path) -> None:
        box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Icon.Warning, "Open HTML", text,
                                    QtWidgets.QMessageBox.StandardButton.Close, self)
        box.setInformativeText(str(page))
        box.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        copy = box.addButton("Copy Path", QtWidgets.QMessageBox.ButtonRole.ActionRole)
        copy.clicked.connect(lambda: QtGui.QGuiApplication.clipboard().setText(str(page)))
        box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        self.html_message = box
        box.open()
