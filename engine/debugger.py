"""Layer breakpoints, pause, step and resume for a Network, built on its debugger hooks.

The thread that runs the network (the worker) blocks inside the after-layer hook while execution is
paused, so a pause stops the network, never the GUI. Every other method is meant to be called from
another thread (the GUI): ``step`` runs the next computed layer and pauses again, ``resume`` runs to
the next breakpoint (or to the end of the inference), ``stop`` makes the paused or running inference
raise ``DebugStopped`` in the worker. While paused, ``submit`` runs a function in the worker thread
(to read any layer already computed, on the worker's device context) and returns its future.

Execution pauses *after* a breakpoint layer has been computed, so its output can be inspected. A
pass that paused leaves debugging when it finishes; breakpoints stay and pause the next pass again
(with video: every new frame), until they are removed."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from engine.errors import LayerLabError
from engine.network import Network


class DebugStopped(LayerLabError):
    """The inference was stopped from the debugger."""


@dataclass(frozen=True)
class PauseInfo:
    """Where execution paused: after ``layer`` (``reason``: breakpoint, step or pause), with the layers
    computed so far in this inference, in order."""

    layer: str
    reason: str
    computed: tuple[str, ...] = field(default_factory=tuple)


class Debugger:
    """Breakpoints and stepping on one network at a time (``attach``/``detach``).

    ``on_pause(info)`` and ``on_resume()`` are called in the worker thread (emit signals from them)."""

    def __init__(self, on_pause: Callable[[PauseInfo], None] | None = None,
                 on_resume: Callable[[], None] | None = None) -> None:
        self.on_pause = on_pause
        self.on_resume = on_resume
        self._cond = threading.Condition()
        self._breakpoints: set[str] = set()
        self._net: Network | None = None
        self._paused_at: str | None = None
        self._step = False
        self._pause_request = False
        self._stop = False
        self._in_pass = False
        self._computed: list[str] = []
        self._tasks: list[tuple[Callable[[], Any], Future[Any]]] = []
        self._hits: dict[str, int] = {}
        self._paused_s = 0.0
        self.debugging = False  # a pause happened in the current inference

    # ---- wiring ------------------------------------------------------------------------------------
    def attach(self, net: Network) -> None:
        """Hook into ``net`` (detaching from a previous network). Breakpoints are kept."""
        self.detach()
        self._net = net
        net.hooks.before_inference.append(self._before_inference)
        net.hooks.after_layer.append(self._after_layer)
        net.hooks.after_inference.append(self._after_inference)

    def detach(self) -> None:
        net, self._net = self._net, None
        if net is None:
            return
        for hooks, fn in ((net.hooks.before_inference, self._before_inference),
                          (net.hooks.after_layer, self._after_layer),
                          (net.hooks.after_inference, self._after_inference)):
            if fn in hooks:
                hooks.remove(fn)

    @property
    def network(self) -> Network | None:
        return self._net

    # ---- breakpoints -------------------------------------------------------------------------------
    @property
    def breakpoints(self) -> frozenset[str]:
        with self._cond:
            return frozenset(self._breakpoints)

    def add_breakpoint(self, layer: str) -> None:
        """Pause after ``layer`` is computed (from now on, in this inference too if it is still ahead).

        A layer that a fusing rule merged into another raises LayerLabError naming that layer."""
        if self._net is not None:
            self._net.layer(layer)  # unknown or fused-away layers are refused with the reason
        with self._cond:
            self._breakpoints.add(layer)

    def remove_breakpoint(self, layer: str) -> None:
        with self._cond:
            self._breakpoints.discard(layer)

    def clear_breakpoints(self) -> None:
        with self._cond:
            self._breakpoints.clear()

    # ---- control (any thread) ----------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        with self._cond:
            return self._paused_at is not None

    @property
    def paused_at(self) -> str | None:
        with self._cond:
            return self._paused_at

    @property
    def computed(self) -> list[str]:
        """Layers computed so far in the current (or latest) inference, in order."""
        with self._cond:
            return list(self._computed)

    def hits(self, layer: str) -> int:
        """How many times execution has paused at breakpoint ``layer`` (to tell whether a pass reached it since)."""
        with self._cond:
            return self._hits.get(layer, 0)

    @property
    def paused_seconds(self) -> float:
        """Seconds the current (or latest) inference spent paused: not time the network worked."""
        with self._cond:
            return self._paused_s

    def pause(self) -> None:
        """Pause after the next layer that is computed (if an inference is running or starts)."""
        with self._cond:
            self._pause_request = True

    def step(self) -> None:
        """When paused: compute the next layer and pause again after it."""
        with self._cond:
            if self._paused_at is None:
                return
            self._step = True
            self._paused_at = None
            self._cond.notify_all()

    def resume(self) -> None:
        """When paused: run to the next breakpoint, or to the end of the inference."""
        with self._cond:
            self._pause_request = False
            if self._paused_at is None:
                return
            self._paused_at = None
            self._cond.notify_all()

    def stop(self) -> None:
        """Abort the current inference: the worker raises DebugStopped (at once if paused, otherwise
        after the layer it is computing). Pending ``submit`` calls are cancelled."""
        with self._cond:
            self._stop = self._in_pass
            self._paused_at = None
            self._pause_request = False
            self._step = False
            self._cond.notify_all()

    def wait_paused(self, timeout: float | None = None) -> bool:
        """Block until execution is paused (True) or ``timeout`` seconds pass (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._paused_at is not None, timeout)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no inference is running (True) or ``timeout`` seconds pass (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._in_pass, timeout)

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` in the paused worker thread; its Future holds the result. When not paused the
        Future fails at once with LayerLabError (call the worker the usual way then)."""
        fut: Future[Any] = Future()
        with self._cond:
            if self._paused_at is None:
                fut.set_exception(LayerLabError("the network is not paused"))
                return fut
            self._tasks.append((fn, fut))
            self._cond.notify_all()
        return fut

    # ---- hooks (worker thread) ---------------------------------------------------------------------
    def _before_inference(self, _net: Network) -> None:
        with self._cond:
            self._in_pass = True
            self._stop = False
            self._computed = []
            self._paused_s = 0.0
            self.debugging = False

    def _after_inference(self, _net: Network) -> None:
        with self._cond:
            self._in_pass = False
            self._step = False  # stepping past the last layer finishes the inference
            self.debugging = False
            self._cond.notify_all()

    def _after_layer(self, _net: Network, name: str, _out: Any) -> None:
        with self._cond:
            if not self._in_pass:  # a recomputation outside an inference (reading a recycled output)
                return
            self._computed.append(name)
            self._check_stop()
            if name in self._breakpoints:
                reason = "breakpoint"
                self._hits[name] = self._hits.get(name, 0) + 1
            elif self._step:
                reason = "step"
            elif self._pause_request:
                reason = "pause"
            else:
                return
            self._step = self._pause_request = False
            self._paused_at = name
            self.debugging = True
            info = PauseInfo(name, reason, tuple(self._computed))
            self._cond.notify_all()
        t0 = time.perf_counter()
        if self.on_pause is not None:
            self.on_pause(info)
        try:
            self._wait_while_paused()
        finally:
            with self._cond:
                self._paused_s += time.perf_counter() - t0
        if self.on_resume is not None:
            self.on_resume()

    def _wait_while_paused(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._paused_at is None or self._stop or bool(self._tasks))
                if self._stop:
                    self._fail_tasks()
                    self._check_stop()
                tasks, self._tasks = self._tasks, []
                if not tasks and self._paused_at is None:
                    return
            for fn, fut in tasks:  # outside the lock: a task may take time (device copies)
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn())
                    except BaseException as exc:  # handed to the caller through the future
                        fut.set_exception(exc)

    def _fail_tasks(self) -> None:
        for _fn, fut in self._tasks:
            fut.cancel()
        self._tasks = []

    def _check_stop(self) -> None:
        if self._stop:
            self._stop = False
            self._in_pass = False
            self._paused_at = None
            self.debugging = False
            self._cond.notify_all()
            raise DebugStopped("the inference was stopped from the debugger")
