"""The designer's main window: model tabs (one canvas each) and report tabs, the palette, parameter, type-check,
run-logger and log docks, and the File / Edit / View / Tools / Analysis / Window / Help menus.

The window composes its parts and wires them together; each part is a controller in its own module that receives a
:class:`~app.designer.context.DesignerContext`, never the window. Runs go to the worker thread (app.designer.worker);
the window only sends commands and shows what comes back."""
from __future__ import annotations

import os

from PySide6 import QtCore, QtGui, QtWidgets

from app.analysis.mode import AnalysisMode
from app.designer.autosave import Autosaver
from app.designer.batch_dialog import add_batch_menu
from app.designer.collections_dialog import Collections
from app.designer.context import DesignerContext
from app.designer.custom_layers import CustomLayers
from app.designer.document import Document
from app.designer.editing import Editing, make_action
from app.designer.export_dialog import add_export_menu
from app.designer.files import Files
from app.designer.help import Help
from app.designer.log_panel import LogPanel
from app.designer.netlayers_ui import NetworkLayers
from app.designer.onnx_import import OnnxImport
from app.designer.overlay import CanvasFigures
from app.designer.palette import Palette
from app.designer.params import ParamPanel
from app.designer.recent import RecentFiles
from app.designer.recovery import AUTOSAVE_INTERVAL_MS, Autosave, default_autosave_dir
from app.designer.reports import Reports, default_reports_dir
from app.designer.run_logger import RunLogger
from app.designer.runs import Runs
from app.designer.templates import Templates
from app.designer.typecheck_panel import TypeCheckPanel
from app.designer.warmup import KernelWarmup
from app.designer.worker import RunController
from app.designer.workspace import SAMPLE, Workspace
from app.docks import add_dock
from engine.events import CustomLayerChanged, Event, TemplateEvent
from engine.plugins import default_registry
from engine.registry import Registry
from engine.templates import template_name

__all__ = ["SAMPLE", "MainWindow"]

APP_NAME = "LayerLab"
REDO_KEYS = [QtGui.QKeySequence("Ctrl+Shift+Z"), QtGui.QKeySequence("Ctrl+Y")]
Area = QtCore.Qt.DockWidgetArea


class MainWindow(QtWidgets.QMainWindow):
    """The designer. Usable from tests without ``app.gui.run`` (pass a QSettings and an autosave folder)."""

    def __init__(self, registry: Registry | None = None, settings: QtCore.QSettings | None = None,
                 autosave_dir: str | os.PathLike[str] | None = None, autosave_interval_ms: int = AUTOSAVE_INTERVAL_MS,
                 reports_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.registry = registry or default_registry()
        self.settings = settings or QtCore.QSettings("LayerLab", "LayerLab")
        self.autosaver = Autosaver(autosave_dir or default_autosave_dir())
        self._actions_pending = False
        self.setWindowTitle(APP_NAME)
        self.setObjectName("MainWindow")
        self.setDockNestingEnabled(True)
        self.resize(1500, 900)

        self.workspace = Workspace(self.registry, self)
        self.tabs = self.workspace.tabs
        self.setCentralWidget(self.tabs)
        self.palette = Palette(self.registry)
        self.context = ctx = DesignerContext(self, self.registry, self.settings, self.workspace, self.palette,
                                             lambda path: self.files.open_path(path), lambda path: self.recent.add(path))
        self.editing = Editing(ctx)
        self.palette.add_requested.connect(self.editing.add_layer)
        self.params = ParamPanel()
        self.checks = TypeCheckPanel()
        self.checks.layer_activated.connect(self.editing.focus_layer)
        self.palette_dock = self._dock("Layer Palette", "PaletteDock", self.palette, Area.LeftDockWidgetArea)
        self.params_dock = self._dock("Parameters", "ParametersDock", self.params, Area.RightDockWidgetArea)
        self.check_dock = self._dock("Type Check", "TypeCheckDock", self.checks, Area.BottomDockWidgetArea)
        self.logger = RunLogger()
        self.logger_dock = self._dock("Inference Run Logger", "RunLoggerDock", self.logger, Area.BottomDockWidgetArea)
        self.splitDockWidget(self.check_dock, self.logger_dock, QtCore.Qt.Orientation.Horizontal)
        self.log_panel = LogPanel()
        self.log_dock = self._dock("Log", "LogDock", self.log_panel, Area.BottomDockWidgetArea)
        self.tabifyDockWidget(self.logger_dock, self.log_dock)
        self.logger_dock.raise_()
        self.resizeDocks([self.palette_dock, self.params_dock], [290, 360], QtCore.Qt.Orientation.Horizontal)
        self.resizeDocks([self.check_dock, self.logger_dock], [420, 900], QtCore.Qt.Orientation.Horizontal)
        self.resizeDocks([self.check_dock], [150], QtCore.Qt.Orientation.Vertical)

        self.runner = RunController(self)
        self.analysis = AnalysisMode(self, self.runner.worker.analysis,
                                     lambda command, payload: self.runner.submit("analysis", (command, payload)))
        self.analysis.active_changed.connect(lambda _on: self._update_actions())
        self.reports = Reports(ctx, str(reports_dir or default_reports_dir()))
        self.reports.closed.connect(self._current_changed)
        self.logger.report_requested.connect(self.reports.open_report)
        self.logger.copied.connect(lambda cmd: self.statusBar().showMessage(f"Copied: {cmd}", 6000))
        self.help = Help(ctx)
        self.templates = Templates(ctx, self.params)
        self.netlayers = NetworkLayers(ctx)
        self.collections = Collections(ctx)
        self._build_actions()
        self._build_menus()
        self.recent = RecentFiles(self.settings, self.recent_menu, ctx.open_path)
        add_export_menu(self)
        add_batch_menu(self)
        self.onnx_import = OnnxImport(ctx, self.act_open)  # File > Import ONNX Model…, .onnx in Open, dropped files
        self.custom = CustomLayers(ctx)  # Edit > Add/Edit Custom Layer…, the consent prompt
        self.runs = Runs(ctx, self.runner, self.reports, self.logger, self.logger_dock, self.custom,
                         lambda: self.analysis.active)
        self.runs.changed.connect(self._update_actions)
        self.figures = CanvasFigures(ctx, self.reports, self.runner.worker.run_finished, self.analysis.proxy,
                                     lambda: self.analysis.doc)  # View > Figures on Canvas
        self.collections.changed.connect(self.help.reload)
        self.collections.changed.connect(lambda: self.runs.fusing_dialog and self.runs.fusing_dialog.refresh())
        self.files = Files(ctx, self.workspace, self.autosaver, self.templates, self.onnx_import)
        self.files.saved.connect(lambda d: d is self.current and self.params.set_target(d, d.canvas.selected_layers()))
        self.files.closed.connect(lambda _d: self._current_changed())
        self.workspace.document_added.connect(self._attach)
        self.tabs.tabCloseRequested.connect(self.close_tab)
        self.tabs.currentChanged.connect(self._current_changed)
        self.status_label = QtWidgets.QLabel()
        for widget in (self.runs.label, self.runs.progress, self.runs.cancel_button, self.status_label):
            self.statusBar().addPermanentWidget(widget)
        self.warmup = KernelWarmup(ctx)
        self._build_toolbar()
        self._default_state = self.saveState()
        self._default_geometry = self.saveGeometry()
        self._restore_last_layout()
        self.autosave = Autosave(ctx, self.autosaver, autosave_interval_ms)
        self._update_actions()

    # ---- construction ----------------------------------------------------------------------------
    def _dock(self, title: str, name: str, widget: QtWidgets.QWidget, area: QtCore.Qt.DockWidgetArea) -> QtWidgets.QDockWidget:
        return add_dock(self, title, name, widget, area)

    def _build_actions(self) -> None:
        K, P = QtGui.QKeySequence.StandardKey, QtWidgets.QStyle.StandardPixmap
        a = lambda *args: make_action(self, *args)  # noqa: E731
        self.act_new = a("&New", lambda: self.workspace.new_model(), K.New, P.SP_FileIcon, "Create an empty model")
        self.act_open = a("&Open…", lambda: self.files.open_dialog(), K.Open, P.SP_DialogOpenButton,
                          "Open a model file")
        self.act_save = a("&Save", lambda: self.files.save(), K.Save, P.SP_DialogSaveButton, "Save the current model")
        self.act_save_as = a("Save &As…", lambda: self.files.save_as(), K.SaveAs)
        self.act_close = a("&Close", self.close_current, K.Close)
        self.act_quit = a("&Quit", self.close, K.Quit)
        self.act_undo = a("&Undo", lambda: self.editing.with_doc(lambda d: d.model.undo()), K.Undo, P.SP_ArrowBack)
        self.act_redo = a("&Redo", lambda: self.editing.with_doc(lambda d: d.model.redo()), None, P.SP_ArrowForward)
        self.act_redo.setShortcuts(REDO_KEYS)  # each bound once (the platform's Redo key is one of them)
        for act, label in ((self.act_undo, "Undo"), (self.act_redo, "Redo")):
            act.setIconText(label)  # the toolbar button keeps this short text; the menu shows the full one
        t = self.templates
        self.act_group = a("&Group Selection as Template…", lambda: t.group_selection(), "Ctrl+G", None,
                           "Make the selected layers a template and replace them by one instance of it")
        self.act_ungroup = a("U&ngroup", t.ungroup_selection, "Ctrl+Shift+G", None,
                             "Replace the selected template instances by their layers")
        self.act_import_template = a("&Import Model as Template…", lambda: t.import_template(), None, None,
                                     "Add a saved model to this network as a template")
        self.act_save_layout = a("&Save Layout", self.save_layout)
        self.act_apply_layout = a("&Apply Layout", self.apply_layout)
        self.act_reset_layout = a("&Reset Layout", self.reset_layout)
        self.act_run = a("&Launch Inference", lambda: self.runs.launch_inference(), "F5", P.SP_MediaPlay,
                         "Run and profile the current model in the background")
        self.act_cancel = a("&Cancel Inference", lambda: self.runs.cancel_inference(), "Shift+F5", P.SP_MediaStop,
                            "Stop the running inference (within one layer)")
        self.act_net_settings = a("&Network Settings…", lambda: self.runs.network_settings(), "Ctrl+Shift+N",
                                  P.SP_FileDialogDetailedView, "Backend, format, iterations, inputs, weights")
        self.act_fusing_rules = a("&Fusing Rules…", lambda: self.runs.fusing_rules(), None, None,
                                  "The plugins' and this network's fusing rules: switch them, add your own")
        self.act_open_report = a("&Open Inference Report…", self.reports.open_report_dialog, None, None,
                                 "Open a report written by a run or by layerlab profile")
        self.act_compare = a("Compare Inference &Reports…", lambda: self.reports.compare_reports(), None, None,
                             "Compare the layer times of several reports")
        self.act_docs = a("Layer &Documentation", lambda: self.help.show_docs(), K.HelpContents,
                          P.SP_DialogHelpButton)
        self.act_about = a("&About LayerLab", self.help.about)

    def _build_menus(self) -> None:
        mb, e, an = self.menuBar(), self.editing, self.analysis
        file = mb.addMenu("&File")
        file.addActions([self.act_new, self.act_open])
        self.recent_menu = file.addMenu("Open &Recent")
        for group in ([self.act_save, self.act_save_as], [self.act_close, self.act_quit]):
            file.addSeparator()
            file.addActions(group)
        edit = mb.addMenu("&Edit")
        for group in ([self.act_undo, self.act_redo], [e.act_cut, e.act_copy, e.act_paste, e.act_duplicate,
                                                       e.act_delete], [e.act_select_all],
                      [self.act_group, self.act_ungroup, self.act_import_template, self.netlayers.act_import]):
            edit.addActions(group)
            edit.addSeparator()
        edit.addActions([e.act_arrange, e.act_find])
        view = mb.addMenu("&View")
        view.addAction(e.act_grid)
        windows = view.addMenu("&Windows")
        self.toolbar_toggle_placeholder = windows
        for dock in (self.palette_dock, self.params_dock, self.check_dock, self.logger_dock, self.log_dock):
            windows.addAction(dock.toggleViewAction())
        view.addSeparator()
        view.addActions([e.act_fit, e.act_zoom_in, e.act_zoom_out])
        view.addSeparator()
        view.addActions([e.act_expand_all, e.act_collapse_all])
        view.addSeparator()
        view.addAction(an.act_inspector)
        tools = mb.addMenu("&Tools")
        for group in ([self.act_run, self.act_cancel],
                      [self.act_net_settings, self.act_fusing_rules, self.collections.act_manage],
                      [self.act_open_report, self.act_compare]):
            tools.addActions(group)
            tools.addSeparator()
        tools.addAction(an.act_timings)
        self.tools_menu = tools
        analysis = mb.addMenu("&Analysis")
        for group in ([an.act_launch, an.act_stop], [an.act_inspector, an.act_rerun]):
            analysis.addActions(group)
            analysis.addSeparator()
        analysis.addAction(an.act_compare)
        self.analysis_menu = analysis
        mb.addMenu("&Window").addActions([self.act_save_layout, self.act_apply_layout, self.act_reset_layout])
        mb.addMenu("&Help").addActions([self.act_docs, self.act_about])

    def _build_toolbar(self) -> None:
        tb = self.addToolBar("Main")
        tb.setObjectName("MainToolBar")
        tb.setIconSize(QtCore.QSize(18, 18))
        tb.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        for i, group in enumerate(([self.act_new, self.act_open, self.act_save], [self.act_undo, self.act_redo],
                                   [self.editing.act_fit, self.act_docs],
                                   [self.act_run, self.act_cancel, self.act_net_settings],
                                   [self.analysis.act_launch, self.analysis.act_stop])):
            if i:
                tb.addSeparator()
            tb.addActions(group)
        self.toolbar_toggle_placeholder.addAction(tb.toggleViewAction())

    # ---- documents -------------------------------------------------------------------------------
    @property
    def current(self) -> Document | None:
        """The model of the current tab."""
        return self.workspace.current

    @property
    def docs(self) -> list[Document]:
        """The open models."""
        return self.workspace.docs

    def run_target(self) -> Document | None:
        """The model a run, an export or the network settings apply to (``Reports.run_target``)."""
        return self.reports.run_target()

    def _attach(self, doc: Document) -> None:
        """A document is being added: every part follows it."""
        e = self.editing
        doc.canvas.show_grid(e.act_grid.isChecked())
        doc.state_changed.connect(lambda d=doc: self._doc_state_changed(d))
        doc.checked.connect(lambda diags, d=doc: self._doc_checked(d, diags))
        doc.canvas.selection_changed.connect(lambda names, d=doc: self._selection_changed(d, names))
        doc.canvas.status_message.connect(lambda msg: self.statusBar().showMessage(msg, 6000))
        doc.bridge.event.connect(lambda ev, d=doc: self._doc_event(d, ev))
        self.netlayers.attach(doc)
        self.templates.attach(doc)
        self.onnx_import.attach(doc)
        doc.canvas.set_context_actions(
            [("Group as Template…", self.act_group), ("Ungroup", self.act_ungroup), None,
             ("Cut", e.act_cut), ("Copy", e.act_copy), ("Duplicate", e.act_duplicate), ("Delete", e.act_delete),
             None, *e.format_menu_items(), None, ("Edit Custom Layer…", self.custom.act_edit),
             ("Layer Documentation", self.act_docs)],
            [("Paste", e.act_paste), ("Select All", e.act_select_all), None,
             ("Import Model as Template…", self.act_import_template), ("Arrange", e.act_arrange),
             ("Fit to View", e.act_fit)])

    def close_tab(self, index: int) -> bool:
        """Close tab ``index`` (a report, or a model after asking about unsaved changes)."""
        view = self.reports.report_at(index)
        if view is not None:
            return self.reports.close_report(view)
        return self.files.close_document(self.workspace.doc_at(index))

    def close_current(self) -> None:
        """File > Close."""
        self.close_tab(self.tabs.currentIndex())

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:  # noqa: N802 (Qt API)
        for doc in list(self.docs):
            if not self.files.maybe_save(doc):
                event.ignore()
                return
        self.settings.setValue("layout/last_state", self.saveState())
        self.settings.setValue("layout/last_geometry", self.saveGeometry())
        self.autosave.stop()
        self.help.close()
        self.reports.close_all()
        self.runner.worker.request_cancel()  # a running inference stops before its next layer
        self.analysis.shutdown()  # a paused analysis is aborted, then stopped in the worker thread
        self.runner.shutdown()
        self.log_panel.detach()
        event.accept()

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
                self.templates.refresh()
            # an event comes while its command runs, before the undo stack records it: look again afterwards;
            # a burst of events (an import placing thousands of layers) updates now once and then once after it
            if not self._actions_pending:
                self._update_actions()
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
            self.reports.select_in_reports(doc, names[0])

    def _current_changed(self, _index: int = -1) -> None:
        doc = self.current
        self.params.set_target(doc, doc.canvas.selected_layers() if doc else [])
        self.checks.show_diagnostics(doc.diagnostics if doc else [])
        self.templates.refresh()
        if doc is not None:
            self.editing.act_grid.setChecked(doc.canvas.grid_shown)
            self.runs.follow(doc)
        self._update_title()
        self._update_actions()
        self._update_status()

    def _update_title(self) -> None:
        doc = self.current
        self.setWindowTitle(f"{doc.title}[*] — {APP_NAME}" if doc else APP_NAME)
        self.setWindowModified(doc.modified if doc else False)

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
        for act, label, able, what in ((self.act_undo, "Undo", has and doc.model.can_undo(),
                                        doc.model.undo_text() if has else ""),
                                       (self.act_redo, "Redo", has and doc.model.can_redo(),
                                        doc.model.redo_text() if has else "")):
            act.setEnabled(able)
            act.setText(f"&{label} {what}" if able else f"&{label}")
            act.setIconText(label)
            keys = ", ".join(k.toString(QtGui.QKeySequence.SequenceFormat.NativeText) for k in act.shortcuts())
            act.setToolTip(f"{label} {what} ({keys})" if able else f"{label} ({keys})")
        self.editing.update_actions(doc)
        selected = has and bool(doc.canvas.selected_layers())
        self.act_group.setEnabled(selected)
        self.act_ungroup.setEnabled(selected and any(
            template_name(doc.model.layers[n].type) for n in doc.canvas.selected_layers()))
        for act in (self.act_import_template, self.act_save, self.act_save_as, self.act_fusing_rules):
            act.setEnabled(has)
        self.act_close.setEnabled(has or self.reports.current_report is not None)
        target = self.reports.run_target() is not None
        self.act_run.setEnabled(target and not self.runner.busy and not self.analysis.active)
        self.act_cancel.setEnabled(self.runner.busy)
        self.act_net_settings.setEnabled(target)
        self.custom.update_actions()
        self._update_status()

    # ---- layouts ---------------------------------------------------------------------------------
    def save_layout(self) -> None:
        """Window > Save Layout."""
        self.settings.setValue("layout/saved_state", self.saveState())
        self.settings.setValue("layout/saved_geometry", self.saveGeometry())
        self.statusBar().showMessage("Window layout saved", 4000)

    def apply_layout(self) -> bool:
        """Window > Apply Layout: the saved layout, if any."""
        state = self.settings.value("layout/saved_state")
        if state is None:
            self.statusBar().showMessage("No saved layout yet (Window > Save Layout)", 4000)
            return False
        self.restoreState(state)
        return True

    def reset_layout(self) -> None:
        """Window > Reset Layout: the docks where they start."""
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
