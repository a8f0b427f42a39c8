"""Class 3 (designer side): the designer starts with a registry in which a plugin called sys.exit at import and
another raised KeyboardInterrupt while registering; the failures are recorded with their reasons and the
palette offers the layers of the plugins that loaded."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")


def test_designer_survives_plugins_that_exit_or_interrupt(qtbot, tmp_path):
    from PySide6 import QtCore

    from app.designer.main_window import MainWindow
    from engine.plugins import load_plugins

    folder = tmp_path / "plugins"
    folder.mkdir()
    header = "from engine.registry import PluginMeta\nPLUGIN = PluginMeta('{n}', '1', 'a', 'd')\n"
    (folder / "exits.py").write_text(header.format(n="exits") + "import sys\nsys.exit(0)\n")
    (folder / "interrupts.py").write_text(header.format(n="interrupts") + "def register(r):\n    raise KeyboardInterrupt\n")
    registry = load_plugins([folder])
    reasons = {f.source.rsplit("/", 1)[-1]: f.reason for f in registry.failures}
    assert reasons["exits.py"].startswith("SystemExit") and reasons["interrupts.py"].startswith("KeyboardInterrupt")
    settings = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(registry=registry, settings=settings, autosave_dir=str(tmp_path / "autosave"))
    qtbot.addWidget(window)
    window.show()
    assert window.palette.registry.find_layer("convolution") is not None
    assert "convolution" in window.palette.registry.layer_names
