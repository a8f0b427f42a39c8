"""Analysis mode in the designer: Launch Analysis from the main window (the session runs in the run
worker's thread), models read-only during analysis (edits refused with a status-bar message),
breakpoints through the GUI, video synchronised with the debugger, Stop Analysis, closing while paused."""
from __future__ import annotations

import pytest
from PySide6 import QtCore, QtWidgets

from resources import SAMPLES

WAIT = 10_000


def menu_texts(window, title: str) -> list[str]:
    menu = next(a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == title)
    return [a.text().replace("&", "") for a in menu.actions() if a.text()]


def test_menus_and_actions(make_window):
    w = make_window()
    assert menu_texts(w, "Analysis") == ["Launch Analysis", "Stop Analysis", "Channel Inspector", "Rerun Inference",
                                         "Compare Precision…"]
    assert "Channel Inspector" in menu_texts(w, "View") and "Profile Layer Timings" in menu_texts(w, "Tools")
    assert not w.analysis.act_stop.isEnabled() and not w.analysis.act_inspector.isEnabled()
    assert w.analysis.proxy.session is w.runner.worker.analysis  # one worker owns runs and analysis
    assert w.analysis.proxy.thread is None


def test_launch_read_only_breakpoint_and_stop(make_window, qtbot):
    w = make_window()
    other = w.files.open_path(SAMPLES / "edges.lnet")
    doc = w.files.open_path(SAMPLES / "filters.lnet")
    assert w.current is doc
    mode = w.analysis
    with qtbot.waitSignal(mode.proxy.ran, timeout=WAIT):
        mode.act_launch.trigger()
    assert mode.active and mode.window.isVisible() and mode.act_stop.isEnabled()
    assert not mode.act_launch.isEnabled() and not w.act_run.isEnabled()  # no inference run meanwhile
    assert w.runner.worker.analysis.thread() is w.runner.worker_thread
    ctl = mode.ctl
    assert list(ctl.overview.glyphs)[0] == "photo"
    assert ctl.inputs.viewers["photo"].view.image.shape == (240, 320, 3)  # the model's input setting
    # every open model is read-only: edits are refused with a status-bar message
    before = [d.model.content() for d in (doc, other)]
    doc.canvas.select_layers(["photo"])
    w.editing.act_delete.trigger()
    with pytest.raises(Exception, match="read-only"):  # the other open model is locked too
        other.model.set_param("photo", "scale", "2")
    w.act_undo.trigger()
    assert [d.model.content() for d in (doc, other)] == before
    assert "read-only" in w.statusBar().currentMessage()
    # a breakpoint from the overview's context menu stops execution at that layer; step; resume
    ov = ctl.overview
    with qtbot.waitSignal(mode.proxy.paused, timeout=WAIT) as blocker:
        dict(ov.context_actions("denoise"))["Add Breakpoint"]()
    assert blocker.args[0].layer == "denoise"
    QtWidgets.QApplication.processEvents()  # the GUI thread is free while the worker is paused
    with qtbot.waitSignal(mode.proxy.paused, timeout=WAIT) as blocker:
        ctl.debug.act_step.trigger()
    assert blocker.args[0].layer == "sharpen"
    dict(ov.context_actions("denoise"))["Remove Breakpoint"]()
    with qtbot.waitSignal(mode.proxy.ran, timeout=WAIT) as blocker:
        ctl.debug.act_resume.trigger()
    assert blocker.args[0].executed == ["photo", "noisy", "denoise", "sharpen", "compare", "result"]
    # Stop Analysis: the models can be edited again
    mode.act_stop.trigger()
    qtbot.waitUntil(lambda: not mode.active, timeout=WAIT)
    assert mode.act_launch.isEnabled() and w.act_run.isEnabled()
    other.model.set_param("photo", "scale", "2")
    assert other.model.layers["photo"].params["scale"] == "2"


def test_video_follows_the_debugger_and_closing_while_paused(make_window, qtbot):
    w = make_window()
    w.files.open_path(SAMPLES / "filters.lnet")
    mode = w.analysis
    with qtbot.waitSignal(mode.proxy.ran, timeout=WAIT):
        mode.act_launch.trigger()
    ctl = mode.ctl
    with qtbot.waitSignal(mode.proxy.ran, timeout=WAIT):
        ctl.inputs.file_chosen.emit("photo", str(SAMPLES / "scene.avi"))
    viewer = ctl.inputs.viewers["photo"]
    qtbot.waitUntil(lambda: viewer.frame is not None and viewer.frame.kind == "video", timeout=WAIT)
    mode.proxy.debugger.add_breakpoint("sharpen")
    ctl.overview.set_breakpoints(mode.proxy.debugger.breakpoints)
    with qtbot.waitSignal(mode.proxy.paused, timeout=WAIT):
        qtbot.mouseClick(viewer.play_button, QtCore.Qt.MouseButton.LeftButton)
    frame = viewer.frame_label.text()
    qtbot.wait(300)  # playing at 12 fps, but the network is paused: the video waits
    assert viewer.frame_label.text() == frame
    with qtbot.waitSignal(mode.proxy.paused, timeout=WAIT):
        ctl.debug.act_resume.trigger()  # the next frame reaches the breakpoint again
    qtbot.waitUntil(lambda: viewer.frame_label.text() != frame, timeout=WAIT)
    assert mode.proxy.debugger.paused
    w.close()  # closing the designer while the worker is paused neither hangs nor crashes
    assert not w.runner.worker_thread.isRunning()
