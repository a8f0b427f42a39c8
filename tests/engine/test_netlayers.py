"""Network layers: an external .lnet used as one layer (engine.netlayers)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from engine.errors import LayerLabError
from engine.export import export_onnx, preprocessed_model
from engine.export.common import host_weights
from engine.model import LayerSpec, Model
from engine.modelfile import load, save
from engine.netlayers import NetworkLayerError, expand_networks, network_type, relative_reference
from engine.network import Network
from engine.preprocess import preprocess
from engine.run import RunSpec, open_network
from engine.templates import find_desc
from engine.typecheck import check, errors, output_shapes
from engine.weights import RandomWeights, save_weights


def block(path: Path, channels: int = 4, name: str = "block") -> Path:
    """input -> conv (channels) -> relu conv -> output, saved at ``path``."""
    m = Model(name)
    m.add_layer("input", "x", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c1", params={"num_output_channels": str(channels)}, inputs=["x"])
    m.add_layer("convolution", "c2", params={"num_output_channels": "3"}, inputs=["c1"])
    m.add_layer("output", "y", inputs=["c2"])
    path.parent.mkdir(parents=True, exist_ok=True)
    save(m, path)
    return path


def outer(folder: Path, ref: str = "blocks/block.lnet", weights: str = "") -> Model:
    """input -> net (network layer) -> output, saved as folder/outer.lnet."""
    m = Model("outer")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer(network_type(ref), "net", inputs=["inp"], params={"weights": weights} if weights else {})
    m.add_layer("output", "out", inputs=["net"])
    save(m, folder / "outer.lnet")
    return load(folder / "outer.lnet")


def test_expansion_names_the_inner_layers_and_wires_the_ports(tmp_path, registry):
    block(tmp_path / "blocks" / "block.lnet")
    model = outer(tmp_path)
    exp = expand_networks(model, registry)
    assert list(exp.model.layers) == ["inp", "net__c1", "net__c2", "out"]
    assert exp.model.layers["net__c1"].inputs == ["inp"] and exp.model.layers["out"].inputs == ["net__c2"]
    assert exp.origin["net__c2"] == ("net", "c2") and exp.output_of == {"net": "net__c2"}
    assert list(model.layers) == ["inp", "net", "out"]  # unchanged
    desc = find_desc(model, registry, model.layers["net"].type)
    assert desc is not None and [i.name for i in desc.inputs] == ["x"] and desc.param("output").enum_values == ("y",)
    assert not errors(check(model, registry)) and output_shapes(model, registry)["net"] == (1, 3, 8, 8)


def test_the_network_computes_what_the_referenced_model_computes_with_its_own_namespaced_weights(tmp_path, registry):
    block(tmp_path / "blocks" / "block.lnet")
    inner = Network(load(tmp_path / "blocks" / "block.lnet"), registry, weights=RandomWeights(7))
    x = np.random.default_rng(0).random((1, 3, 8, 8), dtype=np.float32)
    inner.set_input("x", x)
    inner.run()
    want = inner.output("y")
    save_weights(tmp_path / "blocks" / "w", {n: host_weights(inner, n) for n in ("c1", "c2")})
    model = outer(tmp_path, weights="blocks/w")
    net = Network(model, registry, weights=RandomWeights(0), fusing="off")
    net.set_input("inp", x)
    net.run()
    np.testing.assert_allclose(net.output("out"), want, rtol=1e-5, atol=1e-6)
    # without its own weights, the layers read the outer weights under the expanded names
    plain = Network(outer(tmp_path), registry, weights=RandomWeights(7), fusing="off")
    assert "net__c1" in plain.nodes
    plain.set_input("inp", x)
    plain.run()
    assert not np.allclose(plain.output("out"), want)


def test_missing_weights_of_a_network_layer_name_the_inner_layer(tmp_path, registry):
    block(tmp_path / "blocks" / "block.lnet")
    (tmp_path / "blocks" / "empty").mkdir()
    net = Network(outer(tmp_path, weights="blocks/empty"), registry, fusing="off")
    with pytest.raises(LayerLabError, match=r"c1_weights\.npy"):
        net.run()
    net = Network(outer(tmp_path, weights="blocks/nowhere"), registry, fusing="off")
    with pytest.raises(LayerLabError, match=r"network layer net: its weights: weights folder .*nowhere does not exist"):
        net.run()


def test_missing_file_is_a_type_check_error_naming_it(tmp_path, registry):
    outer(tmp_path, ref="blocks/gone.lnet")
    model = load(tmp_path / "outer.lnet", registry)  # the model opens; the type check says what is wrong
    diags = errors(check(model, registry))
    assert [d.layer for d in diags] == ["net"] and "blocks/gone.lnet" in diags[0].message
    with pytest.raises(NetworkLayerError, match="gone.lnet"):
        preprocess(model, registry)


def test_recursion_is_an_error_naming_the_files(tmp_path, registry):
    a, b = Model("a"), Model("b")
    for m, other in ((a, "b.lnet"), (b, "a.lnet")):
        m.add_layer("input", "x", params={"dimensions": "1x3x8x8"})
        m.add_layer(network_type(other), "n", inputs=["x"])
        m.add_layer("output", "y", inputs=["n"])
    save(a, tmp_path / "a.lnet")
    save(b, tmp_path / "b.lnet")
    diags = errors(check(load(tmp_path / "a.lnet"), registry))
    assert diags and all(d.layer == "n" for d in diags)
    assert any("a.lnet uses itself: a.lnet -> b.lnet -> a.lnet" in d.message for d in diags), diags
    m = load(tmp_path / "a.lnet")
    m.layers["n"].type = network_type("a.lnet")  # a model using its own file
    assert any("a.lnet uses itself: a.lnet -> a.lnet" in d.message for d in errors(check(m, registry)))


def test_port_mismatch_is_an_error(tmp_path, registry):
    block(tmp_path / "blocks" / "block.lnet")
    model = outer(tmp_path)
    model.layers["net"].inputs = ["inp", "inp"]
    msgs = [d.message for d in errors(check(model, registry)) if d.layer == "net"]
    assert any("block.lnet has 1 input" in m for m in msgs), msgs
    model.layers["net"].inputs = ["inp"]
    model.layers["net"].params["output"] = "nope"
    save(model, tmp_path / "outer.lnet")
    model = load(tmp_path / "outer.lnet", registry)  # opens: the type check names the problem
    msgs = [d.message for d in errors(check(model, registry)) if d.layer == "net"]
    assert any("block.lnet has no output layer 'nope'" in m for m in msgs), msgs


def test_a_changed_file_is_picked_up_by_the_next_build(tmp_path, registry):
    path = block(tmp_path / "blocks" / "block.lnet", channels=4)
    model = outer(tmp_path)
    assert Network(model, registry).model.layers["net__c1"].params["num_output_channels"] == "4"
    block(path, channels=6)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new stamp even on coarse clocks
    assert Network(model, registry).model.layers["net__c1"].params["num_output_channels"] == "6"


def test_nested_network_layers_route_weights_by_the_longest_prefix(tmp_path, registry):
    block(tmp_path / "blocks" / "block.lnet")
    mid = Model("mid")
    mid.add_layer("input", "x", params={"dimensions": "1x3x8x8"})
    mid.add_layer(network_type("block.lnet"), "b", inputs=["x"], params={"weights": "bw"})
    mid.add_layer("output", "y", inputs=["b"])
    save(mid, tmp_path / "blocks" / "mid.lnet")
    model = outer(tmp_path, ref="blocks/mid.lnet", weights="blocks/mw")
    result = preprocess(model, registry, fusing="off")
    assert list(result.model.layers) == ["inp", "net__b__c1", "net__b__c2", "out"]
    assert result.networks is not None
    assert result.networks.weights == {"net__": str(tmp_path / "blocks" / "mw"),
                                       "net__b__": str(tmp_path / "blocks" / "bw")}
    assert result.expansion is not None and result.expansion.origin["net__b__c1"] == ("net", "b__c1")


def test_network_layer_and_template_expand_together_and_exporters_see_through(tmp_path, registry):
    block(tmp_path / "blocks" / "block.lnet")
    model = outer(tmp_path)
    pre = preprocessed_model(model, registry, fusing="off")
    assert "net__c1" in pre.layers and all(not s.type.startswith("network:") for s in pre.layers.values())
    onnx = pytest.importorskip("onnx")
    export_onnx(model, registry, tmp_path / "m.onnx")
    names = {n.name for n in onnx.load(str(tmp_path / "m.onnx")).graph.node}
    assert any("net__c1" in n for n in names), names
    from engine.export import export_torch

    export_torch(model, registry, tmp_path / "torch")
    weights = np.load(tmp_path / "torch" / "outer_weights.npz")
    assert any("net__c1" in k for k in weights.files), weights.files


def test_relative_reference_and_run_path(tmp_path, registry):
    block(tmp_path / "blocks" / "block.lnet")
    model = outer(tmp_path)
    assert relative_reference(model, tmp_path / "blocks" / "block.lnet") == "blocks/block.lnet"
    net = open_network(model, RunSpec(backend="numpy", fusing="off"), registry)
    assert "net__c2" in net.nodes


def test_profiling_drift_and_the_project_see_through_with_its_own_weights(tmp_path, registry):
    from engine.analysis import compare_precision
    from engine.export import ProjectOptions, export_project
    from engine.profiling import profile

    block(tmp_path / "blocks" / "block.lnet")
    inner = Network(load(tmp_path / "blocks" / "block.lnet"), registry, weights=RandomWeights(5), fusing="off")
    inner.run()
    own = {n: host_weights(inner, n) for n in ("c1", "c2")}
    save_weights(tmp_path / "blocks" / "w", own)
    model = outer(tmp_path, weights="blocks/w")
    net = Network(model, registry, fusing="off")
    names = [lay.name for lay in profile(net, iterations=1, warmup=0).layers]
    assert "net__c1" in names and "net__c2" in names
    drift = compare_precision(model, registry, candidate="fp16")
    assert {"net__c1", "net__c2"} <= {d.name for d in drift.layers}
    export_project(model, registry, tmp_path / "project", ProjectOptions(package="proj"))
    np.testing.assert_array_equal(np.load(tmp_path / "project" / "proj" / "weights" / "net__c1_weights.npy"),
                                  own["c1"]["weights"])
    assert "network:" not in (tmp_path / "project" / "proj" / "network.py").read_text()


def test_a_copy_keeps_the_folder_references_start_from(tmp_path, registry, monkeypatch):
    block(tmp_path / "blocks" / "block.lnet")
    model = load(outer(tmp_path).path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    copy = model.copy()  # what the designer's worker runs
    assert copy.path is None
    assert "net__c1" in Network(copy, registry).nodes and not errors(check(copy, registry))


def test_a_network_layer_inside_a_template(tmp_path, registry):
    from engine.templates import template_xml

    block(tmp_path / "blocks" / "block.lnet")
    (tmp_path / "blocks" / "w").mkdir()
    m = Model("holder")
    layers = [LayerSpec("n", network_type("blocks/block.lnet"), {}, inputs=["$x"]),
              LayerSpec("r", "convolution", {"num_output_channels": "3"}, inputs=["n"], position=(220, 0))]
    m.templates["wrap"] = template_xml("wrap", ["x"], layers, "r")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("template:wrap", "t1", inputs=["inp"])
    m.add_layer("output", "out", inputs=["t1"])
    save(m, tmp_path / "holder.lnet")
    model = load(tmp_path / "holder.lnet", registry)
    assert not errors(check(model, registry))
    result = preprocess(model, registry, fusing="off")
    assert list(result.model.layers) == ["inp", "t1__n__c1", "t1__n__c2", "t1__r", "out"]
    assert result.expansion.origin["t1__n__c1"] == ("t1", "n__c1") and result.expansion.output_of["t1"] == "t1__r"
    Network(model, registry).infer()
    top = outer(tmp_path, ref="holder.lnet")  # the holder itself used as a network layer
    assert "net__t1__n__c1" in preprocess(top, registry, fusing="off").model.layers
    (tmp_path / "blocks" / "block.lnet").unlink()
    model = load(tmp_path / "holder.lnet", registry)  # still opens
    diags = errors(check(model, registry))
    assert [d.layer for d in diags] == ["t1"] and "n: network file blocks/block.lnet not found" in diags[0].message


def test_a_breakpoint_inside_a_network_layer_pauses_there(tmp_path, registry):
    import threading

    from engine.debugger import Debugger

    block(tmp_path / "blocks" / "block.lnet")
    net = Network(outer(tmp_path), registry, fusing="off", protected={"net__c1"})
    dbg = Debugger()
    dbg.attach(net)
    dbg.add_breakpoint("net__c1")
    worker = threading.Thread(target=net.run)
    worker.start()
    assert dbg.wait_paused(30) and dbg.paused_at == "net__c1"
    inner = dbg.submit(lambda: net.output("net__c1")).result(30)
    assert inner.shape == (1, 4, 8, 8) and "net__c2" not in dbg.computed
    dbg.resume()
    worker.join(30)
    assert not worker.is_alive() and net.output("out").shape == (1, 3, 8, 8)


def _uses(path: Path, refs: list[str], name: str) -> None:
    """A file whose layers are network layers in a row, one per entry of ``refs``."""
    m = Model(name)
    m.add_layer("input", "x", params={"dimensions": "1x3x8x8"})
    last = "x"
    for i, ref in enumerate(refs):
        m.add_layer(network_type(ref), f"n{i}", inputs=[last])
        last = f"n{i}"
    m.add_layer("output", "y", inputs=[last])
    save(m, path)


def test_a_file_used_many_times_expands_at_every_use(tmp_path, registry):
    # d0 uses d1 twice, ..., d4 uses block twice: input, output and 2**5 blocks of 2 layers (each file is
    # expanded once and copied at every use)
    block(tmp_path / "block.lnet")
    for i in range(5):
        _uses(tmp_path / f"d{i}.lnet", [f"d{i + 1}.lnet" if i < 4 else "block.lnet"] * 2, f"d{i}")
    model = load(tmp_path / "d0.lnet")
    exp = expand_networks(model, registry)
    assert len(exp.model.layers) == 2 + 2 ** 5 * 2
    assert "n1__n0__n1__n0__n1__c2" in exp.model.layers and exp.output_of["n1"] == "n1__n1__n1__n1__n1__c2"
    assert not errors(check(model, registry))


def test_a_too_large_tree_of_files_is_refused_before_expanding_naming_the_file_and_the_size(tmp_path, registry):
    block(tmp_path / "block.lnet")
    for i in range(20):
        _uses(tmp_path / f"d{i}.lnet", [f"d{i + 1}.lnet" if i < 19 else "block.lnet"] * 2, f"d{i}")
    with pytest.raises(LayerLabError, match=r"network d0: its network layers expand to 2097154 layers, more than "
                                            r"200000 \(network file d1.lnet alone expands to 1048576\)"):
        expand_networks(load(tmp_path / "d0.lnet"), registry)


@pytest.mark.parametrize(("chain", "fails"), [(61, False), (62, True)])
def test_a_file_expanded_once_is_still_nested_too_deeply_when_reached_deeper(tmp_path, registry, chain, fails):
    # top uses x directly (expanded, remembered) and through a chain of files ending in x: the second use is
    # as deep as without remembering
    block(tmp_path / "y.lnet")
    _uses(tmp_path / "x.lnet", ["y.lnet"], "x")
    for i in range(1, chain + 1):
        _uses(tmp_path / f"c{i}.lnet", [f"c{i + 1}.lnet" if i < chain else "x.lnet"], f"c{i}")
    m = Model("top")
    m.add_layer("input", "i", params={"dimensions": "1x3x8x8"})
    m.add_layer(network_type("x.lnet"), "a", inputs=["i"])
    m.add_layer(network_type("c1.lnet"), "b", inputs=["a"])
    m.add_layer("output", "o", inputs=["b"])
    save(m, tmp_path / "top.lnet")
    exp = expand_networks(load(tmp_path / "top.lnet"), registry, strict=False)
    assert "a" not in exp.failed
    assert ("b" in exp.failed and "nested more than 64 levels" in exp.failed["b"]) == fails
