"""The inference worker: one QThread with one QObject that owns the engine Network.

The GUI thread never runs inference. It sends commands to the worker through a queued signal
(``RunController.submit(command, payload)``; the worker runs ``cmd_<command>(payload)`` in its
thread) and receives progress, results and failures through the worker's signals. Cancelling is the
one call that is not queued: ``RunController.cancel()`` sets a thread-safe flag that the running
profile polls before every layer, so a run stops within one layer's time.

The built Network is kept between runs: a run of an unchanged model with the same backend, format,
weights, seed and fusing reuses it (no rebuild, no weight reload). Analysis mode goes through
``cmd_analysis((command, payload))`` to ``Worker.analysis`` (app/analysis/session.py), which keeps its
own Network built for the whole analysis session in this same thread."""
from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6 import QtCore

from app.analysis.live import AnalysisSession
from app.commands import dispatch
from app.run_config import RunConfig
from engine import modelfile
from engine import report as rep
from engine.device_errors import GpuFault, translate
from engine.errors import LayerLabError
from engine.model import Model
from engine.network import Network
from engine.profiling import Cancelled, Warming
from engine.registry import Registry
from engine.run import load_inputs, make_report, open_network, run_timed


@dataclass

class RunRequest:
    """One run: a private copy of the model (the GUI may edit the original meanwhile) and its settings."""

    run_id: int
    doc_id: int | None
    model: Model
    registry: Registry
    config: RunConfig
    report_base: Path  # the report is written to report_base.json and report_base.html
    model_file: str  # the file the command line names (the model's file, or a snapshot written for the run)
    write_snapshot: bool = False  # write ``model`` to ``model_file`` (unsaved or modified models)
    command: str = ""
    started: _dt.datetime = field(default_factory=_dt.datetime.now)


@dataclass
class RunResult:
    run_id: int
    doc_id: int | None
    report: dict[str, Any]
    json_path: Path
    html_path: Path
    avg_ms: float
    backend: str
    device: str
    format: str
    reused_network: bool


def build_key(model: Model, config: RunConfig) -> str:
    """What a built Network depends on: the layers (not their canvas positions), rules and the settings
    that change the build. Equal keys mean the previous Network can run again as it is."""
    content = model.content()
    for layer in content["layers"]:
        layer.pop("position", None)
    content.pop("settings", None)
    weights_stamp = None
    if config.weights:
        w = Path(config.weights)
        files = [w] if w.is_file() else sorted(w.glob("*.npy"))
        weights_stamp = [(f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files]
    build = {"backend": config.backend, "format": config.format, "weights": config.weights, "stamp": weights_stamp,
             "seed": config.seed, "fusing": config.fusing,
             "imported": id(model.weights_source) if model.weights_source is not None else None}
    return json.dumps([content, build], sort_keys=True, default=str)


class Worker(QtCore.QObject):
    """Lives in the worker thread. Signals carry the run id first."""

    run_started = QtCore.Signal(int, str, str, str)  # run id, backend, device, format
    phase = QtCore.Signal(int, str)  # run id, what is being done ("building the network", ...)
    progress = QtCore.Signal(int, int, int)  # run id, iteration i, of n
    #: run id, layers of the untimed runs done, of total, what now ("layer NAME" or "compiling kernel K for NAME")
    warming = QtCore.Signal(int, int, int, str)
    run_finished = QtCore.Signal(int, object)  # run id, RunResult
    run_failed = QtCore.Signal(int, str)  # run id, reason
    run_cancelled = QtCore.Signal(int)
    command_failed = QtCore.Signal(str, str)  # command, reason (commands other than run)
    gpu_fault = QtCore.Signal(int, str)  # run id, reason: a kernel faulted, the CUDA context is lost (after run_failed)

    def __init__(self) -> None:
        super().__init__()
        self.net: Network | None = None
        self.net_key: str | None = None
        self.net_notes: list[str] = []  # notes about the kept Network (backend fallback), repeated in every report
        self.builds = 0  # how many Networks were built (tests check the reuse)
        self._cancel = threading.Event()
        self._last_progress = 0.0
        # analysis mode: a session that keeps its own Network built; a child, so it lives in this thread too
        self.analysis = AnalysisSession(self)

    # ---- thread-safe calls -----------------------------------------------------------------------
    def request_cancel(self) -> None:
        """Called from any thread: the running command stops before its next layer."""
        self._cancel.set()

    def clear_cancel(self) -> None:
        self._cancel.clear()

    def cancelled(self) -> bool:
        return self._cancel.is_set()

    # ---- commands (run in the worker thread) -----------------------------------------------------
    @QtCore.Slot(str, object)
    def handle(self, command: str, payload: object) -> None:
        """Dispatch a queued command to ``cmd_<command>``."""
        dispatch(self, "the worker", command, payload, self.command_failed.emit)

    def cmd_analysis(self, payload: tuple[str, object]) -> None:
        """(command, payload) for the analysis session (it runs ``AnalysisSession.cmd_<command>``)."""
        command, arg = payload
        self.analysis.handle(command, arg)

    def cmd_forget(self, _payload: object = None) -> None:
        """Drop the kept Network (its memory is released)."""
        self.net, self.net_key = None, None

    def cmd_run(self, req: RunRequest) -> None:
        """Build (or reuse) the network, run and time it, write the report. A failure ends the run with
        ``run_failed`` and drops the kept Network, so the next run starts afresh; a GPU fault is also announced
        with ``gpu_fault``."""
        try:
            result = self._run(req)
        except Cancelled:
            self.run_cancelled.emit(req.run_id)
        except LayerLabError as exc:
            self._failed(req.run_id, exc)
        except MemoryError:
            self.cmd_forget()
            self.run_failed.emit(req.run_id, "out of memory (try a smaller input or the other backend)")
        except Exception as exc:  # a bug: report it as a failed run, never crash the designer
            gpu = translate(exc, f"run of {req.model.name}")  # a GPU error outside any layer (inputs, copies)
            if gpu is not None:
                self._failed(req.run_id, gpu)
                return
            traceback.print_exc()
            self.cmd_forget()
            self.run_failed.emit(req.run_id, f"internal error: {type(exc).__name__}: {exc}")
        else:
            self.run_finished.emit(req.run_id, result)

    def _failed(self, run_id: int, exc: LayerLabError) -> None:
        self.cmd_forget()  # its buffers go (after running out of GPU memory, the next run must not keep them)
        self.run_failed.emit(run_id, str(exc))
        if isinstance(exc, GpuFault):
            self.gpu_fault.emit(run_id, str(exc))

    # ---- the run ---------------------------------------------------------------------------------
    def _progress(self, run_id: int, i: int, n: int) -> None:
        """Emit progress at most every 50 ms (and for the first and last iteration): a fast network must not
        flood the GUI's event loop."""
        now = time.monotonic()
        if i in (1, n) or now - self._last_progress >= 0.05:
            self._last_progress = now
            self.progress.emit(run_id, i, n)

    @contextlib.contextmanager
    def _compiles_reported(self, run_id: int, backend: str) -> Iterator[Warming]:
        """The ``warming`` callback of a run: ``warming`` signals at most every 100 ms, and at once when a CPU kernel
        starts compiling (named, with the layer it is for)."""
        state = {"done": 0, "total": 1, "layer": ""}

        def warming(done: int, total: int, layer: str) -> None:
            state.update(done=done, total=total, layer=layer)
            now = time.monotonic()
            if done in (1, total) or now - self._last_progress >= 0.1:
                self._last_progress = now
                self.warming.emit(run_id, done, total, f"layer {layer}")

        def compiling(kernel: str) -> None:
            layer = f" for {state['layer']}" if state["layer"] else ""
            self.warming.emit(run_id, state["done"], state["total"], f"compiling kernel {kernel}{layer}")

        if backend != "numpy":
            yield warming
            return
        from engine.backends.cpu.compile_cache import compiles_reported  # noqa: PLC0415 - with the CPU backend

        with compiles_reported(compiling):
            yield warming

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise Cancelled("the run was cancelled")

    def _network(self, req: RunRequest, notes: list[str]) -> tuple[Network, bool]:
        cfg = req.config
        key = build_key(req.model, cfg)
        if self.net is not None and key == self.net_key:
            notes += self.net_notes
            return self.net, True
        self.cmd_forget()
        self.phase.emit(req.run_id, "building the network")
        notice = io.StringIO()
        net = open_network(req.model, cfg, req.registry, notice=notice)
        self.net_notes = [line.removeprefix("layerlab: ") for line in notice.getvalue().splitlines() if line.strip()]
        notes += self.net_notes
        self.builds += 1
        self.net, self.net_key = net, key
        return net, False

    def _run(self, req: RunRequest) -> RunResult:
        cfg = req.config
        notes = list(cfg.warnings)
        self._check_cancel()
        net, reused = self._network(req, notes)
        backend = net.backend
        fmt = str(net.fmt)
        self.run_started.emit(req.run_id, backend.name, backend.device_name, fmt)
        load_inputs(net, cfg).close()
        self.phase.emit(req.run_id, "warm-up" if cfg.warmup else "running")
        with self._compiles_reported(req.run_id, backend.name) as warming:
            result = run_timed(net, cfg, progress=lambda i, n: self._progress(req.run_id, i, n),
                               cancelled=self._cancel.is_set, warming=warming)
        self.phase.emit(req.run_id, "writing the report")
        if req.write_snapshot:
            Path(req.model_file).parent.mkdir(parents=True, exist_ok=True)
            modelfile.save(req.model, req.model_file)
        doc = make_report(net, result, cfg, model=req.model, model_path=req.model_file, notes=notes)
        doc["run"]["command"] = req.command
        json_path = rep.write_json(doc, req.report_base.with_suffix(".json"))
        html_path = rep.write_html(doc, req.report_base.with_suffix(".html"))
        return RunResult(req.run_id, req.doc_id, doc, json_path, html_path, doc["network"]["avg_ms"], backend.name,
                         backend.device_name, fmt, reused)


class RunController(QtCore.QObject):
    """GUI-side owner of the worker thread: one run at a time, cancel, orderly shutdown."""

    submit_command = QtCore.Signal(str, object)

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.worker_thread = QtCore.QThread(self)
        self.worker_thread.setObjectName("LayerLabWorker")
        self.worker = Worker()
        self.worker.moveToThread(self.worker_thread)
        self.submit_command.connect(self.worker.handle, QtCore.Qt.ConnectionType.QueuedConnection)
        self.current_run: int | None = None
        for sig in (self.worker.run_finished, self.worker.run_failed):
            sig.connect(self._run_ended)
        self.worker.run_cancelled.connect(self._run_ended)
        app = QtCore.QCoreApplication.instance()
        if app is not None:  # a safety net: the thread never outlives the application
            app.aboutToQuit.connect(self.shutdown)

    @property
    def busy(self) -> bool:
        return self.current_run is not None

    def _run_ended(self, run_id: int, *_: object) -> None:
        if run_id == self.current_run:
            self.current_run = None

    def submit(self, command: str, payload: object = None) -> None:
        """Queue a command for the worker (it runs ``Worker.cmd_<command>(payload)`` in its thread).

        The thread starts with the first command (a window that never runs anything has no thread)."""
        if not self.worker_thread.isRunning():
            self.worker_thread.start()
        self.submit_command.emit(command, payload)

    def start(self, request: RunRequest) -> bool:
        """Queue a run; False (nothing queued) while another run is going on."""
        if self.busy:
            return False
        self.current_run = request.run_id
        self.worker.clear_cancel()
        self.submit("run", request)
        return True

    def cancel(self) -> bool:
        """Ask the running run to stop (it ends with ``run_cancelled``); False when nothing runs."""
        if not self.busy:
            return False
        self.worker.request_cancel()
        return True

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Cancel any run and stop the thread; True when it stopped within ``timeout_ms``."""
        if not self.worker_thread.isRunning():
            return True
        self.worker.request_cancel()
        self.worker_thread.quit()
        return self.worker_thread.wait(QtCore.QDeadlineTimer(timeout_ms))
