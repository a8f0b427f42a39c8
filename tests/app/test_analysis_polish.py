"""Analysis-mode behaviours that were easy to get wrong, through the real controller and widgets: the status after Resume and the
single Compare Precision dialog."""
from __future__ import annotations

import pytest
from PySide6 import QtWidgets

from app.analysis.compare_precision import ComparePrecisionDialog
from tests.app.test_analysis_panels import WAIT, launch


def test_status_leaves_paused_after_resume(qtbot, ctl, registry):
    launch(qtbot, ctl, registry)
    msgs: list[str] = []
    ctl.message.connect(msgs.append)
    with qtbot.waitSignal(ctl.proxy.paused, timeout=WAIT):
        ctl.set_breakpoint("denoise", True)
    assert msgs[-1].startswith("Paused after denoise")
    ctl.set_breakpoint("denoise", False)
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.debug.act_resume.trigger()
    qtbot.waitUntil(lambda: not msgs[-1].startswith("Paused"), timeout=WAIT)
    assert "Resumed" in msgs[-1] and "not paused" in ctl.debug.state.text()


def test_compare_precision_asks_once(qtbot, ctl, registry):
    launch(qtbot, ctl, registry)
    dlg = ctl.compare_precision_dialog()
    assert isinstance(dlg, ComparePrecisionDialog) and dlg.isVisible()
    assert [w for w in QtWidgets.QApplication.topLevelWidgets() if isinstance(w, QtWidgets.QInputDialog)
            and w.isVisible()] == []
    dlg.variant.setCurrentText("fp16")
    dlg.threshold.setValue(0.001)
    with qtbot.waitSignal(ctl.proxy.drift, timeout=WAIT) as blocker:
        dlg.accept()
    assert "fp16" in blocker.args[0].candidate and blocker.args[0].threshold == pytest.approx(0.001)


def test_inspector_fits_each_channel_and_keeps_the_readout_in_step(qtbot, ctl):
    import numpy as np

    from app.analysis.live import LayerData
    from engine.analysis import channel_stats

    ins = ctl.inspector
    ins.resize(900, 500)
    ins.show()
    t = np.zeros((1, 2, 4, 4), np.float32)
    t[0, 0] = np.linspace(0.0, 1.0, 16).reshape(4, 4)  # an image in 0..1
    t[0, 1] = np.linspace(0.0, 0.01, 16).reshape(4, 4)  # a faint channel
    long_name = "a_weight_with_a_rather_long_name"
    ins.show_layer(LayerData("conv", "convolution", "1x2x4x4", t, 1, {long_name: np.ones((2, 2, 1, 1), np.float32)},
                             channel_stats(t)))
    assert ins.wait_ready()
    img, lay = ins.view.image, ins.layout_
    for c in (0, 1):
        x0, y0 = lay.cell_origin(0, c)
        cell = img[y0:y0 + 4, x0:x0 + 4, 1]
        assert cell.max() == 255 and cell.min() == 0 and len(set(cell.ravel().tolist())) > 8  # full range, not saturated
    assert ins.shift_box.value() == 0.0 and ins.scale_box.value() == 1.0
    ins.scale_box.setValue(0.5)  # editable mapping
    assert ins.wait_ready() and ins.scale == 0.5
    x0, y0 = lay.cell_origin(0, 0)
    assert ins.view.image[y0 + 3, x0 + 3, 1] == round(0.5 * 255)
    # the read-out follows the image on screen: hover, then a new layer arrives
    ins._hover(x0 + 3, y0 + 3)
    assert ins.hover.text().split()[-1] == "1"
    t2 = t * 7
    ins.show_layer(LayerData("conv", "convolution", "1x2x4x4", t2, 1, {}, channel_stats(t2)))
    assert ins.wait_ready()
    assert ins.hover.text().split()[-1] == "7"
    # the weights selector shows whole names
    ins.show_layer(LayerData("conv", "convolution", "1x2x4x4", t, 1, {long_name: np.ones((2, 2, 1, 1), np.float32)},
                             channel_stats(t)))
    ins.source.setCurrentText(f"Weights: {long_name}")
    qtbot.waitUntil(lambda: ins.source.width() >= ins.source.fontMetrics().horizontalAdvance(f"Weights: {long_name}"))


def test_the_trained_sample_shows_a_denoised_photograph_in_analysis_mode(qtbot, ctl, registry):
    import numpy as np

    from app.run_config import from_model
    from engine import modelfile
    from engine.io import read_image
    from resources import SAMPLES

    path = SAMPLES / "denoiser_trained.lnet"
    model = modelfile.load(path, registry)
    config = from_model(model, str(path))  # what Launch Analysis does
    shown = []
    ctl.proxy.outputs.connect(shown.append)
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.launch(model, registry, config)
    qtbot.waitUntil(lambda: bool(shown), timeout=WAIT)
    image = shown[-1]["output"].astype(np.float32) / 255.0  # the 8-bit picture the Analysis Output shows
    clean = read_image(SAMPLES / "photo_clean.png")[0].transpose(1, 2, 0)
    noisy = read_image(SAMPLES / "photo_noisy.png")[0].transpose(1, 2, 0)
    assert image.shape == clean.shape
    err = lambda a: float(np.mean((a - clean) ** 2))  # noqa: E731
    assert err(image) < 0.25 * err(noisy)  # visibly denoised: a quarter of the noisy input's error, or less
