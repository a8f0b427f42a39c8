"""Tools > Manage Collections through the real dialog (pytest-qt, mouse): the sample third-party package (found
through its entry point, tests/sample_plugin.py) unloaded and loaded again, the choice remembered, a plugin folder
added with a failing plugin in it; the palette, documentation, fusing rules and type check follow."""
from __future__ import annotations

import pytest
from PySide6 import QtCore, QtWidgets

from app.designer.collections_dialog import FOLDERS_KEY, UNLOADED_KEY, ManageCollectionsDialog
from engine.model import Model
from engine.modelfile import save
from engine.plugins import load_plugins
from tests.harness import plugin_folder
from tests.sample_plugin import sample_installed  # noqa: F401 (fixture)


def click_check_box(tree: QtWidgets.QTreeWidget, item: QtWidgets.QTreeWidgetItem, qtbot) -> None:
    """A mouse click on the item's check box (where the style draws it)."""
    opt = QtWidgets.QStyleOptionViewItem()
    opt.rect = tree.visualItemRect(item)
    opt.features |= QtWidgets.QStyleOptionViewItem.ViewItemFeature.HasCheckIndicator
    opt.state |= QtWidgets.QStyle.StateFlag.State_Enabled
    rect = tree.style().subElementRect(QtWidgets.QStyle.SubElement.SE_ItemViewItemCheckIndicator, opt, tree)
    qtbot.mouseClick(tree.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())


def gains(path):
    m = Model("gains")
    m.add_layer("input", "inp", params={"dimensions": "1x2x4x4"})
    m.add_layer("sample_gain", "g1", params={"gain": "2"}, inputs=["inp"])
    m.add_layer("sample_gain", "g2", params={"gain": "3"}, inputs=["g1"])
    m.add_layer("output", "out", inputs=["g2"])
    save(m, path)
    return path


@pytest.fixture
def own_window(qtbot, tmp_path, monkeypatch):
    """A MainWindow over a registry of its own (the dialog changes it), with its own settings file."""
    from app.designer.main_window import MainWindow

    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        staticmethod(lambda *a, **k: QtWidgets.QMessageBox.StandardButton.Discard))

    def make(registry):
        settings = QtCore.QSettings(str(tmp_path / "own.ini"), QtCore.QSettings.Format.IniFormat)
        w = MainWindow(registry=registry, settings=settings, autosave_dir=str(tmp_path / "autosave"))
        qtbot.addWidget(w)
        w.show()
        return w

    return make


def errors_of(doc):
    return {d.layer: d.message for d in doc.diagnostics if d.severity == "error"}


@pytest.mark.usefixtures("sample_installed")
def test_unload_and_load_the_sample_collection_with_the_mouse(own_window, qtbot, tmp_path):
    registry = load_plugins()
    window = own_window(registry)
    doc = window.files.open_path(gains(tmp_path / "gains.lnet"))
    assert not errors_of(doc) and window.palette.item_for("sample_gain") is not None
    fusing = window.runs.fusing_rules()
    assert any(src == "plugin sample" or "sample" in src for _t, src, _on in fusing.rule_rows())
    window.help.show_docs()
    assert "layer:sample_gain" in window.help.docs_browser.visible_keys()

    tools = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Tools")
    next(a for a in tools.actions() if a.text() == "Manage &Collections…").trigger()
    dlg = window.findChildren(ManageCollectionsDialog)[-1]
    assert dlg.isVisible()
    item = dlg.item_for("sample")
    assert item.text(1) == "0.1.0" and item.text(2) == "LayerLab examples" and item.text(3) == "installed"
    assert item.text(4).endswith("layerlab_sample/__init__.py")
    dlg.tree.setCurrentItem(item)
    assert "sample_gain_pair" in dlg.details.toPlainText() and "sample_gain[offset == 0]" in dlg.details.toPlainText()

    click_check_box(dlg.tree, item, qtbot)
    assert registry.find_layer("sample_gain") is None
    assert dlg.item_for("sample").checkState(0) == QtCore.Qt.CheckState.Unchecked
    assert window.palette.item_for("sample_gain") is None
    assert "unknown layer type 'sample_gain'" in errors_of(doc)["g1"]  # an error, no crash
    assert not any("sample" in src for _t, src, _on in fusing.rule_rows())
    assert "layer:sample_gain" not in window.help.docs_browser.visible_keys()
    assert window.settings.value(UNLOADED_KEY) in (["sample"], "sample")

    second = own_window(load_plugins())  # the same settings file: the choice is remembered
    assert second.registry.find_layer("sample_gain") is None
    assert not second.collections.manager.is_loaded("sample")
    second.close()

    click_check_box(dlg.tree, dlg.item_for("sample"), qtbot)
    assert registry.find_layer("sample_gain") is not None and not errors_of(doc)
    assert window.palette.item_for("sample_gain") is not None
    assert window.settings.value(UNLOADED_KEY) in ([], None, "")


def test_add_plugin_folder_lists_its_collections_and_failures(own_window, qtbot, tmp_path, monkeypatch):
    folder = plugin_folder(tmp_path / "more_plugins", "tiny", "import no_such_module_here\n")
    window = own_window(load_plugins())
    dlg = window.collections.show_dialog()
    assert not dlg.failures.isVisible()
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(folder)))
    qtbot.mouseClick(dlg.add_button, QtCore.Qt.MouseButton.LeftButton)
    item = dlg.item_for("tiny")
    assert item is not None and item.text(3) == "folder" and item.checkState(0) == QtCore.Qt.CheckState.Checked
    failures = [dlg.failures.item(i).text() for i in range(dlg.failures.count())]
    assert dlg.failures.isVisible() and any("broken.py" in f and "no_such_module_here" in f for f in failures)
    assert window.settings.value(FOLDERS_KEY) in ([str(folder.resolve())], str(folder.resolve()))


def test_gui_plugins_flag_and_plugin_path_reach_the_designer(monkeypatch, tmp_path):
    from app import gui
    from app.cli import main

    flag, env = tmp_path / "flag", tmp_path / "env"
    for folder, name in ((flag, "from_flag"), (env, "from_env")):
        folder.mkdir()
        (folder / f"{name}.py").write_text(
            f"from engine.registry import PluginMeta\nPLUGIN = PluginMeta({name!r}, '1', 'me', 'x')\n"
            "def register(r):\n    pass\n")
    seen = {}
    monkeypatch.setattr(gui, "run", lambda path=None, argv=None, plugins=None: seen.update(plugins=plugins) or 0)
    assert main(["gui", "--plugins", str(flag)]) == 0 and seen["plugins"] == [str(flag)]
    monkeypatch.setenv("LAYERLAB_PLUGIN_PATH", str(env))
    registry = gui.designer_registry(seen["plugins"])
    assert {"from_flag", "from_env", "standard"} <= set(registry.plugins)


UNCHECK_EVERY_COLLECTION = """
import sys
from PySide6 import QtCore, QtWidgets
app = QtWidgets.QApplication([])
from app.designer.main_window import SAMPLE, MainWindow
from engine.plugins import load_plugins
from tests.app.test_collections_dialog import click_check_box
from PySide6.QtTest import QTest

folder = sys.argv[1]
settings = QtCore.QSettings(folder + "/settings.ini", QtCore.QSettings.Format.IniFormat)
window = MainWindow(registry=load_plugins(), settings=settings, autosave_dir=folder + "/autosave")
window.show()
window.files.open_path(SAMPLE)
dlg = window.collections.show_dialog()
for name in ("activations", "analysis"):
    click_check_box(dlg.tree, dlg.item_for(name), QTest)
    for _ in range(5):
        app.processEvents()
    assert not window.collections.manager.is_loaded(name), name
    assert dlg.item_for(name).checkState(0) == QtCore.Qt.CheckState.Unchecked, name
print("unchecked")
"""


def test_unchecking_a_collection_with_the_mouse_does_not_crash(tmp_path):
    """A click on a collection's check box with the sample open (in a child process: the crash was a segmentation
    fault, made certain by filling freed memory with garbage)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root), QT_QPA_PLATFORM="offscreen", MALLOC_PERTURB_="165")
    proc = subprocess.run([sys.executable, "-c", UNCHECK_EVERY_COLLECTION, str(tmp_path)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "unchecked" in proc.stdout, proc.stderr[-2000:]
