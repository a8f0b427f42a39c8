"""The GUI-thread face of an AnalysisSession living in the worker thread.

Qt delivers a signal to a plain Python callable in the thread that emits it, so GUI code must never
connect a worker signal straight to a lambda. The proxy is a QObject of the GUI thread that re-emits
every session signal (queued across threads): panels connect to the proxy. Commands go the other way
through ``send`` (queued to the worker); debugger calls are thread-safe and made directly."""
from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore

from app.analysis.live import AnalysisSession

SIGNALS = ("started", "stopped", "failed", "overview", "options", "option_error", "input_frame", "outputs",
           "layer_data", "ran", "timings", "paused", "resumed", "drift",
           "fix_progress", "precision_fixed")


class SessionProxy(QtCore.QObject):
    """Re-emits the session's signals in the GUI thread and forwards commands to it.

    ``send``: how commands reach the session's thread (the designer passes its worker's queue); with
    None the proxy starts a thread of its own for the session (tests, tools)."""

    started = QtCore.Signal(object)
    stopped = QtCore.Signal()
    failed = QtCore.Signal(str, str)
    overview = QtCore.Signal(object)
    options = QtCore.Signal(object)
    option_error = QtCore.Signal(str, str, str)
    input_frame = QtCore.Signal(object)
    outputs = QtCore.Signal(object)
    layer_data = QtCore.Signal(object)
    ran = QtCore.Signal(object)
    timings = QtCore.Signal(object)
    paused = QtCore.Signal(object)
    resumed = QtCore.Signal()
    drift = QtCore.Signal(object)
    fix_progress = QtCore.Signal(float, str)
    precision_fixed = QtCore.Signal(object)
    _command = QtCore.Signal(str, object)

    def __init__(self, session: AnalysisSession | None = None, send: Callable[[str, object], None] | None = None,
                 parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session or AnalysisSession()
        self.thread: QtCore.QThread | None = None
        if send is None:
            self.thread = QtCore.QThread(self)
            self.thread.setObjectName("LayerLabAnalysis")
            self.session.moveToThread(self.thread)
            self._command.connect(self.session.handle, QtCore.Qt.ConnectionType.QueuedConnection)
            self.thread.start()
            send = self._command.emit
        self._send = send
        for name in SIGNALS:
            if name != "ran":
                getattr(self.session, name).connect(getattr(self, name), QtCore.Qt.ConnectionType.QueuedConnection)
        self.session.ran.connect(self._ran, QtCore.Qt.ConnectionType.QueuedConnection)

    @QtCore.Slot(object)
    def _ran(self, info: object) -> None:
        """``ran`` comes last of a run: once its slots returned the views show that run, and the session may
        prepare the next video frame (frames falling due meanwhile are dropped, not queued in the GUI)."""
        self.ran.emit(info)
        self.session.frame_shown()

    @property
    def debugger(self):  # noqa: ANN201 - engine.debugger.Debugger, thread-safe
        return self.session.debugger

    def send(self, command: str, payload: object = None) -> None:
        """Queue ``cmd_<command>(payload)`` in the session's thread."""
        self._send(command, payload)

    def request_layer(self, name: str | None) -> None:
        """Show ``name`` in the inspector: served by the paused worker, or queued when it runs."""
        if not self.session.request_layer(name):
            self.send("inspect", name)

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Stop the session in its thread (a paused inference is aborted first), and end its own thread
        if it has one; True when that thread ended in time. Blocks, without a nested event loop."""
        self.session.debugger.stop()
        home = self.session.thread()
        if home is not None and home is not QtCore.QThread.currentThread() and home.isRunning():
            QtCore.QMetaObject.invokeMethod(self.session, "stop_now", QtCore.Qt.ConnectionType.BlockingQueuedConnection)
        else:
            self.session.stop_now()
        if self.thread is None:
            return True
        self.thread.quit()
        return self.thread.wait(QtCore.QDeadlineTimer(timeout_ms))
