"""The export dialogs driven with pytest-qt (file dialogs replaced, nothing blocks) and File > Export."""
from __future__ import annotations

import onnx
import pytest
from PySide6 import QtCore, QtWidgets

from app.designer.export_dialog import ExportDialog, ExportResultDialog, add_export_menu
from engine.model import Model
from engine.modelfile import load
from resources import SAMPLES

MODEL = SAMPLES / "denoiser.lnet"


@pytest.fixture
def dialog(qtbot, registry):
    def make(kind="onnx", model=None, path=str(MODEL)):
        dlg = ExportDialog(model or load(MODEL, registry), registry, path, kind)
        qtbot.addWidget(dlg)
        dlg.show()
        return dlg
    return make


def click_export(qtbot, dlg) -> ExportResultDialog:
    """Click Export and wait (the event loop running) for the background export's result dialog."""
    qtbot.mouseClick(dlg.export_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dlg.result_dialog is not None, timeout=120_000)
    qtbot.addWidget(dlg.result_dialog)
    return dlg.result_dialog


def test_fp32_compute_goes_with_fp16(dialog):
    dlg = dialog("onnx")
    assert not dlg.fp32_compute.isEnabled()
    dlg.fp32_compute.setChecked(True)  # ignored without fp16
    assert "--fp32-compute" not in dlg.command.text() and not dlg.request().fp32_compute
    dlg.fp16.setChecked(True)
    assert dlg.fp32_compute.isEnabled() and dlg.command.text().endswith("--fp16 --fp32-compute")


def test_onnx_export_with_options(dialog, qtbot, tmp_path, monkeypatch):
    dlg = dialog("onnx")
    assert dlg.output.text().endswith("denoiser.onnx") and dlg.fusing.currentText() == "on"
    target = tmp_path / "out.onnx"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(target), "")))
    qtbot.mouseClick(dlg.browse_output, QtCore.Qt.MouseButton.LeftButton)
    assert dlg.output.text() == str(target)
    dlg.fp16.setChecked(True)
    dlg.explicit_sizes.setChecked(True)
    assert dlg.command.text() == f"layerlab export onnx {MODEL} -o {target} --fp16 --explicit-sizes"
    result = click_export(qtbot, dlg)
    assert result.ok and result.message_texts()[0].startswith(f"wrote {target}")
    assert not dlg.isVisible()  # a successful export closes the options dialog
    assert not result.details.isVisible()
    qtbot.mouseClick(result.details_button, QtCore.Qt.MouseButton.LeftButton)
    assert result.details.isVisible() and "layerlab export onnx" in result.details.toPlainText()
    assert str(target) in result.details.toPlainText()
    m = onnx.load(str(target))
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_project_page_wizard_options(dialog, qtbot, tmp_path, monkeypatch):
    dlg = dialog("torch")
    dlg.set_kind("project")
    assert dlg.pages.currentIndex() == 2 and dlg.builder.text() == "build_denoiser"
    folder = tmp_path / "proj"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(folder)))
    qtbot.mouseClick(dlg.browse_output, QtCore.Qt.MouseButton.LeftButton)
    dlg.builder.setText("")
    assert not dlg.export_button.isEnabled()  # a builder name is needed
    qtbot.keyClicks(dlg.builder, "make_denoiser")
    dlg.pyproject.setChecked(False)
    dlg.project_format.setCurrentText("fp16 nhwc")
    assert "--builder make_denoiser --no-pyproject --format fp16 nhwc" in dlg.command.text()
    result = click_export(qtbot, dlg)
    assert result.ok, result.message_texts()
    assert (folder / "denoiser" / "__main__.py").is_file() and not (folder / "pyproject.toml").exists()
    assert "def make_denoiser(" in (folder / "denoiser" / "network.py").read_text()


def test_errors_are_listed_and_the_dialog_stays(dialog, qtbot, tmp_path):
    dlg = dialog("project")
    dlg.output.setText(str(tmp_path / "p"))
    dlg.builder.setText("class")
    result = click_export(qtbot, dlg)
    assert not result.ok and dlg.isVisible()
    assert result.message_texts() == ["error: builder name 'class' is not a Python identifier: use letters, digits and "
                                      "'_', not starting with a digit, and not a Python keyword"]


def test_torch_stubs_list_each_warning(dialog, qtbot, tmp_path, registry):
    if registry.find_layer("noise") is None or registry.layer_class("noise").torch_support != "no":
        pytest.skip("needs an analysis layer without a PyTorch equivalent")
    m = Model("mixed")
    m.add_layer("input", "x", params={"dimensions": "1x3x8x8"})
    m.add_layer("noise", "n1", inputs=["x"])
    m.add_layer("output", "y", inputs=["n1"])
    dlg = dialog("torch", m, None)
    assert dlg.fusing.currentText() == "off"
    dlg.output.setText(str(tmp_path / "t"))
    result = click_export(qtbot, dlg)
    assert not result.ok and "n1 (noise)" in result.message_texts()[0] and "--stubs" in result.message_texts()[0]
    dlg.stubs.setChecked(True)
    result = click_export(qtbot, dlg)
    assert result.ok and any(t.startswith("warning: stub written for n1 (noise)") for t in result.message_texts())
    assert "the model is not saved" in result.details.toPlainText()


def test_file_export_menu(window, sample_path, qtbot, tmp_path):
    menu = add_export_menu(window)
    file_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&File")
    assert menu.menuAction() in file_menu.actions()
    assert file_menu.actions().index(menu.menuAction()) < file_menu.actions().index(window.act_close)
    assert [a.text() for a in menu.actions()] == ["&ONNX Model…", "&PyTorch Module…", "&Standalone Project…",
                                                  "P&reprocessed Model…"]
    window.export_actions["preprocessed"].trigger()  # no model open: a status message, no dialog
    assert "Open a model to export it" in window.statusBar().currentMessage()
    window.files.open_path(sample_path)
    window.export_actions["preprocessed"].trigger()
    dlg = window.export_dialog
    assert dlg.isVisible() and dlg.kind == "preprocessed" and dlg.output.text().endswith("denoiser_preprocessed.lnet")
    dlg.output.setText(str(tmp_path / "pre.lnet"))
    result = click_export(qtbot, dlg)
    assert result.ok and (tmp_path / "pre.lnet").is_file() and (tmp_path / "pre_weights").is_dir()
    assert "pre.lnet" in window.statusBar().currentMessage()


def test_export_runs_in_the_background_on_a_copy_of_the_model(dialog, qtbot, tmp_path, registry, monkeypatch):
    """While the export runs the designer keeps handling events, the Export button is off, Cancel waits for the
    export, and an edit made meanwhile does not reach the exported file."""
    import threading

    import app.designer.export_dialog as export_dialog

    release = threading.Event()
    real = export_dialog.run_export

    def slow_export(req, model, reg):
        assert threading.current_thread() is not threading.main_thread()
        release.wait(30)
        return real(req, model, reg)

    monkeypatch.setattr(export_dialog, "run_export", slow_export)
    model = load(MODEL, registry)
    dlg = dialog("preprocessed", model=model)
    dlg.output.setText(str(tmp_path / "pre.lnet"))
    qtbot.mouseClick(dlg.export_button, QtCore.Qt.MouseButton.LeftButton)
    assert dlg.exporting and not dlg.export_button.isEnabled() and dlg.progress.isVisible()
    model.rename_layer("conv1", "renamed_meanwhile")  # the GUI thread edits while the export waits
    dlg.reject()  # Cancel: refused while the files are being written
    assert dlg.isVisible() and "cannot be stopped" in dlg.progress_label.text()
    qtbot.wait(50)  # events are processed: the GUI thread is free
    assert dlg.result_dialog is None
    release.set()
    qtbot.waitUntil(lambda: dlg.result_dialog is not None, timeout=60_000)
    qtbot.addWidget(dlg.result_dialog)
    assert dlg.result_dialog.ok and not dlg.exporting
    saved = load(tmp_path / "pre.lnet", registry)
    assert "conv1" in saved.layers and "renamed_meanwhile" not in saved.layers


def test_an_imported_model_is_never_exported_over_its_own_onnx_file(dialog, qtbot, tmp_path, monkeypatch, registry):
    """The imported model (no file of its own, named after its ONNX file, opened from that folder): the proposed
    output is a new file; typing the ONNX file's name asks before replacing it, and No leaves it alone."""
    model = load(MODEL, registry)
    source = tmp_path / f"{model.name}.onnx"
    source.write_bytes(b"the imported model")
    monkeypatch.chdir(tmp_path)
    dlg = dialog("onnx", model=model, path=None)
    assert dlg.output.text() == str(tmp_path / f"{model.name}_exported.onnx")
    asked = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", staticmethod(
        lambda *a, **k: asked.append(a[2]) or QtWidgets.QMessageBox.StandardButton.Cancel))
    dlg.output.setText(str(source))
    qtbot.mouseClick(dlg.export_button, QtCore.Qt.MouseButton.LeftButton)
    assert asked and str(source) in asked[0]
    assert not dlg.exporting and dlg.isVisible() and source.read_bytes() == b"the imported model"
