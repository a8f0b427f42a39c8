"""Tools > Fusing Rules driven with pytest-qt: switching plugin and network rules, adding and removing custom
rules, undo, and what the built network then fuses."""
from __future__ import annotations

from PySide6 import QtCore

from engine import modelfile
from engine.fusing import DISABLED_RULES_SETTING, disabled_plugin_rules
from engine.network import Network

CONV_BN = "*|*|conv_bn = batch_normalization {convolution[act == 'none']}"


def conv_bn_model(window):
    doc = window.workspace.new_model()
    m = doc.model
    m.add_layer("input", "inp", params={"dimensions": "1x3x16x16"})
    m.add_layer("convolution", "conv", params={"num_output_channels": "8"}, inputs=["inp"])
    m.add_layer("batch_normalization", "bn", inputs=["conv"], activation="relu")
    m.add_layer("output", "out", inputs=["bn"])
    return doc


def fused(model, registry):
    net = Network(model, registry)
    return [a[0] for a in net.fused.applied] if net.fused is not None else []


def open_from_menu(window):
    action = next(a for a in window.tools_menu.actions() if a.text() == "&Fusing Rules…")
    assert action.isEnabled()
    action.trigger()
    dlg = window.runs.fusing_dialog
    assert dlg is not None and dlg.isVisible()
    return dlg


def row(dlg, text):
    return next(dlg.tree.topLevelItem(i) for i in range(dlg.tree.topLevelItemCount())
                if dlg.tree.topLevelItem(i).text(0) == text)


def test_switching_a_plugin_rule_off_for_this_network_and_undo(window, registry):
    doc = conv_bn_model(window)
    assert "conv_bn" in str(fused(doc.model, registry))
    dlg = open_from_menu(window)
    rows = dlg.rule_rows()
    assert (CONV_BN, "plugin standard", True) in rows and all(r[2] for r in rows)
    row(dlg, CONV_BN).setCheckState(0, QtCore.Qt.CheckState.Unchecked)  # what a click on the box does
    assert disabled_plugin_rules(doc.model) == {CONV_BN}
    assert "conv_bn" not in str(fused(doc.model, registry))
    assert (CONV_BN, "plugin standard", False) in dlg.rule_rows()
    doc.model.undo()
    assert DISABLED_RULES_SETTING not in doc.model.settings
    assert (CONV_BN, "plugin standard", True) in dlg.rule_rows()  # the list follows undo
    assert "conv_bn" in str(fused(doc.model, registry))


def test_custom_rules_are_checked_added_switched_and_removed(window, registry, tmp_path):
    doc = conv_bn_model(window)
    dlg = open_from_menu(window)
    dlg.new_rule.setText("*|*|conv_bn = batch_normalization[act == ] {convolution}")
    assert not dlg.add_rule()
    assert "column" in dlg.message.text() and doc.model.fusing_rules == []
    assert dlg.new_rule.text()  # the text stays for mending
    mine = "fp16|nhwc|conv_bn = batch_normalization {convolution[act == 'none']}"
    dlg.new_rule.setText(mine)
    assert dlg.add_rule()
    assert dlg.message.text() == "" and [(r.text, r.enabled) for r in doc.model.fusing_rules] == [(mine, True)]
    assert dlg.rule_rows()[-1] == (mine, "this network", True) and dlg.text.toPlainText() == mine
    row(dlg, mine).setCheckState(0, QtCore.Qt.CheckState.Unchecked)
    assert [r.enabled for r in doc.model.fusing_rules] == [False]
    row(dlg, CONV_BN).setCheckState(0, QtCore.Qt.CheckState.Unchecked)
    path = tmp_path / "rules.lnet"
    modelfile.save(doc.model, path)
    loaded = modelfile.load(path, registry)
    assert disabled_plugin_rules(loaded) == {CONV_BN} and [(r.text, r.enabled) for r in loaded.fusing_rules] == [
        (mine, False)]
    dlg.tree.setCurrentItem(row(dlg, mine))
    assert dlg.remove_button.isEnabled()
    dlg.remove_button.click()
    assert doc.model.fusing_rules == [] and mine not in [r[0] for r in dlg.rule_rows()]
    dlg.tree.setCurrentItem(row(dlg, CONV_BN))
    assert not dlg.remove_button.isEnabled()  # plugin rules are switched off, not removed


def test_the_dialog_follows_the_current_tab(window, sample_path):
    first = conv_bn_model(window)
    dlg = open_from_menu(window)
    assert dlg.model is first.model
    second = window.files.open_path(sample_path)
    assert dlg.model is second.model and "denoiser" in dlg.windowTitle()
    dlg.close()
    assert dlg.model is None
    assert open_from_menu(window).model is second.model


def test_a_mouse_click_on_a_check_box_switches_the_rule(window, qtbot):
    doc = conv_bn_model(window)
    dlg = open_from_menu(window)
    item = row(dlg, CONV_BN)
    rect = dlg.tree.visualItemRect(item)
    box = QtCore.QPoint(rect.left() + dlg.tree.style().pixelMetric(
        dlg.tree.style().PixelMetric.PM_IndicatorWidth) // 2 + 4, rect.center().y())
    qtbot.mouseClick(dlg.tree.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=box)
    assert disabled_plugin_rules(doc.model) == {CONV_BN}
    qtbot.mouseClick(dlg.tree.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=box)
    assert disabled_plugin_rules(doc.model) == set()
