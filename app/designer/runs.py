"""Inference runs from the designer: Tools > Launch / Cancel Inference through the worker thread, the run's line in
the Inference Run Logger with the equivalent ``layerlab profile`` command, the progress in the status bar, and the
run settings (Tools > Network Settings, Fusing Rules)."""
from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Callable
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app import run_config
from app.designer.context import Controller, DesignerContext
from app.designer.custom_layers import CustomLayers
from app.designer.document import Document
from app.designer.fusing_rules import FusingRulesDialog
from app.designer.network_settings import NetworkSettingsDialog
from app.designer.reports import Reports, reports_folder
from app.designer.run_logger import RunEntry, RunLogger
from app.designer.worker import RunController, RunRequest, RunResult
from engine.custom import used_definitions
from engine.errors import LayerLabError


class Runs(Controller):
    """Starts runs in ``runner``'s worker and follows them; ``changed`` when a run starts or ends (the window's
    actions follow). ``analysis_active`` says whether Analysis holds the worker."""

    changed = QtCore.Signal()

    def __init__(self, ctx: DesignerContext, runner: RunController, reports: Reports, logger: RunLogger,
                 logger_dock: QtWidgets.QDockWidget, custom: CustomLayers,
                 analysis_active: Callable[[], bool]) -> None:
        super().__init__(ctx)
        self.runner = runner
        self.reports = reports
        self.logger = logger
        self.logger_dock = logger_dock
        self.custom = custom
        self.analysis_active = analysis_active
        self.fusing_dialog: FusingRulesDialog | None = None
        self._run_ids = 0
        self._runs: dict[int, RunRequest] = {}
        self.label = QtWidgets.QLabel()
        self.progress = QtWidgets.QProgressBar()
        self.progress.setMaximumWidth(180)
        self.progress.setMaximumHeight(16)
        self.progress.setTextVisible(False)
        self.cancel_button = QtWidgets.QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Cancel the run (Shift+F5): it stops after the layer running now")
        self.cancel_button.clicked.connect(self.cancel_inference)
        for widget in (self.label, self.progress, self.cancel_button):
            widget.hide()
        w = runner.worker
        w.run_started.connect(self._started)
        w.phase.connect(self._phase)
        w.progress.connect(self._progress)
        w.warming.connect(self._warming)
        w.run_finished.connect(self._finished)
        w.run_failed.connect(self._failed)
        w.run_cancelled.connect(self._cancelled)
        w.command_failed.connect(lambda cmd, msg: ctx.status(f"Worker: {cmd} failed: {msg}", 10000))
        w.gpu_fault.connect(self._gpu_fault)
        self.gpu_lost = ""  # why GPU runs need a restart of the application (empty while the GPU is fine)

    # ---- settings --------------------------------------------------------------------------------
    def network_settings(self, doc: Document | None = None) -> NetworkSettingsDialog | None:
        """Open Tools > Network Settings for ``doc`` (default: the run target); non-blocking, applied on OK."""
        doc = doc or self.reports.run_target()
        if doc is None:
            self.ctx.status("Open a model first", 4000)
            return None
        dlg = NetworkSettingsDialog(doc.model, doc.path, self.ctx.parent)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dlg.accepted.connect(lambda: self.ctx.status(f"Network settings of {doc.model.name} updated", 5000))
        dlg.open()
        return dlg

    def fusing_rules(self) -> FusingRulesDialog | None:
        """Open Tools > Fusing Rules for the current model (non-modal; it follows the current tab)."""
        doc = self.ctx.documents.current
        if doc is None:
            self.ctx.status("Open a model first", 4000)
            return None
        if self.fusing_dialog is None:
            self.fusing_dialog = FusingRulesDialog(doc.bridge, self.ctx.registry, self.ctx.parent)
        else:
            self.fusing_dialog.set_bridge(doc.bridge)
        self.fusing_dialog.show()
        self.fusing_dialog.raise_()
        return self.fusing_dialog

    def follow(self, doc: Document | None) -> None:
        """The current tab changed: an open Fusing Rules window shows ``doc``'s rules."""
        if doc is not None and self.fusing_dialog is not None and self.fusing_dialog.isVisible():
            self.fusing_dialog.set_bridge(doc.bridge)

    # ---- runs ------------------------------------------------------------------------------------
    def _new_report_base(self, doc: Document, started: _dt.datetime) -> Path:
        folder = reports_folder(doc, self.reports.reports_dir)
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
        doc = doc or self.reports.run_target()
        if doc is None:
            self.ctx.status("Open a model to run it", 5000)
            return None
        if self.runner.busy:
            self.ctx.status("A run is already in progress: wait for it or cancel it", 6000)
            return None
        if self.analysis_active():
            self.ctx.status("Analysis is running: Stop Analysis before launching an inference run", 6000)
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
            config = self._after_gpu_fault(run_config.from_model(doc.model, doc.path))
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
            self.ctx.status(f"Run not started: {exc}", 10000)
            return None
        req = RunRequest(run_id, doc.id, doc.model.copy(), self.ctx.registry, config, base, model_file,
                         write_snapshot=snapshot, command=entry.command, started=started)
        self._runs[run_id] = req
        self.logger.add(entry)
        self.runner.start(req)
        self.label.setText(f"Running {doc.model.name}: starting…")
        self.progress.setRange(0, 0)
        for widget in (self.label, self.progress, self.cancel_button):
            widget.show()
        self.changed.emit()
        return run_id

    def _after_gpu_fault(self, config: run_config.RunConfig) -> run_config.RunConfig:
        """After a GPU fault the CUDA context of this process is lost: a run asking for the GPU is refused (the
        message says what to do), one on ``auto`` runs on the CPU with a note."""
        if not self.gpu_lost or config.backend == "numpy":
            return config
        if config.backend == "cupy":
            raise LayerLabError("GPU runs need a restart of LayerLab after the GPU fault of an earlier run; save your "
                                "work and restart, or set the backend to numpy in Network Settings to run on the CPU")
        note = "runs on the CPU (numpy): GPU runs need a restart of LayerLab after the GPU fault of an earlier run"
        return dataclasses.replace(config, backend="numpy", warnings=(*config.warnings, note))

    def cancel_inference(self) -> bool:
        """Tools > Cancel Inference: the run stops before its next layer; False when none runs."""
        if not self.runner.cancel():
            return False
        self.label.setText(self.label.text().split(":")[0] + ": cancelling…")
        return True

    def _name(self, run_id: int) -> str:
        req = self._runs.get(run_id)
        return req.model.name if req else "model"

    def _started(self, run_id: int, backend: str, device: str, fmt: str) -> None:
        self.logger.update_entry(run_id, backend=backend, device=device, format=fmt)

    def _phase(self, run_id: int, text: str) -> None:
        if run_id == self.runner.current_run:
            self.label.setText(f"Running {self._name(run_id)}: {text}…")

    def _progress(self, run_id: int, i: int, n: int) -> None:
        if run_id == self.runner.current_run:
            self.label.setText(f"Running {self._name(run_id)}: iteration {i} of {n}")
            self.progress.setRange(0, n)
            self.progress.setValue(i)

    def _warming(self, run_id: int, done: int, total: int, what: str) -> None:
        """The untimed runs before the timed ones, layer by layer (the first loads or compiles the kernels)."""
        if run_id == self.runner.current_run and not self.label.text().endswith("cancelling…"):
            self.label.setText(f"Running {self._name(run_id)}: warm-up {done} of {total} layers, {what}")
            self.progress.setRange(0, total)
            self.progress.setValue(done)

    def _ended(self, run_id: int, message: str) -> None:
        self._runs.pop(run_id, None)
        for widget in (self.label, self.progress, self.cancel_button):
            widget.hide()
        self.ctx.status(message, 12000)
        self.changed.emit()

    def _finished(self, run_id: int, result: RunResult) -> None:
        self.logger.update_entry(run_id, status="done", avg_ms=result.avg_ms, report_path=str(result.json_path))
        name = self._name(run_id)
        self._ended(run_id, f"Run of {name} done: {result.avg_ms:.3f} ms per iteration ({result.backend}, "
                            f"{result.format}); report {result.json_path}")
        self.reports.show_run_report(result)

    def _failed(self, run_id: int, reason: str) -> None:
        self.logger.update_entry(run_id, status="failed", reason=reason)
        self.logger_dock.show()
        self._ended(run_id, f"Run of {self._name(run_id)} failed: {reason}")

    def _gpu_fault(self, _run_id: int, reason: str) -> None:
        """A kernel faulted on the GPU (the run already failed with ``reason``): tell the user what still works."""
        self.gpu_lost = reason
        QtWidgets.QMessageBox.warning(
            self.ctx.parent, "GPU fault — LayerLab",
            f"The run stopped: {reason}\n\n"
            "What still works: editing, saving and exporting your models, and runs on the CPU (backend auto or "
            "numpy in Network Settings; auto now uses the CPU).\n"
            "GPU runs and GPU analysis need a restart of LayerLab: the GPU's state in this process is lost.\n\n"
            "Your open models are untouched. Save your work (File > Save) before you restart.")

    def _cancelled(self, run_id: int) -> None:
        self.logger.update_entry(run_id, status="cancelled")
        self._ended(run_id, f"Run of {self._name(run_id)} cancelled")
