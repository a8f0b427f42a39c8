from __future__ import annotations

import textwrap

import numpy as np
import pytest

from engine.model import Model
from engine.network import Network
from engine.plugins import load_plugins
from tests.plugin_file import GOOD


def write(folder, name, text):
    (folder / name).write_text(textwrap.dedent(text))


def test_broken_plugins_are_reported_and_the_rest_load(tmp_path):
    write(tmp_path, "good.py", GOOD)
    write(tmp_path, "syntax.py", "def broken(:\n")
    write(tmp_path, "raises.py", "from engine.registry import PluginMeta\nPLUGIN = PluginMeta('r', '1', 'a', 'd')\n"
                                 "def register(r):\n    raise RuntimeError('cannot find my license')\n")
    write(tmp_path, "nometa.py", "def register(r):\n    pass\n")
    write(tmp_path, "notes.txt", "not a plugin")
    reg = load_plugins([tmp_path])
    reasons = {f.source.split("/")[-1]: f.reason for f in reg.failures}
    assert set(reasons) == {"syntax.py", "raises.py", "nometa.py"}
    assert "SyntaxError" in reasons["syntax.py"]
    assert "RuntimeError: cannot find my license" in reasons["raises.py"]
    assert "PLUGIN" in reasons["nometa.py"]
    assert "double" in reg.layer_names and "convolution" in reg.layer_names and "relu" in reg.activation_names
    assert reg.plugins["thirdparty"].meta.version == "1.2"
    assert [r.text for r in reg.fusing_rules if r.collection == "thirdparty"] == ["fp32|nchw|double = double {double}"]


def test_third_party_layer_runs_and_unloading_removes_it(tmp_path):
    write(tmp_path, "good.py", GOOD)
    reg = load_plugins([tmp_path])
    m = Model()
    m.add_layer("input", "i", params={"dimensions": "1x1x2x2"})
    m.add_layer("double", "d", inputs=["i"])
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    np.testing.assert_array_equal(Network(m, reg).infer({"i": x})["d"], x * 2)
    reg.unload("thirdparty")
    assert "double" not in reg.layer_names and not any(r.collection == "thirdparty" for r in reg.fusing_rules)


def test_missing_plugin_folder_is_reported(tmp_path):
    reg = load_plugins([tmp_path / "nope"])
    assert any("does not exist" in f.reason for f in reg.failures)
    assert "convolution" in reg.layer_names


def test_builtin_collections_come_through_the_entry_point_group():
    from importlib.metadata import PackageNotFoundError, distribution, entry_points

    try:
        distribution("layerlab")
    except PackageNotFoundError:
        pytest.skip("LayerLab is not installed in this environment (source tree on PYTHONPATH)")

    names = {ep.value for ep in entry_points(group="layerlab.plugins")}
    assert {"plugins.standard", "plugins.activations"} <= names
