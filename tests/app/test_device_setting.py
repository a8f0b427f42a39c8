"""The Network Settings' GPU device entry: stored as the model's ``device`` setting, read into the run spec."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from app import run_config
from app.designer.network_settings import NetworkSettingsDialog
from engine.model import Model


def test_device_entry_round_trips_through_the_model_settings(window, qtbot):
    doc = window.workspace.new_model()
    doc.model.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    window.act_net_settings.trigger()
    dlg = window.findChildren(NetworkSettingsDialog)[-1]
    assert dlg.device.value() == -1 and dlg.device.text() == "Default (GPU 0)"
    dlg.device.setFocus()
    dlg.device.lineEdit().selectAll()
    qtbot.keyClicks(dlg.device, "1")
    qtbot.keyClick(dlg.device, QtCore.Qt.Key.Key_Tab)
    assert dlg.device.value() == 1
    dlg.buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Ok).click()
    assert doc.model.settings["device"] == "1"
    assert run_config.from_model(doc.model).device == 1
    doc.model.undo()
    assert "device" not in doc.model.settings or doc.model.settings["device"] == ""


def test_default_device_is_no_setting():
    dlg = NetworkSettingsDialog(Model("m"))
    assert dlg.values()["device"] == ""
    dlg.deleteLater()
