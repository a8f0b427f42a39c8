"""Edit > Add Custom Layer… / Edit Custom Layer…: the dialog describing a custom layer (type name, display
name, category, documentation, inputs and parameters), its shape script (with its syntax and live
validation, errors with the column) and its code, one editor per backend and format: Python for the CPU
(and GPU formats without a kernel) and CUDA C with its launch line per tensor format. Validation only parses
(shape script, launch lines, Python with ``ast``): nothing is run or compiled here."""
from __future__ import annotations

import html
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.designer.code_editor import CodeEditor
from engine.custom.definition import (
    DEFAULT_CATEGORY,
    INPUT_KINDS,
    CudaVariant,
    CustomInput,
    CustomLayerDef,
    CustomParam,
    python_problem,
    read_definition_file,
    write_definition_file,
)
from engine.custom.script import ScriptError, check_shape_script
from engine.descriptors import PARAM_TYPES
from engine.errors import LayerLabError
from engine.tensor import FORMATS, TensorFormat

PYTHON_TEMPLATE = '''def forward(xp, inputs, params):
    """inputs: the input arrays, N x C x H x W (None for an unconnected input); xp: numpy or cupy;
    params: the parameters by name. Return the output, of the size the shape script gives."""
    x = inputs[0]
    return x
'''

CUDA_PLACEHOLDER = '''extern "C" __global__ void k_custom(float* out, const float* in, int NC, int H, int W)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;   // W
    int y = blockIdx.y * blockDim.y + threadIdx.y;   // H
    int z = blockIdx.z * blockDim.z + threadIdx.z;   // N x C
    if (x >= W || y >= H || z >= NC) return;
    int i = (z * H + y) * W + x;                     // NCHW
    out[i] = in[i];
}'''
LAUNCH_PLACEHOLDER = "k_custom<16,16,1>(out, in[0], out.n * out.c, out.h, out.w)"

SHAPE_HELP = """<p><b>Shape script</b>: four expressions separated by commas, the output's <b>N, C, H, W</b>.</p>
<ul>
<li><code>in.n in.c in.h in.w</code>: the first input's sizes; <code>in[1].c</code>: input 1's (from 0)</li>
<li>parameters by name (numbers, booleans); a dimension parameter <code>p</code> gives <code>p.n p.c p.h p.w</code></li>
<li>numbers, <code>+ - * / // %</code>, parentheses, <code>min(a, b, …)</code>, <code>max(a, b, …)</code>,
<code>ceil(x)</code>, <code>floor(x)</code></li>
<li><code>/</code> is exact (7 / 2 = 3.5), <code>//</code> rounds down; each size must be a whole number ≥ 1</li>
</ul>
<p>Example: <code>in.n, in.c * 4, in.h / 2, in.w / 2</code></p>"""

LAUNCH_HELP = """<p><b>Launch line</b> <code>kernel&lt;X,Y,Z&gt;[n,c,h,w](arguments){shared bytes}</code>:
one thread per output element; X covers W, Y covers H, Z covers N × C. A block size followed by <code>!</code>
is fixed (that grid dimension is 1: the kernel loops itself); <code>[n,c,h,w]</code> (optional) is the stepping,
elements per thread along each axis. Arguments: <code>out</code>, <code>in</code>/<code>in[i]</code> (device
pointers), and expressions such as <code>out.c</code>, <code>in[1].w</code> or a parameter (int, or float when a
float parameter, a decimal number or <code>/</code> is involved). Declare the kernel
<code>extern "C" __global__</code>; fp16 formats get <code>cuda_fp16.h</code> (<code>__half</code>).</p>"""

PYTHON_HELP = """<p><b>Python</b>: define <code>forward(xp, inputs, params)</code>. <code>xp</code> is numpy (or cupy on
the GPU), <code>inputs</code> the input arrays in N × C × H × W order (float32 on the CPU; None for an unconnected
input), <code>params</code> the parameters by name. Return the output array. It runs on the CPU in every format,
and on the GPU in the formats that have no CUDA kernel.</p>"""


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _line_edit(text: str = "", placeholder: str = "") -> QtWidgets.QLineEdit:
    w = QtWidgets.QLineEdit(text)
    w.setPlaceholderText(placeholder)
    return w


def _combo(items: tuple[str, ...] | list[str], current: str) -> QtWidgets.QComboBox:
    w = QtWidgets.QComboBox()
    w.addItems(list(items))
    w.setCurrentText(current)
    return w


class CustomLayerDialog(QtWidgets.QDialog):
    """Emits ``definition_accepted(CustomLayerDef, old_name)`` when OK is pressed on a valid definition
    (``old_name`` is None for a new layer). ``taken`` are names the new layer may not have."""

    definition_accepted = QtCore.Signal(object, object)

    def __init__(self, definition: CustomLayerDef | None = None, taken: set[str] | frozenset[str] = frozenset(),
                 parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.old_name = definition.name if definition is not None else None
        self.taken = set(taken) - ({self.old_name} if self.old_name else set())
        self.setWindowTitle(f"Edit Custom Layer {self.old_name}" if self.old_name else "Add Custom Layer")
        self.setObjectName("CustomLayerDialog")
        self.resize(900, 720)
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.addTab(self._description_page(), "Description")
        self.tabs.addTab(self._shape_page(), "Shape")
        self.tabs.addTab(self._code_page(), "Code")
        self.problems = QtWidgets.QLabel()
        self.problems.setObjectName("problems")
        self.problems.setWordWrap(True)
        self.problems.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Ok
                                                  | QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = self.buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Ok)
        self.import_button = self.buttons.addButton("Import…", QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        self.export_button = self.buttons.addButton("Export…", QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        self.import_button.clicked.connect(lambda: self._file_dialog(False))
        self.export_button.clicked.connect(lambda: self._file_dialog(True))
        self.file_dialog: QtWidgets.QFileDialog | None = None
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(self.tabs, 1)
        lay.addWidget(self.problems)
        lay.addWidget(self.buttons)
        self.set_definition(definition or CustomLayerDef("", python=PYTHON_TEMPLATE))
        if self.old_name:
            self.type_name.setReadOnly(True)
            self.type_name.setToolTip("A custom layer keeps its type name: its instances refer to it")

    # ---- pages -----------------------------------------------------------------------------------------
    def _description_page(self) -> QtWidgets.QWidget:
        page = QtWidgets.QWidget()
        form = QtWidgets.QFormLayout()
        self.type_name = _line_edit(placeholder="type name, e.g. space_to_depth2 (letters, digits, _)")
        self.type_name.setObjectName("type_name")
        self.display_name = _line_edit(placeholder="name shown in the palette (default: the type name)")
        self.category = _line_edit(DEFAULT_CATEGORY)
        self.documentation = QtWidgets.QPlainTextEdit()
        self.documentation.setPlaceholderText("What the layer computes (the first line is its summary)")
        self.documentation.setMaximumHeight(110)
        form.addRow("Type name", self.type_name)
        form.addRow("Display name", self.display_name)
        form.addRow("Category", self.category)
        form.addRow("Documentation", self.documentation)
        self.inputs = QtWidgets.QTableWidget(0, 2)
        self.inputs.setHorizontalHeaderLabels(["Input", "Kind"])
        self.inputs.horizontalHeader().setStretchLastSection(True)
        self.add_input_button = QtWidgets.QPushButton("Add Input")
        self.remove_input_button = QtWidgets.QPushButton("Remove Input")
        self.add_input_button.clicked.connect(lambda: self.add_input())
        self.remove_input_button.clicked.connect(lambda: self._remove_row(self.inputs))
        self.params = QtWidgets.QTableWidget(0, 7)
        self.params.setHorizontalHeaderLabels(["Parameter", "Type", "Default", "Min", "Max", "Enum values", "Description"])
        self.params.horizontalHeader().setStretchLastSection(True)
        self.add_param_button = QtWidgets.QPushButton("Add Parameter")
        self.remove_param_button = QtWidgets.QPushButton("Remove Parameter")
        self.add_param_button.clicked.connect(lambda: self.add_param())
        self.remove_param_button.clicked.connect(lambda: self._remove_row(self.params))
        lay = QtWidgets.QVBoxLayout(page)
        lay.addLayout(form)
        for table, add, remove, note in (
                (self.inputs, self.add_input_button, self.remove_input_button,
                 "Inputs: primary (must be connected), secondary (optional), infinite (the last one: any number)"),
                (self.params, self.add_param_button, self.remove_param_button,
                 "Parameters: type, default and, for numbers, the range (min/max, optional)")):
            lay.addWidget(QtWidgets.QLabel(note))
            lay.addWidget(table, 1)
            row = QtWidgets.QHBoxLayout()
            row.addWidget(add)
            row.addWidget(remove)
            row.addStretch(1)
            lay.addLayout(row)
        for w in (self.type_name, self.display_name, self.category):
            w.textChanged.connect(self.validate)
        self.documentation.textChanged.connect(self.validate)
        return page

    def _shape_page(self) -> QtWidgets.QWidget:
        page = QtWidgets.QWidget()
        self.shape = _line_edit(placeholder="in.n, in.c, in.h, in.w")
        self.shape.setObjectName("shape")
        self.shape.setFont(self._mono())
        self.shape.textChanged.connect(self.validate)
        self.shape_status = QtWidgets.QLabel()
        self.shape_status.setObjectName("shape_status")
        self.shape_status.setTextFormat(QtCore.Qt.TextFormat.RichText)
        help_label = QtWidgets.QLabel(SHAPE_HELP)
        help_label.setWordWrap(True)
        lay = QtWidgets.QVBoxLayout(page)
        lay.addWidget(QtWidgets.QLabel("Output shape (N, C, H, W):"))
        lay.addWidget(self.shape)
        lay.addWidget(self.shape_status)
        lay.addWidget(help_label)
        lay.addStretch(1)
        return page

    def _code_page(self) -> QtWidgets.QWidget:
        page = QtWidgets.QWidget()
        self.code_tabs = QtWidgets.QTabWidget()
        py = QtWidgets.QWidget()
        self.python_editor = CodeEditor("python")
        self.python_editor.setObjectName("python_editor")
        self.python_status = QtWidgets.QLabel()
        self.python_editor.textChanged.connect(self.validate)
        pl = QtWidgets.QVBoxLayout(py)
        help_py = QtWidgets.QLabel(PYTHON_HELP)
        help_py.setWordWrap(True)
        pl.addWidget(help_py)
        pl.addWidget(self.python_editor, 1)
        pl.addWidget(self.python_status)
        self.code_tabs.addTab(py, "Python (CPU)")
        self.cuda: dict[TensorFormat, tuple[QtWidgets.QLineEdit, CodeEditor, QtWidgets.QLabel]] = {}
        for fmt in FORMATS:
            w = QtWidgets.QWidget()
            launch = _line_edit(placeholder=LAUNCH_PLACEHOLDER)
            launch.setFont(self._mono())
            editor = CodeEditor("cuda")
            editor.setPlaceholderText(CUDA_PLACEHOLDER)
            status = QtWidgets.QLabel()
            status.setWordWrap(True)
            launch.textChanged.connect(self.validate)
            editor.textChanged.connect(self.validate)
            cl = QtWidgets.QVBoxLayout(w)
            cl.addWidget(QtWidgets.QLabel("Launch line:"))
            cl.addWidget(launch)
            cl.addWidget(editor, 1)
            cl.addWidget(status)
            self.cuda[fmt] = (launch, editor, status)
            self.code_tabs.addTab(w, f"CUDA {fmt.precision.value.upper()} {fmt.layout.value.upper()}")
        launch_help = QtWidgets.QLabel(LAUNCH_HELP)
        launch_help.setWordWrap(True)
        self.runs_in = QtWidgets.QLabel()
        self.runs_in.setObjectName("runs_in")
        self.runs_in.setWordWrap(True)
        lay = QtWidgets.QVBoxLayout(page)
        lay.addWidget(self.code_tabs, 1)
        lay.addWidget(launch_help)
        lay.addWidget(self.runs_in)
        return page

    @staticmethod
    def _mono():  # type: ignore[no-untyped-def]
        from PySide6 import QtGui  # noqa: PLC0415

        return QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont)

    # ---- rows -------------------------------------------------------------------------------------------
    def add_input(self, name: str | None = None, kind: str = "primary") -> int:
        row = self.inputs.rowCount()
        self.inputs.insertRow(row)
        edit = _line_edit(name if name is not None else ("input" if row == 0 else f"input{row}"))
        combo = _combo(list(INPUT_KINDS), kind)
        edit.textChanged.connect(self.validate)
        combo.currentTextChanged.connect(self.validate)
        for col, w in enumerate((edit, combo)):
            w.installEventFilter(self)
            self.inputs.setCellWidget(row, col, w)
        self.validate()
        return row

    def add_param(self, param: CustomParam | None = None) -> int:
        p = param or CustomParam(f"param{self.params.rowCount() + 1}", "float", "1")
        row = self.params.rowCount()
        self.params.insertRow(row)
        cells: list[QtWidgets.QWidget] = [_line_edit(p.name), _combo(PARAM_TYPES, p.type), _line_edit(p.default),
                                          _line_edit(p.min), _line_edit(p.max), _line_edit(",".join(p.values)),
                                          _line_edit(p.doc)]
        for col, w in enumerate(cells):
            if isinstance(w, QtWidgets.QComboBox):
                w.currentTextChanged.connect(self.validate)
            else:
                w.textChanged.connect(self.validate)
            w.installEventFilter(self)
            self.params.setCellWidget(row, col, w)
        self.validate()
        return row

    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:  # noqa: N802 (Qt API)
        """A click into a cell's editor makes its row the table's current row (what Remove removes); Enter in a
        cell finishes that cell (focus to the next one) instead of pressing OK for the whole dialog."""
        if (event.type() == QtCore.QEvent.Type.KeyPress
                and event.key() in (QtCore.Qt.Key.Key_Return, QtCore.Qt.Key.Key_Enter)  # type: ignore[attr-defined]
                and isinstance(obj, QtWidgets.QWidget)):
            obj.focusNextChild()
            return True
        if event.type() in (QtCore.QEvent.Type.FocusIn, QtCore.QEvent.Type.MouseButtonPress):
            for table in (self.inputs, self.params):
                for r in range(table.rowCount()):
                    for c in range(table.columnCount()):
                        if table.cellWidget(r, c) is obj:
                            table.setCurrentCell(r, c)
                            return False
        return super().eventFilter(obj, event)

    def _remove_row(self, table: QtWidgets.QTableWidget) -> None:
        row = table.currentRow() if table.currentRow() >= 0 else table.rowCount() - 1
        if row >= 0:
            table.removeRow(row)
            self.validate()

    def cell(self, table: QtWidgets.QTableWidget, row: int, col: int) -> QtWidgets.QWidget:
        return table.cellWidget(row, col)

    def cuda_launch(self, fmt: TensorFormat) -> QtWidgets.QLineEdit:
        return self.cuda[fmt][0]

    def cuda_editor(self, fmt: TensorFormat) -> CodeEditor:
        return self.cuda[fmt][1]

    # ---- the definition ---------------------------------------------------------------------------------
    def definition(self) -> CustomLayerDef:
        """The definition the fields describe now (possibly invalid: see ``validate``)."""
        inputs = tuple(CustomInput(self.cell(self.inputs, r, 0).text().strip(), self.cell(self.inputs, r, 1).currentText())
                       for r in range(self.inputs.rowCount()))
        params = []
        for r in range(self.params.rowCount()):
            texts = [self.cell(self.params, r, c).text() for c in (0, 2, 3, 4, 5, 6)]
            params.append(CustomParam(texts[0].strip(), self.cell(self.params, r, 1).currentText(), texts[1].strip(),
                                      texts[2].strip(), texts[3].strip(),
                                      tuple(v.strip() for v in texts[4].split(",") if v.strip()), texts[5].strip()))
        cuda = tuple(CudaVariant(fmt, editor.toPlainText(), launch.text().strip())
                     for fmt, (launch, editor, _) in self.cuda.items() if editor.toPlainText().strip())
        return CustomLayerDef(self.type_name.text().strip(), self.display_name.text().strip(),
                              self.category.text().strip() or DEFAULT_CATEGORY, self.documentation.toPlainText(),
                              inputs, tuple(params), self.shape.text(), self.python_editor.toPlainText(), cuda)

    def set_definition(self, defn: CustomLayerDef) -> None:
        """Show ``defn`` in the fields (the type name stays read-only when editing)."""
        self._loading = True
        try:
            if not self.type_name.isReadOnly():
                self.type_name.setText(defn.name)
            self.display_name.setText(defn.display_name)
            self.category.setText(defn.category)
            self.documentation.setPlainText(defn.documentation)
            self.inputs.setRowCount(0)
            for i in defn.inputs:
                self.add_input(i.name, i.kind)
            self.params.setRowCount(0)
            for p in defn.params:
                self.add_param(p)
            self.shape.setText(defn.shape)
            self.python_editor.setPlainText(defn.python)
            for fmt, (launch, editor, _) in self.cuda.items():
                v = defn.cuda_for(fmt)
                launch.setText(v.launch if v else "")
                editor.setPlainText(v.code if v else "")
        finally:
            self._loading = False
        self.validate()

    def validate(self) -> list[tuple[str, str]]:
        """Check the fields now: the shape status (with the column), each editor's status, which formats run,
        the list of problems; OK is enabled only without problems. Returns the problems."""
        if getattr(self, "_loading", False) or not hasattr(self, "runs_in"):
            return []
        defn = self.definition()
        problems = defn.problems()
        if defn.name in self.taken:
            problems.insert(0, ("name", f"a custom layer named {defn.name!r} already exists in this model"))
        self._show_shape(defn)
        py = python_problem(defn.python) if defn.python.strip() else None
        self.python_status.setText(py or ("No Python code: the layer does not run on the CPU."
                                          if not defn.python.strip() else "Python code: no syntax problem found."))
        by_field = dict(problems)
        for fmt, (_, editor, status) in self.cuda.items():
            if not editor.toPlainText().strip():
                status.setText("No kernel for this format." + (" The Python code runs instead." if defn.python.strip()
                                                               else ""))
            else:
                status.setText(by_field.get(f"cuda {fmt}", "Launch line and kernel name: no problem found."))
        self.runs_in.setText(defn.runs_in_text())
        if problems:
            items = "".join(f"<li>{_esc(msg)}</li>" for _, msg in problems)
            self.problems.setText(f"<span style='color:#b00020'>To fix before OK:</span><ul>{items}</ul>")
        else:
            self.problems.setText("The definition is complete.")
        self.ok_button.setEnabled(not problems)
        self.export_button.setEnabled(not problems)
        return problems

    def _show_shape(self, defn: CustomLayerDef) -> None:
        try:
            check_shape_script(defn.shape, defn.scope())
        except ScriptError as exc:
            caret = _esc(defn.shape) + "<br>" + "&nbsp;" * (exc.column - 1) + "^"
            self.shape_status.setText(f"<span style='color:#b00020'>Column {exc.column}: {_esc(exc.message)}"
                                      f"</span><br><code>{caret}</code>")
            return
        self.shape_status.setText("<span style='color:#1b7f3b'>The shape script is valid.</span>")

    def _accept(self) -> None:
        if self.validate():
            return
        self.definition_accepted.emit(self.definition(), self.old_name)
        self.accept()

    # ---- files ------------------------------------------------------------------------------------------
    def export_to(self, path: str | Path) -> None:
        """Write the definition to ``path`` (XML), to share it between models."""
        write_definition_file(self.definition(), path)

    def import_from(self, path: str | Path) -> str | None:
        """Fill the fields from a definition file; returns the problem (file, reason) or None."""
        try:
            defn = read_definition_file(path)
        except LayerLabError as exc:
            self.problems.setText(f"<span style='color:#b00020'>{_esc(str(exc))}</span>")
            return str(exc)
        self.set_definition(defn)
        return None

    def _file_dialog(self, save: bool) -> None:
        dlg = QtWidgets.QFileDialog(self, "Export Custom Layer" if save else "Import Custom Layer")
        dlg.setOption(QtWidgets.QFileDialog.Option.DontUseNativeDialog)
        dlg.setNameFilter(DEFINITION_FILTER)
        dlg.setAcceptMode(QtWidgets.QFileDialog.AcceptMode.AcceptSave if save
                          else QtWidgets.QFileDialog.AcceptMode.AcceptOpen)
        if save:
            dlg.setDefaultSuffix("xml")
            dlg.selectFile(f"{self.definition().name or 'custom_layer'}.custom-layer.xml")
        dlg.fileSelected.connect(self.export_to if save else self.import_from)
        self.file_dialog = dlg
        dlg.open()


DEFINITION_FILTER = "Custom layer definitions (*.xml)"

