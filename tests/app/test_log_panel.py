"""The designer's Log dock shows the logger tree's records (from the GUI thread and from other threads)."""
from __future__ import annotations

import logging
import threading

from engine.log import get_logger
from engine.model import Model
from engine.network import Network


def test_log_dock_shows_building_and_plugin_warnings_from_any_thread(window, qtbot, registry):
    panel = window.log_panel
    view = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    windows = next(a.menu() for a in view.actions() if a.text() == "&Windows")
    assert "Log" in [a.text() for a in windows.actions()]
    m = Model("logged")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("output", "out", inputs=["inp"])
    Network(m, registry)
    qtbot.waitUntil(lambda: any("built network logged" in t for t in panel.messages()), timeout=2000)
    worker = threading.Thread(target=lambda: get_logger("acme.blur").warning("kernel %s not found", "blur3"))
    worker.start()
    worker.join()
    qtbot.waitUntil(lambda: "kernel blur3 not found" in panel.messages(logging.WARNING), timeout=2000)
    row = panel.tree.topLevelItem(panel.tree.topLevelItemCount() - 1)
    assert row.text(1) == "warning" and row.text(2) == "plugins.acme.blur"
    panel.level.setCurrentIndex(2)  # warnings and above: the info rows hide
    hidden = [panel.tree.topLevelItem(i).isHidden() for i in range(panel.tree.topLevelItemCount())]
    assert hidden[-1] is False and any(hidden)
    window.close()
    get_logger("acme.blur").warning("after close")
    qtbot.wait(50)
    assert "after close" not in panel.messages()


def test_records_from_before_the_panel_are_shown(window, qtbot):
    from engine.log import collect
    from engine.plugins import load_plugins

    with collect(logging.INFO) as records:
        load_plugins()
    window.log_panel.add_records(records)
    qtbot.waitUntil(lambda: any(t.startswith("loaded collection standard") for t in window.log_panel.messages()),
                    timeout=2000)
