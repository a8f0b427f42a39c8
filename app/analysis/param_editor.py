"""The Parameter Editor: the runtime options of every analysis layer, grouped per layer in expandable
items, each with a control for its type (float: spin box and, when asked, a slider; int: spin box;
bool: check box; enum: combo box; string: line edit). A change emits ``option_changed`` at once; the
session reruns the network and a refused value comes back through ``set_error``."""
from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtWidgets

ERROR_STYLE = "border: 1px solid #e05050; background: #4a2020;"
SLIDER_STEPS = 1000


class OptionEditor(QtWidgets.QWidget):
    """The control of one option; ``changed(value)`` when the user changes it."""

    changed = QtCore.Signal(object)

    def __init__(self, opt: dict[str, Any]) -> None:
        super().__init__()
        self.opt = opt
        kind = opt["type"]
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.slider: QtWidgets.QSlider | None = None
        if kind == "float":
            w = QtWidgets.QDoubleSpinBox()
            step = float(opt.get("step", 0.01))
            w.setDecimals(max(2, min(6, len(f"{step:g}".split(".")[-1]) if "." in f"{step:g}" else 2)))
            w.setRange(float(opt.get("min", -1e9)), float(opt.get("max", 1e9)))
            w.setSingleStep(step)
            w.setKeyboardTracking(False)
            w.valueChanged.connect(self._spin_changed)
            if opt.get("slider") and "min" in opt and "max" in opt:
                self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
                self.slider.setRange(0, SLIDER_STEPS)
                self.slider.valueChanged.connect(self._slider_changed)
                lay.addWidget(self.slider, 2)
        elif kind == "int":
            w = QtWidgets.QSpinBox()
            w.setRange(int(max(opt.get("min", -2**31), -2**31)), int(min(opt.get("max", 2**31 - 1), 2**31 - 1)))
            w.setSingleStep(int(opt.get("step", 1)))
            w.setKeyboardTracking(False)
            w.valueChanged.connect(lambda v: self.changed.emit(int(v)))
        elif kind == "bool":
            w = QtWidgets.QCheckBox()
            w.toggled.connect(lambda v: self.changed.emit(bool(v)))
        elif kind == "enum":
            w = QtWidgets.QComboBox()
            w.addItems([str(v) for v in opt.get("values", [])])
            w.currentTextChanged.connect(self.changed.emit)
        else:
            w = QtWidgets.QLineEdit()
            w.editingFinished.connect(lambda: self.changed.emit(w.text()))
        self.control = w
        lay.addWidget(w, 1)
        if opt.get("unit"):
            lay.addWidget(QtWidgets.QLabel(str(opt["unit"])))
        tip = opt.get("tooltip", "")
        self.setToolTip(tip)
        self.set_value(opt.get("value"))

    def _spin_changed(self, v: float) -> None:
        self._sync_slider(v)
        self.changed.emit(float(v))

    def _slider_changed(self, pos: int) -> None:
        lo, hi = float(self.opt["min"]), float(self.opt["max"])
        self.control.setValue(lo + (hi - lo) * pos / SLIDER_STEPS)  # emits through the spin box

    def _sync_slider(self, v: float) -> None:
        if self.slider is None:
            return
        lo, hi = float(self.opt["min"]), float(self.opt["max"])
        self.slider.blockSignals(True)
        self.slider.setValue(round((float(v) - lo) / (hi - lo) * SLIDER_STEPS) if hi > lo else 0)
        self.slider.blockSignals(False)

    def set_value(self, value: Any) -> None:
        """Show ``value`` without emitting ``changed``."""
        w = self.control
        w.blockSignals(True)
        try:
            if isinstance(w, QtWidgets.QDoubleSpinBox):
                w.setValue(float(value))
                self._sync_slider(float(value))
            elif isinstance(w, QtWidgets.QSpinBox):
                w.setValue(int(value))
            elif isinstance(w, QtWidgets.QCheckBox):
                w.setChecked(bool(value))
            elif isinstance(w, QtWidgets.QComboBox):
                w.setCurrentText(str(value))
            else:
                w.setText("" if value is None else str(value))
        finally:
            w.blockSignals(False)

    def set_error(self, message: str | None) -> None:
        self.control.setStyleSheet(ERROR_STYLE if message else "")
        self.control.setToolTip(message or self.opt.get("tooltip", ""))


class ParameterEditor(QtWidgets.QWidget):
    """Runtime options grouped per layer. ``option_changed(layer, option, value)``."""

    option_changed = QtCore.Signal(str, str, object)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Option", "Value"])
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(False)
        self.tree.header().setStretchLastSection(True)
        self.tree.setColumnWidth(0, 170)
        self.message = QtWidgets.QLabel("No analysis layer with runtime options (Launch Analysis first).")
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #9aa0a6;")
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.message)
        self.editors: dict[tuple[str, str], OptionEditor] = {}
        self.groups: dict[str, QtWidgets.QTreeWidgetItem] = {}
        self._shape: list[tuple[str, tuple[tuple[str, str], ...]]] = []

    def set_options(self, options: dict[str, list[dict[str, Any]]]) -> None:
        """Show these options (``Network.runtime_options()``): rebuilt when the set of options changed,
        otherwise only the values are updated (the user's focus and scroll position stay)."""
        shape = [(layer, tuple((o["name"], o["type"]) for o in opts)) for layer, opts in options.items()]
        if shape != self._shape:
            self._rebuild(options)
            self._shape = shape
        for layer, opts in options.items():
            for o in opts:
                ed = self.editors[(layer, o["name"])]
                ed.opt = o
                ed.set_value(o["value"])
                ed.set_error(None)
        if not options:  # analysis runs: the network itself has none
            self.message.setText("This network has no layer with runtime options (the analysis collection's layers, "
                                 "such as mix, noise or linear_blend, have them).")
        self.message.setVisible(not options)

    def _rebuild(self, options: dict[str, list[dict[str, Any]]]) -> None:
        expanded = {name for name, item in self.groups.items() if item.isExpanded()} if self.groups else None
        self.tree.clear()
        self.editors, self.groups = {}, {}
        for layer, opts in options.items():
            group = QtWidgets.QTreeWidgetItem(self.tree, [layer, ""])
            font = group.font(0)
            font.setBold(True)
            group.setFont(0, font)
            self.groups[layer] = group
            for o in opts:
                item = QtWidgets.QTreeWidgetItem(group, [o["text"], ""])
                item.setToolTip(0, f"{o['name']}: {o.get('tooltip', '')}")
                ed = OptionEditor(o)
                ed.changed.connect(lambda v, lay=layer, name=o["name"]: self.option_changed.emit(lay, name, v))
                self.tree.setItemWidget(item, 1, ed)
                self.editors[(layer, o["name"])] = ed
            group.setExpanded(expanded is None or layer in expanded)

    def set_error(self, layer: str, option: str, message: str) -> None:
        """Mark a refused value (the session sends the reason)."""
        ed = self.editors.get((layer, option))
        if ed is not None:
            ed.set_error(message)
        self.message.setText(message)
        self.message.setVisible(True)
