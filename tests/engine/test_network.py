from __future__ import annotations

import numpy as np
import pytest

from engine.errors import GraphError, InputError, LayerLabError, ShapeError, WeightsError
from engine.model import Model
from engine.network import Network
from engine.tensor import FORMATS, FP32_NCHW, Dims, TensorFormat, convert
from engine.weights import RandomWeights, WeightsFolder, save_weights
from tests.harness import FORMAT_IDS, assert_replays_match, backend_param, each_backend_and_format


def branchy() -> Model:
    """input -> a -> b -> c; a and input feed a sum; several intermediates die early (reuse)."""
    m = Model("branchy")
    m.add_layer("input", "inp", params={"dimensions": "2x3x11x9"})
    m.add_layer("convolution", "a", params={"num_output_channels": "8"}, inputs=["inp"], activation="relu")
    m.add_layer("convolution", "b", params={"num_output_channels": "8"}, inputs=["a"], activation="tanh")
    m.add_layer("convolution", "c", params={"num_output_channels": "8"}, inputs=["b"])
    m.add_layer("convolution", "d", params={"num_output_channels": "8", "kernel_size": "1", "padding": "0"},
                inputs=["c"], activation="sigmoid")
    m.add_layer("element_wise", "s", params={"operation": "sum"}, inputs=["d", "a", "b"])
    m.add_layer("convolution", "e", params={"num_output_channels": "3"}, inputs=["s"])
    m.add_layer("element_wise", "r", params={"operation": "sub"}, inputs=["inp", "e"])
    m.add_layer("output", "out", inputs=["r"])
    return m


def capture_all(net: Network) -> dict[str, np.ndarray]:
    seen: dict[str, np.ndarray] = {}
    net.hooks.after_layer.append(lambda n, name, arr: seen.__setitem__(
        name, n.backend.to_host(convert(arr, n.storage_format(name), FP32_NCHW, n.xp))))
    net.run()
    return seen


@each_backend_and_format
def test_buffer_reuse_never_corrupts_a_live_tensor(registry, backend, fmt):
    reused = Network(branchy(), registry, backend_param(backend), fmt, reuse_buffers=True)
    fresh = Network(branchy(), registry, backend_param(backend), fmt, reuse_buffers=False)
    a, b = capture_all(reused), capture_all(fresh)
    assert set(a) == set(b) == set(reused.order)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert reused.slot_count < fresh.slot_count
    assert reused.peak_memory_bytes < fresh.peak_memory_bytes
    for name in reused.order:  # every layer readable afterwards (recycled ones are recomputed)
        np.testing.assert_array_equal(reused.output(name), b[name], err_msg=name)


def test_unchanged_rerun_does_no_layer_work_and_affected_reruns_downstream_only(registry):
    net = Network(branchy(), registry)
    assert net.run() == net.order
    first = net.output("out")
    assert net.run() == []
    net.mark_affected("e")
    assert net.run() == ["e", "r", "out"]
    np.testing.assert_array_equal(net.output("out"), first)
    net.mark_affected("d")  # s also reads a and b: their buffers may be recycled, so they are recomputed
    executed = net.run()
    assert executed[-4:] == ["s", "e", "r", "out"] and "d" in executed
    np.testing.assert_array_equal(net.output("out"), first)


def test_reshape_on_new_input_size_without_rebuilding(registry):
    net = Network(branchy(), registry)
    net.run()
    layers = dict((n, net.layer(n)) for n in net.order)
    loads = net.weights_loads
    x = np.random.default_rng(5).random((1, 3, 20, 31), dtype=np.float32)
    net.set_input("inp", x)
    net.run()
    assert net.dims("out") == Dims(1, 3, 20, 31)
    assert all(net.layer(n) is layers[n] for n in net.order) and net.weights_loads == loads
    assert net.layer("a").reshape_count == 2
    reference = Network(branchy(), registry)
    reference.set_input("inp", x)
    reference.run()
    np.testing.assert_allclose(net.output("out"), reference.output("out"), rtol=1e-6, atol=1e-6)


def test_reshape_that_changes_weight_shapes_is_an_error(registry):
    m = branchy()
    m.connect("e", "r", 0)  # no layer compares the input's channels with the output's
    net = Network(m, registry)
    net.run()
    net.set_input("inp", np.zeros((1, 4, 8, 8), np.float32))
    with pytest.raises(WeightsError, match=r"layer a: the new input sizes need weight 'weights' of shape \(8, 4, 3, 3\)"):
        net.run()


def test_bypass_layer_aliases_its_input(registry):
    m = Model()
    m.add_layer("input", "inp", params={"dimensions": "1x2x4x4"})
    m.add_layer("element_wise", "e", inputs=["inp", "inp"])
    m.add_layer("output", "out", inputs=["e"])
    net = Network(m, registry)
    net.run()
    assert net._views["out"] is net._views["e"]  # output layer: no buffer, no copy
    np.testing.assert_array_equal(net.output("out"), net.output("e"))


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_any_layer_output_in_any_format(registry, fmt):
    net = Network(branchy(), registry, fmt=TensorFormat.parse("fp32 nhwc"))
    net.run()
    ref = net.output("a")
    got = net.output("a", fmt)
    assert got.shape == fmt.shape(Dims(*ref.shape)) and got.dtype == fmt.dtype
    np.testing.assert_allclose(convert(got, fmt, FP32_NCHW), ref, rtol=1e-3, atol=1e-3)


def test_cycle_error_names_the_layers(registry):
    m = branchy()
    m.connect("e", "b", 0, allow_cycle=True)
    with pytest.raises(GraphError, match=r"cycle: (b -> c -> d -> s -> e -> b|.*b.*e.*)"):
        Network(m, registry)


def test_unconnected_mandatory_input_is_an_error(registry):
    m = branchy()
    m.disconnect("c", 0)
    with pytest.raises(GraphError, match="convolution c: these mandatory inputs are not connected: 0"):
        Network(m, registry)


def test_set_input_validation(registry):
    net = Network(branchy(), registry)
    with pytest.raises(InputError, match="no input layer 'x'"):
        net.set_input("x", np.zeros((1, 3, 4, 4)))
    with pytest.raises(InputError, match="expected a tensor of rank 1 to 6"):
        net.set_input("inp", np.zeros((1,) * 7))
    net.set_input("inp", np.zeros((3, 4, 4)))  # a rank the input takes, but not its readers: refused when planned
    with pytest.raises(ShapeError, match=r"input 0 \(from layer inp\) is a tensor of rank 3 \(3x4x4\), but "
                                         r"convolution takes tensors of rank 4"):
        net.run()
    net = Network(branchy(), registry)
    bad = np.zeros((1, 3, 4, 4), np.float32)
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        net.set_input("inp", bad)


def test_random_weights_are_deterministic_and_folder_weights_are_validated(registry, tmp_path):
    a = Network(branchy(), registry, weights=RandomWeights(3)).infer()["out"]
    b = Network(branchy(), registry, weights=RandomWeights(3)).infer()["out"]
    c = Network(branchy(), registry, weights=RandomWeights(4)).infer()["out"]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    # a folder holding exactly the seed-3 weights reproduces the seed-3 result
    net = Network(branchy(), registry, weights=RandomWeights(3))
    net.run()
    save_weights(tmp_path, {n: {w: net.backend.to_host(v) for w, v in net.layer(n).weights.items()} for n in net.order})
    np.testing.assert_array_equal(Network(branchy(), registry, weights=WeightsFolder(tmp_path)).infer()["out"], a)
    np.save(tmp_path / "b_weights.npy", np.zeros((8, 4, 3, 3), np.float32))
    with pytest.raises(WeightsError, match=r"layer b: weight 'weights' in b_weights.npy has shape \(8, 4, 3, 3\), "
                                           r"expected \(8, 8, 3, 3\)"):
        Network(branchy(), registry, weights=WeightsFolder(tmp_path)).run()
    (tmp_path / "b_weights.npy").unlink()
    with pytest.raises(WeightsError, match="layer b: weight 'weights' missing: expected .*b_weights.npy"):
        Network(branchy(), registry, weights=WeightsFolder(tmp_path)).run()
    with pytest.raises(WeightsError, match="does not exist"):
        WeightsFolder(tmp_path / "nope")


@pytest.mark.gpu
def test_cupy_backend_matches_numpy(registry):
    fmt = TensorFormat.parse("fp16 nhwc")
    gpu = Network(branchy(), registry, backend_param("cupy"), fmt).infer()["out"]
    cpu = Network(branchy(), registry, backend_param("numpy"), fmt).infer()["out"]
    np.testing.assert_allclose(gpu, cpu, rtol=2e-2, atol=2e-2)


def conv_bn_model() -> Model:
    m = Model("cbn")
    m.add_layer("input", "inp", params={"dimensions": "1x3x10x12"})
    m.add_layer("convolution", "conv", params={"num_output_channels": "6"}, inputs=["inp"])
    m.add_layer("batch_normalization", "bn", inputs=["conv"], activation="relu")
    m.add_layer("output", "out", inputs=["bn"])
    return m


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_network_applies_builtin_fusing_rules_with_the_same_result(registry, fmt):
    fused = Network(conv_bn_model(), registry, fmt=fmt, fusing="on")
    plain = Network(conv_bn_model(), registry, fmt=fmt, fusing="off")
    assert [a[1:] for a in fused.fused.applied] == [("conv", "bn", "bn")]
    assert fused.layer("bn").desc.name == "conv_bn" and "conv" not in fused.order
    tol = 2e-2 if fmt.dtype == np.float16 else 1e-4
    np.testing.assert_allclose(fused.infer()["out"], plain.infer()["out"], rtol=tol, atol=tol)
    with pytest.raises(LayerLabError, match="layer conv was fused into bn by a fusing rule"):
        fused.output("conv")
    kept = Network(conv_bn_model(), registry, fmt=fmt, fusing="on", protected={"conv"})
    assert not kept.fused.applied and "conv" in kept.order


def test_secondary_weight_input_of_the_wrong_size_is_a_shape_error(registry):
    from engine.errors import ShapeError

    m = Model()
    m.add_layer("input", "x", params={"dimensions": "1x3x8x8"})
    m.add_layer("input", "w", params={"dimensions": "1x1x3x3"})
    m.add_layer("convolution", "c", params={"num_output_channels": "4"}, inputs=["x", "w"])
    with pytest.raises(ShapeError, match=r"convolution c: weights input w has 9 values \(1x1x3x3\), "
                                         r"the layer needs shape \(4, 3, 3, 3\)"):
        Network(m, registry).run()


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp16 nhwc", "fp32 nchw"])
def test_cuda_graph_replay_matches_eager_and_follows_new_inputs(registry, fmt):
    f = TensorFormat.parse(fmt)
    net = Network(branchy(), registry, backend_param("cupy"), f)
    ref = Network(branchy(), registry, backend_param("numpy"), f)
    assert_replays_match(net, ref, (2, 3, 11, 9))
    if f.dtype == np.float16 or net.backend.cudnn is not None:  # fp32 too: its convolutions run on cuDNN
        assert net.graph_status.startswith("captured"), net.graph_status
    else:  # without cuDNN, fp32 convolutions run on cuBLAS, which CuPy refuses to capture: eager, said so
        assert net.graph_status.startswith("failed at layer"), net.graph_status
    net.set_input("inp", np.random.default_rng(10).random((1, 3, 16, 20), dtype=np.float32))  # reshape: recapture later
    net.run()
    assert net.replayer.graph is None and net.dims("out") == Dims(1, 3, 16, 20)


def dense_block() -> Model:
    """A DenseNet block: every layer joins the input and all earlier layers' outputs again (j1, j2, j3), then
    normalizes and convolves the join."""
    m = Model("dense")
    m.add_layer("input", "inp", params={"dimensions": "2x4x6x5"})
    features = ["inp"]
    for i in (1, 2, 3):
        m.add_layer("concatenation", f"j{i}", inputs=list(features))
        m.add_layer("batch_normalization", f"bn{i}", inputs=[f"j{i}"], activation="relu")
        m.add_layer("convolution", f"c{i}", params={"num_output_channels": "3"}, inputs=[f"bn{i}"])
        features.append(f"c{i}")
    m.add_layer("concatenation", "j4", inputs=list(features))
    m.add_layer("output", "out", inputs=["j4"])
    return m


@each_backend_and_format
def test_joins_of_the_same_leading_inputs_share_one_buffer(registry, backend, fmt, monkeypatch):
    """Where the backend reads a join's leading channels as a view, DenseNet-style joins share the longest one's
    buffer and write only their new inputs: every layer's output is the same as with a buffer per join, after a
    full run, a partial one (a join whose predecessor did not run copies all its inputs) and a read of an
    earlier join."""
    be = backend_param(backend)
    monkeypatch.setattr(be, "views_joins", False)
    ref = Network(dense_block(), registry, be, fmt)
    expected = capture_all(ref)
    monkeypatch.setattr(be, "views_joins", True)
    net = Network(dense_block(), registry, be, fmt)
    got = capture_all(net)
    for name in net.order:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert len({net._slot_of[j] for j in ("j1", "j2", "j3", "j4")}) == 1
    assert net.peak_memory_bytes < ref.peak_memory_bytes
    x = np.random.default_rng(3).random((2, 4, 6, 5), dtype=np.float32)
    for n in (net, ref):
        n.set_input("inp", x)
        n.run()
    np.testing.assert_array_equal(net.output("out"), ref.output("out"))
    for name in ("j2", "j1", "j3"):  # earlier joins, read after the chain moved on
        np.testing.assert_array_equal(net.output(name), ref.output(name), err_msg=name)
    kept = Network(dense_block(), registry, be, fmt, reuse_buffers=False)  # nothing recycled, still one chain
    kept.set_input("inp", x)
    kept.run()
    assert len({kept._slot_of[j] for j in ("j1", "j2", "j3", "j4")}) == 1
    kept._views["j3"][...] = np.nan  # what j2 wrote is gone: j3 must not count on it
    kept.mark_affected("c2")  # c2 again: j3 runs without j2 and copies every input
    assert kept.run() == ["c2", "j3", "bn3", "c3", "j4", "out"]
    np.testing.assert_array_equal(kept.output("out"), ref.output("out"))


def residual_blocks() -> Model:
    """Two residual sums: s1 = conv(b) + a, a read last there; s2 = conv(s1) + s1, its convolution reading the
    residual itself."""
    m = Model("residual")
    m.add_layer("input", "inp", params={"dimensions": "2x8x9x7"})
    m.add_layer("convolution", "a", params={"num_output_channels": "16"}, inputs=["inp"], activation="relu")
    m.add_layer("convolution", "b", params={"num_output_channels": "16"}, inputs=["a"], activation="relu")
    m.add_layer("convolution", "c", params={"num_output_channels": "16"}, inputs=["b"])
    m.add_layer("element_wise", "s1", params={"operation": "sum"}, inputs=["c", "a"], activation="relu")
    m.add_layer("convolution", "d", params={"num_output_channels": "16", "kernel_size": "1", "padding": "0"},
                inputs=["s1"])
    m.add_layer("element_wise", "s2", params={"operation": "sum"}, inputs=["d", "s1"])
    m.add_layer("convolution", "e", params={"num_output_channels": "4"}, inputs=["s2"])
    m.add_layer("output", "out", inputs=["e"])
    return m


@each_backend_and_format
@pytest.mark.parametrize("fusing", ["on", "off"])
def test_a_sum_writes_over_an_input_it_reads_last(registry, backend, fmt, monkeypatch, fusing):
    """On a backend that allows it, a residual sum (fused, or an element-wise sum) takes the buffer of an input it is
    the last reader of (a fused sum: its residual's), never where its convolution reads the same tensor, and a
    squeeze-excitation product takes its tensor's: the outputs are those of a network with a buffer per layer, after
    a full run, a partial one and a read of an overwritten input (recomputed)."""
    be = backend_param(backend)
    model = residual_blocks()
    model.add_layer("pooling", "squeeze", params={"global": "true"}, inputs=["s2"])
    model.add_layer("element_wise", "gated", params={"operation": "product"}, inputs=["squeeze", "s2"])
    model.layers["e"].inputs = ["gated"]
    monkeypatch.setattr(be, "overwrites_inputs", False)
    ref = Network(model, registry, be, fmt, fusing=fusing)
    expected = capture_all(ref)
    monkeypatch.setattr(be, "overwrites_inputs", True)
    net = Network(model, registry, be, fmt, fusing=fusing)
    got = capture_all(net)
    assert {type(net.nodes[n].layer).__name__ for n in ("s1", "s2")} == {"ConvSum" if fusing == "on" else "ElementWise"}
    for name in net.order:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    if fusing == "on":
        assert net._slot_of["s1"] == net._slot_of["a"] and ref._slot_of["s1"] != ref._slot_of["a"]
        assert net._slot_of["s2"] != net._slot_of["s1"]
    else:
        assert net._slot_of["s1"] == net._slot_of["c"] and net._slot_of["s2"] == net._slot_of["d"]
    assert net._slot_of["gated"] == net._slot_of["s2"] and ref._slot_of["gated"] != ref._slot_of["s2"]
    x = np.random.default_rng(4).random((2, 8, 9, 7), dtype=np.float32)
    for n in (net, ref):
        n.set_input("inp", x)
        n.run()
    np.testing.assert_array_equal(net.output("out"), ref.output("out"))
    np.testing.assert_array_equal(net.output("a"), ref.output("a"))  # perhaps overwritten: computed again
    np.testing.assert_array_equal(net.output("s2"), ref.output("s2"))
    for n in (net, ref):
        n.mark_affected("b")
        n.run()
    np.testing.assert_array_equal(net.output("out"), ref.output("out"))
    kept = Network(model, registry, be, fmt, reuse_buffers=False, fusing=fusing)
    kept.run()
    assert kept._slot_of["s1"] != kept._slot_of["a"] and kept._slot_of["gated"] != kept._slot_of["s2"]


def test_the_layers_a_run_computes_follow_what_changed_and_which_buffers_were_reused(registry):
    """The run set is remembered per affected set and buffer owners: each run computes what a fresh evaluation of
    the network's state says (a partial rerun, one after a read of an intermediate output that took a reused
    buffer, a full rerun), with the right results, the second time round as the first."""
    from engine.memory_plan import evaluation_set

    m = Model("runs")
    m.add_layer("input", "x", params={"dimensions": "1x2x6x6"})
    for i, src in enumerate(["x", "c0", "c1", "c2"]):
        m.add_layer("convolution", f"c{i}", params={"num_output_channels": "2"}, inputs=[src])
    m.add_layer("output", "out", inputs=["c3"])
    net = Network(m, registry, backend_param("numpy"), FP32_NCHW)
    full = ["x", "c0", "c1", "c2", "c3", "out"]
    assert net.run() == full
    reference = net.output("out").copy()

    def run(affected: str) -> list[str]:
        net.mark_affected(affected)
        fresh = evaluation_set({affected}, net.order, net._inputs, net._readers, net._roots, net._slot_of,
                               list(net._owner))
        done = net.run()
        assert done == [n for n in net.order if n in fresh]
        np.testing.assert_array_equal(net.output("out"), reference)
        return done

    rounds = []
    for _ in range(2):
        steady = run("c2")
        net.output("c0")  # recomputed if its buffer was reused: the owners change
        after_read = run("c2")
        rounds.append((steady, after_read, run("x")))
    assert rounds[0] == rounds[1] and rounds[0][2] == full and rounds[0][0][-3:] == ["c2", "c3", "out"]


@each_backend_and_format
def test_an_input_is_held_in_its_own_output_buffer(registry, backend, fmt):
    """A given input tensor becomes the input layer's output buffer (copied there once; the layer's forward then copies
    nothing): new inputs of one size go straight there, a new size is held again after the new plan, a run that only
    recomputes reads it unchanged, and every output equals a fresh network's. An input layer with an activation
    keeps its tensor apart (its forward activates a copy)."""
    from engine.backends import NumpyBackend

    net = Network(branchy(), registry, backend_param(backend), fmt)
    rng = np.random.default_rng(3)

    def fresh(x: np.ndarray) -> np.ndarray:
        ref = Network(branchy(), registry, NumpyBackend(), FP32_NCHW)
        ref.set_input("inp", x)
        ref.run()
        return ref.output("out")

    tol = 5e-2 if fmt.dtype == np.float16 else 1e-4
    for shape in ((2, 3, 11, 9), (2, 3, 11, 9), (1, 3, 7, 13)):
        x = rng.standard_normal(shape).astype(np.float32)
        net.set_input("inp", x)
        net.run()
        layer = net.layer("inp")
        assert layer.data is net._views["inp"]  # held where its output lives
        np.testing.assert_allclose(net.output("out"), fresh(x), rtol=tol, atol=tol)
        net.mark_affected("inp")
        net.run()  # the input recomputed: nothing copied, the same values read
        np.testing.assert_allclose(net.output("out"), fresh(x), rtol=tol, atol=tol)
    m = branchy()
    m.layers["inp"].activation = "relu"
    activated = Network(m, registry, backend_param(backend), fmt)
    x = rng.standard_normal((2, 3, 11, 9)).astype(np.float32)
    for _ in range(2):
        activated.set_input("inp", x)
        activated.run()
        assert activated.layer("inp").data is not activated._views["inp"]
    np.testing.assert_allclose(activated.output("inp"), np.maximum(x, 0), rtol=tol, atol=tol)
