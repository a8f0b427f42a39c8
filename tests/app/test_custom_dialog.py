"""Custom layers in the designer, through its real widgets: the Add Custom Layer dialog driven with the mouse
and the keyboard (live validation of the shape script with the column, highlighted code editors, which
formats run), the palette and documentation entries, editing a definition with instances on the canvas of
two open models and undoing it, import/export of a definition, and the consent prompt before a run."""
from __future__ import annotations

import io
import shlex
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from app.cli import main as cli_main
from engine import modelfile
from engine.custom import CONSENT, CudaVariant, custom_type
from engine.custom.scope import definitions
from engine.tensor import FP32_NCHW, TensorFormat
from plugins.standard.space_to_depth import space_to_depth
from tests.app.test_main_window import wait_checked
from tests.canvas.conftest import right_click
from tests.engine.custom_cases import (
    S2D_CUDA,
    S2D_LAUNCH,
    S2D_PYTHON,
    net_with,
    no_consent,  # noqa: F401 - autouse fixture: no consent before/after each test
    s2d,
    softsign,
)

LEFT = QtCore.Qt.MouseButton.LeftButton


def click(qtbot, widget: QtWidgets.QWidget) -> None:
    qtbot.mouseClick(widget, LEFT, pos=widget.rect().center())


def plain(label: QtWidgets.QLabel) -> str:
    """What a rich-text label shows, as plain text."""
    doc = QtGui.QTextDocument()
    doc.setHtml(label.text())
    return doc.toPlainText()


def retype(qtbot, line: QtWidgets.QLineEdit, text: str) -> None:
    """Select everything in ``line`` with the keyboard and type ``text``."""
    line.setFocus()
    qtbot.keyClick(line, QtCore.Qt.Key.Key_A, QtCore.Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(line, QtCore.Qt.Key.Key_Delete)
    qtbot.keyClicks(line, text)


def test_add_a_custom_layer_with_the_dialog(make_window, qtbot, registry, tmp_path):
    window = make_window()
    doc = window.workspace.new_model()
    edit_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Edit")
    entries = [a.text() for a in edit_menu.actions()]
    assert {"Add Custom &Layer…", "&Edit Custom Layer…", "Import Custom Layer…", "Export Custom Layer…"} <= set(entries)
    window.custom.act_add.trigger()
    dlg = window.custom.dialog
    assert dlg.isVisible() and dlg.windowTitle() == "Add Custom Layer"  # open(): the action returned at once
    assert dlg.category.text() == "Custom" and not dlg.ok_button.isEnabled()  # no type name yet
    retype(qtbot, dlg.type_name, "s2d_custom")
    qtbot.keyClicks(dlg.display_name, "My space to depth")
    qtbot.keyClicks(dlg.documentation, "Moves 2x2 blocks into channels.")
    dlg.tabs.setCurrentIndex(1)
    retype(qtbot, dlg.shape, "in.n, in.c *, in.h / 2, in.w / 2")
    assert "Column 13: expected a number, a name or '('" in plain(dlg.shape_status)
    assert not dlg.ok_button.isEnabled() and "shape script: column 13" in plain(dlg.problems)
    retype(qtbot, dlg.shape, "in.n, in.c * 4, in.h / 2, in.w / 2")
    assert "The shape script is valid" in plain(dlg.shape_status)
    # a parameter with the mouse, typed values with the keyboard, then removed again
    click(qtbot, dlg.add_param_button)
    assert dlg.params.rowCount() == 1
    retype(qtbot, dlg.cell(dlg.params, 0, 2), "-3")
    dlg.cell(dlg.params, 0, 1).setCurrentText("uint")
    assert "parameter param1: default '-3' is not an integer >= 0" in plain(dlg.problems)
    click(qtbot, dlg.add_param_button)
    retype(qtbot, dlg.cell(dlg.params, 1, 0), "gain")
    click(qtbot, dlg.cell(dlg.params, 0, 0))  # the row clicked into is the one Remove removes
    click(qtbot, dlg.remove_param_button)
    assert dlg.params.rowCount() == 1 and dlg.cell(dlg.params, 0, 0).text() == "gain"
    click(qtbot, dlg.remove_param_button)
    assert dlg.params.rowCount() == 0
    # the code: Python typed into its highlighted editor, no CUDA kernel
    dlg.tabs.setCurrentIndex(2)
    editor = dlg.python_editor
    editor.setFocus()
    qtbot.keyClick(editor, QtCore.Qt.Key.Key_A, QtCore.Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(editor, QtCore.Qt.Key.Key_Delete)
    qtbot.keyClicks(editor, "def forward(xp, inputs, params)")
    assert "Python code, line 1:" in dlg.python_status.text() and not dlg.ok_button.isEnabled()
    editor.setPlainText(S2D_PYTHON)
    assert "CPU (NumPy): every format" in dlg.runs_in.text()
    assert "every format: the Python code on CuPy" in dlg.runs_in.text()
    assert dlg.ok_button.isEnabled(), plain(dlg.problems)
    click(qtbot, dlg.ok_button)
    assert not dlg.isVisible()
    # stored in the model, one undo step, an instance added, listed in the palette under Custom and in the docs
    m = doc.model
    assert definitions(m)["s2d_custom"].display_name == "My space to depth"
    instance = next(n for n, s in m.layers.items() if s.type == "custom:s2d_custom")
    assert window.act_undo.text() == f"&Undo Add {instance}"
    item = window.palette.item_for("custom:s2d_custom")
    assert item is not None and item.text(0) == "My space to depth" and item.parent().text(0) == "Custom"
    browser = window.help.show_docs(f"layer:{custom_type('s2d_custom')}")
    assert "in.n, in.c * 4, in.h / 2, in.w / 2" in browser.page.toPlainText()
    # it type-checks and runs like any layer (the user wrote it: no consent prompt)
    m.add_layer("input", "input", {"dimensions": "1x2x4x6"})
    m.connect("input", instance, 0)
    wait_checked(qtbot, doc)
    assert doc.diagnostics == [] and doc.shapes[instance] == (1, 8, 2, 3)
    assert "→ 1×8×2×3" in doc.canvas.nodes[instance].info.get_value()
    assert window.custom.ensure_consent(doc, lambda: None) is True and window.custom.prompt is None
    # remembered as the user's own code: after saving, a later session does not ask either
    path = tmp_path / "mine.lnet"
    assert window.files.save_as(doc, str(path))
    CONSENT.clear()
    later = make_window()
    assert later.custom.ensure_consent(later.files.open_path(path), lambda: None) is True and later.custom.prompt is None


def test_code_editors_highlight_python_and_cuda(window, qtbot):
    window.custom.add()
    dlg = window.custom.dialog
    fmt16 = TensorFormat.parse("fp16 nhwc")
    dlg.cuda_editor(fmt16).setPlainText('extern "C" __global__ void k(float* out) /* a\ncomment */ { return; }')
    dlg.python_editor.setPlainText("def forward(xp, inputs, params):\n    return 1.5  # done\n")

    def formats(editor, line):
        block = editor.document().findBlockByNumber(line)
        return {(r.start, r.length): r.format.foreground().color().name() for r in block.layout().formats()}

    hl = dlg.python_editor.highlighter
    assert isinstance(hl, QtGui.QSyntaxHighlighter)
    py0, py1 = formats(dlg.python_editor, 0), formats(dlg.python_editor, 1)
    assert py0[(0, 3)] == hl.token_format("keyword").foreground().color().name()  # def
    assert py1[(11, 3)] == hl.token_format("number").foreground().color().name()  # 1.5
    assert py1[(16, 6)] == hl.token_format("comment").foreground().color().name()  # # done
    cu0, cu1 = formats(dlg.cuda_editor(fmt16), 0), formats(dlg.cuda_editor(fmt16), 1)
    chl = dlg.cuda_editor(fmt16).highlighter
    assert cu0[(11, 10)] == chl.token_format("keyword").foreground().color().name()  # __global__
    assert cu1[(0, 10)] == chl.token_format("comment").foreground().color().name()  # the comment's second line
    # a CUDA variant without Python code: the dialog says which formats run
    dlg.python_editor.setPlainText("")
    dlg.cuda_launch(fmt16).setText("k<64>(out)")
    assert "CPU (NumPy): nothing" in dlg.runs_in.text() and "fp16|nhwc: CUDA kernel" in dlg.runs_in.text()
    dlg.reject()


@pytest.fixture
def two_models(window, tmp_path):
    """Two open models using custom layer softsign (the first twice), saved to files."""
    docs = []
    for i, params in enumerate(({"alpha": "3"}, {"alpha": "0.5"})):
        model = net_with(softsign(), "1x2x4x4", params)
        model.name = f"net{i}"
        if i == 0:
            model.add_layer("custom:softsign", "second", {"alpha": "4"}, inputs=["input"], position=(0, 200))
        model.set_custom_layer("s2d", s2d().to_xml())
        path = tmp_path / f"net{i}.lnet"
        modelfile.save(model, path)
        docs.append(window.files.open_path(path))
    return docs


def test_edit_a_definition_with_instances_on_the_canvas_and_undo(window, two_models, qtbot):
    first, second = two_models
    other = window.workspace.new_model()  # its own, different layer named softsign: not this definition, left alone
    other.model.set_custom_layer("softsign", replace(softsign(), display_name="Not the same").to_xml())
    window.tabs.setCurrentWidget(first.canvas.widget)
    first.canvas.select_layers(["custom"])
    entries = dict(right_click(first.canvas, "custom", "Edit Custom Layer…"))
    assert entries["Edit Custom Layer…"] is True
    dlg = window.custom.dialog
    assert dlg.isVisible() and dlg.windowTitle() == "Edit Custom Layer softsign" and dlg.type_name.isReadOnly()
    assert dlg.cell(dlg.params, 0, 0).text() == "alpha"
    retype(qtbot, dlg.display_name, "Softsign v2")
    retype(qtbot, dlg.cell(dlg.params, 0, 0), "beta")  # alpha becomes beta: the instances' alpha values go
    dlg.python_editor.setPlainText(softsign().python.replace('params["alpha"]', 'params["beta"]'))
    click(qtbot, dlg.add_input_button)
    dlg.cell(dlg.inputs, 1, 1).setCurrentText("secondary")
    click(qtbot, dlg.ok_button)
    for doc in (first, second):
        d = definitions(doc.model)["softsign"]
        assert (d.display_name, [p.name for p in d.params], [i.kind for i in d.inputs]) == \
               ("Softsign v2", ["beta"], ["primary", "secondary"])
        assert doc.model.layers["custom"].params == {}
        assert len(doc.canvas.nodes["custom"].input_ports()) == 2  # the node follows the definition
    assert first.model.layers["second"].params == {} and len(first.canvas.nodes["second"].input_ports()) == 2
    assert window.palette.item_for("custom:softsign").text(0) == "Softsign v2"
    assert window.act_undo.text() == "&Undo Edit custom layer softsign"
    assert definitions(other.model)["softsign"].display_name == "Not the same"
    window.act_undo.trigger()  # one step restores the definition and both instances' parameters
    assert definitions(first.model)["softsign"] == softsign()
    assert first.model.layers["custom"].params == {"alpha": "3"} and first.model.layers["second"].params == {"alpha": "4"}
    assert len(first.canvas.nodes["custom"].input_ports()) == 1
    assert window.palette.item_for("custom:softsign").text(0) == "Scaled softsign"
    assert definitions(second.model)["softsign"].display_name == "Softsign v2"  # its own undo stack
    second.model.undo()
    assert definitions(second.model)["softsign"] == softsign()


def test_palette_menu_of_a_custom_layer(window, two_models, qtbot):
    first, _ = two_models
    window.tabs.setCurrentWidget(first.canvas.widget)
    tree = window.palette.tree
    item = window.palette.item_for("custom:s2d")
    tree.scrollToItem(item)
    tree.customContextMenuRequested.emit(tree.visualItemRect(item).center())
    menu = window.palette.menu
    assert menu.isVisible()
    actions = {a.text(): a for a in menu.actions() if a.text()}
    assert list(actions) == ["Add Instance", "Edit Custom Layer…", "Export Definition…", "Delete Custom Layer"]
    actions["Add Instance"].trigger()
    menu.close()
    assert [n for n, s in first.model.layers.items() if s.type == "custom:s2d"] == ["s2d_1"]
    window.palette.custom_menu("softsign").actions()[3].trigger()
    assert "still used by custom, second" in window.context.message_box.text()
    window.palette.custom_menu("s2d").actions()[1].trigger()
    assert window.custom.dialog.isVisible() and window.custom.dialog.windowTitle() == "Edit Custom Layer s2d"
    window.custom.dialog.reject()


def test_export_and_import_a_definition(window, two_models, tmp_path, qtbot):
    first, _ = two_models
    window.tabs.setCurrentWidget(first.canvas.widget)
    first.canvas.select_layers(["custom"])
    window.custom.act_export.trigger()
    fd = window.custom.file_dialog
    assert fd.isVisible() and fd.acceptMode() == QtWidgets.QFileDialog.AcceptMode.AcceptSave
    target = tmp_path / "shared.custom-layer.xml"
    fd.fileSelected.emit(str(target))
    fd.close()
    assert target.read_text().startswith('<?xml version="1.0" encoding="utf-8"?>\n<custom-layer name="softsign"')
    fresh = window.workspace.new_model()
    assert window.custom.import_definition(target) == "softsign"
    assert definitions(fresh.model)["softsign"] == softsign()
    assert window.custom.import_definition(target) is None
    assert "already exists" in window.context.message_box.text()
    bad = tmp_path / "bad.xml"
    bad.write_text("<custom-layer name='x'>")
    assert window.custom.import_definition(bad) is None and "bad.xml" in window.context.message_box.text()
    # the dialog's own Export… / Import… buttons
    window.custom.add()
    dlg = window.custom.dialog
    dlg.import_from(target)
    assert dlg.type_name.text() == "softsign" and dlg.cell(dlg.params, 0, 0).text() == "alpha"
    retype(qtbot, dlg.type_name, "softsign_copy")
    click(qtbot, dlg.export_button)
    assert dlg.file_dialog.isVisible()
    dlg.file_dialog.close()
    dlg.export_to(tmp_path / "copy.xml")
    assert 'name="softsign_copy"' in (tmp_path / "copy.xml").read_text()
    dlg.reject()


@pytest.fixture
def custom_file(tmp_path):
    model = net_with(s2d(cuda=(CudaVariant(FP32_NCHW, S2D_CUDA, S2D_LAUNCH),)), "1x2x4x6")
    model.set_setting("iterations", "1")
    path = tmp_path / "custom.lnet"
    modelfile.save(model, path)
    return path


def _prompt_button(box: QtWidgets.QMessageBox, text: str) -> QtWidgets.QAbstractButton:
    return next(b for b in box.buttons() if b.text().replace("&", "") == text)


def test_running_asks_for_consent_and_remembers_it(make_window, custom_file, qtbot):
    window = make_window()
    doc = window.files.open_path(custom_file)
    n = len(window.logger.entries)
    assert window.runs.launch_inference(doc) is None  # asks first; nothing runs yet
    box = window.custom.prompt
    assert box.isVisible() and "s2d" in box.text() and "executes this Python and CUDA code" in box.text()
    click(qtbot, _prompt_button(box, "Cancel"))
    assert window.custom.prompt is None and len(window.logger.entries) == n
    assert "Not run: the custom layer code of s2d was not trusted" in window.statusBar().currentMessage()
    window.act_run.trigger()
    box = window.custom.prompt
    click(qtbot, _prompt_button(box, "Run the Code"))
    assert len(window.logger.entries) == n + 1  # the run started once consent was given
    entry = window.logger.entries[max(window.logger.entries)]
    qtbot.waitUntil(lambda: entry.status != "running" and not window.runner.busy, timeout=30_000)
    assert entry.status == "done", entry.reason
    argv = shlex.split(entry.command)  # the logged command reproduces the run, consent included
    assert argv[-1] == "--trust-custom-code"
    assert cli_main(argv[1:], out=io.StringIO()) == 0
    # remembered for this content: another window with the same settings does not ask again
    CONSENT.clear()
    window.files.close_document(doc)
    again = window.files.open_path(custom_file)
    assert window.custom.ensure_consent(again, lambda: None) is True and window.custom.prompt is None
    # changed code asks again
    CONSENT.clear()
    model = modelfile.load(custom_file)
    model.set_custom_layer("s2d", s2d(python=True).to_xml().replace("x = inputs[0]", "x = inputs[0] * 1"))
    modelfile.save(model, custom_file.with_name("changed.lnet"))
    changed = window.files.open_path(custom_file.with_name("changed.lnet"))
    assert window.custom.ensure_consent(changed, lambda: None) is False and window.custom.prompt.isVisible()
    window.custom.prompt.reject()


def test_the_run_computes_the_custom_layer(window, custom_file, qtbot, tmp_path):
    doc = window.files.open_path(custom_file)
    ran = []
    assert window.custom.ensure_consent(doc, lambda: ran.append(True)) is False
    click(qtbot, _prompt_button(window.custom.prompt, "Run the Code"))
    assert ran == [True]
    from engine.network import Network

    x = np.random.default_rng(0).random((1, 2, 4, 6), dtype=np.float32)
    y = Network(doc.model, window.registry).infer({"input": x})["output"]
    np.testing.assert_array_equal(y, space_to_depth(x, 2, "DCR"))


def test_saved_model_round_trips_from_the_designer(window, two_models, tmp_path):
    first, _ = two_models
    text = Path(first.path).read_text()
    assert window.files.save_as(first, str(tmp_path / "again.lnet"))
    assert (tmp_path / "again.lnet").read_text() == text


def test_analysis_mode_asks_for_consent_first(window, custom_file, qtbot):
    doc = window.files.open_path(custom_file)
    mode = window.analysis
    assert mode.launch() is False and not mode.active
    click(qtbot, _prompt_button(window.custom.prompt, "Cancel"))
    assert not mode.active and (mode.window is None or not mode.window.isVisible())
    mode.act_launch.trigger()
    with qtbot.waitSignal(mode.proxy.ran, timeout=10_000) as blocker:
        click(qtbot, _prompt_button(window.custom.prompt, "Run the Code"))
    assert mode.active and mode.doc is doc and "custom" in blocker.args[0].executed
    mode.act_stop.trigger()
    qtbot.waitUntil(lambda: not mode.active, timeout=10_000)


def test_a_custom_layer_can_be_grouped_into_a_template_and_runs(window, custom_file, qtbot, registry):
    from engine.network import Network

    doc = window.files.open_path(custom_file)
    doc.canvas.select_layers(["custom"])
    instance = window.templates.group_selection("block")
    assert instance == "block_1" and doc.model.layers[instance].type == "template:block"
    wait_checked(qtbot, doc)
    assert doc.diagnostics == [] and doc.shapes[instance] == (1, 8, 2, 3)
    CONSENT.grant(definitions(doc.model).values())
    x = np.random.default_rng(1).random((1, 2, 4, 6), dtype=np.float32)
    np.testing.assert_array_equal(Network(doc.model, registry).infer({"input": x})["output"], space_to_depth(x, 2, "DCR"))
    window.act_undo.trigger()
    assert doc.model.layers["custom"].type == "custom:s2d"


def test_copy_paste_carries_the_definition_to_another_model(window, two_models, qtbot):
    first, _ = two_models
    window.tabs.setCurrentWidget(first.canvas.widget)
    first.canvas.select_layers(["custom"])
    window.editing.act_copy.trigger()
    fresh = window.workspace.new_model()
    window.editing.act_paste.trigger()
    assert [s.type for s in fresh.model.layers.values()] == ["custom:softsign"]
    assert definitions(fresh.model) == {"softsign": softsign()}  # s2d is not used by the copy: not carried
    wait_checked(qtbot, fresh)
    assert window.palette.item_for("custom:softsign") is not None
    window.act_undo.trigger()  # one step: the layer and the definition
    assert fresh.model.layers == {} and fresh.model.custom_layers == {}


def test_parameter_window_edits_a_custom_layer_like_any_layer(window, two_models, qtbot):
    first, _ = two_models
    window.tabs.setCurrentWidget(first.canvas.widget)
    first.canvas.select_layers(["custom"])
    row = window.params.rows["param.alpha"]
    row.editor.edit.setText("11")  # the definition's range is [0, 10]
    row.editor.edit.editingFinished.emit()
    assert row.has_error and "in [0, 10]" in row.error.text()
    row.editor.edit.setText("2.5")
    row.editor.edit.editingFinished.emit()
    assert not row.has_error and first.model.layers["custom"].params["alpha"] == "2.5"


def test_a_custom_layer_node_shows_its_parameters(window, two_models):
    first, _ = two_models
    info = first.canvas.nodes["second"].info.get_value()
    assert "alpha" in info and "4" in info


def test_the_dialog_opens_again_after_closing_and_enter_in_a_cell_keeps_it_open(window, two_models, qtbot):
    """OK, Cancel and Esc each close the dialog; Add and Edit open a new one each time after that; Enter in a
    parameter cell finishes the cell and keeps the value, it does not press OK."""
    first = window.custom.add()
    click(qtbot, first.buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Cancel))
    qtbot.waitUntil(lambda: not first.isVisible())
    QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)  # it deletes itself on close
    second = window.custom.add()
    assert second is not None and second.isVisible()
    qtbot.keyClick(second, QtCore.Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not second.isVisible())
    QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
    name = next(iter(two_models[0].model.custom_layers))
    third = window.custom.edit(name)
    assert third is not None and third.isVisible()
    row = third.add_param()
    default = third.cell(third.params, row, 2)
    retype(qtbot, default, "7")
    qtbot.keyClick(default, QtCore.Qt.Key.Key_Return)
    assert third.isVisible() and third.result() == 0
    assert third.definition().params[row].default == "7"
    click(qtbot, third.ok_button)
    qtbot.waitUntil(lambda: not third.isVisible())
    QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
    from engine.custom.scope import get_definition

    assert get_definition(two_models[0].model, name).params[row].default == "7"
    assert window.custom.edit(name) is not None
