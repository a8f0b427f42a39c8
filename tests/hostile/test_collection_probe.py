"""Plugins in the designer: Tools > Manage Collections > Add Plugin Folder tries each new plugin in a separate
process first. A plugin that ends the process (os._exit), loops forever or crashes it (a segmentation fault) at
import is refused with a clear message, the designer stays up with the open model untouched, a good plugin of the
same folder loads, and at the next start nothing is tried again (what came of each try is remembered)."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from PySide6 import QtCore  # noqa: E402

from tests.hostile.test_plugin_probe import BAD, HEADER, PROBE_TIMEOUT, plant  # noqa: E402


def test_manage_collections_refuses_plugins_that_crash_exit_or_hang(tmp_path, monkeypatch, designer, shown_warnings):
    from app.designer.collections_dialog import ManageCollectionsDialog
    from engine import modelfile

    warnings = shown_warnings
    monkeypatch.setattr("app.designer.collection_probe.PROBE_TIMEOUT_S", PROBE_TIMEOUT)
    folder = plant(tmp_path / "plugins")
    ini = str(tmp_path / "settings.ini")
    window = designer(ini)
    doc = window.workspace.new_model()
    doc.model.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    doc.model.add_layer("convolution", "conv", inputs=["inp"], params={"num_output_channels": "4"})
    before = modelfile.dumps(doc.model)

    tools = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Tools")
    next(a for a in tools.actions() if a.text() == "Manage &Collections…").trigger()
    dlg = window.findChildren(ManageCollectionsDialog)[-1]
    added = dlg.add_folder(str(folder))

    assert added == ["thirdparty"] and window.registry.find_layer("double") is not None
    assert dlg.item_for("thirdparty").checkState(0) == QtCore.Qt.CheckState.Checked
    assert window.palette.item_for("double") is not None
    assert len(warnings) == 1
    text = warnings[0]
    assert "exits.py: loading it ended the process with exit status 3" in text
    assert "loops.py: it did not finish loading within 4 s" in text
    assert "crashes.py: loading it crashed the process (SIGSEGV)" in text
    assert "good.py" not in text and "raises.py" not in text and "untouched" in text
    failures = [dlg.failures.item(i).text() for i in range(dlg.failures.count())]
    assert dlg.failures.isVisible() and len(failures) == 4
    assert {n for n in [*BAD, "raises.py"] if any(n in f for f in failures)} == {*BAD, "raises.py"}
    assert any("raises.py failed to load: RuntimeError: no luck" in f for f in failures)
    assert window.isVisible() and window.workspace.current is doc and doc in window.workspace.docs
    assert modelfile.dumps(doc.model) == before and doc.modified
    assert window.collections.probe.probed == 5

    # the next start: the folder is remembered; nothing is tried again, the same plugins load or are refused
    window.collections.probe.probed = 0
    again = designer(ini)
    assert again.collections.probe.probed == 0
    assert again.registry.find_layer("double") is not None
    refused = {f.source.rsplit("/", 1)[-1] for f in again.collections.manager.failures}
    assert refused == {*BAD, "raises.py"} and len(warnings) == 1  # at start: listed, not shouted

    # an edited plugin is tried again
    (folder / "exits.py").write_text(HEADER.format(name="exits") + "# fixed\n")
    third = designer(ini)
    assert third.collections.probe.probed == 1 and "exits" in third.registry.plugins
