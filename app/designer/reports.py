"""Inference reports in the designer: a run's report in its model's report tab, report files opened in tabs,
Tools > Open Inference Report / Compare Inference Reports, and the link between a report's rows and the canvas
(selecting a layer on one selects it on the other)."""
from __future__ import annotations

import os
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.designer.compare_view import REPORT_FILTER, CompareDialog
from app.designer.context import Controller, DesignerContext
from app.designer.document import Document
from app.designer.report_view import ReportView
from app.designer.worker import RunResult
from engine import report as report_file
from engine.errors import LayerLabError
from engine.netlayers import expand_all, network_file
from engine.templates import template_name


def default_reports_dir() -> str:
    """Where reports of models that have no file yet go (``LAYERLAB_REPORTS_DIR`` overrides it)."""
    env = os.environ.get("LAYERLAB_REPORTS_DIR")
    if env:
        return env
    base = QtCore.QStandardPaths.writableLocation(QtCore.QStandardPaths.StandardLocation.AppDataLocation)
    return str(Path(base or Path.home() / ".layerlab") / "reports")


def reports_folder(doc: Document, unsaved_root: str | os.PathLike[str]) -> Path:
    """``<model stem>_reports`` next to the model file, or under ``unsaved_root`` for a model without a file."""
    if doc.path:
        p = Path(doc.path)
        return p.parent / f"{p.stem}_reports"
    return Path(unsaved_root) / f"{doc.model.name}_reports"


def report_row(doc: Document, name: str) -> str:
    """The network layer a canvas layer stands for in reports: a template instance's output layer."""
    spec = doc.model.layers.get(name)
    if spec is None or (template_name(spec.type) is None and network_file(spec.type) is None):
        return name
    return expand_all(doc.model, doc.registry, strict=False).output_of.get(name, name)


def canvas_layer(doc: Document, name: str) -> str | None:
    """The canvas layer showing a network layer: itself, or the template instance an expanded layer
    (``<instance>__<layer>``) comes from."""
    if name in doc.canvas.nodes:
        return name
    instance = name.split("__")[0]
    if "__" in name and instance in doc.model.layers and (template_name(doc.model.layers[instance].type)
                                                          or network_file(doc.model.layers[instance].type)):
        return instance
    return None


class Reports(Controller):
    """The report tabs (``reports``) among the model tabs, and the comparison dialogs (``compare_dialogs``);
    ``closed`` when a report tab was closed."""

    closed = QtCore.Signal()

    def __init__(self, ctx: DesignerContext, reports_dir: str) -> None:
        super().__init__(ctx)
        self.reports_dir = reports_dir
        self.reports: list[ReportView] = []
        self._live: dict[int, ReportView] = {}  # document id -> the tab showing its latest run
        self.compare_dialogs: list[CompareDialog] = []

    @property
    def tabs(self) -> QtWidgets.QTabWidget:
        return self.ctx.documents.tabs

    def report_at(self, index: int) -> ReportView | None:
        """The report shown in tab ``index`` (None for a model tab)."""
        widget = self.tabs.widget(index)
        return widget if isinstance(widget, ReportView) and widget in self.reports else None

    @property
    def current_report(self) -> ReportView | None:
        """The report of the current tab, if it is a report tab."""
        return self.report_at(self.tabs.currentIndex())

    def run_target(self) -> Document | None:
        """The model a run or the network settings apply to: the current model tab, or the model of the
        current report tab."""
        doc = self.ctx.documents.current
        if doc is not None:
            return doc
        view = self.current_report
        return self.doc_for_report(view) if view is not None else None

    def doc_for_report(self, view: ReportView) -> Document | None:
        """The open model a report belongs to: the one it was run from, else the one with its model file."""
        doc = self.ctx.documents.document_by_id(view.doc_id)
        if doc is not None:
            return doc
        path = view.model_path
        if path:
            for d in self.ctx.documents.docs:
                if d.path and Path(d.path).resolve() == Path(path).resolve():
                    return d
        return None

    def _add_view(self, report: dict, path: str | None, doc_id: int | None) -> ReportView:
        view = ReportView(report, path, doc_id)
        view.layer_selected.connect(lambda name, v=view: self._layer_selected(v, name))
        view.layer_activated.connect(lambda name, v=view: self._layer_activated(v, name))
        view.compare_requested.connect(lambda p: self.compare_reports([p] if p else None))
        self.reports.append(view)
        icon = self.ctx.parent.style().standardIcon(QtWidgets.QStyle.StandardPixmap.SP_FileDialogInfoView)
        index = self.tabs.addTab(view, icon, view.tab_title)
        self.tabs.setTabToolTip(index, path or "")
        return view

    def show_run_report(self, result: RunResult) -> ReportView:
        """Show a finished run's report in its model's report tab (made current when the user is looking at
        that model or its report)."""
        view = self._live.get(result.doc_id) if result.doc_id is not None else None
        doc = self.ctx.documents.document_by_id(result.doc_id)
        looking = self.tabs.currentWidget() in ((doc.canvas.widget if doc else None), view) or self.tabs.count() == 0
        if view is not None and view in self.reports:
            view.set_report(result.report, str(result.json_path))
            index = self.tabs.indexOf(view)
            self.tabs.setTabText(index, view.tab_title)
            self.tabs.setTabToolTip(index, str(result.json_path))
        else:
            view = self._add_view(result.report, str(result.json_path), result.doc_id)
            if result.doc_id is not None:
                self._live[result.doc_id] = view
        if doc is not None:
            sel = doc.canvas.selected_layers()
            if len(sel) == 1:
                view.select_layer(report_row(doc, sel[0]))
        if looking:
            self.tabs.setCurrentWidget(view)
        return view

    def open_report(self, path: str | os.PathLike[str]) -> ReportView | None:
        """Open a report file in a tab (or switch to it); errors are shown, not raised."""
        path = str(Path(path).resolve())
        for view in self.reports:
            if view.path and Path(view.path).resolve() == Path(path):
                self.tabs.setCurrentWidget(view)
                return view
        try:
            report = report_file.load(path)
        except LayerLabError as exc:
            self.ctx.status(str(exc), 10000)
            QtWidgets.QMessageBox.critical(self.ctx.parent, "Cannot open report", str(exc))
            return None
        view = self._add_view(report, path, None)
        self.tabs.setCurrentWidget(view)
        return view

    def start_dir(self) -> str:
        """Where the report file dialogs start: the run target's reports folder, else the current report's."""
        doc = self.run_target()
        if doc is not None:
            folder = reports_folder(doc, self.reports_dir)
            if folder.is_dir():
                return str(folder)
        view = self.current_report
        return str(Path(view.path).parent) if view is not None and view.path else str(Path.cwd())

    def open_report_dialog(self) -> None:
        """Tools > Open Inference Report."""
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self.ctx.parent, "Open inference report", self.start_dir(),
                                                        REPORT_FILTER)
        if path:
            self.open_report(path)

    def close_report(self, view: ReportView) -> bool:
        """Close a report tab."""
        index = self.tabs.indexOf(view)
        if index < 0:
            return False
        self.reports.remove(view)
        self._live = {k: v for k, v in self._live.items() if v is not view}
        self.tabs.removeTab(index)
        view.deleteLater()
        self.closed.emit()
        return True

    def compare_reports(self, paths: list[str] | None = None) -> CompareDialog | None:
        """Tools > Compare Inference Reports: asks for report files until there are two or more."""
        start = self.start_dir()
        paths = list(paths or [])
        if len(paths) < 2:
            picked, _ = QtWidgets.QFileDialog.getOpenFileNames(self.ctx.parent, "Reports to compare", start,
                                                               REPORT_FILTER)
            paths += [p for p in picked if p not in paths]
        if not paths:
            return None
        dlg = CompareDialog(paths, start, self.ctx.parent)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.finished.connect(lambda _r, d=dlg: self.compare_dialogs.remove(d) if d in self.compare_dialogs else None)
        self.compare_dialogs.append(dlg)
        dlg.show()
        return dlg

    def select_in_reports(self, doc: Document, name: str) -> None:
        """The canvas selected ``name`` alone: its row is selected in ``doc``'s reports."""
        row = report_row(doc, name)
        for view in self.reports:
            if self.doc_for_report(view) is doc:
                view.select_layer(row)

    def _layer_selected(self, view: ReportView, name: str) -> None:
        doc = self.doc_for_report(view)
        if doc is None:
            return
        layer = canvas_layer(doc, name)
        if layer is not None:
            doc.canvas.select_layers([layer])
        else:
            self.ctx.status(f"{name} is not on the canvas of {doc.title} (fused or renamed)", 6000)

    def _layer_activated(self, view: ReportView, name: str) -> None:
        doc = self.doc_for_report(view)
        if doc is None:
            self.ctx.status(f"The model of this report ({view.model_name}) is not open", 6000)
            return
        self.tabs.setCurrentWidget(doc.canvas.widget)
        layer = canvas_layer(doc, name) or name
        current = self.ctx.documents.current
        if current is not None and layer in current.canvas.nodes:
            current.canvas.focus_layer(layer)

    def close_all(self) -> None:
        """The window closes: the comparison dialogs close with it."""
        for dlg in list(self.compare_dialogs):
            dlg.close()
