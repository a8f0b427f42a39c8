"""Tools > Compare Inference Reports: any number of reports, each with its colour; a summary table
(format, backend, device, average time and its difference against the base report chosen in the combo
box); the layer table matched by name and type (engine.report.compare) with each report's time and the
difference against the base, layers missing from a report shown as "missing"; charts per layer and for
the network."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.charts import REPORT_COLOURS, BarChart, colour_icon
from engine import report as rep
from engine.errors import LayerLabError

REPORT_FILTER = "LayerLab reports (*.json);;All files (*)"
MISSING = "missing"
SORT_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1


def _cell(text: str, sort: Any = None, colour: str | None = None, right: bool = True) -> QtGui.QStandardItem:
    it = QtGui.QStandardItem(text)
    it.setEditable(False)
    it.setData(text if sort is None else sort, SORT_ROLE)
    if right:
        it.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
    if colour:
        it.setForeground(QtGui.QColor(colour))
    return it


def _diff_colour(d: float | None) -> str | None:
    if d is None or abs(d) < 1e-12:
        return None
    return "#ff7b7b" if d > 0 else "#6fcf6f"


class CompareDialog(QtWidgets.QDialog):
    """Non-modal; ``add_reports(paths)`` loads files (errors are listed, never raised)."""

    def __init__(self, paths: list[str] | None = None, start_dir: str = "", parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare Inference Reports")
        self.setObjectName("CompareDialog")
        self.resize(1280, 800)
        self.start_dir = start_dir
        self.paths: list[str] = []
        self.reports: list[dict[str, Any]] = []
        self.comparison: rep.Comparison | None = None
        self.errors: list[str] = []

        self.add_button = QtWidgets.QPushButton("Add Reports…")
        self.remove_button = QtWidgets.QPushButton("Remove")
        self.base = QtWidgets.QComboBox()
        self.base.setMinimumWidth(260)
        self.save_button = QtWidgets.QPushButton("Save HTML…")
        self.message = QtWidgets.QLabel()
        self.message.setWordWrap(True)
        self.add_button.clicked.connect(self.browse)
        self.remove_button.clicked.connect(self.remove_selected)
        self.base.currentIndexChanged.connect(lambda _i: self._recompute())
        self.save_button.clicked.connect(self.save_html)

        self.summary = QtWidgets.QTableWidget(0, 8)
        self.summary.setHorizontalHeaderLabels(["", "Report", "Model", "Format", "Backend", "Device", "Avg ms",
                                                "Diff vs base"])
        self.summary.verticalHeader().hide()
        self.summary.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.summary.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.summary.horizontalHeader().setStretchLastSection(True)

        self.layer_model = QtGui.QStandardItemModel(self)
        self.proxy = QtCore.QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.layer_model)
        self.proxy.setSortRole(SORT_ROLE)
        self.layers = QtWidgets.QTableView()
        self.layers.setModel(self.proxy)
        self.layers.horizontalHeader().setSortIndicator(-1, QtCore.Qt.SortOrder.AscendingOrder)  # network order first
        self.layers.setSortingEnabled(True)
        self.layers.verticalHeader().hide()
        self.layers.verticalHeader().setDefaultSectionSize(22)
        self.layers.setAlternatingRowColors(True)
        self.layers.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.layers.horizontalHeader().setStretchLastSection(True)

        self.layer_chart = BarChart("Time per layer (mean)", "ms")
        self.network_chart = BarChart("Network: average time per iteration", "ms")
        self.network_chart.setMaximumHeight(220)

        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(self.add_button)
        bar.addWidget(self.remove_button)
        bar.addSpacing(16)
        bar.addWidget(QtWidgets.QLabel("Base report:"))
        bar.addWidget(self.base)
        bar.addStretch(1)
        bar.addWidget(self.save_button)
        charts = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        charts.addWidget(self.layer_chart)
        charts.addWidget(self.network_chart)
        charts.setSizes([500, 180])
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        layer_box = QtWidgets.QGroupBox("Layers (matched by name and type)")
        QtWidgets.QVBoxLayout(layer_box).addWidget(self.layers)
        split.addWidget(layer_box)
        split.addWidget(charts)
        split.setSizes([700, 560])
        summary_box = QtWidgets.QGroupBox("Summary")
        QtWidgets.QVBoxLayout(summary_box).addWidget(self.summary)
        close = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.message)
        lay.addWidget(summary_box)
        lay.addWidget(split, 1)
        lay.addWidget(close)
        if paths:
            self.add_reports(paths)
        self._recompute()

    # ---- reports ---------------------------------------------------------------------------------
    def colour(self, i: int) -> str:
        return REPORT_COLOURS[i % len(REPORT_COLOURS)]

    def label(self, i: int) -> str:
        return f"[{i}] {Path(self.paths[i]).stem}"

    def add_reports(self, paths: list[str]) -> int:
        """Load and add report files (a file already shown is skipped); returns how many were added."""
        added = 0
        self.errors = []
        for p in paths:
            p = str(Path(p).resolve())
            if p in self.paths:
                continue
            try:
                doc = rep.load(p)
            except LayerLabError as exc:
                self.errors.append(str(exc))
                continue
            self.paths.append(p)
            self.reports.append(doc)
            added += 1
        self._fill_base()
        return added

    def browse(self) -> None:
        paths, _ = QtWidgets.QFileDialog.getOpenFileNames(self, "Add inference reports", self.start_dir, REPORT_FILTER)
        if paths:
            self.start_dir = str(Path(paths[0]).parent)
            self.add_reports(paths)

    def remove_selected(self) -> None:
        rows = sorted({i.row() for i in self.summary.selectedIndexes()}, reverse=True)
        for r in rows:
            del self.paths[r]
            del self.reports[r]
        self._fill_base()

    def _fill_base(self) -> None:
        keep = self.base.currentIndex()
        self.base.blockSignals(True)
        self.base.clear()
        for i, doc in enumerate(self.reports):
            self.base.addItem(colour_icon(self.colour(i)), f"{self.label(i)} — {doc['run']['backend']} {doc['run']['format']}")
        self.base.setCurrentIndex(keep if 0 <= keep < len(self.reports) else 0)
        self.base.blockSignals(False)
        self._recompute()

    # ---- tables and charts -----------------------------------------------------------------------
    def _recompute(self) -> None:
        n = len(self.reports)
        msgs = [html.escape(e) for e in self.errors]
        if n < 2:
            msgs.insert(0, "Add at least two reports to compare them (Add Reports…).")
        self.message.setText("<br>".join(f"<span style='color:{'#ff6b6b' if m in self.errors else '#9aa4b0'}'>{m}</span>"
                                         for m in msgs))
        self.message.setVisible(bool(msgs))
        self.remove_button.setEnabled(n > 0)
        self.save_button.setEnabled(n > 0)
        self.comparison = rep.compare(self.reports, [self.label(i) for i in range(n)], max(0, self.base.currentIndex())) \
            if n else None
        self._fill_summary()
        self._fill_layers()
        self._fill_charts()

    def _fill_summary(self) -> None:
        c = self.comparison
        self.summary.setRowCount(0)
        if c is None:
            return
        base_avg = c.reports[c.base]["network"]["avg_ms"]
        for i, doc in enumerate(c.reports):
            self.summary.insertRow(i)
            r, avg = doc["run"], doc["network"]["avg_ms"]
            d = avg - base_avg
            cells = ["", self.label(i) + ("  (base)" if i == c.base else ""), f"{doc['model']['name']} {doc['model']['version']}",
                     r["format"], r["backend"], r["device"], f"{avg:.4f}",
                     "—" if i == c.base else f"{d:+.4f} ms ({100 * d / base_avg:+.1f}%)" if base_avg else f"{d:+.4f} ms"]
            for col, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                item.setToolTip(self.paths[i] if col == 1 else text)
                if col == 0:
                    item.setIcon(colour_icon(self.colour(i), 14))
                if col >= 6:
                    item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
                if col == 7 and i != c.base and (colour := _diff_colour(d)):
                    item.setForeground(QtGui.QColor(colour))
                self.summary.setItem(i, col, item)
        self.summary.resizeColumnsToContents()
        rows = min(max(self.summary.rowCount(), 2), 8)
        row_h = self.summary.verticalHeader().defaultSectionSize()
        self.summary.setFixedHeight(self.summary.horizontalHeader().sizeHint().height() + rows * row_h + 6)

    def _fill_layers(self) -> None:
        c = self.comparison
        self.layer_model.clear()
        if c is None:
            return
        heads = ["Layer", "Type"]
        for i in range(len(c.reports)):
            heads += [f"[{i}] ms", "base" if i == c.base else f"[{i}] − [{c.base}]"]
        self.layer_model.setHorizontalHeaderLabels(heads)
        for i in range(len(c.reports)):
            self.layer_model.horizontalHeaderItem(2 + 2 * i).setIcon(colour_icon(self.colour(i)))
        for name, typ, vals in c.rows:
            row = [_cell(name, right=False), _cell(typ, right=False)]
            for i, v in enumerate(vals):
                d = c.diff(vals, i)
                row.append(_cell(f"{v:.4f}" if v is not None else MISSING, v if v is not None else -1.0,
                                 None if v is not None else "#888888"))
                if i == c.base:
                    row.append(_cell("—", 0.0, "#777777"))
                else:
                    base_v = vals[c.base]
                    text = "–" if d is None else f"{d:+.4f}" + (f" ({100 * d / base_v:+.0f}%)" if base_v else "")
                    row.append(_cell(text, d if d is not None else 0.0, _diff_colour(d)))
            self.layer_model.appendRow(row)
        self.layers.resizeColumnsToContents()

    def _fill_charts(self) -> None:
        c = self.comparison
        if c is None:
            self.layer_chart.set_bars([], [])
            self.network_chart.set_bars([], [])
            return
        names = [name for name, _, _ in c.rows]
        self.layer_chart.set_bars(names, [([vals[i] for _, _, vals in c.rows], self.colour(i)) for i in range(len(c.reports))])
        avgs = [d["network"]["avg_ms"] for d in c.reports]
        self.network_chart.set_bars([self.label(i) for i in range(len(c.reports))],
                                    [(avgs, [self.colour(i) for i in range(len(c.reports))])])

    # ---- queries and actions ---------------------------------------------------------------------
    def layer_row(self, name: str) -> dict[str, str]:
        """The layer table's row for ``name`` as {header: text} (tests, and copying)."""
        for r in range(self.layer_model.rowCount()):
            if self.layer_model.item(r, 0).text() == name:
                return {self.layer_model.horizontalHeaderItem(col).text(): self.layer_model.item(r, col).text()
                        for col in range(self.layer_model.columnCount())}
        raise KeyError(name)

    def save_html(self, path: str | None = None) -> str | None:
        if self.comparison is None:
            return None
        if path is None:
            start = str(Path(self.start_dir) / "comparison.html")
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save comparison", start, "HTML (*.html)")
            if not path:
                return None
        try:
            Path(path).write_text(rep.comparison_html(self.comparison), encoding="utf-8")
        except OSError as exc:
            self.errors = [f"{path}: {exc}"]
            self._recompute()
            return None
        return path
