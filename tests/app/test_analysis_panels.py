"""The analysis panels through real widgets, driven by a real session in a worker thread: parameter
editor, model inputs with video controls, network overview with breakpoints, channel inspector,
debugger controls, precision drift colouring. Each panel is also rendered to PNG (LAYERLAB_SHOTS=dir
keeps them)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from app.analysis.live import LayerData
from engine import modelfile
from engine.analysis import channel_stats
from engine.run import RunSpec
from resources import SAMPLES

WAIT = 10_000


def launch(qtbot, ctl, registry, name="filters.lnet", **extra):
    model = modelfile.load(SAMPLES / name, registry)
    cfg = RunSpec(backend="numpy", weights=str(SAMPLES / "filters_weights"),
                         inputs=(("photo", str(SAMPLES / "scene.jpg")),), **extra)
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.launch(model, registry, cfg)
    return model


def shot(widget: QtWidgets.QWidget, name: str, tmp_path: Path, size=(900, 600)) -> QtGui.QImage:
    from app.gui import apply_theme

    apply_theme(QtWidgets.QApplication.instance())
    widget.resize(*size)
    widget.show()
    QtWidgets.QApplication.processEvents()
    folder = Path(os.environ.get("LAYERLAB_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = str(folder / f"{name}.png")
    assert widget.grab().save(path)
    img = QtGui.QImage(path)
    colours = {img.pixelColor(x, y).name() for x in range(0, img.width(), 9) for y in range(0, img.height(), 9)}
    assert len(colours) > 12, f"{name} looks blank"
    return img


def test_parameter_editor_changes_rerun_and_update_output(qtbot, ctl, registry, tmp_path):
    launch(qtbot, ctl, registry)
    ed = ctl.params
    assert set(ed.groups) == {"noisy", "compare"}  # the analysis layers, one expandable item each
    assert ed.groups["compare"].isExpanded() and ed.groups["compare"].childCount() == 5
    before = ctl.output.views["result"].image.copy()
    divider = ed.editors[("compare", "divider")]
    assert divider.slider is not None  # float options with the slider extra get one
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT) as blocker:
        divider.control.setValue(0.8)
    assert blocker.args[0].executed == ["compare", "result"]  # only the affected layers
    after = ctl.output.views["result"].image
    assert not np.array_equal(before, after)
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT) as blocker:
        ed.editors[("noisy", "kind")].control.setCurrentText("salt_and_pepper")
    assert blocker.args[0].executed[0] == "noisy"
    with qtbot.waitSignal(ctl.proxy.option_error, timeout=WAIT):
        ctl.proxy.send("set_option", ("noisy", "amplitude", "2"))  # as a text field could send it
    assert "border" in ed.editors[("noisy", "amplitude")].control.styleSheet()
    assert "is not a number in [0, 1]" in ed.message.text()
    shot(ed, "parameter_editor", tmp_path, (420, 420))
    shot(ctl.output, "analysis_output", tmp_path, (700, 560))


def test_model_inputs_video_controls(qtbot, ctl, registry, tmp_path, monkeypatch):
    launch(qtbot, ctl, registry)
    viewer = ctl.inputs.viewers["photo"]
    assert viewer.view.image.shape == (240, 320, 3) and not viewer.controls.isVisibleTo(ctl.inputs)
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(SAMPLES / "scene.avi"), "")))
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        qtbot.mouseDClick(viewer.view.viewport(), QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: viewer.frame is not None and viewer.frame.kind == "video", timeout=WAIT)
    assert viewer.controls.isVisibleTo(ctl.inputs) and viewer.frame_label.text() == "1 / 36"
    assert viewer.view.image.shape == (144, 192, 3)
    assert ctl.output.views["result"].image.shape == (144, 192, 3)  # the network reshaped to the video
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        qtbot.mouseClick(viewer.next_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: viewer.frame_label.text() == "2 / 36", timeout=WAIT)
    viewer.slider.setValue(20)
    viewer.slider.sliderReleased.emit()
    qtbot.waitUntil(lambda: viewer.frame_label.text() == "21 / 36", timeout=WAIT)
    qtbot.mouseClick(viewer.play_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: viewer.frame_label.text() == "36 / 36" and not viewer.play_button.isChecked(),
                    timeout=WAIT)
    assert viewer.slider.value() == 35
    shot(ctl.inputs, "model_inputs", tmp_path, (520, 480))


def test_overview_selection_breakpoint_step_resume_and_inspector(qtbot, ctl, registry, tmp_path):
    launch(qtbot, ctl, registry)
    ov = ctl.overview
    assert list(ov.glyphs) == ["photo", "noisy", "denoise", "sharpen", "compare", "result"]
    assert ov.glyphs["denoise"].item.shape == "1x3x240x320"
    with qtbot.waitSignal(ctl.proxy.layer_data, timeout=WAIT) as blocker:
        ov.select("compare")  # selecting follows the layer in the inspector
    assert blocker.args[0].name == "compare" and not blocker.args[0].stale
    pens = {k: link.pen().color().name() for k, link in ov.links.items()}
    assert pens[("noisy", "compare", 0)] == pens[("sharpen", "compare", 1)] == "#f0d228"  # inputs: yellow
    assert pens[("compare", "result", 0)] == "#4696ff"  # outputs: blue
    assert pens[("photo", "noisy", 0)] not in ("#f0d228", "#4696ff")
    # right-click > Add Breakpoint stops execution at that layer now
    add = dict(ov.context_actions("denoise"))["Add Breakpoint"]
    with qtbot.waitSignal(ctl.proxy.paused, timeout=WAIT):
        add()
    assert ov.glyphs["denoise"].breakpoint and ov.glyphs["denoise"].paused
    assert ctl.debug.act_step.isEnabled() and "paused after denoise" in ctl.debug.state.text()
    # the GUI stays responsive while the worker is paused, and the inspector reads computed layers
    t = QtCore.QElapsedTimer()
    t.start()
    qtbot.wait(50)
    assert t.elapsed() < 1000
    with qtbot.waitSignal(ctl.proxy.layer_data, timeout=WAIT, check_params_cb=lambda d: d.name == "noisy") as b:
        ov.select("noisy")
    assert not b.args[0].stale  # computed in this pass, before the breakpoint
    with qtbot.waitSignal(ctl.proxy.layer_data, timeout=WAIT, check_params_cb=lambda d: d.name == "compare") as b:
        ov.select("compare")
    assert b.args[0].stale  # not reached yet in this pass: the previous pass's values, marked as such
    qtbot.waitUntil(lambda: "previous pass" in ctl.inspector.layer_label.text(), timeout=WAIT)
    with qtbot.waitSignal(ctl.proxy.paused, timeout=WAIT) as blocker:
        ctl.debug.act_step.trigger()
    assert blocker.args[0].layer == "sharpen" and ov.glyphs["sharpen"].paused
    shot(ctl.overview_panel, "network_overview_paused", tmp_path, (420, 640))
    assert "Remove Breakpoint" in dict(ov.context_actions("denoise"))
    dict(ov.context_actions("denoise"))["Remove Breakpoint"]()
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT) as blocker:
        ctl.debug.act_resume.trigger()
    assert blocker.args[0].executed == ["photo", "noisy", "denoise", "sharpen", "compare", "result"]
    assert not ctl.debug.act_step.isEnabled() and not ov.glyphs["sharpen"].paused
    # timings on the glyphs with Profile Layer Timings + Rerun
    ctl.overview_panel.act_timings.setChecked(True)
    with qtbot.waitSignal(ctl.proxy.timings, timeout=WAIT):
        ctl.overview_panel.act_rerun.trigger()
    qtbot.waitUntil(lambda: "ms" in ov.glyphs["denoise"].status.text(), timeout=WAIT)
    # precision drift colours every glyph and names the first layer over the threshold
    msgs = []
    ctl.message.connect(msgs.append)
    with qtbot.waitSignal(ctl.proxy.drift, timeout=WAIT):
        ctl.compare_precision("fp16", 1e-3)
    assert all(g.drift is not None for g in ov.glyphs.values())
    assert "drift" in ov.glyphs["denoise"].status.text()
    assert msgs and "Precision drift" in msgs[-1]
    shot(ctl.overview_panel, "network_overview_drift", tmp_path, (420, 640))


def test_inspector_grid_hover_mapping_and_stats(qtbot, ctl, tmp_path):
    ins = ctl.inspector
    t = np.zeros((1, 4, 3, 3), np.float32)
    t[0, 0] = -0.5
    t[0, 1] = 0.25
    t[0, 2, 1, 1] = np.nan
    t[0, 3] = 2.0
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    ins.act_fit.setChecked(False)  # the raw values (the per-channel fit is tested in test_analysis_polish)
    ins.show_layer(LayerData("conv", "convolution", "1x4x3x3", t, 1, {"weights": w}, channel_stats(t)))
    assert ins.wait_ready()
    img, lay = ins.view.image, ins.layout_
    assert (lay.rows, lay.cols) == (2, 2) and img.shape == (7, 7, 3)
    assert img[0, 0].tolist() == [128, 0, 0]  # -0.5: half red
    assert img[0, 4].tolist() == [0, 64, 0]  # 0.25: quarter green
    assert img[4 + 1, 1].tolist() == [40, 90, 255]  # NaN in blue
    assert img[4, 4].tolist() == [0, 255, 0]  # 2.0 saturates
    ins._hover(5, 1)
    assert ins.hover.text().split() == ["n", "0", "c", "1", "y", "1", "x", "1", "value", "0.25"]
    assert ins.stats.rowCount() == 4 and ins.stats.text(2, 5) == "1"  # one NaN in channel 2
    assert ins.stats.text(0, 2) == "-0.5" and ins.stats.text(3, 4) == "2"
    model, red = ins.stats.stats_model, QtCore.Qt.ItemDataRole.ForegroundRole
    assert model.data(model.index(2, 5), red).color() == QtCore.Qt.GlobalColor.red  # a NaN count is red
    assert model.data(model.index(1, 5), red) is None and model.headerData(5, QtCore.Qt.Orientation.Horizontal) == "NaN"
    ins.act_scale_down.trigger()  # scale 0.5: 2.0 -> 1.0, 0.25 -> 0.125
    ins.act_shift_up.trigger()  # shift + 0.1 / 0.5 = +0.2: 0.25 -> (0.45) * 0.5
    assert ins.wait_ready()
    assert (ins.shift, ins.scale) == (pytest.approx(0.2), 0.5)
    assert ins.view.image[0, 4].tolist() == [0, round(0.45 * 0.5 * 255), 0]
    ins.act_reset.trigger()
    assert ins.wait_ready() and (ins.shift, ins.scale) == (0.0, 1.0)
    assert ins.view.image[0, 4].tolist() == [0, 64, 0]
    ins.source.setCurrentText("Weights: weights")
    assert ins.wait_ready()
    assert (ins.layout_.n, ins.layout_.c) == (4, 3) and "weight weights" in ins.layer_label.text()
    shot(ins, "channel_inspector_weights", tmp_path, (800, 500))


def test_inspector_on_a_large_layer_stays_responsive_and_zooms_to_full_resolution(qtbot, ctl, registry, tmp_path):
    launch(qtbot, ctl, registry)
    ins = ctl.inspector
    with qtbot.waitSignal(ctl.proxy.layer_data, timeout=WAIT):
        ctl.overview.select("denoise")
    assert ins.wait_ready()
    lay = ins.layout_
    s = ins.shown_stride  # the grid comes at the viewer's display size: its cells are every s-th pixel
    assert (lay.n, lay.c, lay.h, lay.w) == (1, 3, -(-240 // s), -(-320 // s))
    x0, y0 = lay.cell_origin(0, 2)
    with qtbot.waitSignal(ctl.proxy.layer_data, timeout=WAIT) as blocker:
        ins.view.double_clicked.emit(x0 + 5, y0 + 5)
    assert blocker.args[0].channel == (0, 2) and blocker.args[0].tensor.shape == (1, 1, 240, 320)
    assert ins.wait_ready() and ins.act_back.isVisible()
    shot(ins, "channel_inspector_output", tmp_path, (900, 520))
    ins.act_back.trigger()
    # a big tensor: 64 channels at 1080p is prepared in the thread pool, the GUI keeps running
    rng = np.random.default_rng(1)
    big = (rng.standard_normal((1, 64, 1080, 1), dtype=np.float32)
           * rng.standard_normal((1, 1, 1, 1920), dtype=np.float32))  # 530 MB, quick to make
    timer = QtCore.QElapsedTimer()
    timer.start()
    ins.show_layer(LayerData("big", "convolution", "1x64x1080x1920", big[:, :, ::4, ::4], 4, {},
                             channel_stats(big[:, :, ::8, ::8])))
    assert timer.elapsed() < 2000  # returns before the image is ready
    assert ins.wait_ready(20_000)
    assert ins.view.image.shape[0] * ins.view.image.shape[1] <= 4_000_000
    v = ins.value_at(*ins.layout_.cell_origin(0, 10))
    assert v[:4] == (0, 10, 0, 0) and v[4] == pytest.approx(float(big[0, 10, 0, 0]))


def test_statistics_of_a_playing_layer_are_refilled_at_most_every_interval_and_end_on_the_last(qtbot):
    """Video frames of the layer shown: the image changes every frame, the statistics table at most every
    STATS_INTERVAL_S, and the last frame's statistics are shown once the interval is over."""
    from types import SimpleNamespace

    from app.analysis.inspector import ChannelInspector
    from engine.analysis import channel_grid, channel_stats

    ins = ChannelInspector()
    qtbot.addWidget(ins)
    ins.STATS_INTERVAL_S = 0.3

    def frame(value: float):
        t = np.full((1, 4, 6, 6), value, np.float32)
        rgb, layout = channel_grid(t, max_pixels=10_000)
        return SimpleNamespace(stats=channel_stats(t), tensor=t, stride=1, layout=layout, image=rgb)

    ins._show_prepared(frame(1.0), "conv")
    assert ins.stats.text(0, 2) == "1"
    second = frame(2.0)
    ins._show_prepared(second, "conv")
    assert ins.view.image is second.image  # the image of every frame
    assert ins.stats.text(0, 2) == "1"  # the table waits for the interval
    ins._show_prepared(frame(3.0), "conv")
    qtbot.waitUntil(lambda: ins.stats.text(0, 2) == "3", timeout=2000)  # then shows the newest
    ins._show_prepared(frame(4.0), "other layer")
    assert ins.stats.text(0, 2) == "4"  # another layer: at once


def test_a_classifier_output_shows_its_top_classes(qtbot, ctl, registry):
    """A 1x1000 output (a classifier's scores) is not an empty 1x1 image: the panel lists its largest values."""
    from engine.model import Model

    m = Model("classifier")
    m.add_layer("input", "scores", params={"dimensions": "1x1000x1x1"})
    m.add_layer("output", "out", inputs=["scores"])
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.launch(m, registry, RunSpec(backend="numpy", seed=3))
    qtbot.waitUntil(lambda: "1000 values" in ctl.output.labels["out"].text(), timeout=WAIT)
    scores = ctl.proxy.session.net.output("scores").reshape(-1)
    best = int(np.argmax(scores))
    text = ctl.output.views["out"].label.textItem.toPlainText()
    assert f"class {best}:" in text.splitlines()[1] and "1x1" not in ctl.output.labels["out"].text()
    # the Parameter Editor says why it is empty while analysis runs, not to launch it
    assert not ctl.params.message.isHidden() and "Launch Analysis" not in ctl.params.message.text()
    assert "no layer with runtime options" in ctl.params.message.text()
