"""Models are read-only during analysis: edits, undo and redo are refused with a message, and work
again after unlocking."""
from __future__ import annotations

import pytest

from app.analysis.readonly import MESSAGE, ReadOnlyError, ReadOnlyGuard
from canvas.bridge import ModelBridge
from engine.model import Model


def test_locked_model_refuses_every_edit_and_unlocks(qapp):
    m = Model("m")
    m.add_layer("input", "inp")
    m.add_layer("output", "out", inputs=["inp"])
    before = m.content()
    messages = []
    guard = ReadOnlyGuard(messages.append)
    bridge = ModelBridge(m)
    guard.lock([bridge, ModelBridge(m)])
    assert guard.is_locked(m) and len(guard.locked) == 1
    for edit in (lambda: m.add_layer("convolution", "c"), lambda: m.remove_layer("out"),
                 lambda: m.set_param("inp", "scale", "2"), lambda: m.move_layer("inp", (5, 5)),
                 lambda: m.rename_layer("inp", "x"), m.undo, m.redo):
        with pytest.raises(ReadOnlyError, match="read-only while analysis runs"):
            edit()
    assert m.content() == before and messages == [MESSAGE] * 7
    guard.unlock()
    m.set_param("inp", "scale", "2")
    assert m.layers["inp"].params["scale"] == "2"
    m.undo()
    assert m.content() == before
