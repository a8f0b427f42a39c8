"""Wires the analysis panels to a session: the main window creates one AnalysisController, places its
panels (docks and tabs) and calls ``launch`` / ``stop``. Everything the panels ask goes to the session
(queued to the worker, or directly to the thread-safe debugger); everything the session sends comes
back through the proxy in the GUI thread."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtWidgets

from app.analysis.compare_precision import ComparePrecisionDialog
from app.analysis.debug_bar import DebuggerControls
from app.analysis.inputs import ModelInputsWindow
from app.analysis.inspector import ChannelInspector
from app.analysis.live import StartRequest
from app.analysis.output_view import AnalysisOutputView
from app.analysis.overview import OverviewPanel
from app.analysis.param_editor import ParameterEditor
from app.analysis.precision_fix import PrecisionFixPanel
from app.analysis.proxy import SessionProxy
from engine.model import Model
from engine.registry import Registry
from engine.run import RunSpec


def pins_applied(model: Model, pins: list[str]) -> str:
    """Apply Pins to Model on a writable ``model`` (``engine.precision.apply_pins``); the status-bar line."""
    from engine.precision import apply_pins  # noqa: PLC0415

    return f"Pinned to fp32 in {model.name}: {', '.join(apply_pins(model, pins)) or 'none'} (Edit > Undo removes them)"


class AnalysisController(QtCore.QObject):
    """Owns the analysis panels and the session proxy. ``message(text)`` is for the status bar;
    ``active_changed(bool)`` when analysis starts or stops."""

    message = QtCore.Signal(str)
    active_changed = QtCore.Signal(bool)

    def __init__(self, proxy: SessionProxy | None = None, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.proxy = proxy or SessionProxy(parent=self)
        self.inputs = ModelInputsWindow()
        self.output = AnalysisOutputView()
        self.params = ParameterEditor()
        self.overview_panel = OverviewPanel()
        self.overview = self.overview_panel.view
        self.inspector = ChannelInspector()
        self.debug = DebuggerControls()
        self.precision = PrecisionFixPanel()
        self.model: Model | None = None  # the designer's model analysed (read-only while analysis runs)
        self.active = False
        self.paused_info: Any = None
        self.last_run: Any = None
        self.drift_result: Any = None
        self.info: dict[str, Any] = {}
        self.precision_dialog: ComparePrecisionDialog | None = None
        #: Apply Pins while the model is read-only: the designer stops analysis, then applies them
        self.stop_for_pins: Callable[[list[str]], None] | None = None
        p = self.proxy
        p.started.connect(self._started)
        p.stopped.connect(self._stopped)
        p.failed.connect(self._failed)
        p.overview.connect(self.overview.set_items)
        p.options.connect(self.params.set_options)
        p.option_error.connect(self._option_error)
        p.input_frame.connect(self.inputs.show_frame)
        p.outputs.connect(self.output.show_outputs)
        p.layer_data.connect(self.inspector.show_layer)
        p.ran.connect(self._ran)
        p.timings.connect(self.overview.set_times)
        p.paused.connect(self._paused)
        p.resumed.connect(self._resumed)
        p.drift.connect(self._drift)
        p.fix_progress.connect(self.precision.show_progress)
        p.precision_fixed.connect(self._precision_fixed)
        self.precision.pin_requested.connect(self.pin_diverging_layers)
        self.precision.apply_requested.connect(self.apply_pins)
        self.inputs.file_chosen.connect(lambda layer, path: p.send("open_input", (layer, path)))
        self.params.option_changed.connect(lambda layer, name, value: p.send("set_option", (layer, name, value)))
        self.overview.selected.connect(self.inspect)
        self.overview.inspect_requested.connect(self.inspect)
        self.overview.breakpoint_toggled.connect(self.set_breakpoint)
        self.overview_panel.act_timings.toggled.connect(lambda on: p.send("profile_timings", on))
        self.overview_panel.act_rerun.triggered.connect(lambda: p.send("rerun"))
        self.inspector.layer_requested.connect(p.request_layer)
        self.inspector.channel_requested.connect(lambda layer, n, c: p.send("inspect_channel", (layer, n, c)))
        self.inspector.mapping_changed.connect(lambda *mapping: p.send("inspect_mapping", mapping))
        self.debug.act_pause.triggered.connect(p.debugger.pause)
        self.debug.act_step.triggered.connect(p.debugger.step)
        self.debug.act_resume.triggered.connect(self.resume)
        self.debug.act_stop.triggered.connect(p.debugger.stop)

    # ---- commands --------------------------------------------------------------------------------
    def launch(self, model: Model, registry: Registry, config: RunSpec | None = None) -> None:
        """Start analysis on a private copy of ``model`` (the caller makes models read-only)."""
        self.active = True
        self.model = model
        self.active_changed.emit(True)
        self.message.emit(f"Analysis of {model.name}: building the network…")
        # grids come prepared as the inspector maps them, at its display size
        self.proxy.send("inspect_mapping", (*self.inspector.mapping(), self.inspector.grid_pixels()))
        self.proxy.send("start", StartRequest(model.copy(), registry, config or RunSpec()))

    def stop(self) -> None:
        """Leave analysis (a paused inference is aborted)."""
        if not self.active:
            return
        self.proxy.debugger.stop()
        self.proxy.send("stop")
        self.active = False
        self.active_changed.emit(False)

    def inspect(self, layer: str) -> None:
        if self.active:
            self.inspector.inspect(layer)

    def set_breakpoint(self, layer: str, on: bool) -> None:
        """Overview context menu: Add Breakpoint stops execution at the layer now; Remove Breakpoint."""
        dbg = self.proxy.debugger
        try:
            if on:
                dbg.add_breakpoint(layer)  # while paused: takes effect when execution reaches it
                if not dbg.paused:
                    # run again now, so execution stops there (unless a running pass reaches it first)
                    self.proxy.send("break_at", (layer, dbg.hits(layer)))
            else:
                dbg.remove_breakpoint(layer)
        except Exception as exc:  # a fused-away or unknown layer: say why
            self.message.emit(str(exc))
            return
        self.overview.set_breakpoints(dbg.breakpoints)

    def resume(self) -> None:
        self.proxy.debugger.resume()

    def compare_precision(self, candidate: str = "fp16", threshold: float = 1e-2) -> None:
        """Analysis > Compare Precision: the current inputs in fp32 and in ``candidate``."""
        self.message.emit(f"Comparing fp32 with {candidate}…")
        self.proxy.send("compare_precision", (candidate, threshold))

    def pin_diverging_layers(self) -> None:
        """Compare Precision's "Pin Diverging Layers to fp32": the search on the latest comparison's candidate and
        threshold, run in the worker (progress on the Precision panel), then the comparison again."""
        result = self.drift_result
        if result is None:
            self.message.emit("Run Analysis > Compare Precision first")
            return
        self.message.emit(f"Searching for the layers to pin to fp32 ({result.candidate}, threshold {result.threshold:g})…")
        self.proxy.send("fix_precision", (result.candidate, result.threshold))

    def apply_pins(self, pins: list[str]) -> None:
        """Store ``pins`` as the model's fp32 layers (other precision settings removed, layouts kept): one undo
        step. While analysis keeps the model read-only, ``stop_for_pins`` (the designer's: stop analysis, then
        apply) takes over; without one the request is refused with a message."""
        model = self.model
        if model is None:
            return
        if model.read_only:
            if self.stop_for_pins is not None:
                self.stop_for_pins(list(pins))
                return
            self.message.emit("Stop Analysis, then Apply Pins to Model (the model is read-only while analysis runs)")
            return
        self.message.emit(pins_applied(model, pins))

    def _precision_fixed(self, report: Any) -> None:
        self.precision.show_report(report)
        fix, times = report.fix, {t.label: t.ms for t in report.times}
        self.message.emit(f"Pinned to fp32: {', '.join(fix.pins) or 'none needed'}; largest output error "
                          f"{fix.before.max_output_error:.2e} -> {fix.after.max_output_error:.2e}; "
                          f"{times['all fp16']:.2f} ms all fp16, {times['mixed']:.2f} ms mixed, "
                          f"{times['all fp32']:.2f} ms all fp32")

    def compare_precision_dialog(self, parent: QtWidgets.QWidget | None = None) -> ComparePrecisionDialog:
        """One non-modal dialog for the variant and the threshold; accepting it starts the comparison."""
        dlg = ComparePrecisionDialog(parent)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.chosen.connect(self.compare_precision)
        self.precision_dialog = dlg
        dlg.open()
        return dlg

    # ---- session signals ---------------------------------------------------------------------------
    def _started(self, info: dict[str, Any]) -> None:
        self.info = info
        for viewer in self.inputs.set_inputs(info["inputs"]):
            viewer.play.connect(lambda layer: self.proxy.send("play", layer))
            viewer.pause.connect(lambda layer: self.proxy.send("pause_video", layer))
            viewer.seek.connect(lambda layer, f: self.proxy.send("seek", (layer, f)))
            viewer.step.connect(lambda layer, d: self.proxy.send("step_frame", (layer, d)))
        self.output.set_outputs(info["outputs"])
        self.overview.set_breakpoints(self.proxy.debugger.breakpoints)
        note = f" ({info['notice']})" if info.get("notice") else ""
        self.message.emit(f"Analysis running on {info['backend']} ({info['device']}), {info['format']}{note}")

    def _stopped(self) -> None:
        self._paused(None)
        self.message.emit("Analysis stopped")

    def _failed(self, command: str, reason: str) -> None:
        self.message.emit(f"Analysis: {reason}")
        if command == "fix_precision":
            self.precision.failed(reason)
        if command == "start":
            self.active = False
            self.active_changed.emit(False)

    def _option_error(self, layer: str, option: str, reason: str) -> None:
        self.params.set_error(layer, option, reason)
        self.message.emit(reason)

    def _ran(self, info: Any) -> None:
        self.last_run = info
        self._paused(None)
        if info.stopped:
            self.output.set_status(f"run {info.run} stopped from the debugger")
        else:
            self.output.set_status(f"run {info.run}: {len(info.executed)} layers computed in {info.ms:.1f} ms")

    def _paused(self, info: Any) -> None:
        was = self.paused_info
        self.paused_info = info
        if info is None and was is not None:  # the status bar must not keep saying "Paused after"
            self.message.emit(f"Resumed after {was.layer}: running")
        self.debug.set_paused(info)
        self.overview.set_paused(info.layer if info is not None else None)
        if info is not None:
            self.message.emit(f"Paused after {info.layer} ({info.reason}): Step, Resume or Stop")
            current = self.overview.current or info.layer
            self.proxy.request_layer(current)

    def _resumed(self) -> None:
        self._paused(None)

    def _drift(self, result: Any) -> None:
        self.drift_result = result
        self.precision.show_drift(result)
        self.overview.set_drift({d.name: d.rel_error for d in result.layers}, result.threshold)
        first = result.first_over
        self.message.emit(
            f"Precision drift {result.candidate} vs {result.reference}: first layer over {result.threshold:g} is "
            f"{first.name} (relative error {first.rel_error:.2e})" if first else
            f"Precision drift {result.candidate} vs {result.reference}: no layer over {result.threshold:g}")
