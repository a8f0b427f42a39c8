"""The debugger at engine level: a worker thread runs the network and blocks at breakpoints; the test
thread steps, resumes and stops it, and checks the order of evaluated layers."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.debugger import Debugger, DebugStopped, PauseInfo
from engine.errors import LayerLabError
from engine.model import Model
from engine.network import Network
from tests.harness import conv_bn_model

ORDER = ["inp", "c1", "c2", "c3", "c4", "out"]
T = 10.0  # generous timeout: a failure must not hang the suite


def chain(registry, reuse: bool = False, fusing: str = "off") -> Network:
    m = Model("chain")
    m.add_layer("input", "inp", params={"dimensions": "1x2x6x6"})
    prev = "inp"
    for i in range(1, 5):
        m.add_layer("convolution", f"c{i}", params={"num_output_channels": "2"}, inputs=[prev])
        prev = f"c{i}"
    m.add_layer("output", "out", inputs=[prev])
    return Network(m, registry, reuse_buffers=reuse, fusing=fusing)


class Worker:
    """Runs net.run() in a thread and records what happened."""

    def __init__(self, net: Network, dbg: Debugger) -> None:
        self.net, self.dbg = net, dbg
        self.evaluated: list[str] = []
        self.pauses: list[PauseInfo] = []
        self.result: list[str] | None = None
        self.error: BaseException | None = None
        dbg.on_pause = self.pauses.append
        net.hooks.before_layer.append(lambda _n, name, _o: self.evaluated.append(name))
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        def body() -> None:
            try:
                self.result = self.net.run()
            except BaseException as exc:  # reported to the test thread
                self.error = exc
        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def join(self) -> None:
        assert self.thread is not None
        self.thread.join(T)
        assert not self.thread.is_alive(), "the worker did not finish"


def paused_after(w: Worker, layer: str) -> None:
    assert w.dbg.wait_paused(T), "the worker did not pause"
    assert w.dbg.paused_at == layer


def start_paused(net: Network, *breakpoints: str) -> tuple[Debugger, Worker]:
    """A debugger attached to ``net`` with ``breakpoints``, and a worker running ``net``, paused at the first."""
    dbg = Debugger()
    dbg.attach(net)
    for layer in breakpoints:
        dbg.add_breakpoint(layer)
    w = Worker(net, dbg)
    w.start()
    paused_after(w, breakpoints[0])
    return dbg, w
    assert w.evaluated[-1] == layer  # nothing ran past the paused layer
    assert w.dbg.computed == ORDER[: ORDER.index(layer) + 1]


def test_breakpoint_step_resume_order(registry):
    net = chain(registry)
    dbg, w = start_paused(net, "c2", "c4")
    assert w.pauses[-1] == PauseInfo("c2", "breakpoint", ("inp", "c1", "c2"))
    assert dbg.debugging and w.result is None
    threading.Event().wait(0.05)  # paused means paused: no progress while waiting
    assert w.evaluated == ["inp", "c1", "c2"]
    dbg.step()
    paused_after(w, "c3")
    assert w.pauses[-1].reason == "step"
    dbg.resume()
    paused_after(w, "c4")
    assert w.pauses[-1].reason == "breakpoint"
    dbg.resume()
    w.join()
    assert w.error is None
    assert w.result == ORDER and w.evaluated == ORDER
    assert not dbg.paused and not dbg.debugging
    assert [p.layer for p in w.pauses] == ["c2", "c3", "c4"]


def test_inspect_computed_layers_while_paused(registry):
    net = chain(registry)
    ref = Network(net.model, registry, fusing="off")
    ref.run()
    dbg, w = start_paused(net, "c3")
    main_thread = threading.get_ident()
    fut = dbg.submit(lambda: (threading.get_ident(), net.output("c1"), net.output("c3")))
    ident, c1, c3 = fut.result(T)
    assert ident != main_thread  # ran in the worker thread
    np.testing.assert_allclose(c1, ref.output("c1"), rtol=1e-6)
    np.testing.assert_allclose(c3, ref.output("c3"), rtol=1e-6)
    assert w.evaluated == ["inp", "c1", "c2", "c3"]  # reading did not compute anything
    with pytest.raises(LayerLabError, match="boom"):
        dbg.submit(lambda: (_ for _ in ()).throw(LayerLabError("boom"))).result(T)
    dbg.resume()
    w.join()
    with pytest.raises(LayerLabError, match="not paused"):
        dbg.submit(lambda: 1).result(T)


def test_stop_unblocks_the_paused_worker_and_next_run_recomputes(registry):
    net = chain(registry)
    dbg, w = start_paused(net, "c1")
    dbg.stop()
    w.join()
    assert isinstance(w.error, DebugStopped)
    assert not dbg.paused and not dbg.debugging
    dbg.clear_breakpoints()
    w.evaluated.clear()
    assert net.run() == ORDER  # the stopped pass left everything to recompute
    ref = Network(net.model, registry, fusing="off")
    np.testing.assert_allclose(net.output("out"), ref.infer()["out"], rtol=1e-6)


def test_pause_request_and_breakpoint_added_while_running(registry):
    net = chain(registry)
    dbg = Debugger()
    dbg.attach(net)
    gate = threading.Event()
    net.hooks.before_layer.insert(0, lambda _n, name, _o: gate.wait(T) if name == "c1" else None)
    w = Worker(net, dbg)
    w.start()
    dbg.add_breakpoint("c3")  # added while the worker is inside the inference
    gate.set()
    paused_after(w, "c3")
    dbg.remove_breakpoint("c3")
    dbg.pause()
    dbg.resume()  # resume clears a pending pause request and runs to the end: no breakpoint is left
    w.join()
    assert w.result == ORDER and [p.layer for p in w.pauses] == ["c3"]
    dbg.pause()  # a pause request waits for the next inference
    net.mark_affected("c2")
    w2 = Worker(net, dbg)
    w2.start()
    assert dbg.wait_paused(T) and dbg.paused_at == "c2"
    assert w2.pauses[-1].reason == "pause"
    dbg.resume()
    w2.join()
    assert w2.result == ["c2", "c3", "c4", "out"]


def test_breakpoints_pause_every_inference_and_stepping_past_the_end_finishes(registry):
    net = chain(registry)
    dbg = Debugger()
    dbg.attach(net)
    dbg.add_breakpoint("c4")
    for _ in range(2):  # e.g. two video frames
        net.mark_affected("inp")
        w = Worker(net, dbg)
        w.start()
        paused_after(w, "c4")
        dbg.step()
        paused_after(w, "out")
        dbg.step()  # nothing left: the inference finishes
        w.join()
        assert w.result == ORDER
    assert not dbg.paused


def test_unknown_and_fused_layers_are_refused(registry):
    net = Network(conv_bn_model("1x2x6x6", 2), registry, fusing="on")
    dbg = Debugger()
    dbg.attach(net)
    with pytest.raises(LayerLabError, match="no layer 'nope'"):
        dbg.add_breakpoint("nope")
    assert net.fused is not None and net.fused.merged == {"conv": "bn"}
    with pytest.raises(LayerLabError, match="conv was fused into bn"):
        dbg.add_breakpoint("conv")
    dbg.detach()
    assert dbg.network is None and not net.hooks.after_layer
