"""Issue 17's analysis-mode defects, through the real controller and widgets: the status after Resume and the
single Compare Precision dialog."""
from __future__ import annotations

import pytest
from PySide6 import QtWidgets

from app.analysis.compare_precision import ComparePrecisionDialog
from app.analysis.controller import AnalysisController
from tests.app.test_analysis_panels import WAIT, launch


@pytest.fixture
def ctl(qtbot, registry):
    c = AnalysisController()
    yield c
    c.stop()
    assert c.proxy.shutdown()
    for w in (c.inputs, c.output, c.params, c.overview_panel, c.inspector, c.debug):
        w.deleteLater()


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
