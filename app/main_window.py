"""The designer's main window: model tabs (one canvas each) and report tabs, the palette, parameter,
type-check and run-logger docks, and the File / Edit / View / Tools / Window / Help menus.

Runs go to the worker thread (app.worker); the window only sends commands and shows what comes back."""
from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app import run_config
from app.analysis.mode import AnalysisMode
from app.autosave import Autosaver
from app.batch_dialog import add_batch_menu
from app.collections_dialog import Collections
from app.compare_view import REPORT_FILTER, CompareDialog
from app.custom_layers import CustomLayers
from app.docs_browser import DocsBrowser
from app.document import Document
from app.export_dialog import add_export_menu
from app.fusing_rules import FusingRulesDialog
from app.log_panel import LogPanel
from app.netlayers_ui import NetworkLayers
from app.network_settings import NetworkSettingsDialog
from app.onnx_import import OPEN_FILTER, OnnxImport
from app.palette import Palette
from app.params import ParamPanel
from app.report_view import ReportView
from app.run_logger import RunEntry, RunLogger
from app.template_editing import TemplateEditing
from app.typecheck_panel import TypeCheckPanel
from app.worker import RunController, RunRequest, RunResult
from engine import modelfile
from engine import report as report_file
from engine.custom import custom_descs, used_definitions
from engine.errors import LayerLabError
from engine.events import CustomLayerChanged, Event, TemplateEvent
from engine.importers import is_importable
from engine.model import Model
from engine.netlayers import expand_all, network_file
from engine.plugins import default_registry
from engine.registry import Registry
from engine.templates import (
    group,
    rename_template,
    template_descs,
    template_name,
    template_type,
    ungroup,
)

APP_NAME = "LayerLab"
FILE_FILTER = "LayerLab models (*.lnet);;All files (*)"
MAX_RECENT = 10
SAMPLE = Path(__file__).resolve().parent.parent / "resources" / "samples" / "denoiser.lnet"
REDO_KEYS = [QtGui.QKeySequence("Ctrl+Shift+Z"), QtGui.QKeySequence("Ctrl+Y")]


def default_autosave_dir() -> str:
    env = os.environ.get("LAYERLAB_AUTOSAVE_DIR")
    if env:
        return env
    base = QtCore.QStandardPaths.writableLocation(QtCore.QStandardPaths.StandardLocation.AppDataLocation)
    return str(Path(base or Path.home() / ".layerlab") / "autosave")


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


class MainWindow(QtWidgets.QMainWindow):
    """The designer. Usable from tests without ``app.gui.run`` (pass a QSettings and an autosave folder)."""

    def __init__(self, registry: Registry | None = None, settings: QtCore.QSettings | None = None,
                 autosave_dir: str | os.PathLike[str] | None = None, autosave_interval_ms: int = 60_000,
                 reports_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.registry = registry or default_registry()
        self.settings = settings or QtCore.QSettings("LayerLab", "LayerLab")
        self.autosaver = Autosaver(autosave_dir or default_autosave_dir())
        self.reports_dir = str(reports_dir or default_reports_dir())
        self.docs: list[Document] = []
        self.reports: list[ReportView] = []  # report tabs
        self._live_reports: dict[int, ReportView] = {}  # document id -> the tab showing its latest run
        self.compare_dialogs: list[CompareDialog] = []
        self.runner = RunController(self)
        self.analysis = AnalysisMode(self, self.runner.worker.analysis,
                                     lambda command, payload: self.runner.submit("analysis", (command, payload)))
        self.analysis.active_changed.connect(lambda _on: self._update_actions())
        self._run_ids = 0
        self._actions_pending = False
        self._runs: dict[int, RunRequest] = {}
        self.fusing_dialog: FusingRulesDialog | None = None
        self.warmup_process: Any = None  # the CPU-kernel compile of a first start (start_kernel_warmup)
        self.docs_browser: DocsBrowser | None = None
        self.template_dialog: QtWidgets.QInputDialog | None = None
        self.message_box: QtWidgets.QMessageBox | None = None
        self.setWindowTitle(APP_NAME)
        self.setObjectName("MainWindow")
        self.setDockNestingEnabled(True)
        self.resize(1500, 900)

        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setTabsClosable(True)
        self.tabs.setMovable(True)
        self.tabs.setDocumentMode(True)
        self.tabs.tabCloseRequested.connect(self.close_tab)
        self.tabs.currentChanged.connect(self._current_changed)
        self.setCentralWidget(self.tabs)

        self.palette = Palette(self.registry)
        self.palette.add_requested.connect(self.add_layer)
        self.palette.template_action.connect(self._palette_template_action)
        self.params = ParamPanel()
        self.checks = TypeCheckPanel()
        self.checks.layer_activated.connect(self.focus_layer)
        self.palette_dock = self._dock("Layer Palette", "PaletteDock", self.palette, QtCore.Qt.DockWidgetArea.LeftDockWidgetArea)
        self.params_dock = self._dock("Parameters", "ParametersDock", self.params, QtCore.Qt.DockWidgetArea.RightDockWidgetArea)
        self.check_dock = self._dock("Type Check", "TypeCheckDock", self.checks, QtCore.Qt.DockWidgetArea.BottomDockWidgetArea)
        self.logger = RunLogger()
        self.logger.report_requested.connect(self.open_report)
        self.logger.copied.connect(lambda cmd: self.statusBar().showMessage(f"Copied: {cmd}", 6000))
        self.logger_dock = self._dock("Inference Run Logger", "RunLoggerDock", self.logger,
                                      QtCore.Qt.DockWidgetArea.BottomDockWidgetArea)
        self.splitDockWidget(self.check_dock, self.logger_dock, QtCore.Qt.Orientation.Horizontal)
        self.log_panel = LogPanel()
        self.log_dock = self._dock("Log", "LogDock", self.log_panel, QtCore.Qt.DockWidgetArea.BottomDockWidgetArea)
        self.tabifyDockWidget(self.logger_dock, self.log_dock)
        self.logger_dock.raise_()
        self.resizeDocks([self.palette_dock, self.params_dock], [290, 360], QtCore.Qt.Orientation.Horizontal)
        self.resizeDocks([self.check_dock, self.logger_dock], [420, 900], QtCore.Qt.Orientation.Horizontal)
        self.resizeDocks([self.check_dock], [150], QtCore.Qt.Orientation.Vertical)

        self.status_label = QtWidgets.QLabel()
        self.run_label = QtWidgets.QLabel()
        self.run_progress = QtWidgets.QProgressBar()
        self.run_progress.setMaximumWidth(180)
        self.run_progress.setMaximumHeight(16)
        self.run_progress.setTextVisible(False)
        self.run_label.hide()
        self.run_progress.hide()
        self.statusBar().addPermanentWidget(self.run_label)
        self.statusBar().addPermanentWidget(self.run_progress)
        self.statusBar().addPermanentWidget(self.status_label)
        w = self.runner.worker
        w.run_started.connect(self._run_started)
        w.phase.connect(self._run_phase)
        w.progress.connect(self._run_progress)
        w.run_finished.connect(self._run_finished)
        w.run_failed.connect(self._run_failed)
        w.run_cancelled.connect(self._run_cancelled)
        w.command_failed.connect(lambda cmd, msg: self.statusBar().showMessage(f"Worker: {cmd} failed: {msg}", 10000))
        self.netlayers = NetworkLayers(self)
        self.collections = Collections(self)
        self.template_editing = TemplateEditing(self)
        self._build_actions()
        self._build_menus()
        add_export_menu(self)
        add_batch_menu(self)
        self.onnx_import = OnnxImport(self)  # File > Import ONNX Model…, .onnx in Open, dropped files
        self.custom = CustomLayers(self)  # Edit > Add/Edit Custom Layer…, the consent prompt
        self._build_toolbar()
        self._default_state = self.saveState()
        self._default_geometry = self.saveGeometry()
        self._restore_last_layout()

        self.autosave_timer = QtCore.QTimer(self)
        self.autosave_timer.setInterval(autosave_interval_ms)
        self.autosave_timer.timeout.connect(self.autosave_now)
        self.autosave_timer.start()
        self._update_actions()

    # ---- construction ----------------------------------------------------------------------------
    def _dock(self, title: str, name: str, widget: QtWidgets.QWidget, area: QtCore.Qt.DockWidgetArea) -> QtWidgets.QDockWidget:
        dock = QtWidgets.QDockWidget(title, self)
        dock.setObjectName(name)
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    def _action(self, text: str, slot: object, shortcut: QtGui.QKeySequence | str | None = None,
                icon: QtWidgets.QStyle.StandardPixmap | None = None, tip: str = "") -> QtGui.QAction:
        act = QtGui.QAction(text, self)
        if shortcut is not None:
            act.setShortcut(QtGui.QKeySequence(shortcut))
        if icon is not None:
            act.setIcon(self.style().standardIcon(icon))
        if tip:
            act.setStatusTip(tip)
        act.triggered.connect(lambda _checked=False: slot())
        return act

    def _build_actions(self) -> None:
        K, P = QtGui.QKeySequence.StandardKey, QtWidgets.QStyle.StandardPixmap
        self.act_new = self._action("&New", self.new_model, K.New, P.SP_FileIcon, "Create an empty model")
        self.act_open = self._action("&Open…", self.open_dialog, K.Open, P.SP_DialogOpenButton, "Open a model file")
        self.act_save = self._action("&Save", self.save, K.Save, P.SP_DialogSaveButton, "Save the current model")
        self.act_save_as = self._action("Save &As…", self.save_as, K.SaveAs)
        self.act_close = self._action("&Close", self.close_current, K.Close)
        self.act_quit = self._action("&Quit", self.close, K.Quit)
        self.act_undo = self._action("&Undo", lambda: self._with_doc(lambda d: d.model.undo()), K.Undo, P.SP_ArrowBack)
        self.act_redo = self._action("&Redo", lambda: self._with_doc(lambda d: d.model.redo()), None,
                                     P.SP_ArrowForward)
        self.act_redo.setShortcuts(REDO_KEYS)  # each bound once (the platform's Redo key is one of them)
        for act, label in ((self.act_undo, "Undo"), (self.act_redo, "Redo")):
            act.setIconText(label)  # the toolbar button keeps this short text; the menu shows the full one
        self.act_cut = self._action("Cu&t", lambda: self._with_doc(lambda d: d.canvas.cut_selection()), K.Cut)
        self.act_copy = self._action("&Copy", lambda: self._with_doc(lambda d: d.canvas.copy_selection()), K.Copy)
        self.act_paste = self._action("&Paste", lambda: self._with_doc(lambda d: d.canvas.paste()), K.Paste)
        self.act_duplicate = self._action("D&uplicate", lambda: self._with_doc(lambda d: d.canvas.duplicate_selection()),
                                          "Ctrl+D")
        self.act_delete = self._action("&Delete", lambda: self._with_doc(lambda d: d.canvas.delete_selection()), K.Delete)
        self.act_select_all = self._action("Select &All", lambda: self._with_doc(lambda d: d.canvas.select_all_layers()),
                                           K.SelectAll)
        self.act_group = self._action("&Group Selection as Template…", self.group_selection, "Ctrl+G", None,
                                      "Make the selected layers a template and replace them by one instance of it")
        self.act_ungroup = self._action("U&ngroup", self.ungroup_selection, "Ctrl+Shift+G", None,
                                        "Replace the selected template instances by their layers")
        self.act_import_template = self._action("&Import Model as Template…", self.import_template, None, None,
                                                "Add a saved model to this network as a template")
        self.act_grid = self._action("Show &Grid", lambda: self.set_grid(self.act_grid.isChecked()))
        self.act_grid.setCheckable(True)
        self.act_grid.setChecked(True)
        self.act_fit = self._action("&Fit to View", lambda: self._with_doc(lambda d: d.canvas.fit()), "F",
                                    P.SP_FileDialogContentsView, "Show the whole network")
        self.act_arrange = self._action("&Arrange", self.arrange, "Ctrl+L", None,
                                        "Lay the network out left to right by depth (the selection only, when "
                                        "several layers are selected); one undo step")
        self.act_zoom_in = self._action("Zoom &In", lambda: self._zoom(0.1), K.ZoomIn)
        self.act_zoom_out = self._action("Zoom &Out", lambda: self._zoom(-0.1), K.ZoomOut)
        self.act_save_layout = self._action("&Save Layout", self.save_layout)
        self.act_apply_layout = self._action("&Apply Layout", self.apply_layout)
        self.act_reset_layout = self._action("&Reset Layout", self.reset_layout)
        self.act_run = self._action("&Launch Inference", self.launch_inference, "F5", P.SP_MediaPlay,
                                    "Run and profile the current model in the background")
        self.act_cancel = self._action("&Cancel Inference", self.cancel_inference, "Shift+F5", P.SP_MediaStop,
                                       "Stop the running inference (within one layer)")
        self.act_net_settings = self._action("&Network Settings…", self.network_settings, "Ctrl+Shift+N",
                                             P.SP_FileDialogDetailedView, "Backend, format, iterations, inputs, weights")
        self.act_fusing_rules = self._action("&Fusing Rules…", self.fusing_rules, None, None,
                                             "The plugins' and this network's fusing rules: switch them, add your own")
        self.act_open_report = self._action("&Open Inference Report…", self.open_report_dialog, None, None,
                                            "Open a report written by a run or by layerlab profile")
        self.act_compare = self._action("Compare Inference &Reports…", self.compare_reports, None, None,
                                        "Compare the layer times of several reports")
        self.act_docs = self._action("Layer &Documentation", self.show_docs, K.HelpContents, P.SP_DialogHelpButton)
        self.act_about = self._action("&About LayerLab", self.about)
        for act in (self.act_delete, self.act_select_all, self.act_fit):
            act.setShortcutContext(QtCore.Qt.ShortcutContext.WindowShortcut)

    def _build_menus(self) -> None:
        mb = self.menuBar()
        file = mb.addMenu("&File")
        file.addActions([self.act_new, self.act_open])
        self.recent_menu = file.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        self._fill_recent()
        file.addSeparator()
        file.addActions([self.act_save, self.act_save_as])
        file.addSeparator()
        file.addActions([self.act_close, self.act_quit])
        edit = mb.addMenu("&Edit")
        edit.addActions([self.act_undo, self.act_redo])
        edit.addSeparator()
        edit.addActions([self.act_cut, self.act_copy, self.act_paste, self.act_duplicate, self.act_delete])
        edit.addSeparator()
        edit.addAction(self.act_select_all)
        edit.addSeparator()
        edit.addActions([self.act_group, self.act_ungroup, self.act_import_template, self.netlayers.act_import])
        edit.addSeparator()
        edit.addAction(self.act_arrange)
        view = mb.addMenu("&View")
        view.addAction(self.act_grid)
        windows = view.addMenu("&Windows")
        self.toolbar_toggle_placeholder = windows
        for dock in (self.palette_dock, self.params_dock, self.check_dock, self.logger_dock, self.log_dock):
            windows.addAction(dock.toggleViewAction())
        view.addSeparator()
        view.addActions([self.act_fit, self.act_zoom_in, self.act_zoom_out])
        view.addSeparator()
        view.addAction(self.analysis.act_inspector)
        tools = mb.addMenu("&Tools")
        tools.addActions([self.act_run, self.act_cancel])
        tools.addSeparator()
        tools.addActions([self.act_net_settings, self.act_fusing_rules, self.collections.act_manage])
        tools.addSeparator()
        tools.addActions([self.act_open_report, self.act_compare])
        tools.addSeparator()
        tools.addAction(self.analysis.act_timings)
        self.tools_menu = tools
        analysis = mb.addMenu("&Analysis")
        analysis.addActions([self.analysis.act_launch, self.analysis.act_stop])
        analysis.addSeparator()
        analysis.addActions([self.analysis.act_inspector, self.analysis.act_rerun])
        analysis.addSeparator()
        analysis.addAction(self.analysis.act_compare)
        self.analysis_menu = analysis
        window = mb.addMenu("&Window")
        window.addActions([self.act_save_layout, self.act_apply_layout, self.act_reset_layout])
        helpm = mb.addMenu("&Help")
        helpm.addActions([self.act_docs, self.act_about])

    def _build_toolbar(self) -> None:
        tb = self.addToolBar("Main")
        tb.setObjectName("MainToolBar")
        tb.setIconSize(QtCore.QSize(18, 18))
        tb.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        tb.addActions([self.act_new, self.act_open, self.act_save])
        tb.addSeparator()
        tb.addActions([self.act_undo, self.act_redo])
        tb.addSeparator()
        tb.addActions([self.act_fit, self.act_docs])
        tb.addSeparator()
        tb.addActions([self.act_run, self.act_cancel, self.act_net_settings])
        tb.addSeparator()
        tb.addActions([self.analysis.act_launch, self.analysis.act_stop])
        self.toolbar_toggle_placeholder.addAction(tb.toggleViewAction())

    # ---- documents -------------------------------------------------------------------------------
    @property
    def current(self) -> Document | None:
        return self._doc_at(self.tabs.currentIndex())

    def _doc_at(self, index: int) -> Document | None:
        widget = self.tabs.widget(index)
        for d in self.docs:
            if d.canvas.widget is widget:
                return d
        return None

    def _report_at(self, index: int) -> ReportView | None:
        widget = self.tabs.widget(index)
        return widget if isinstance(widget, ReportView) and widget in self.reports else None

    @property
    def current_report(self) -> ReportView | None:
        return self._report_at(self.tabs.currentIndex())

    def run_target(self) -> Document | None:
        """The model a run or the network settings apply to: the current model tab, or the model of the
        current report tab."""
        if self.current is not None:
            return self.current
        view = self.current_report
        return self.doc_for_report(view) if view is not None else None

    def document_by_id(self, doc_id: int | None) -> Document | None:
        return next((d for d in self.docs if d.id == doc_id), None)

    def close_tab(self, index: int) -> bool:
        view = self._report_at(index)
        if view is not None:
            return self.close_report(view)
        return self.close_document(self._doc_at(index))

    def format_menu_items(self) -> list[tuple[str, QtGui.QAction]]:
        """The layer right-click menu's Precision and Layout entries (``app.layer_format``), made once."""
        from app import layer_format as lf  # noqa: PLC0415

        if not hasattr(self, "_format_actions"):
            items = [(f"Precision: {c}", lambda c=c: self._with_doc(
                lambda d: lf.set_precision(d.model, d.canvas.selected_layers(), c))) for c in lf.PRECISION_CHOICES]
            items += [(f"Layout: {c}", lambda c=c: self._with_doc(
                lambda d: lf.set_layout(d.model, d.canvas.selected_layers(), c))) for c in lf.LAYOUT_CHOICES]
            self._format_actions = [(text, self._action(text, slot)) for text, slot in items]
        return self._format_actions

    def _with_doc(self, fn: object) -> None:
        doc = self.current
        if doc is not None:
            try:
                fn(doc)  # type: ignore[operator]
            except LayerLabError as exc:
                self.statusBar().showMessage(str(exc), 8000)

    def add_document(self, model: Model, path: str | None = None) -> Document:
        """Open ``model`` in a new tab and make it current."""
        doc = Document(model, self.registry, path, self)
        doc.canvas.show_grid(self.act_grid.isChecked())
        self.docs.append(doc)
        doc.state_changed.connect(lambda d=doc: self._doc_state_changed(d))
        doc.checked.connect(lambda diags, d=doc: self._doc_checked(d, diags))
        doc.canvas.selection_changed.connect(lambda names, d=doc: self._selection_changed(d, names))
        doc.canvas.status_message.connect(lambda msg: self.statusBar().showMessage(msg, 6000))
        doc.bridge.event.connect(lambda ev, d=doc: self._doc_event(d, ev))
        self.netlayers.attach(doc)
        self.template_editing.attach(doc)
        self.onnx_import.attach(doc)
        doc.canvas.set_context_actions(
            [("Group as Template…", self.act_group), ("Ungroup", self.act_ungroup), None,
             ("Cut", self.act_cut), ("Copy", self.act_copy), ("Duplicate", self.act_duplicate), ("Delete", self.act_delete),
             None, *self.format_menu_items(), None, ("Edit Custom Layer…", self.custom.act_edit),
             ("Layer Documentation", self.act_docs)],
            [("Paste", self.act_paste), ("Select All", self.act_select_all), None,
             ("Import Model as Template…", self.act_import_template), ("Arrange", self.act_arrange),
             ("Fit to View", self.act_fit)])
        index = self.tabs.addTab(doc.canvas.widget, doc.title)
        self.tabs.setCurrentIndex(index)
        self._doc_state_changed(doc)
        QtCore.QTimer.singleShot(0, doc.canvas.fit)
        return doc

    def new_model(self) -> Document:
        names = {d.model.name for d in self.docs}
        name, n = "network", 1
        while name in names:
            n += 1
            name = f"network_{n}"
        return self.add_document(Model(name))

    def open_path(self, path: str | os.PathLike[str]) -> Document | None:
        """Open a model file (or switch to its tab); errors are shown, not raised. An ``.onnx`` file is imported in
        the background into a new tab (None is returned; ``self.onnx_import`` shows the import)."""
        if is_importable(path):
            self.onnx_import.import_file(path)
            return None
        path = str(Path(path).resolve())
        for d in self.docs:
            if d.path and Path(d.path).resolve() == Path(path):
                self.tabs.setCurrentWidget(d.canvas.widget)
                return d
        try:
            model = modelfile.load(path, self.registry)
        except LayerLabError as exc:
            QtWidgets.QMessageBox.critical(self, "Cannot open model", str(exc))
            self.statusBar().showMessage(str(exc), 10000)
            return None
        doc = self.add_document(model, path)
        self._add_recent(path)
        msg = f"Opened {path}"
        if model.load_warnings:
            msg += f" — {len(model.load_warnings)} warning(s): " + "; ".join(model.load_warnings[:3])
        self.statusBar().showMessage(msg, 10000)
        return doc

    def open_dialog(self) -> None:
        start = str(Path(self.current.path).parent) if self.current and self.current.path else str(SAMPLE.parent)
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Open model", start, OPEN_FILTER)
        if path:
            self.open_path(path)

    def save(self, doc: Document | None = None) -> bool:
        doc = doc or self.current
        if doc is None:
            return False
        if self.template_editing.handles(doc):  # a template's definition: saved back into its model(s)
            return self.template_editing.save(doc)
        if not doc.path:
            return self.save_as(doc)
        return self._write(doc, doc.path)

    def save_as(self, doc: Document | None = None, path: str | None = None) -> bool:
        doc = doc or self.current
        if doc is None:
            return False
        if path is None:
            start = doc.path or str(Path.cwd() / f"{doc.model.name}.lnet")
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save model as", start, FILE_FILTER)
            if not path:
                return False
            if not Path(path).suffix:
                path += ".lnet"
        return self._write(doc, path)

    def _write(self, doc: Document, path: str) -> bool:
        try:
            self.onnx_import.before_save(doc, path)  # an imported model's weights: a .safetensors next to it
            modelfile.save(doc.model, path)
        except (OSError, LayerLabError) as exc:
            QtWidgets.QMessageBox.critical(self, "Cannot save model", f"{path}: {exc}")
            return False
        doc.mark_saved(str(Path(path).resolve()))
        if doc is self.current:
            self.params.set_target(doc, doc.canvas.selected_layers())  # its File line shows the new path
        self.autosaver.remove(doc.id)
        self._add_recent(doc.path)
        self.statusBar().showMessage(f"Saved {doc.path}", 6000)
        return True

    def maybe_save(self, doc: Document) -> bool:
        """Ask before losing unsaved changes; False means the user cancelled."""
        if not doc.modified:
            return True
        self.tabs.setCurrentWidget(doc.canvas.widget)
        B = QtWidgets.QMessageBox.StandardButton
        answer = QtWidgets.QMessageBox.question(
            self, "Unsaved changes", f"{doc.title} has unsaved changes. Save them before closing?",
            B.Save | B.Discard | B.Cancel, B.Save)
        if answer == B.Save:
            return self.save(doc)
        return answer == B.Discard

    def close_document(self, doc: Document | None) -> bool:
        if doc is None:
            return False
        if not self.maybe_save(doc):
            doc.canvas.reset_modifiers()  # the dialog took the Ctrl release of Ctrl+W
            return False
        self.autosaver.remove(doc.id)
        index = self.tabs.indexOf(doc.canvas.widget)
        self.docs.remove(doc)
        self.tabs.removeTab(index)
        doc.close()
        doc.canvas.widget.deleteLater()
        doc.deleteLater()
        self._current_changed()
        return True

    def close_current(self) -> None:
        self.close_tab(self.tabs.currentIndex())

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802 (Qt API)
        for doc in list(self.docs):
            if not self.maybe_save(doc):
                event.ignore()
                return
        self.settings.setValue("layout/last_state", self.saveState())
        self.settings.setValue("layout/last_geometry", self.saveGeometry())
        for doc in list(self.docs):
            self.autosaver.remove(doc.id)
        self.autosave_timer.stop()
        if self.docs_browser is not None:
            self.docs_browser.close()
        for dlg in list(self.compare_dialogs):
            dlg.close()
        self.runner.worker.request_cancel()  # a running inference stops before its next layer
        self.analysis.shutdown()  # a paused analysis is aborted, then stopped in the worker thread
        self.runner.shutdown()
        self.log_panel.detach()
        event.accept()

    # ---- recent files ----------------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        value = self.settings.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in value or []]

    def _add_recent(self, path: str) -> None:
        files = [path] + [p for p in self.recent_files() if p != path]
        self.settings.setValue("recent", files[:MAX_RECENT])
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        files = self.recent_files()
        for p in files:
            act = self.recent_menu.addAction(Path(p).name)
            act.setToolTip(p)
            act.setStatusTip(p)
            act.triggered.connect(lambda _c=False, p=p: self.open_path(p))
        if not files:
            self.recent_menu.addAction("(none)").setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear Menu", lambda: (self.settings.setValue("recent", []), self._fill_recent()))

    # ---- reactions -------------------------------------------------------------------------------
    def _doc_state_changed(self, doc: Document) -> None:
        index = self.tabs.indexOf(doc.canvas.widget)
        if index >= 0:
            self.tabs.setTabText(index, doc.title + (" *" if doc.modified else ""))
            self.tabs.setTabToolTip(index, doc.path or "not saved yet")
        if doc is self.current:
            self._update_title()
        self._update_actions()

    def _doc_event(self, doc: Document, ev: Event) -> None:
        if doc is self.current:
            if isinstance(ev, (TemplateEvent, CustomLayerChanged)):
                self._refresh_templates()
            self._update_actions()
            # an event comes while its command runs, before the undo stack records it: look again afterwards
            if not self._actions_pending:
                self._actions_pending = True
                QtCore.QTimer.singleShot(0, self._update_actions_later)

    def _update_actions_later(self) -> None:
        self._actions_pending = False
        self._update_actions()

    def _doc_checked(self, doc: Document, diags: list) -> None:
        if doc is self.current:
            self.checks.show_diagnostics(diags)
            self._update_status()

    def _selection_changed(self, doc: Document, names: list[str]) -> None:
        if doc is self.current:
            self.params.set_target(doc, names)
            self._update_actions()
        if len(names) == 1:  # the canvas selects the layer's row in the model's reports
            row = self._report_row(doc, names[0])
            for view in self.reports:
                if self.doc_for_report(view) is doc:
                    view.select_layer(row)

    def _current_changed(self, _index: int = -1) -> None:
        doc = self.current
        self.params.set_target(doc, doc.canvas.selected_layers() if doc else [])
        self.checks.show_diagnostics(doc.diagnostics if doc else [])
        self._refresh_templates()
        if doc is not None:
            self.act_grid.setChecked(doc.canvas.grid_shown)
            if self.fusing_dialog is not None and self.fusing_dialog.isVisible():
                self.fusing_dialog.set_bridge(doc.bridge)
        self._update_title()
        self._update_actions()
        self._update_status()

    def _update_title(self) -> None:
        doc = self.current
        if doc is None:
            self.setWindowTitle(APP_NAME)
            self.setWindowModified(False)
            return
        self.setWindowTitle(f"{doc.title}[*] — {APP_NAME}")
        self.setWindowModified(doc.modified)

    def _update_status(self) -> None:
        doc = self.current
        if doc is None:
            self.status_label.setText("")
            return
        n_err = sum(d.severity == "error" for d in doc.diagnostics)
        n_warn = len(doc.diagnostics) - n_err
        self.status_label.setText(f"{doc.model.name} {doc.model.version} · {len(doc.model.layers)} layers · "
                                  f"{n_err} errors · {n_warn} warnings")

    def _update_actions(self) -> None:
        doc = self.current
        has = doc is not None
        self.act_undo.setEnabled(has and doc.model.can_undo())
        self.act_redo.setEnabled(has and doc.model.can_redo())
        for act, label, able, what in ((self.act_undo, "Undo", has and doc.model.can_undo(),
                                        doc.model.undo_text() if has else ""),
                                       (self.act_redo, "Redo", has and doc.model.can_redo(),
                                        doc.model.redo_text() if has else "")):
            act.setText(f"&{label} {what}" if able else f"&{label}")
            act.setIconText(label)
            keys = ", ".join(k.toString(QtGui.QKeySequence.SequenceFormat.NativeText) for k in act.shortcuts())
            act.setToolTip(f"{label} {what} ({keys})" if able else f"{label} ({keys})")
        selected = has and bool(doc.canvas.selected_layers())
        for act in (self.act_cut, self.act_copy, self.act_duplicate, self.act_group):
            act.setEnabled(selected)
        self.act_ungroup.setEnabled(selected and any(
            template_name(doc.model.layers[n].type) for n in doc.canvas.selected_layers()))
        self.act_import_template.setEnabled(has)
        for act in (self.act_save, self.act_save_as, self.act_paste, self.act_delete,
                    self.act_select_all, self.act_fit, self.act_zoom_in, self.act_zoom_out, self.act_arrange):
            act.setEnabled(has)
        self.act_close.setEnabled(has or self.current_report is not None)
        target = self.run_target() is not None
        self.act_run.setEnabled(target and not self.runner.busy and not self.analysis.active)
        self.act_cancel.setEnabled(self.runner.busy)
        self.act_net_settings.setEnabled(target)
        self.custom.update_actions()
        self.act_fusing_rules.setEnabled(has)
        self._update_status()

    # ---- editing and view ------------------------------------------------------------------------
    def add_layer(self, layer_type: str) -> str | None:
        """Add a layer at the centre of the current canvas (a new model is created if none is open)."""
        doc = self.current or self.new_model()
        return doc.canvas.add_layer(layer_type)

    # ---- templates -------------------------------------------------------------------------------
    def _refresh_templates(self) -> None:
        """The palette's Templates category shows the current model's templates."""
        doc = self.current
        self.palette.set_templates([*template_descs(doc.model, doc.registry), *custom_descs(doc.model)] if doc else [])

    @staticmethod
    def default_template_name(model: Model) -> str:
        """``template1``, ``template2``, ...: the first one neither a template nor a layer of ``model`` uses."""
        n = 1
        while f"template{n}" in model.templates or f"template{n}_1" in model.layers:
            n += 1
        return f"template{n}"

    def group_selection(self, name: str | None = None) -> str | None:
        """Edit > Group Selection as Template: with ``name``, group now and return the instance's name; without,
        ask for the name in a non-modal dialog (``self.template_dialog``) and group when it is accepted."""
        doc = self.current
        if doc is None:
            return None
        names = doc.canvas.selected_layers()
        if not names:
            self.statusBar().showMessage("Select the layers to group as a template", 5000)
            return None
        if name is None:
            self._ask_template_name("Group as Template",
                                    f"Name of the new template ({len(names)} layer(s): {', '.join(names[:6])}"
                                    f"{'…' if len(names) > 6 else ''}):", self.default_template_name(doc.model),
                                    lambda text, d=doc, n=names: self._group(d, n, text))
            return None
        return self._group(doc, names, name)

    def _ask_template_name(self, title: str, label: str, value: str, accepted: Any) -> None:
        """Ask for a template name in a dialog that does not block (``self.template_dialog``); ``accepted`` gets
        the stripped text when it is accepted."""
        dlg = QtWidgets.QInputDialog(self)
        dlg.setWindowTitle(title)
        dlg.setLabelText(label)
        dlg.setTextValue(value)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.textValueSelected.connect(lambda text: accepted(text.strip()))
        self.template_dialog = dlg
        dlg.open()

    def _group(self, doc: Document, names: list[str], name: str) -> str | None:
        try:
            instance = group(doc.model, names, name, doc.registry)
        except LayerLabError as exc:
            self._warn("Cannot group as a template", str(exc))
            return None
        doc.canvas.select_layers([instance])
        self.statusBar().showMessage(f"Grouped {len(names)} layers as template {name}: instance {instance}", 8000)
        return instance

    def _palette_template_action(self, action: str, name: str) -> None:
        if action == "add":
            self.add_layer(template_type(name))
        elif action == "exposed":
            self.edit_exposed(name)
        elif action == "delete":
            self.delete_template(name)
        elif action == "rename":
            self.rename_template(name)
        elif action == "edit":
            self.template_editing.edit_template(name)

    def rename_template(self, name: str, new: str | None = None) -> bool:
        """Rename template ``name`` of the current model, its instances following (one undo step); without
        ``new``, ask for it in a non-modal dialog (``self.template_dialog``) and rename when it is accepted."""
        doc = self.current
        if doc is None:
            return False
        if new is None:
            self._ask_template_name("Rename Template", f"New name of template {name} (its instances follow):", name,
                                    lambda text, n=name: self.rename_template(n, text))
            return False
        try:
            rename_template(doc.model, name, new, doc.registry)
        except LayerLabError as exc:
            self._warn("Cannot rename the template", str(exc))
            return False
        self.statusBar().showMessage(f"Renamed template {name} to {new}", 6000)
        return True

    def edit_exposed(self, name: str) -> None:
        """Open the dialog choosing the exposed parameters of template ``name`` of the current model."""
        doc = self.current
        if doc is not None:
            self.params.set_target(doc, doc.canvas.selected_layers())
            self.params.edit_exposed(name)

    def delete_template(self, name: str) -> bool:
        """Delete template ``name`` from the current model (refused, with the reason, while it is used)."""
        doc = self.current
        if doc is None:
            return False
        try:
            doc.model.remove_template(name)
        except LayerLabError as exc:
            self._warn("Cannot delete the template", str(exc))
            return False
        self.statusBar().showMessage(f"Deleted template {name}", 6000)
        return True

    def _warn(self, title: str, text: str) -> None:
        """Show a problem in the status bar and in a message box that does not block (``self.message_box``)."""
        self.statusBar().showMessage(text, 10000)
        box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Icon.Warning, title, text,
                                    QtWidgets.QMessageBox.StandardButton.Ok, self)
        box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        self.message_box = box
        box.open()

    def ungroup_selection(self) -> list[str]:
        """Edit > Ungroup: replace the selected template instances by their layers (one undo step)."""
        doc = self.current
        if doc is None:
            return []
        instances = [n for n in doc.canvas.selected_layers() if template_name(doc.model.layers[n].type)]
        if not instances:
            self.statusBar().showMessage("Select a template instance to ungroup", 5000)
            return []
        new: list[str] = []
        try:
            with doc.model.macro("Ungroup " + ", ".join(instances)):
                for inst in instances:
                    new += ungroup(doc.model, inst, doc.registry)
        except LayerLabError as exc:
            self.statusBar().showMessage(f"Cannot ungroup: {exc}", 10000)
            return []
        doc.canvas.select_layers(new)
        self.statusBar().showMessage(f"Ungrouped {', '.join(instances)} into {len(new)} layers", 8000)
        return new

    def import_template(self, path: str | os.PathLike[str] | None = None, name: str | None = None) -> str | None:
        """Edit > Import Model as Template: add a saved model to the current one as a template (asks for the
        file when ``path`` is None); returns the template's name."""
        doc = self.current
        if doc is None:
            return None
        if path is None:
            start = str(Path(doc.path).parent) if doc.path else str(SAMPLE.parent)
            path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Import model as template", start, FILE_FILTER)
            if not path:
                return None
        try:
            added = modelfile.import_model_as_template(doc.model, path, self.registry, name)
        except LayerLabError as exc:
            self._warn("Cannot import the model as a template", str(exc))
            return None
        self.statusBar().showMessage(f"Imported {Path(path).name} as template {added}: add it from the palette's "
                                     "Templates category", 8000)
        return added

    def focus_layer(self, name: str) -> None:
        doc = self.current
        if doc is not None and name in doc.canvas.nodes:
            doc.canvas.focus_layer(name)

    def arrange(self) -> int:
        """Edit > Arrange: a layered layout of the current network (of the selection when it holds several
        layers), undoable in one step; the view is fitted to the result."""
        doc = self.current
        if doc is None:
            return 0
        selected = doc.canvas.selected_layers()
        moved = doc.canvas.arrange(selected if len(selected) > 1 else None)
        if moved:
            doc.canvas.fit()
        return moved

    def set_grid(self, on: bool) -> None:
        self.act_grid.setChecked(on)
        for doc in self.docs:
            doc.canvas.show_grid(on)

    def _zoom(self, step: float) -> None:
        doc = self.current
        if doc is not None:
            doc.canvas.zoom(1 if step > 0 else -1)

    # ---- layouts ---------------------------------------------------------------------------------
    def save_layout(self) -> None:
        self.settings.setValue("layout/saved_state", self.saveState())
        self.settings.setValue("layout/saved_geometry", self.saveGeometry())
        self.statusBar().showMessage("Window layout saved", 4000)

    def apply_layout(self) -> bool:
        state = self.settings.value("layout/saved_state")
        if state is None:
            self.statusBar().showMessage("No saved layout yet (Window > Save Layout)", 4000)
            return False
        self.restoreState(state)
        return True

    def reset_layout(self) -> None:
        self.restoreState(self._default_state)
        for dock in (self.palette_dock, self.params_dock, self.check_dock, self.logger_dock, self.log_dock):
            dock.show()

    def _restore_last_layout(self) -> None:
        geometry = self.settings.value("layout/last_geometry")
        state = self.settings.value("layout/last_state")
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is not None:
            self.restoreState(state)

    # ---- autosave and recovery -------------------------------------------------------------------
    def autosave_now(self) -> None:
        """Write an autosave copy of every modified model (and drop copies of unmodified ones)."""
        for doc in self.docs:
            if doc.modified:
                try:
                    self.autosaver.write(doc.id, doc.model, doc.path, doc.title)
                except OSError as exc:
                    self.statusBar().showMessage(f"Autosave failed: {exc}", 8000)
            else:
                self.autosaver.remove(doc.id)

    def start_kernel_warmup(self) -> None:
        """At the first start after installing, compile the CPU kernels in another process
        (``engine.backends.cpu.warmup``), so that the first CPU inference starts at once; the status bar says so."""
        from engine.backends.cpu import warmup  # noqa: PLC0415

        try:
            self.warmup_process = warmup.start_in_background()
        except OSError as exc:
            self.statusBar().showMessage(f"Could not start compiling the CPU kernels ({exc}): the first CPU run "
                                         "compiles them", 10000)
            return
        if self.warmup_process is None:
            return
        self.statusBar().showMessage("Compiling the CPU kernels in the background (first start after installing, "
                                     "about half a minute)")
        self._warmup_timer = QtCore.QTimer(self)
        self._warmup_timer.setInterval(500)
        self._warmup_timer.timeout.connect(self._check_warmup)
        self._warmup_timer.start()

    def _check_warmup(self) -> None:
        rc = self.warmup_process.poll() if self.warmup_process is not None else 0
        if rc is None:
            return
        self._warmup_timer.stop()
        self.statusBar().showMessage("CPU kernels compiled" if rc == 0 else
                                     f"Compiling the CPU kernels failed (exit status {rc}): the first CPU run compiles "
                                     "them", 10000)

    def offer_recovery(self) -> list[Document]:
        """After a crash: offer to reopen the autosave copies left behind; returns the recovered documents."""
        found = self.autosaver.recoverable()
        if not found:
            return []
        B = QtWidgets.QMessageBox.StandardButton
        names = "\n".join(f"  • {r.title}" + (f" ({r.original_path})" if r.original_path else "") for r in found)
        answer = QtWidgets.QMessageBox.question(
            self, "Recover unsaved models",
            f"LayerLab did not close cleanly. Autosaved copies of these models were found:\n{names}\n\nRecover them?",
            B.Yes | B.No, B.Yes)
        recovered = []
        for r in found:
            if answer == B.Yes:
                try:
                    model = modelfile.load(r.model_file, self.registry)
                except LayerLabError as exc:
                    self.statusBar().showMessage(f"Cannot recover {r.title}: {exc}", 10000)
                    continue
                model.path = r.original_path
                doc = self.add_document(model, r.original_path)
                doc.recovered = True
                self._doc_state_changed(doc)
                recovered.append(doc)
            r.discard()
        if recovered:
            self.autosave_now()
            self.statusBar().showMessage(f"Recovered {len(recovered)} model(s); save them to keep the changes", 10000)
        return recovered

    # ---- runs ------------------------------------------------------------------------------------
    def network_settings(self, doc: Document | None = None) -> NetworkSettingsDialog | None:
        """Open Tools > Network Settings for ``doc`` (default: the run target); non-blocking, applied on OK."""
        doc = doc or self.run_target()
        if doc is None:
            self.statusBar().showMessage("Open a model first", 4000)
            return None
        dlg = NetworkSettingsDialog(doc.model, doc.path, self)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.accepted.connect(lambda: self.statusBar().showMessage(f"Network settings of {doc.model.name} updated", 5000))
        dlg.open()
        return dlg

    def fusing_rules(self) -> FusingRulesDialog | None:
        """Open Tools > Fusing Rules for the current model (non-modal; it follows the current tab)."""
        doc = self.current
        if doc is None:
            self.statusBar().showMessage("Open a model first", 4000)
            return None
        if self.fusing_dialog is None:
            self.fusing_dialog = FusingRulesDialog(doc.bridge, self.registry, self)
        else:
            self.fusing_dialog.set_bridge(doc.bridge)
        self.fusing_dialog.show()
        self.fusing_dialog.raise_()
        return self.fusing_dialog

    def _new_report_base(self, doc: Document, started: _dt.datetime) -> Path:
        folder = reports_folder(doc, self.reports_dir)
        stamp = started.strftime("%Y%m%d-%H%M%S")
        base, n = folder / stamp, 1
        while any(base.with_suffix(ext).exists() for ext in (".json", ".html", ".lnet")) or \
                any(r.report_base == base for r in self._runs.values()):
            n += 1
            base = folder / f"{stamp}_{n}"
        return base

    def launch_inference(self, doc: Document | None = None) -> int | None:
        """Start a run of ``doc`` (default: the run target) in the worker; returns its run id, or None when
        it could not start (the reason is in the logger and the status bar)."""
        doc = doc or self.run_target()
        if doc is None:
            self.statusBar().showMessage("Open a model to run it", 5000)
            return None
        if self.runner.busy:
            self.statusBar().showMessage("A run is already in progress: wait for it or cancel it", 6000)
            return None
        if self.analysis.active:
            self.statusBar().showMessage("Analysis is running: Stop Analysis before launching an inference run", 6000)
            return None
        if not self.custom.ensure_consent(doc, lambda d=doc: self.launch_inference(d)):
            return None  # asking: the run starts when the user accepts
        self._run_ids += 1
        run_id = self._run_ids
        started = _dt.datetime.now()
        entry = RunEntry(run_id, started, doc.model.name)
        try:
            doc.run_check()  # diagnostics of the latest edit, not of the debounced one
            errors = [d for d in doc.diagnostics if d.severity == "error"]
            if errors:
                raise LayerLabError(f"the model has {len(errors)} type-check error(s); the first: {errors[0]}")
            config = run_config.from_model(doc.model, doc.path)
            base = self._new_report_base(doc, started)
            snapshot = doc.path is None or doc.modified
            model_file = str(base.with_suffix(".lnet")) if snapshot else str(doc.path)
            entry.command = run_config.command_line(config, model_file, str(base) + "_cli")
            if used_definitions(doc.model):  # the user consented to run its custom layer code
                entry.command += " --trust-custom-code"
            entry.format = config.format
            entry.backend = config.backend
        except LayerLabError as exc:
            entry.status, entry.reason = "failed", str(exc)
            self.logger.add(entry)
            self.logger_dock.show()
            self.statusBar().showMessage(f"Run not started: {exc}", 10000)
            return None
        req = RunRequest(run_id, doc.id, doc.model.copy(), self.registry, config, base, model_file,
                         write_snapshot=snapshot, command=entry.command, started=started)
        self._runs[run_id] = req
        self.logger.add(entry)
        self.runner.start(req)
        self.run_label.setText(f"Running {doc.model.name}: starting…")
        self.run_progress.setRange(0, 0)
        self.run_label.show()
        self.run_progress.show()
        self._update_actions()
        return run_id

    def cancel_inference(self) -> bool:
        if not self.runner.cancel():
            return False
        self.run_label.setText(self.run_label.text().split(":")[0] + ": cancelling…")
        return True

    def _run_name(self, run_id: int) -> str:
        req = self._runs.get(run_id)
        return req.model.name if req else "model"

    def _run_started(self, run_id: int, backend: str, device: str, fmt: str) -> None:
        self.logger.update_entry(run_id, backend=backend, device=device, format=fmt)

    def _run_phase(self, run_id: int, text: str) -> None:
        if run_id == self.runner.current_run:
            self.run_label.setText(f"Running {self._run_name(run_id)}: {text}…")

    def _run_progress(self, run_id: int, i: int, n: int) -> None:
        if run_id == self.runner.current_run:
            self.run_label.setText(f"Running {self._run_name(run_id)}: iteration {i} of {n}")
            self.run_progress.setRange(0, n)
            self.run_progress.setValue(i)

    def _run_ended(self, run_id: int, message: str) -> None:
        self._runs.pop(run_id, None)
        self.run_label.hide()
        self.run_progress.hide()
        self.statusBar().showMessage(message, 12000)
        self._update_actions()

    def _run_finished(self, run_id: int, result: RunResult) -> None:
        self.logger.update_entry(run_id, status="done", avg_ms=result.avg_ms, report_path=str(result.json_path))
        name = self._run_name(run_id)
        self._run_ended(run_id, f"Run of {name} done: {result.avg_ms:.3f} ms per iteration ({result.backend}, "
                                f"{result.format}); report {result.json_path}")
        self.show_run_report(result)

    def _run_failed(self, run_id: int, reason: str) -> None:
        self.logger.update_entry(run_id, status="failed", reason=reason)
        self.logger_dock.show()
        self._run_ended(run_id, f"Run of {self._run_name(run_id)} failed: {reason}")

    def _run_cancelled(self, run_id: int) -> None:
        self.logger.update_entry(run_id, status="cancelled")
        self._run_ended(run_id, f"Run of {self._run_name(run_id)} cancelled")

    # ---- reports ---------------------------------------------------------------------------------
    def doc_for_report(self, view: ReportView) -> Document | None:
        """The open model a report belongs to: the one it was run from, else the one with its model file."""
        doc = self.document_by_id(view.doc_id)
        if doc is not None:
            return doc
        path = view.model_path
        if path:
            for d in self.docs:
                if d.path and Path(d.path).resolve() == Path(path).resolve():
                    return d
        return None

    def _add_report_view(self, report: dict, path: str | None, doc_id: int | None) -> ReportView:
        view = ReportView(report, path, doc_id)
        view.layer_selected.connect(lambda name, v=view: self._report_layer_selected(v, name))
        view.layer_activated.connect(lambda name, v=view: self._report_layer_activated(v, name))
        view.compare_requested.connect(lambda p: self.compare_reports([p] if p else None))
        self.reports.append(view)
        index = self.tabs.addTab(view, self.style().standardIcon(QtWidgets.QStyle.StandardPixmap.SP_FileDialogInfoView),
                                 view.tab_title)
        self.tabs.setTabToolTip(index, path or "")
        return view

    def show_run_report(self, result: RunResult) -> ReportView:
        """Show a finished run's report in its model's report tab (made current when the user is looking at
        that model or its report)."""
        view = self._live_reports.get(result.doc_id) if result.doc_id is not None else None
        doc = self.document_by_id(result.doc_id)
        looking = self.tabs.currentWidget() in ((doc.canvas.widget if doc else None), view) or self.tabs.count() == 0
        if view is not None and view in self.reports:
            view.set_report(result.report, str(result.json_path))
            index = self.tabs.indexOf(view)
            self.tabs.setTabText(index, view.tab_title)
            self.tabs.setTabToolTip(index, str(result.json_path))
        else:
            view = self._add_report_view(result.report, str(result.json_path), result.doc_id)
            if result.doc_id is not None:
                self._live_reports[result.doc_id] = view
        if doc is not None:
            sel = doc.canvas.selected_layers()
            if len(sel) == 1:
                view.select_layer(self._report_row(doc, sel[0]))
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
            self.statusBar().showMessage(str(exc), 10000)
            QtWidgets.QMessageBox.critical(self, "Cannot open report", str(exc))
            return None
        view = self._add_report_view(report, path, None)
        self.tabs.setCurrentWidget(view)
        return view

    def _reports_start_dir(self) -> str:
        doc = self.run_target()
        if doc is not None:
            folder = reports_folder(doc, self.reports_dir)
            if folder.is_dir():
                return str(folder)
        view = self.current_report
        return str(Path(view.path).parent) if view is not None and view.path else str(Path.cwd())

    def open_report_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Open inference report", self._reports_start_dir(), REPORT_FILTER)
        if path:
            self.open_report(path)

    def close_report(self, view: ReportView) -> bool:
        index = self.tabs.indexOf(view)
        if index < 0:
            return False
        self.reports.remove(view)
        self._live_reports = {k: v for k, v in self._live_reports.items() if v is not view}
        self.tabs.removeTab(index)
        view.deleteLater()
        self._current_changed()
        return True

    def compare_reports(self, paths: list[str] | None = None) -> CompareDialog | None:
        """Tools > Compare Inference Reports: asks for report files until there are two or more."""
        start = self._reports_start_dir()
        paths = list(paths or [])
        if len(paths) < 2:
            picked, _ = QtWidgets.QFileDialog.getOpenFileNames(self, "Reports to compare", start, REPORT_FILTER)
            paths += [p for p in picked if p not in paths]
        if not paths:
            return None
        dlg = CompareDialog(paths, start, self)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.finished.connect(lambda _r, d=dlg: self.compare_dialogs.remove(d) if d in self.compare_dialogs else None)
        self.compare_dialogs.append(dlg)
        dlg.show()
        return dlg

    def _report_layer_selected(self, view: ReportView, name: str) -> None:
        doc = self.doc_for_report(view)
        if doc is None:
            return
        layer = self._canvas_layer(doc, name)
        if layer is not None:
            doc.canvas.select_layers([layer])
        else:
            self.statusBar().showMessage(f"{name} is not on the canvas of {doc.title} (fused or renamed)", 6000)

    def _report_layer_activated(self, view: ReportView, name: str) -> None:
        doc = self.doc_for_report(view)
        if doc is None:
            self.statusBar().showMessage(f"The model of this report ({view.model_name}) is not open", 6000)
            return
        self.tabs.setCurrentWidget(doc.canvas.widget)
        self.focus_layer(self._canvas_layer(doc, name) or name)

    @staticmethod
    def _report_row(doc: Document, name: str) -> str:
        """The network layer a canvas layer stands for in reports: a template instance's output layer."""
        spec = doc.model.layers.get(name)
        if spec is None or (template_name(spec.type) is None and network_file(spec.type) is None):
            return name
        return expand_all(doc.model, doc.registry, strict=False).output_of.get(name, name)

    @staticmethod
    def _canvas_layer(doc: Document, name: str) -> str | None:
        """The canvas layer showing a network layer: itself, or the template instance an expanded layer
        (``<instance>__<layer>``) comes from."""
        if name in doc.canvas.nodes:
            return name
        instance = name.split("__")[0]
        if "__" in name and instance in doc.model.layers and (template_name(doc.model.layers[instance].type)
                                                              or network_file(doc.model.layers[instance].type)):
            return instance
        return None

    # ---- help ------------------------------------------------------------------------------------
    def show_docs(self, key: str | None = None) -> DocsBrowser:
        if self.docs_browser is None:
            self.docs_browser = DocsBrowser(self.registry, self)
        self.docs_browser.set_templates([*template_descs(self.current.model, self.current.registry),
                                         *custom_descs(self.current.model)] if self.current else [])
        if key is None and self.current is not None:
            sel = self.current.canvas.selected_layers()
            if sel:
                key = "layer:" + self.current.model.layers[sel[0]].type
        if key:
            self.docs_browser.show_entry(key)
        self.docs_browser.show()
        self.docs_browser.raise_()
        return self.docs_browser

    def about(self) -> None:
        plugins = ", ".join(f"{p.meta.name} {p.meta.version}" for p in self.registry.plugins.values())
        QtWidgets.QMessageBox.about(
            self, "About LayerLab",
            "<h3>LayerLab</h3><p>Design, run, profile and export convolutional networks.</p>"
            f"<p>{len(self.registry.layer_names)} layers and {len(self.registry.activation_names)} activations "
            f"from: {plugins}</p><p>Qt {QtCore.qVersion()}</p>")
