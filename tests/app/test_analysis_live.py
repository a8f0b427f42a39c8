"""The analysis session in a real worker thread: runtime options rerun only affected layers, inputs
and video frames, breakpoints paused in the worker while the GUI thread stays free, precision drift."""
from __future__ import annotations

import threading

import numpy as np

from engine.model import Model
from tests.app.analysis_helpers import compare_model, start, write_video

WAIT = 10_000


def started(qtbot, st, registry, model=None, **config):
    with qtbot.waitSignals([st.started, st.ran], timeout=WAIT) as blocker:
        start(st, model or compare_model(), registry, **config)
    return blocker.all_signals_and_args


def last_run(qtbot, st, command, payload):
    with qtbot.waitSignal(st.ran, timeout=WAIT) as blocker:
        st.send(command, payload)
    return blocker.args[0]


def test_start_then_option_change_reruns_only_affected(qtbot, st, registry):
    runs = []
    st.ran.connect(runs.append)
    opts = []
    st.options.connect(opts.append)
    started(qtbot, st, registry)
    assert set(runs[-1].executed) == {"inp", "conv", "conv2", "cmp", "out"}
    assert [o["name"] for o in opts[-1]["cmp"]][:2] == ["blend", "factor"]
    info = last_run(qtbot, st, "set_option", ("cmp", "divider", 0.25))
    assert info.executed == ["cmp", "out"]
    assert opts[-1]["cmp"][2]["value"] == 0.25
    with qtbot.waitSignal(st.option_error, timeout=WAIT) as blocker:
        st.send("set_option", ("cmp", "factor", "7"))
    assert blocker.args[:2] == ["cmp", "factor"] and "is not a number in [0, 1]" in blocker.args[2]
    assert st.session.builds == 1  # the network stays built


def test_slider_drag_coalesces_into_one_run(qtbot, st, registry):
    started(qtbot, st, registry)
    runs = []
    st.ran.connect(runs.append)
    opts = []
    st.options.connect(opts.append)
    with qtbot.waitSignal(st.ran, timeout=WAIT):
        for v in (0.1, 0.2, 0.3, 0.4):
            st.send("set_option", ("cmp", "divider", v))
    qtbot.waitUntil(lambda: bool(opts) and opts[-1]["cmp"][2]["value"] == 0.4, timeout=WAIT)
    qtbot.wait(100)
    # the commands queued while the session was busy coalesce: one run, or two when the session thread took the
    # first command before the others were posted (a scheduling race on a loaded machine), never one per value
    assert 1 <= len(runs) <= 2 and all(r.executed == ["cmp", "out"] for r in runs), runs


def test_video_input_frames_step_seek_and_play(qtbot, st, registry, tmp_path):
    video = write_video(tmp_path / "clip.avi", frames=6)
    started(qtbot, st, registry)
    frames = []
    st.input_frame.connect(frames.append)
    info = last_run(qtbot, st, "open_input", ("inp", str(video)))
    assert "inp" in info.executed
    f = frames[-1]
    assert (f.kind, f.frame, f.frame_count, f.shape) == ("video", 0, 6, "1x3x24x32")
    assert abs(int(f.image.mean()) - 30) <= 3
    last_run(qtbot, st, "step_frame", ("inp", 1))
    qtbot.waitUntil(lambda: frames[-1].frame == 1, timeout=WAIT)
    assert abs(int(frames[-1].image.mean()) - 60) <= 3
    last_run(qtbot, st, "seek", ("inp", 4))
    qtbot.waitUntil(lambda: frames[-1].frame == 4, timeout=WAIT)
    assert abs(int(frames[-1].image.mean()) - 150) <= 3
    last_run(qtbot, st, "step_frame", ("inp", -1))
    qtbot.waitUntil(lambda: frames[-1].frame == 3, timeout=WAIT)
    st.send("play", "inp")  # plays frames 4 and 5, then stops at the end
    qtbot.waitUntil(lambda: frames[-1].frame == 5 and not frames[-1].playing, timeout=WAIT)
    seen = [f.frame for f in frames]
    assert seen[seen.index(3):][:3] == [3, 4, 5]


def test_breakpoint_pauses_worker_and_gui_reads_layers(qtbot, st, registry):
    started(qtbot, st, registry)
    with qtbot.waitSignal(st.paused, timeout=WAIT) as blocker:
        st.send("break_at", "conv2")
    info = blocker.args[0]
    assert info.layer == "conv2" and info.reason == "breakpoint" and info.computed == ("inp", "conv", "conv2")
    data = []
    st.layer_data.connect(data.append)
    assert st.session.request_layer("conv")  # computed in an earlier run, still valid: buffers are kept
    qtbot.waitUntil(lambda: bool(data), timeout=WAIT)
    assert data[-1].name == "conv" and data[-1].tensor.shape == (1, 3, 24, 32)
    assert data[-1].weights["weights"].shape == (3, 3, 3, 3)
    with qtbot.waitSignal(st.paused, timeout=WAIT) as blocker:
        st.session.debugger.step()
    assert blocker.args[0].layer == "cmp" and blocker.args[0].reason == "step"
    st.session.debugger.remove_breakpoint("conv2")
    with qtbot.waitSignal(st.ran, timeout=WAIT) as blocker:
        st.session.debugger.resume()
    assert blocker.args[0].executed == ["inp", "conv", "conv2", "cmp", "out"] and not blocker.args[0].stopped
    assert not st.session.request_layer("conv")  # not paused any more


def test_video_waits_while_the_network_is_paused(qtbot, st, registry, tmp_path):
    video = write_video(tmp_path / "clip.avi", frames=8)
    started(qtbot, st, registry)
    frames = []
    st.input_frame.connect(frames.append)
    last_run(qtbot, st, "open_input", ("inp", str(video)))
    st.session.debugger.add_breakpoint("conv")
    with qtbot.waitSignal(st.paused, timeout=WAIT):
        st.send("play", "inp")
    qtbot.waitUntil(lambda: st.session.debugger.paused, timeout=WAIT)
    n = len(frames)
    qtbot.wait(300)  # at 10 fps three frames would have been shown if the video did not wait
    assert len(frames) == n
    st.session.debugger.remove_breakpoint("conv")
    st.session.debugger.resume()
    qtbot.waitUntil(lambda: frames and frames[-1].frame == 7 and not frames[-1].playing, timeout=WAIT)
    numbers = [f.frame for f in frames if f.playing]
    assert numbers == list(range(numbers[0], 8))  # no frame skipped or repeated


def test_stop_from_debugger_and_precision_drift(qtbot, st, registry):
    started(qtbot, st, registry)
    with qtbot.waitSignal(st.paused, timeout=WAIT):
        st.send("break_at", "conv")
    with qtbot.waitSignal(st.ran, timeout=WAIT) as blocker:
        st.session.debugger.stop()
    assert blocker.args[0].stopped
    st.session.debugger.clear_breakpoints()
    with qtbot.waitSignal(st.drift, timeout=WAIT) as blocker:
        st.send("compare_precision", ("fp16", 0.01))
    res = blocker.args[0]
    assert [d.name for d in res.layers] == ["inp", "conv", "conv2", "cmp", "out"]
    assert res.first_over is None
    assert max(d.rel_error for d in res.layers) > 0  # fp16 did round something


def test_timings_and_inspect(qtbot, st, registry):
    started(qtbot, st, registry)
    st.send("profile_timings", True)
    with qtbot.waitSignal(st.timings, timeout=WAIT) as blocker:
        st.send("rerun")
    times = blocker.args[0]
    assert set(times) == {"inp", "conv", "conv2", "cmp", "out"} and all(t >= 0 for t in times.values())
    with qtbot.waitSignal(st.layer_data, timeout=WAIT) as blocker:
        st.send("inspect", "conv")
    d = blocker.args[0]
    assert d.name == "conv" and d.stride == 1 and d.stats.min.shape == (1, 3)
    assert np.all(d.tensor >= 0)  # relu
    with qtbot.waitSignal(st.layer_data, timeout=WAIT) as blocker:
        st.send("set_option", ("cmp", "factor", 0.9))  # every run refreshes the inspected layer
    assert blocker.args[0].name == "conv"
    with qtbot.waitSignal(st.failed, timeout=WAIT) as blocker:
        st.send("open_input", ("inp", "/nonexistent.png"))
    assert "no such file" in blocker.args[1]


def test_time_paused_at_a_breakpoint_is_not_layer_time(qtbot, st, registry):
    started(qtbot, st, registry)
    st.send("profile_timings", True)
    with qtbot.waitSignal(st.paused, timeout=WAIT):
        st.send("break_at", "conv2")
    qtbot.wait(600)  # the user looks at the paused layer
    st.session.debugger.remove_breakpoint("conv2")
    with qtbot.waitSignal(st.timings, timeout=WAIT) as blocker:
        st.session.debugger.resume()
    times = blocker.args[0]
    assert "conv2" in times and times["conv2"] < 300  # the 600 ms pause is not counted as the layer's time


def branches() -> Model:
    """inp -> a -> c and inp -> b, joined by a mix: the execution order lists b between a and c."""
    m = Model("branches")
    m.add_layer("input", "inp", params={"dimensions": "1x3x24x32"})
    m.add_layer("convolution", "a", params={"num_output_channels": "3"}, inputs=["inp"])
    m.add_layer("convolution", "b", params={"num_output_channels": "3"}, inputs=["inp"])
    m.add_layer("convolution", "c", params={"num_output_channels": "3"}, inputs=["a"])
    m.add_layer("mix", "join", params={"blend": "split"}, inputs=["b", "c"])
    m.add_layer("output", "out", inputs=["join"])
    return m


def test_step_goes_through_every_layer_and_paused_time_is_not_run_time(qtbot, st, registry):
    started(qtbot, st, registry, branches())
    order = list(st.session.net.order)
    assert order.index("a") < order.index("b") < order.index("c")
    with qtbot.waitSignal(st.paused, timeout=WAIT):
        st.send("break_at", ("a", st.session.debugger.hits("a")))
    with qtbot.waitSignal(st.paused, timeout=WAIT) as blocker:
        st.session.debugger.step()
    assert blocker.args[0].layer == "b"  # the next layer in order, not the next one depending on "a"
    qtbot.wait(700)  # the user looks at the paused layer
    st.session.debugger.remove_breakpoint("a")
    with qtbot.waitSignal(st.ran, timeout=WAIT) as blocker:
        st.session.debugger.resume()
    assert blocker.args[0].executed == order and blocker.args[0].ms < 600


def test_a_breakpoint_added_while_a_pass_runs_pauses_once(qtbot, st, registry):
    """Added while a pass is running (a big network): that pass stops at it; after Resume no second pass starts
    by itself and stops there again."""
    started(qtbot, st, registry)
    busy, go = threading.Event(), threading.Event()

    def hold(_net, name, _out):
        if name == "conv":
            busy.set()
            go.wait(WAIT / 1e3)

    st.session.net.hooks.before_layer.append(hold)
    st.send("rerun")
    assert busy.wait(WAIT / 1e3)  # the worker is computing, not paused
    dbg = st.session.debugger
    dbg.add_breakpoint("conv2")  # what Add Breakpoint does while not paused
    st.send("break_at", ("conv2", dbg.hits("conv2")))
    with qtbot.waitSignal(st.paused, timeout=WAIT) as blocker:
        go.set()
    assert blocker.args[0].layer == "conv2"
    paused = []
    st.paused.connect(paused.append)
    with qtbot.waitSignal(st.ran, timeout=WAIT):
        dbg.resume()
    with qtbot.waitSignal(st.layer_data, timeout=WAIT):  # served after the queued commands: nothing paused
        st.send("inspect", "conv")
    assert paused == [] and not dbg.paused
