"""Collections loaded and unloaded while running (engine.plugin_collections), with the sample third-party package
found through its entry point (tests/sample_plugin.py)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import LayerLabError
from engine.fusing import rules_from
from engine.model import Model
from engine.network import Network
from engine.plugin_collections import CollectionManager
from engine.plugins import load_plugins
from engine.typecheck import check, errors
from tests.harness import plugin_folder
from tests.sample_plugin import sample_installed  # noqa: F401 (fixture)


def gains() -> Model:
    m = Model("gains")
    m.add_layer("input", "inp", params={"dimensions": "1x2x4x4"})
    m.add_layer("sample_gain", "g1", params={"gain": "2"}, inputs=["inp"])
    m.add_layer("sample_gain", "g2", params={"gain": "3"}, inputs=["g1"])
    m.add_layer("output", "out", inputs=["g2"])
    return m


@pytest.mark.usefixtures("sample_installed")
def test_the_sample_package_loads_through_its_entry_point_and_its_rule_fuses():
    reg = load_plugins()
    assert not reg.failures, reg.failures
    info = CollectionManager(reg).collection("sample")
    assert info.kind == "installed" and info.loaded and info.meta.author == "LayerLab examples"
    assert info.layers == ("sample_gain", "sample_gain_pair") and len(info.fusing_rules) == 1
    assert info.location.endswith("layerlab_sample/__init__.py")
    x = np.random.default_rng(0).random((1, 2, 4, 4), dtype=np.float32)
    net = Network(gains(), reg)
    assert net.model.layers["g2"].type == "sample_gain_pair" and "g1" not in net.model.layers
    np.testing.assert_allclose(net.infer({"inp": x})["out"], 6 * x, rtol=1e-6)
    plain = Network(gains(), reg, fusing="off")
    plain.set_runtime_option("g2", "gain", 0.5)  # the runtime option, live
    np.testing.assert_allclose(plain.infer({"inp": x})["out"], x, rtol=1e-6)


@pytest.mark.usefixtures("sample_installed")
def test_unload_and_load_again():
    reg = load_plugins()
    manager = CollectionManager(reg)
    model = gains()
    assert not errors(check(model, reg))
    n_rules = len(rules_from(reg, model, "on"))
    manager.unload("sample")
    assert reg.find_layer("sample_gain") is None and not manager.is_loaded("sample")
    assert not [r for r in reg.fusing_rules if r.collection == "sample"]
    assert len(rules_from(reg, Model("plain"), "on")) == n_rules - 1
    msgs = {d.layer: d.message for d in errors(check(model, reg))}
    assert "unknown layer type 'sample_gain'" in msgs["g1"]
    assert manager.choices() == (["sample"], [])
    assert not manager.collection("sample").loaded and manager.collection("sample").layers
    manager.load("sample")
    assert reg.find_layer("sample_gain_pair") is not None and not errors(check(model, reg))
    assert Network(model, reg).model.layers["g2"].type == "sample_gain_pair"
    with pytest.raises(LayerLabError, match="not loaded"):
        manager.unload("nope")


def test_add_folder_loads_its_collections_and_records_failures(tmp_path):
    folder = plugin_folder(tmp_path / "plugins", "good", "raise RuntimeError('boom')\n")
    reg = load_plugins()
    manager = CollectionManager(reg)
    assert manager.add_folder(folder) == ["good"]
    assert manager.collection("good").kind == "folder" and manager.collection("good").location == str(folder / "good.py")
    assert any("broken.py" in f.source and "boom" in f.reason for f in manager.failures)
    assert manager.add_folder(folder) == []  # not twice
    fresh = CollectionManager(load_plugins())
    assert fresh.apply(["good", "standard", "gone"], [str(folder)]) == [
        "collection gone was unloaded last time, and is not there now"]
    assert not fresh.is_loaded("good") and not fresh.is_loaded("standard") and fresh.is_loaded("activations")
