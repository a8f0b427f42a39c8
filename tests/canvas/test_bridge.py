"""The one bridge: every view hears of model changes through ``canvas.bridge.ModelBridge``."""
from __future__ import annotations

import ast
from pathlib import Path

from canvas.bridge import ModelBridge
from engine.events import Event, LayerAdded, ModifiedChanged, ParamChanged
from engine.model import Model

ROOT = Path(__file__).resolve().parents[2]


def subscriptions(path: Path) -> list[int]:
    """Lines of ``<something>.events.connect(...)`` calls in a source file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "connect" and isinstance(n.func.value, ast.Attribute) and n.func.value.attr == "events"]


def test_only_the_bridge_subscribes_to_model_events():
    found = [f"{p.relative_to(ROOT)}:{line}" for folder in ("app", "canvas") for p in sorted((ROOT / folder).rglob("*.py"))
             for line in subscriptions(p)]
    assert [f.split(":")[0] for f in found] == ["canvas/bridge.py"], found


def test_the_scan_finds_a_direct_subscription(tmp_path):
    f = tmp_path / "widget.py"
    f.write_text("class W:\n    def __init__(self, model):\n        model.events.connect(self.on)\n")
    assert subscriptions(f) == [3]


def test_the_bridge_re_emits_typed_events_and_detaches(qapp):
    m = Model("m")
    bridge = ModelBridge(m)
    got: list[Event] = []
    bridge.event.connect(got.append)
    m.add_layer("input", "inp")
    m.set_param("inp", "scale", "2")
    bridge.detach()
    m.set_param("inp", "scale", "3")
    assert [e for e in got if not isinstance(e, ModifiedChanged)] == [LayerAdded("inp"), ParamChanged("inp")]
