from __future__ import annotations

import pytest

from engine.errors import GraphError, LayerLabError
from engine.events import (
    EditRefused,
    Event,
    FusingRulesChanged,
    LayerAdded,
    LayerEvent,
    LayerRemoved,
    LayerRenamed,
    LinkChanged,
    ModifiedChanged,
    NetworkChanged,
    ParamChanged,
    SettingsChanged,
    TemplateAdded,
    TemplateEvent,
    TemplateRemoved,
)
from engine.model import FusingRuleSpec, Model, ReadOnlyError


def chain() -> Model:
    m = Model("net")
    m.add_layer("input", "inp")
    m.add_layer("convolution", "c1", inputs=["inp"])
    m.add_layer("element_wise", "e", inputs=["c1", "inp"])
    m.add_layer("output", "out", inputs=["e"])
    return m


def test_every_edit_is_undoable_and_redoable():
    m = chain()
    snapshots = [m.content()]
    m.set_param("c1", "num_output_channels", "8")
    m.set_activation("c1", "leaky_relu", {"alpha": "0.2"})
    m.move_layer("c1", (10, 20))
    m.rename_layer("c1", "conv")
    m.connect("inp", "e", 2)
    m.disconnect("e", 1)
    m.remove_layers(["conv"])
    m.set_network(name="other", version="2")
    m.set_setting("backend", "numpy")
    for _ in range(9):
        m.undo()
    assert m.content() == snapshots[0]
    for _ in range(9):
        m.redo()
    assert m.name == "other" and "conv" not in m.layers and m.layers["e"].inputs == [None, None, "inp"]
    assert m.settings == {"backend": "numpy"}


def test_rename_updates_links_and_remove_restores_links_on_undo():
    m = chain()
    m.rename_layer("c1", "conv")
    assert m.layers["e"].inputs == ["conv", "inp"]
    m.remove_layer("inp")
    assert m.layers["conv"].inputs == [None] and m.layers["e"].inputs == ["conv", None]
    m.undo()
    assert list(m.layers) == ["inp", "conv", "e", "out"] and m.layers["e"].inputs == ["conv", "inp"]


def test_names_are_unique_identifiers_and_generated():
    m = chain()
    assert m.unique_name("convolution") == "convolution_1"
    assert m.add_layer("convolution") == "convolution_1"
    assert m.add_layer("convolution") == "convolution_2"
    with pytest.raises(LayerLabError, match="already exists"):
        m.rename_layer("convolution_1", "c1")
    with pytest.raises(LayerLabError, match="not a valid layer name"):
        m.rename_layer("convolution_1", "3x")


def test_connect_refuses_cycles_and_replaces_links():
    m = chain()
    with pytest.raises(GraphError, match="would create a cycle"):
        m.connect("e", "c1", 0)
    m.connect("inp", "e", 0)  # replaces c1
    assert m.layers["e"].inputs == ["inp", "inp"]
    m.undo()
    assert m.layers["e"].inputs == ["c1", "inp"]


def test_macro_is_one_undo_step_and_events_are_emitted():
    m = chain()
    events = []
    m.events.connect(events.append)
    with m.macro("Edit two"):
        m.set_param("c1", "kernel_size", "5")
        m.set_param("c1", "padding", "2")
    assert ParamChanged("c1") in events
    m.undo()
    assert m.layers["c1"].params == {}
    assert not m.can_undo() or m.undo_text() != "Edit two"


def test_modified_flag_follows_undo_to_clean_state():
    m = chain()
    m.mark_clean()
    assert not m.modified
    m.set_param("c1", "num_output_channels", "4")
    assert m.modified
    m.undo()
    assert not m.modified


def test_each_edit_emits_its_typed_event_and_undo_emits_the_reverse():
    m = Model("m")
    events: list[Event] = []
    m.events.connect(events.append)
    m.add_layer("input", "inp")
    m.add_layer("output", "out", inputs=["inp"])
    m.disconnect("out", 0)
    m.rename_layer("inp", "x")
    m.set_setting("backend", "numpy")
    m.set_network(name="other")
    m.set_fusing_rules([FusingRuleSpec("*|*|conv_bn = batch_normalization {convolution}")])
    m.add_template("t", "<template/>")
    assert [e for e in events if not isinstance(e, ModifiedChanged)] == [
        LayerAdded("inp"), LayerAdded("out"), LinkChanged("out", 0, None),
        LayerRenamed("x", "inp"), SettingsChanged("backend"), NetworkChanged(), FusingRulesChanged(), TemplateAdded("t")]
    assert ModifiedChanged(True) in events
    assert all(isinstance(e, LayerEvent) == hasattr(e, "layer") for e in events)
    assert isinstance(events[-1], TemplateEvent) and events[-1].name == "t"
    events.clear()
    m.undo()
    m.undo()
    assert events == [TemplateRemoved("t"), FusingRulesChanged()]
    m.mark_clean()
    assert events[-1] == ModifiedChanged(False)


def test_a_refused_edit_emits_edit_refused_with_the_reason():
    m = Model("m")
    m.add_layer("input", "inp")
    events: list[Event] = []
    m.events.connect(events.append)
    m.read_only = "while testing"
    with pytest.raises(ReadOnlyError):
        m.remove_layer("inp")
    assert len(events) == 1 and isinstance(events[0], EditRefused) and "read-only while testing" in events[0].message
    assert not any(isinstance(e, LayerRemoved) for e in events)
