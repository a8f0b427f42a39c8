"""The parameter window: typed editors for the selected layer(s), or the network parameters when nothing is
selected. Values are validated with the descriptors; an invalid value is shown in red with the reason and is
not applied. Every change is a Model command (several layers: one undo step). A template instance shows its
exposed parameters (``<layer>.<param>``) like a layer's own, and a Template box to choose which inner
parameters its template exposes."""
from __future__ import annotations

import math
from collections.abc import Callable

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.document import Document
from canvas.constants import dims_text
from engine.backends import NumpyBackend
from engine.descriptors import ActivationDesc, CoefDesc, LayerDesc, ParamDesc, is_identifier
from engine.errors import LayerLabError
from engine.events import (
    ActivationChanged,
    Event,
    LayerRemoved,
    LayerRenamed,
    NetworkChanged,
    ParamChanged,
    TemplateChanged,
)
from engine.network import build_layer
from engine.templates import exposable, find_desc, get_template, set_exposed, template_name
from engine.tensor import FP32_NCHW, MAX_RANK, MIN_RANK, Dims

INT_LIMIT = 2**31 - 1
ERROR_STYLE = "border: 1px solid #e05050; background: #4a2020;"

Validator = Callable[[str], str | None]  # returns the reason the text is invalid, or None


#: the window's Undo and Redo keys, which a parameter field passes on when nothing typed is pending
HISTORY_KEYS = ("Ctrl+Z", "Ctrl+Shift+Z", "Ctrl+Y")


class Editor(QtWidgets.QWidget):
    """A value editor working on text; emits ``committed(text)`` when the user finishes an edit."""

    committed = QtCore.Signal(str)

    def set_text(self, text: str) -> None:
        raise NotImplementedError

    def text(self) -> str:
        raise NotImplementedError

    def input_widgets(self) -> list[QtWidgets.QWidget]:
        return [self]

    def editing(self) -> bool:
        """Whether text typed into the editor is not committed yet (Ctrl+Z undoes that typing then)."""
        for w in self.input_widgets():
            line = w.lineEdit() if isinstance(w, (QtWidgets.QAbstractSpinBox, QtWidgets.QComboBox)) else w
            if isinstance(w, QtWidgets.QAbstractSpinBox) and line is not None:
                if line.text() != w.textFromValue(w.value()):  # type: ignore[attr-defined]
                    return True
            elif isinstance(w, QtWidgets.QLineEdit) and w.isModified():
                return True
        return False


class TextEditor(Editor):
    def __init__(self, text: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.edit = QtWidgets.QLineEdit(text)
        self.edit.setPlaceholderText(placeholder)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.edit)
        self._last = text
        self.edit.editingFinished.connect(self._finish)

    def _finish(self) -> None:
        self.edit.setModified(False)  # committed: Ctrl+Z now undoes the model's edit
        if self.edit.text() != self._last:
            self.committed.emit(self.edit.text())

    def set_text(self, text: str) -> None:
        self._last = text
        self.edit.setText(text)

    def text(self) -> str:
        return self.edit.text()

    def input_widgets(self) -> list[QtWidgets.QWidget]:
        return [self.edit]


def _spin(lo: int, hi: int) -> QtWidgets.QSpinBox:
    box = QtWidgets.QSpinBox()
    box.setRange(lo, hi)
    box.setKeyboardTracking(False)  # one commit per finished edit, not per typed digit
    box.setAccelerated(True)
    return box


class IntEditor(Editor):
    def __init__(self, lo: int, hi: int) -> None:
        super().__init__()
        self.box = _spin(lo, hi)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.box)
        self.box.valueChanged.connect(lambda v: self.committed.emit(str(v)))

    def set_text(self, text: str) -> None:
        with QtCore.QSignalBlocker(self.box):
            self.box.setValue(int(text))

    def text(self) -> str:
        return str(self.box.value())

    def input_widgets(self) -> list[QtWidgets.QWidget]:
        return [self.box]


class EnumEditor(Editor):
    def __init__(self, values: tuple[str, ...] | list[str]) -> None:
        super().__init__()
        self.combo = QtWidgets.QComboBox()
        self.combo.addItems(list(values))
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.combo)
        self.combo.activated.connect(lambda i: self.committed.emit(self.combo.itemText(i)))

    def set_text(self, text: str) -> None:
        with QtCore.QSignalBlocker(self.combo):
            if self.combo.findText(text) < 0:
                self.combo.addItem(text)
            self.combo.setCurrentText(text)

    def text(self) -> str:
        return self.combo.currentText()

    def input_widgets(self) -> list[QtWidgets.QWidget]:
        return [self.combo]


class BoolEditor(Editor):
    def __init__(self, label: str = "") -> None:
        super().__init__()
        self.check = QtWidgets.QCheckBox(label)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.check)
        self.check.clicked.connect(lambda on: self.committed.emit("true" if on else "false"))

    def set_text(self, text: str) -> None:
        with QtCore.QSignalBlocker(self.check):
            self.check.setChecked(text.strip().lower() in ("true", "1", "yes", "on"))

    def text(self) -> str:
        return "true" if self.check.isChecked() else "false"

    def input_widgets(self) -> list[QtWidgets.QWidget]:
        return [self.check]


class DimsEditor(Editor):
    """N × C × H × W spin boxes (H × W only for spatial parameters such as kernel size or stride). With
    ``any_rank`` (an input's dimensions), a rank box (1 to 6) first, then as many size boxes as the rank: rank 4
    names its axes N, C, H, W; the other ranks are plain sizes in order (tokens 1 × 49 × 96)."""

    def __init__(self, spatial: bool = False, minimum: int = 0, any_rank: bool = False) -> None:
        super().__init__()
        self.spatial = spatial
        self.any_rank = any_rank and not spatial
        self.minimum = minimum  # below 0 for a value with a special meaning (e.g. -1: same as padding)
        self._desc = ParamDesc("d", "dimension", Dims(1, 1, 1, 1), min=minimum or None, any_rank=self.any_rank)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        self.rank_box: QtWidgets.QSpinBox | None = None
        if self.any_rank:
            self.rank_box = _spin(MIN_RANK, MAX_RANK)
            self.rank_box.setValue(4)
            self.rank_box.setSuffix("-D")
            self.rank_box.setToolTip(f"the tensor's rank ({MIN_RANK} to {MAX_RANK} sizes); 4-D is N × C × H × W")
            self.rank_box.valueChanged.connect(self._rank_changed)
            lay.addWidget(self.rank_box)
        self.boxes: list[QtWidgets.QSpinBox] = []
        self._seps: list[QtWidgets.QLabel] = []
        for i in range(MAX_RANK if self.any_rank else 2 if spatial else 4):
            if i:
                sep = QtWidgets.QLabel("×")
                lay.addWidget(sep)
                self._seps.append(sep)
            box = _spin(minimum, INT_LIMIT)
            if minimum < 0:
                box.setSpecialValueText("same")  # shown for the minimum (-1 of padding_end: same as padding)
            box.setButtonSymbols(QtWidgets.QAbstractSpinBox.ButtonSymbols.NoButtons)
            box.setMinimumWidth(30)
            box.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
            box.valueChanged.connect(lambda _v: self.committed.emit(self.text()))
            lay.addWidget(box, 1)
            self.boxes.append(box)
        self._show_rank(2 if spatial else 4)

    @property
    def rank(self) -> int:
        """How many sizes the editor shows and writes."""
        return self.rank_box.value() if self.rank_box is not None else len(self.boxes)

    def _show_rank(self, rank: int) -> None:
        """Show the first ``rank`` size boxes, each with the name of its axis."""
        names = dict(zip("NCHW", ("batch", "channels", "height", "width")))
        axes = "HW" if self.spatial else "NCHW" if rank == 4 else None
        for i, box in enumerate(self.boxes):
            box.setVisible(i < rank)
            if i:
                self._seps[i - 1].setVisible(i < rank)
            tip = f"{axes[i]} ({names[axes[i]]})" if axes and i < len(axes) else f"size of axis {i} of {rank}"
            box.setToolTip(tip + (f"; {self.minimum}: same as padding" if self.minimum < 0 else ""))

    def _rank_changed(self, rank: int) -> None:
        self._show_rank(rank)
        for box in self.boxes[rank:]:
            with QtCore.QSignalBlocker(box):
                box.setValue(1)
        self.committed.emit(self.text())

    def set_text(self, text: str) -> None:
        d = self._desc.parse(text)
        values = (d.h, d.w) if self.spatial else tuple(d)
        if self.rank_box is not None:
            with QtCore.QSignalBlocker(self.rank_box):
                self.rank_box.setValue(len(values))
            self._show_rank(len(values))
        for i, box in enumerate(self.boxes):  # hidden boxes hold 1: the size a larger rank starts from
            with QtCore.QSignalBlocker(box):
                box.setValue(int(values[i]) if i < len(values) else 1)

    def text(self) -> str:
        values = [b.value() for b in self.boxes[:self.rank]]
        return f"{values[0]}x{values[1]}" if self.spatial else str(Dims(*values))

    def input_widgets(self) -> list[QtWidgets.QWidget]:
        return ([self.rank_box] if self.rank_box is not None else []) + list(self.boxes)


class Row(QtWidgets.QWidget):
    """An editor with its red error line underneath; validates before passing a commit on."""

    def __init__(self, editor: Editor, validate: Validator, apply: Callable[[str], None], tooltip: str = "") -> None:
        super().__init__()
        self.editor = editor
        self.validate = validate
        self.apply = apply
        self.error = QtWidgets.QLabel()
        self.error.setStyleSheet("color: #ff6b6b;")
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(1)
        lay.addWidget(editor)
        lay.addWidget(self.error)
        for w in editor.input_widgets():
            if tooltip:
                w.setToolTip(tooltip)
            w.installEventFilter(self)
        editor.committed.connect(self._commit)

    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802 (Qt API)
        """Undo and Redo keys in a field with nothing typed pending go to the window (the model's undo), not
        to the field's own text history."""
        if (event.type() == QtCore.QEvent.Type.ShortcutOverride and isinstance(event, QtGui.QKeyEvent)
                and QtGui.QKeySequence(event.keyCombination()).toString() in HISTORY_KEYS
                and not self.editor.editing()):
            event.ignore()
            return True
        return super().eventFilter(obj, event)

    def _commit(self, text: str) -> None:
        reason = self.validate(text)
        if reason is None:
            try:
                self.apply(text)
            except LayerLabError as exc:
                reason = str(exc)
        self.show_error(reason)

    def show_error(self, reason: str | None) -> None:
        self.error.setText(reason or "")
        self.error.setVisible(bool(reason))
        for w in self.editor.input_widgets():
            w.setStyleSheet(ERROR_STYLE if reason else "")

    @property
    def has_error(self) -> bool:
        return not self.error.isHidden()


def param_validator(p: ParamDesc) -> Validator:
    def check(text: str) -> str | None:
        try:
            p.parse(text)
        except ValueError as exc:
            return f"{p.name}: {exc}"
        return None
    return check


def coef_validator(c: CoefDesc) -> Validator:
    def check(text: str) -> str | None:
        try:
            v = float(text)
            if not math.isfinite(v):
                raise ValueError
        except ValueError:
            return f"{c.name}: {text!r} is not a number"
        if (c.min is not None and v < c.min) or (c.max is not None and v > c.max):
            return f"{c.name}: {text!r} is outside [{c.min}, {c.max}]"
        return None
    return check


def editor_for(p: ParamDesc, text: str) -> Editor:
    """The control that fits a parameter's type (a text field when the stored text does not parse)."""
    try:
        p.parse(text)
        valid = True
    except ValueError:
        valid = False
    if valid and p.type in ("uint", "int"):
        lo = int(p.min) if p.min is not None else (0 if p.type == "uint" else -INT_LIMIT)
        hi = int(p.max) if p.max is not None else INT_LIMIT
        return IntEditor(max(lo, -INT_LIMIT), min(hi, INT_LIMIT))
    if valid and p.type == "enum":
        return EnumEditor(p.enum_values)
    if valid and p.type == "bool":
        return BoolEditor()
    if valid and p.type == "dimension":
        return DimsEditor(spatial=p.spatial, minimum=min(0, int(p.min or 0)), any_rank=p.any_rank)
    return TextEditor(placeholder=p.allowed())


class ParamPanel(QtWidgets.QScrollArea):
    """Shows and edits the selected layers of a document (or its network parameters)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setMinimumWidth(300)
        self.doc: Document | None = None
        self.names: list[str] = []
        self.rows: dict[str, Row] = {}
        self._getters: dict[str, Callable[[], str]] = {}
        self._act_names: tuple[str, ...] = ()
        self.exposed_dialog: ExposedDialog | None = None
        self.shape_label: QtWidgets.QLabel | None = None
        self._build()

    # ---- target ----------------------------------------------------------------------------------
    def set_target(self, doc: Document | None, names: list[str]) -> None:
        """Show ``names`` of ``doc`` (nothing selected: the network parameters)."""
        if doc is not self.doc:
            if self.doc is not None:
                try:
                    self.doc.bridge.event.disconnect(self._on_event)
                    self.doc.checked.disconnect(self._show_shapes)
                except (RuntimeError, TypeError):
                    pass
            self.doc = doc
            if doc is not None:
                doc.bridge.event.connect(self._on_event)
                doc.checked.connect(self._show_shapes)
        self.names = [n for n in names if doc is not None and n in doc.model.layers]
        self._build()

    def _on_event(self, ev: Event) -> None:
        if self.doc is None:
            return
        if isinstance(ev, LayerRenamed) and ev.old in self.names:
            self.names = [ev.layer if n == ev.old else n for n in self.names]
            self._build()
        elif isinstance(ev, LayerRemoved) and ev.layer in self.names:
            self.names = [n for n in self.names if n in self.doc.model.layers]
            self._build()
        elif isinstance(ev, ActivationChanged) and ev.layer in self.names and self._activation_set_changed():
            self._build()
        elif isinstance(ev, TemplateChanged) and any(
                template_name(self.doc.model.layers[n].type) == ev.name for n in self.names):
            self._build()
        elif isinstance(ev, (ParamChanged, ActivationChanged, NetworkChanged, LayerRenamed)):
            self.refresh()

    def _activation_set_changed(self) -> bool:
        return tuple(sorted({self.doc.model.layers[n].activation for n in self.names})) != self._act_names

    def refresh(self) -> None:
        """Show the Model's current values in the existing editors."""
        for key, row in self.rows.items():
            getter = self._getters.get(key)
            if getter is not None:
                try:
                    row.editor.set_text(getter())
                except ValueError:
                    self._build()
                    return
                row.show_error(None)

    # ---- building --------------------------------------------------------------------------------
    def _show_shapes(self, _diags: object = None) -> None:
        """The selected layer's input and output shapes as the latest type check found them (any rank:
        ``1×96×56×56 → 1×56×56×96``), so a transpose or reshape edit shows what it makes."""
        if self.shape_label is None or self.doc is None or len(self.names) != 1:
            return
        shapes, spec = self.doc.shapes, self.doc.model.layers.get(self.names[0])
        if spec is None:
            return

        def text(d: Dims | None) -> str:
            return dims_text(d) if d is not None else "?"

        ins = ", ".join(text(shapes.get(s)) for s in spec.inputs if s)
        self.shape_label.setText(f"{ins} → {text(shapes.get(spec.name))}".strip())

    def _build(self) -> None:
        self.rows = {}
        self._getters = {}
        self.shape_label = None
        page = QtWidgets.QWidget()
        outer = QtWidgets.QVBoxLayout(page)
        outer.setContentsMargins(6, 6, 6, 6)
        self.title = QtWidgets.QLabel()
        self.title.setWordWrap(True)
        self.title.setTextFormat(QtCore.Qt.TextFormat.RichText)
        outer.addWidget(self.title)
        if self.doc is None:
            self.title.setText("<i>No model open</i>")
        elif not self.names:
            self._build_network(outer)
        else:
            self._build_layers(outer)
        outer.addStretch(1)
        old = self.takeWidget()
        if old is not None:
            old.deleteLater()
        self.setWidget(page)

    def _form(self, outer: QtWidgets.QVBoxLayout, title: str) -> QtWidgets.QFormLayout:
        box = QtWidgets.QGroupBox(title)
        form = QtWidgets.QFormLayout(box)
        form.setFieldGrowthPolicy(QtWidgets.QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setLabelAlignment(QtCore.Qt.AlignmentFlag.AlignRight)
        outer.addWidget(box)
        return form

    def _add(self, form: QtWidgets.QFormLayout, key: str, label: str, editor: Editor, getter: Callable[[], str],
             validate: Validator, apply: Callable[[str], None], tooltip: str = "") -> Row:
        row = Row(editor, validate, apply, tooltip)
        editor.set_text(getter())
        lab = QtWidgets.QLabel(label)
        if tooltip:
            lab.setToolTip(tooltip)
        form.addRow(lab, row)
        self.rows[key] = row
        self._getters[key] = getter
        return row

    def _build_network(self, outer: QtWidgets.QVBoxLayout) -> None:
        model = self.doc.model
        self.title.setText(f"<b>Network</b> — {len(model.layers)} layers<br><span style='color:gray'>"
                           "Select a layer to edit its parameters.</span>")
        form = self._form(outer, "Network parameters")

        def check_name(text: str) -> str | None:
            return None if is_identifier(text) else f"{text!r} is not a valid network name: use letters, digits and '_'"

        self._add(form, "network.name", "Name", TextEditor(), lambda: model.name, check_name,
                  lambda t: model.set_network(name=t), "network name (an identifier)")
        self._add(form, "network.version", "Version", TextEditor(), lambda: model.version,
                  lambda t: None if t.strip() else "the version must not be empty",
                  lambda t: model.set_network(version=t), "network version")
        path = QtWidgets.QLabel(self.doc.path or "<i>not saved yet</i>")
        path.setWordWrap(True)
        path.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        form.addRow("File", path)

    def _descs(self) -> list[LayerDesc | None]:
        model, registry = self.doc.model, self.doc.registry
        return [find_desc(model, registry, model.layers[n].type) for n in self.names]

    def _build_layers(self, outer: QtWidgets.QVBoxLayout) -> None:
        model = self.doc.model
        names = list(self.names)
        first = model.layers[names[0]]
        descs = self._descs()
        desc = descs[0]
        if len(names) == 1:
            kind = desc.display_name if desc else f"{first.type} (unknown type)"
            summary = desc.summary if desc else "This layer type is not provided by any loaded plugin."
            self.title.setText(f"<b>{first.name}</b> — {kind}<br><span style='color:gray'>{summary}</span>")
        else:
            self.title.setText(f"<b>{len(names)} layers selected</b><br><span style='color:gray'>"
                               "Common parameters; a change applies to all of them in one undo step.</span>")
        ident = self._form(outer, "Layer")
        if len(names) == 1:
            def check_name(text: str) -> str | None:
                if text == self.names[0]:
                    return None
                if not is_identifier(text):
                    return f"{text!r} is not a valid layer name: use letters, digits and '_', not starting with a digit"
                if text in model.layers:
                    return f"a layer named {text!r} already exists"
                return None

            self._add(ident, "name", "Name", TextEditor(), lambda: self.names[0], check_name,
                      lambda t: model.rename_layer(self.names[0], t), "unique identifier of the layer")
            ident.addRow("Type", QtWidgets.QLabel(first.type))
            self.shape_label = QtWidgets.QLabel()
            self.shape_label.setObjectName("LayerShape")
            self.shape_label.setWordWrap(True)
            self.shape_label.setToolTip("input shapes → output shape, as the type check found them (? : unknown)")
            self.shape_label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
            ident.addRow("Shape", self.shape_label)
            self._show_shapes()
            if first.note:  # e.g. the ONNX node the layer was imported from
                note = QtWidgets.QLabel(first.note)
                note.setObjectName("LayerNote")
                note.setWordWrap(True)
                note.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
                ident.addRow("Source", note)
        permanent = BoolEditor("keep output (permanent)")
        self._add(ident, "permanent", "", permanent,
                  lambda: "true" if model.layers[self.names[0]].permanent else "false", lambda t: None,
                  lambda t: self._apply_all("permanent", lambda n: model.set_permanent(n, t == "true")),
                  "a permanent layer keeps its output buffer (it is never recycled)")
        self._build_format(ident)

        tname = template_name(first.type) if len(names) == 1 else None
        if tname is not None and desc is not None:
            self._build_template(outer, tname)
        # common parameters: same name and type in every selected layer's descriptor
        if all(d is not None for d in descs):
            common = [p for p in desc.params
                      if all(any(q.name == p.name and q.type == p.type for q in d.params) for d in descs[1:])]
            if common:
                form = self._form(outer, "Parameters")
                for p in common:
                    self._add_param(form, p)
        elif len(names) == 1 and first.params:
            form = self._form(outer, "Parameters (unknown type, shown as text)")
            for key in first.params:
                self._add(form, f"param.{key}", key, TextEditor(), lambda k=key: model.layers[self.names[0]].params[k],
                          lambda t: None, lambda t, k=key: model.set_param(self.names[0], k, t))
        self._build_activation(outer)

    def _build_template(self, outer: QtWidgets.QVBoxLayout, tname: str) -> None:
        defn = get_template(self.doc.model, tname)
        form = self._form(outer, "Template")
        layers = QtWidgets.QLabel(", ".join(defn.layers) + f" (output: {defn.output})")
        layers.setWordWrap(True)
        layers.setToolTip("Its layers run as <instance>__<layer> (see the inference report)")
        form.addRow(tname, layers)
        button = QtWidgets.QPushButton("Exposed Parameters…")
        button.setToolTip("Choose which parameters of the template's layers every instance can set")
        button.clicked.connect(lambda: self.edit_exposed(tname))
        self.exposed_button = button
        form.addRow("", button)
        if not defn.exposed:
            note = QtWidgets.QLabel("No parameter is exposed: every instance uses the template's values.")
            note.setStyleSheet("color: gray;")
            note.setWordWrap(True)
            form.addRow("", note)

    def edit_exposed(self, tname: str) -> ExposedDialog:
        """Open the (non-modal) dialog choosing the exposed parameters of template ``tname``."""
        model, registry = self.doc.model, self.doc.registry
        current = {e.key for e in get_template(model, tname).exposed}
        dlg = ExposedDialog(tname, [(k, p) for k, p in exposable(model, tname, registry)], current, self)
        dlg.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)

        def apply() -> None:
            try:
                set_exposed(model, tname, dlg.selected(), registry)
            except LayerLabError as exc:
                QtWidgets.QToolTip.showText(self.mapToGlobal(QtCore.QPoint(0, 0)), str(exc), self)

        dlg.accepted.connect(apply)
        self.exposed_dialog = dlg
        dlg.open()
        return dlg

    def _add_param(self, form: QtWidgets.QFormLayout, p: ParamDesc) -> None:
        model = self.doc.model

        def getter() -> str:
            return model.layers[self.names[0]].params.get(p.name, p.default_text)

        values = {model.layers[n].params.get(p.name, p.default_text) for n in self.names}
        tip = f"{p.doc} ({p.allowed()}; default {p.default_text})" if p.doc else f"{p.allowed()}; default {p.default_text}"
        if len(values) > 1:
            tip += " — differs between the selected layers"
        editor = editor_for(p, getter())
        label = p.name + (" *" if len(values) > 1 else "")
        self._add(form, f"param.{p.name}", label, editor, getter, self._layer_validator(p),
                  lambda t: self._apply_all(f"Set {p.name}", lambda n: model.set_param(n, p.name, t)), tip)

    def _layer_validator(self, p: ParamDesc) -> Validator:
        """The parameter's own rules, then the layer's (``kernel_size`` 0 parses as a dimension, but no
        convolution accepts it): a value a selected layer refuses is not applied."""
        own = param_validator(p)
        model, registry = self.doc.model, self.doc.registry

        def check(text: str) -> str | None:
            reason = own(text)
            if reason is not None:
                return reason
            for name in self.names:
                spec = model.layers.get(name)
                if spec is None or registry.layer_class(spec.type) is None:
                    continue
                try:
                    build_layer(name, spec.type, {**spec.params, p.name: text}, spec.activation, spec.act_coefs,
                                registry, FP32_NCHW, NumpyBackend())
                except LayerLabError as exc:
                    if p.name in str(exc):
                        return str(exc)
            return None
        return check

    def _build_format(self, form: QtWidgets.QFormLayout) -> None:
        """Precision and Layout: the layer's own tensor format, over the network's (``app.layer_format``)."""
        from app import layer_format as lf  # noqa: PLC0415

        model = self.doc.model

        def first() -> str:
            return model.layers[self.names[0]].format

        self._add(form, "precision", "Precision", EnumEditor(lf.PRECISION_CHOICES), lambda: lf.precision_choice(first()),
                  lambda t: None, lambda t: lf.set_precision(model, list(self.names), t),
                  "run this layer in fp16 or fp32 whatever the network's format (the network converts between)")
        self._add(form, "layout", "Layout", EnumEditor(lf.LAYOUT_CHOICES), lambda: lf.layout_choice(first()),
                  lambda t: None, lambda t: lf.set_layout(model, list(self.names), t),
                  "run this layer in NCHW or NHWC whatever the network's format (the network converts between)")

    def _apply_all(self, text: str, fn: Callable[[str], None]) -> None:
        names = list(self.names)
        with self.doc.model.macro(f"{text} on {', '.join(names)}" if len(names) > 1 else text):
            for n in names:
                fn(n)

    def _build_activation(self, outer: QtWidgets.QVBoxLayout) -> None:
        model, registry = self.doc.model, self.doc.registry
        acts = {model.layers[n].activation for n in self.names}
        self._act_names = tuple(sorted(acts))
        form = self._form(outer, "Activation")
        choices = ["none", *registry.activation_names]
        getter = lambda: model.layers[self.names[0]].activation  # noqa: E731

        def apply(t: str) -> None:
            self._apply_all("Set activation", lambda n: model.set_activation(
                n, t, model.layers[n].act_coefs if model.layers[n].activation == t else {}))

        def check(t: str) -> str | None:
            return None if t in choices else f"unknown activation {t!r}"

        self._add(form, "activation", "Function", EnumEditor(choices), getter, check, apply,
                  "applied to the layer's output (fused where the layer supports it)")
        if len(acts) != 1:
            return
        adesc: ActivationDesc | None = registry.find_activation(next(iter(acts)))
        if adesc is None:
            return
        if adesc.summary:
            note = QtWidgets.QLabel(adesc.summary)
            note.setStyleSheet("color: gray;")
            note.setWordWrap(True)
            form.addRow("", note)
        for c in adesc.coefficients:
            def cget(c: CoefDesc = c) -> str:
                return model.layers[self.names[0]].act_coefs.get(c.name, repr(float(c.default)))

            def capply(t: str, c: CoefDesc = c) -> None:
                self._apply_all(f"Set {c.name}", lambda n: model.set_activation(
                    n, model.layers[n].activation, {**model.layers[n].act_coefs, c.name: t}))

            self._add(form, f"coef.{c.name}", c.name, TextEditor(placeholder="a number"), cget, coef_validator(c),
                      capply, c.doc)


class ExposedDialog(QtWidgets.QDialog):
    """A checklist of a template's inner parameters (``<layer>.<param>``); the checked ones are exposed."""

    def __init__(self, template: str, params: list[tuple[str, ParamDesc]], exposed: set[str],
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Exposed Parameters of {template}")
        self.list = QtWidgets.QListWidget()
        for key, p in params:
            item = QtWidgets.QListWidgetItem(key)
            item.setFlags(item.flags() | QtCore.Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(QtCore.Qt.CheckState.Checked if key in exposed else QtCore.Qt.CheckState.Unchecked)
            item.setToolTip(f"{p.doc} ({p.allowed()}; default {p.default_text})" if p.doc else p.allowed())
            self.list.addItem(item)
        note = QtWidgets.QLabel("Checked parameters can be set on each instance of the template; every instance "
                                "shares this list. An instance's values of unchecked parameters are dropped.")
        note.setWordWrap(True)
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok
                                             | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(note)
        lay.addWidget(self.list)
        lay.addWidget(buttons)
        self.resize(420, 460)

    def items(self) -> dict[str, QtWidgets.QListWidgetItem]:
        return {self.list.item(i).text(): self.list.item(i) for i in range(self.list.count())}

    def selected(self) -> list[str]:
        return [k for k, item in self.items().items() if item.checkState() == QtCore.Qt.CheckState.Checked]
