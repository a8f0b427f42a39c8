"""Tools > Fusing Rules: the plugins' rules and the network's own, each with a check box that switches it on or
off for this network, the selected rule's text, and a field to add a custom rule (checked as it is added:
errors name the column). Every change is an undoable command on the model and is saved with it; the network
applies the checked rules when it is built (``engine.fusing.rules_from``)."""
from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from canvas.bridge import ModelBridge
from engine.errors import LayerLabError
from engine.events import Event, FusingRulesChanged, SettingsChanged
from engine.fusing import disabled_plugin_rules, load_rule, set_plugin_rule_enabled
from engine.model import FusingRuleSpec, Model
from engine.registry import Registry

RULE_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1  # ("plugin", text) or ("network", index)


class FusingRulesDialog(QtWidgets.QDialog):
    """Non-modal: shows the rules of the bridge's model and follows its changes (undo included) through the
    bridge."""

    def __init__(self, bridge: ModelBridge, registry: Registry, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.registry = registry
        self.model: Model | None = None
        self.bridge: ModelBridge | None = None
        self.resize(760, 460)
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setHeaderLabels(["Rule", "From"])
        self.tree.setRootIsDecorated(False)
        self.tree.header().setStretchLastSection(False)
        self.tree.header().setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.tree.header().setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.tree.itemChanged.connect(self._toggled)
        self.tree.currentItemChanged.connect(self._show_selected)
        self.text = QtWidgets.QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumHeight(70)
        self.new_rule = QtWidgets.QLineEdit()
        self.new_rule.setPlaceholderText("fp16|nhwc|conv_bn = batch_normalization {convolution[act == 'none']}")
        self.new_rule.returnPressed.connect(self.add_rule)
        self.add_button = QtWidgets.QPushButton("Add Rule")
        self.add_button.clicked.connect(self.add_rule)
        self.remove_button = QtWidgets.QPushButton("Remove Rule")
        self.remove_button.clicked.connect(self.remove_rule)
        self.message = QtWidgets.QLabel()
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #e06c6c")
        add_row = QtWidgets.QHBoxLayout()
        add_row.addWidget(self.new_rule, 1)
        add_row.addWidget(self.add_button)
        close = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        close.addButton(self.remove_button, QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(QtWidgets.QLabel("Checked rules apply when the network is built (Network Settings can switch "
                                       "all fusing off). Syntax: docs/fusing-rules.md."))
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.text)
        lay.addWidget(QtWidgets.QLabel("Custom rule:"))
        lay.addLayout(add_row)
        lay.addWidget(self.message)
        lay.addWidget(close)
        self.set_bridge(bridge)

    # ---- the model shown -------------------------------------------------------------------------
    def set_bridge(self, bridge: ModelBridge) -> None:
        """Show the rules of ``bridge.model`` (the current document's)."""
        self._detach()
        self.bridge, self.model = bridge, bridge.model
        bridge.event.connect(self._on_event)
        self.setWindowTitle(f"Fusing Rules: {bridge.model.name}")
        self.refresh()

    def _detach(self) -> None:
        if self.bridge is not None:
            try:
                self.bridge.event.disconnect(self._on_event)
            except (RuntimeError, TypeError):  # the document (and its bridge) is already gone
                pass
        self.bridge = self.model = None

    def done(self, result: int) -> None:
        self._detach()
        super().done(result)

    def _on_event(self, event: Event) -> None:
        if isinstance(event, (FusingRulesChanged, SettingsChanged)):
            self.refresh()

    def refresh(self) -> None:
        """Show the registry's and the model's rules. When the rows are the same ones (a rule switched, undo of a
        switch) their states change in place: an item is never deleted inside its own change signal."""
        assert self.model is not None
        off = disabled_plugin_rules(self.model)
        rows = [(r.text, f"plugin {r.collection}", r.enabled and r.text.strip() not in off, ("plugin", r.text),
                 r.enabled) for r in self.registry.fusing_rules]
        rows += [(r.text, "this network", r.enabled, ("network", i), True) for i, r in enumerate(self.model.fusing_rules)]
        items = [self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount())]
        self.tree.blockSignals(True)
        if [it.data(0, RULE_ROLE) for it in items] == [r[3] for r in rows] and all(
                it.text(0) == r[0] for it, r in zip(items, rows)):
            for it, r in zip(items, rows):
                self._set_state(it, r[2])
        else:
            current = self.tree.currentItem()
            at = self.tree.indexOfTopLevelItem(current) if current else 0
            self.tree.clear()
            for text, source, on, key, checkable in rows:
                self._add_item(text, source, on, key, checkable)
            if rows:
                self.tree.setCurrentItem(self.tree.topLevelItem(min(max(at, 0), len(rows) - 1)))
        self.tree.blockSignals(False)
        self._show_selected()

    def _add_item(self, text: str, source: str, on: bool, key: tuple[str, Any], checkable: bool = True) -> None:
        item = QtWidgets.QTreeWidgetItem([text, source])
        flags = item.flags() | QtCore.Qt.ItemFlag.ItemIsUserCheckable
        if not checkable:  # switched off by its plugin
            flags &= ~QtCore.Qt.ItemFlag.ItemIsEnabled
        item.setFlags(flags)
        item.setData(0, RULE_ROLE, key)
        item.setToolTip(0, text)
        self._set_state(item, on)
        self.tree.addTopLevelItem(item)

    @staticmethod
    def _set_state(item: QtWidgets.QTreeWidgetItem, on: bool) -> None:
        item.setCheckState(0, QtCore.Qt.CheckState.Checked if on else QtCore.Qt.CheckState.Unchecked)
        grey = QtGui.QBrush(QtGui.QColor("#808080"))  # off: plain to see where the style draws the box faintly
        for col in (0, 1):
            item.setData(col, QtCore.Qt.ItemDataRole.ForegroundRole, None if on else grey)

    def rule_rows(self) -> list[tuple[str, str, bool]]:
        """(text, from, checked) of every row, in order."""
        out = []
        for i in range(self.tree.topLevelItemCount()):
            it = self.tree.topLevelItem(i)
            out.append((it.text(0), it.text(1), it.checkState(0) == QtCore.Qt.CheckState.Checked))
        return out

    def _show_selected(self, *_: Any) -> None:
        item = self.tree.currentItem()
        self.text.setPlainText(item.text(0) if item else "")
        key = item.data(0, RULE_ROLE) if item else None
        self.remove_button.setEnabled(bool(key) and key[0] == "network")

    # ---- edits (each one undoable command on the model) --------------------------------------------
    def _toggled(self, item: QtWidgets.QTreeWidgetItem, column: int) -> None:
        assert self.model is not None
        kind, key = item.data(0, RULE_ROLE)
        on = item.checkState(0) == QtCore.Qt.CheckState.Checked
        if kind == "plugin":
            set_plugin_rule_enabled(self.model, key, on)
        else:
            rules = [FusingRuleSpec(r.text, r.enabled) for r in self.model.fusing_rules]
            rules[key].enabled = on
            self.model.set_fusing_rules(rules)

    def add_rule(self) -> bool:
        """Add the rule typed in the field to the network's rules; a rule that does not parse or names unknown
        layer types is refused with the reason (the field keeps the text)."""
        assert self.model is not None
        text = self.new_rule.text().strip()
        if not text:
            return False
        try:
            load_rule(text, "new rule", self.registry)
        except LayerLabError as exc:
            self.message.setText(str(exc))
            return False
        self.message.clear()
        self.model.set_fusing_rules(list(self.model.fusing_rules) + [FusingRuleSpec(text, True)])
        self.new_rule.clear()
        self.tree.setCurrentItem(self.tree.topLevelItem(self.tree.topLevelItemCount() - 1))
        return True

    def remove_rule(self) -> None:
        assert self.model is not None
        item = self.tree.currentItem()
        key = item.data(0, RULE_ROLE) if item else None
        if not key or key[0] != "network":
            return
        self.model.set_fusing_rules([r for i, r in enumerate(self.model.fusing_rules) if i != key[1]])
