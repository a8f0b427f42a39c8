"""Analysis mode in the designer: the Launch Analysis / Stop Analysis actions, the read-only lock on the
open models, and the Analysis window. The main window creates one AnalysisMode and puts its actions in
its menus and toolbar; everything else lives here."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from app.analysis.controller import AnalysisController, pins_applied
from app.analysis.live import AnalysisSession
from app.analysis.proxy import SessionProxy
from app.analysis.readonly import ReadOnlyGuard
from app.analysis.window import AnalysisWindow
from engine.errors import LayerLabError
from engine.run import RunSpec


class AnalysisMode(QtCore.QObject):
    """Owns analysis for one main window.

    ``window``: the designer (it provides ``current``, ``docs``, ``registry`` and ``statusBar()``).
    ``session``/``send``: the worker's AnalysisSession and how commands reach its thread; without them
    analysis gets a thread of its own."""

    active_changed = QtCore.Signal(bool)

    def __init__(self, window: QtWidgets.QMainWindow, session: AnalysisSession | None = None,
                 send: Callable[[str, object], None] | None = None) -> None:
        super().__init__(window)
        self.main = window
        self.proxy = SessionProxy(session, send, parent=self)
        self.ctl: AnalysisController | None = None  # panels of the running analysis (new for every launch)
        self.guard = ReadOnlyGuard(self._status)
        self.window: AnalysisWindow | None = None
        self.doc: Any = None
        P = QtWidgets.QStyle.StandardPixmap
        style = window.style()
        self.act_launch = QtGui.QAction(style.standardIcon(P.SP_MediaPlay), "Launch &Analysis", self)
        self.act_launch.setShortcut(QtGui.QKeySequence("Ctrl+Shift+A"))
        self.act_launch.setStatusTip("Run the current model live: inputs, runtime options, channel inspector, debugger")
        self.act_launch.triggered.connect(lambda _c=False: self.launch())
        self.act_stop = QtGui.QAction(style.standardIcon(P.SP_BrowserStop), "Stop A&nalysis", self)
        self.act_stop.setStatusTip("Leave analysis mode; the models can be edited again")
        self.act_stop.triggered.connect(lambda _c=False: self.stop())
        self.act_inspector = QtGui.QAction("&Channel Inspector", self)
        self.act_inspector.setStatusTip("Show a layer's channels and weights (during analysis)")
        self.act_inspector.triggered.connect(lambda _c=False: self.show_inspector())
        self.act_compare = QtGui.QAction("Compare &Precision…", self)
        self.act_compare.setStatusTip("Run the current inputs in fp32 and fp16 and colour each layer by its drift")
        self.act_compare.triggered.connect(lambda _c=False: self.ctl and self.ctl.compare_precision_dialog(self.window))
        self.act_timings = QtGui.QAction("Profile Layer &Timings", self)
        self.act_timings.setCheckable(True)
        self.act_timings.setStatusTip("Show each layer's latest time in the Network Overview (Rerun to collect them)")
        self.act_timings.toggled.connect(self._timings_toggled)
        self.act_rerun = QtGui.QAction("&Rerun Inference", self)
        self.act_rerun.triggered.connect(lambda _c=False: self.proxy.send("rerun"))
        self._update_actions()

    @property
    def active(self) -> bool:
        return self.window is not None

    def _status(self, text: str) -> None:
        self.main.statusBar().showMessage(text, 8000)

    def _update_actions(self) -> None:
        on = self.active
        self.act_launch.setEnabled(not on)
        self.act_stop.setEnabled(on)
        for act in (self.act_inspector, self.act_compare, self.act_timings, self.act_rerun):
            act.setEnabled(on)

    def launch(self, config: RunSpec | None = None) -> bool:
        """Start analysis of the current model; every open model becomes read-only."""
        doc = getattr(self.main, "current", None)
        if self.active or doc is None:
            return False
        runner = getattr(self.main, "runner", None)
        if runner is not None and runner.busy:
            self._status("An inference run is in progress: wait for it or cancel it, then Launch Analysis")
            return False
        custom = getattr(self.main, "custom", None)  # custom layer code runs only with the user's consent
        if custom is not None and not custom.ensure_consent(doc, lambda: self.launch(config)):
            return False
        if config is None:
            try:
                from app.run_config import from_model  # noqa: PLC0415

                config = from_model(doc.model, doc.path)
            except LayerLabError as exc:
                self._status(f"Cannot launch analysis: {exc}")
                return False
        self.doc = doc
        self.guard.lock([d.bridge for d in getattr(self.main, "docs", [doc])])
        self.ctl = AnalysisController(self.proxy, parent=self)
        self.ctl.message.connect(self._status)
        self.ctl.stop_for_pins = self.stop_and_apply_pins
        self.ctl.overview_panel.act_timings.setChecked(self.act_timings.isChecked())
        self.ctl.overview_panel.act_timings.toggled.connect(self.act_timings.setChecked)
        self.window = AnalysisWindow(self.ctl, self.main)
        self.window.setWindowTitle(f"LayerLab Analysis: {doc.title}")
        self.window.closed.connect(self._window_closed)
        if doc.path:
            from pathlib import Path  # noqa: PLC0415

            self.ctl.inputs.start_dir = str(Path(doc.path).parent)
        self.window.show()
        self.ctl.launch(doc.model, self.main.registry, config)
        if self.act_timings.isChecked():
            self.proxy.send("profile_timings", True)
        self._update_actions()
        self.active_changed.emit(True)
        return True

    def stop(self) -> None:
        """Stop Analysis: closes the Analysis window, which stops the session and unlocks the models."""
        if self.window is not None:
            self.window.close()

    def stop_and_apply_pins(self, pins: list[str]) -> None:
        """The Precision panel's Apply Pins to Model during analysis: Stop Analysis (the model is read-only while
        it runs), then store the pins in the analysed model as one undo step."""
        doc = self.doc
        self.stop()
        if doc is None or doc.model.read_only:
            self._status("Apply Pins: the model is still read-only; Stop Analysis, then try again")
            return
        self._status(f"Analysis stopped. {pins_applied(doc.model, pins)}")

    def _timings_toggled(self, on: bool) -> None:
        if self.ctl is not None and self.ctl.overview_panel.act_timings.isChecked() != on:
            self.ctl.overview_panel.act_timings.setChecked(on)  # sends profile_timings

    def _window_closed(self) -> None:
        win, self.window = self.window, None
        ctl, self.ctl = self.ctl, None
        if ctl is not None:  # its late messages ("Analysis stopped") must not cover what the designer says now
            ctl.message.disconnect(self._status)
        self.guard.unlock()
        if win is not None:
            win.deleteLater()  # with the panels
        if ctl is not None:
            ctl.deleteLater()
        self._update_actions()
        self.active_changed.emit(False)
        self._status("Analysis stopped: the models can be edited again")

    def show_inspector(self) -> None:
        if self.window is not None:
            self.window.show_inspector()
            self.window.raise_()

    def shutdown(self) -> bool:
        """Stop analysis and its thread (when it has one of its own)."""
        self.stop()
        return self.proxy.shutdown()
