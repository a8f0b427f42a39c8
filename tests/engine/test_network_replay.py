"""The CPU network's replay of its layers' prepared kernel calls (``engine.replay.Replayer``): the same results as
running every layer's forward, on new input data and after a weight change, and only where a layer's whole
forward was one kernel call."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends.cpu.backend import NumpyBackend, cpu_kernels
from engine.backends.cpu.microkernel import panels_available
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import TensorFormat

pytestmark = pytest.mark.skipif(cpu_kernels() is None, reason="the CPU kernels (Numba) are not installed")

DIMS = "1x8x12x12"


def _model() -> Model:
    """A residual block (conv_bn_sum once fused), a convolution + pooling (conv_pool), a convolution with an
    activation no kernel fuses (sine), a plain one, a product, a squeeze-excitation gate (a global average times
    the tensor), poolings (one with an activation pass), a global average and a fully connected layer."""
    m = Model("replay")
    m.add_layer("input", "input", params={"dimensions": DIMS})
    m.add_layer("convolution", "c1", params={"num_output_channels": "16"}, inputs=["input"], activation="relu")
    m.add_layer("convolution", "c2", params={"num_output_channels": "16", "bias": "false"}, inputs=["c1"])
    m.add_layer("batch_normalization", "bn2", inputs=["c2"])
    m.add_layer("element_wise", "add", params={"operation": "sum"}, inputs=["bn2", "c1"], activation="relu")
    m.add_layer("convolution", "c3", params={"num_output_channels": "16"}, inputs=["add"])
    m.add_layer("pooling", "p3", params={"pool_type": "max", "kernel_size": "2", "stride": "2"}, inputs=["c3"])
    m.add_layer("convolution", "c4", params={"num_output_channels": "16"}, inputs=["p3"], activation="sine")
    m.add_layer("convolution", "c5", params={"num_output_channels": "8", "kernel_size": "1", "padding": "0"},
                inputs=["c4"])
    m.add_layer("element_wise", "mul", params={"operation": "product"}, inputs=["c5", "c5"])
    m.add_layer("pooling", "squeeze", params={"global": "true"}, inputs=["c5"])
    m.add_layer("element_wise", "excite", params={"operation": "product"}, inputs=["mul", "squeeze"])
    m.add_layer("pooling", "p6", params={"pool_type": "average", "kernel_size": "2", "stride": "1"}, inputs=["excite"])
    m.add_layer("pooling", "p7", params={"pool_type": "max", "kernel_size": "2", "stride": "1"}, inputs=["p6"],
                activation="sigmoid")
    m.add_layer("pooling", "gap", params={"global": "true"}, inputs=["p7"])
    m.add_layer("fully_connected", "fc", params={"num_outputs": "4"}, inputs=["gap"])
    m.add_layer("output", "output", inputs=["fc"])
    return m


def _network(replay: bool = True) -> Network:
    net = Network(_model(), default_registry(), NumpyBackend(), TensorFormat.parse("fp32 nhwc"))
    net.replay_calls = replay
    return net


def _data(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 8, 12, 12)).astype(np.float32)


def _forwards(net: Network) -> dict[str, list[int]]:
    """Counts of each root layer's forward calls (the instance's forward wrapped)."""
    counts: dict[str, list[int]] = {}
    for name in net.order:
        layer = net.nodes[name].layer
        counts[name] = [0]

        def counted(ins, out, _f=layer.forward, _c=counts[name]):
            _c[0] += 1
            return _f(ins, out)
        layer.forward = counted  # type: ignore[method-assign]
    return counts


def test_replayed_runs_match_full_runs_on_new_inputs():
    plain, fast = _network(replay=False), _network()
    for seed in range(4):
        for net in (plain, fast):
            net.set_input("input", _data(seed))
            net.run()
        np.testing.assert_array_equal(fast.output("output"), plain.output("output"))
        # each shared buffer ends its run holding the same layer's output (replayed and executed layers in order)
        assert fast._owner == plain._owner and None not in fast._owner
    assert {name for name, call, _ in fast.replayer.recorded if call is not None} >= {"c1", "c5"}


def test_only_layers_whose_forward_is_one_kernel_call_are_replayed():
    net = _network()
    net.set_input("input", _data(0))
    net.run()
    types = {name: net.nodes[name].layer.desc.name for name in net.order}
    replayed = {name for name, call, _ in net.replayer.recorded if call is not None}
    assert {types[n] for n in replayed} == {"convolution", "conv_bn_sum", "pooling", "fully_connected", "conv_pool",
                                            "element_wise"}
    assert {"p6", "gap", "fc", "mul", "excite"} <= replayed  # element-wise: one element_wise or channel_scale call
    # the pooling after its convolution: both prepared calls, replayed as a pair
    assert any(t == "conv_pool" and n in replayed for n, t in types.items())
    assert "c4" not in replayed  # a sine no kernel applies: the layer's forward does a second pass
    assert "p7" not in replayed  # the same after a pooling
    counts = _forwards(net)
    net.set_input("input", _data(1))
    net.run()
    assert all(counts[n] == [0] for n in replayed)
    assert all(counts[n] == [1] for n in net.order if n not in replayed and net._roots[n] == n)
    reference = _network(replay=False)
    reference.set_input("input", _data(1))
    reference.run()
    np.testing.assert_array_equal(net.output("output"), reference.output("output"))


def test_parallel_layers_replay_as_their_launch_alone(monkeypatch):
    """A layer whose kernel call was one parallel launch on the network's buffers replays as that launch
    (``runtime.Launch``), none of its wrapper's Python work, with the same results on new inputs; the mobile
    networks' kinds of layer among them: an expansion and its depthwise layer (fused), a squeeze-excitation's global
    pool and gate, an element-wise sum, a fully connected layer."""
    from engine.backends.cpu import runtime as rt

    monkeypatch.setattr(rt, "cores", lambda: 2)  # (a layer of one job, on a busy machine, is a serial call)
    m = Model("mobile")
    m.add_layer("input", "input", params={"dimensions": "1x32x64x64"})
    m.add_layer("convolution", "expand", params={"num_output_channels": "64", "kernel_size": "1", "padding": "0"},
                inputs=["input"], activation="relu")
    m.add_layer("convolution", "dw", params={"num_output_channels": "64", "groups": "64"}, inputs=["expand"],
                activation="relu")
    m.add_layer("pooling", "squeeze", params={"global": "true"}, inputs=["dw"])
    m.add_layer("element_wise", "excite", params={"operation": "product"}, inputs=["dw", "squeeze"])
    m.add_layer("element_wise", "twice", params={"operation": "sum"}, inputs=["excite", "dw"])
    m.add_layer("pooling", "gap", params={"global": "true"}, inputs=["twice"])
    m.add_layer("fully_connected", "fc", params={"num_outputs": "5000"}, inputs=["gap"])
    m.add_layer("output", "output", inputs=["fc"])
    nets = [Network(m, default_registry(), NumpyBackend(), TensorFormat.parse("fp32 nhwc")) for _ in range(2)]
    nets[1].replay_calls = False
    rng = np.random.default_rng(4)
    for _ in range(3):
        x = rng.standard_normal((1, 32, 64, 64)).astype(np.float32)
        for net in nets:
            net.set_input("input", x)
            net.run()
        np.testing.assert_array_equal(nets[0].output("output"), nets[1].output("output"))
    calls = {name: call for name, call, _ in nets[0].replayer.recorded}
    launched = {name for name, call in calls.items() if isinstance(call, rt.Launch)}
    assert nets[0].layer("dw").desc.name == "conv_depthwise"  # the expansion and the depthwise layer: one launch
    assert {"dw", "squeeze", "excite", "twice", "fc"} <= launched, calls


def test_new_weight_arrays_run_the_layer_again():
    net, reference = _network(), _network(replay=False)
    for n in (net, reference):
        n.set_input("input", _data(2))
        n.run()
    for seed, changed in ((3, "c5"), (4, "fc")):  # a convolution's weights, then the fully connected layer's
        for n in (net, reference):
            layer = n.layer(changed)
            layer.set_weights({k: np.asarray(v) * 0.5 for k, v in layer.weights.items()})
            n.set_input("input", _data(seed))
            n.run()
        np.testing.assert_array_equal(net.output("output"), reference.output("output"))
        assert not np.allclose(net.output("output"), _network_output(_data(seed)))
        entry = next(e for e in net.replayer.recorded if e[0] == changed)
        assert entry[1] is not None and entry[2][1] == tuple(net.layer(changed).weights.values())  # recorded again
    counts = _forwards(net)
    net.set_input("input", _data(9))
    net.run()
    assert counts["c5"] == [0] and counts["fc"] == [0]  # replayed with their new weights
    reference.set_input("input", _data(9))
    reference.run()
    np.testing.assert_array_equal(net.output("output"), reference.output("output"))


def _network_output(x: np.ndarray) -> np.ndarray:
    net = _network(replay=False)
    net.set_input("input", x)
    net.run()
    return net.output("output")


def test_hooks_stop_the_replay_and_a_new_size_records_it_again():
    net = _network()
    net.set_input("input", _data(0))
    net.run()
    assert net.replayer.recorded is not None
    counts = _forwards(net)
    seen: list[str] = []
    net.hooks.after_layer.append(lambda network, name, out: seen.append(name))
    net.mark_affected("input")
    net.run()
    assert counts["c1"] == [1] and "c1" in seen  # hooks see every layer: each runs its forward
    net.hooks.after_layer.clear()
    bigger = np.random.default_rng(4).standard_normal((1, 8, 16, 16)).astype(np.float32)
    net.set_input("input", bigger)
    net.run()  # a new size: a new plan, new buffers, the replay recorded again
    assert counts["c1"] == [2]
    net.set_input("input", bigger * 2)
    net.run()
    assert counts["c1"] == [2]  # replayed on the new buffers
    np.testing.assert_array_equal(net.output("output"), _network_output(bigger * 2))


def test_an_error_in_a_replayed_call_drops_the_replay():
    net = _network()
    net.set_input("input", _data(0))
    net.run()
    from engine.backends.cpu import runtime as rt

    call = next(call for name, call, _ in net.replayer.recorded if name == "c5")
    assert isinstance(call, rt.Launch)  # run by the replay's call sequence straight from its kernel
    kernel = call.kernel

    def broken(*args: object) -> None:
        raise ValueError("kernel failed")
    call.kernel = broken
    net.mark_affected("input")
    with pytest.raises(ValueError, match="kernel failed"):  # LayerLab's own layer: the error as it is (a bug)
        net.run()
    assert net.replayer.recorded is None  # recorded again by the next run, from the layers' forwards
    call.kernel = kernel
    net.set_input("input", _data(5))
    net.run()
    np.testing.assert_array_equal(net.output("output"), _network_output(_data(5)))


def test_a_runtime_option_change_upstream_is_seen_through_the_replay():
    """An analysis layer's live option (Linear Blend's weight) before a replayed convolution: the next run drops the
    replay (as it drops a CUDA graph) and the convolution reads the new values."""
    def model() -> Model:
        m = Model("blend")
        m.add_layer("input", "input", params={"dimensions": DIMS})
        m.add_layer("linear_blend", "blend", params={"weight_a": "1.0"}, inputs=["input"])
        m.add_layer("convolution", "c1", params={"num_output_channels": "16"}, inputs=["blend"], activation="relu")
        m.add_layer("output", "output", inputs=["c1"])
        return m

    outs = []
    for replay in (True, False):
        net = Network(model(), default_registry(), NumpyBackend(), TensorFormat.parse("fp32 nhwc"))
        net.replay_calls = replay
        net.set_input("input", _data(6))
        net.run()
        net.run()
        net.set_runtime_option("blend", "weight_a", 2.0)
        assert net.replayer.recorded is None
        net.run()
        outs.append(net.output("output"))
    np.testing.assert_array_equal(outs[0], outs[1])
    blended = Network(model(), default_registry(), NumpyBackend(), TensorFormat.parse("fp32 nhwc"))
    blended.set_input("input", _data(6))
    blended.run()
    assert not np.allclose(outs[0], blended.output("output"))  # the option changed the result


def _sequence_model() -> Model:
    """Standalone batch normalizations, DenseNet joins sharing one buffer (the second normalization reads the leading
    channels as a view), then a transformer's layers on the pixels as tokens: a permutation, a layer normalization,
    a linear layer with GELU, a reshape, slices, entries taken, attention over them with a constant bias, a
    constant added."""
    m = Model("replay_tokens")
    m.add_layer("input", "input", params={"dimensions": DIMS})
    m.add_layer("batch_normalization", "bn0", inputs=["input"], activation="relu")
    m.add_layer("convolution", "d1", params={"num_output_channels": "8"}, inputs=["bn0"], activation="relu")
    m.add_layer("concatenation", "j1", inputs=["input", "d1"])
    m.add_layer("batch_normalization", "bn1", inputs=["j1"], activation="relu")
    m.add_layer("convolution", "d2", params={"num_output_channels": "8"}, inputs=["bn1"], activation="relu")
    m.add_layer("concatenation", "j2", inputs=["input", "d1", "d2"])
    m.add_layer("batch_normalization", "bn2", inputs=["j2"])
    m.add_layer("transpose", "tokens", params={"perm": "0,2,3,1", "shape": "1,144,24"}, inputs=["bn2"])
    m.add_layer("layer_normalization", "ln", inputs=["tokens"])
    m.add_layer("matmul", "mlp", params={"num_outputs": "32", "bias": "true"}, inputs=["ln"], activation="gelu")
    m.add_layer("reshape", "grid", params={"shape": "1,12,12,32"}, inputs=["mlp"])
    m.add_layer("slice", "rows", params={"axes": "1", "ranges": "2:10"}, inputs=["grid"])
    m.add_layer("gather", "cols", params={"axis": "2", "indices": "0,3,5,7"}, inputs=["rows"])
    m.add_layer("constant", "position_bias", params={"dimensions": "1x8x4x4"})
    m.add_layer("attention", "attend", params={"scale": "0.2"}, inputs=["cols", "cols", "cols", "position_bias"])
    m.add_layer("constant", "offset", params={"dimensions": "1x8x4x32"})
    m.add_layer("element_wise", "shifted", params={"operation": "sum"}, inputs=["attend", "offset"])
    m.add_layer("output", "output", inputs=["shifted"])
    return m


def test_normalizations_joins_and_token_layers_are_replayed_with_the_same_results():
    """Batch and layer normalizations, joins (their new channels' copy), linear layers, attention and the copies of
    permuted, reshaped, sliced and gathered views are each one call on the network's buffers: replayed, the forwards do not
    run, and every layer's output equals a network that runs each forward, on new inputs and new weights."""
    def open_it(replay: bool) -> Network:
        net = Network(_sequence_model(), default_registry(), NumpyBackend(), TensorFormat.parse("fp32 nhwc"), seed=4)
        net.replay_calls = replay
        return net

    net, reference = open_it(True), open_it(False)
    for n in (net, reference):
        n.set_input("input", _data(0))
        n.run()
    assert len({net._slot_of[j] for j in ("j1", "j2")}) == 1  # the joins share one buffer
    types = {name: net.nodes[name].layer.desc.name for name in net.order}
    replayed = {name for name, call, _ in net.replayer.recorded if call is not None}
    expected = {"batch_normalization", "concatenation", "layer_normalization", "matmul", "transpose", "reshape",
                "slice", "gather", "constant"} | ({"attention"} if panels_available() else set())
    assert {types[n] for n in replayed} >= expected
    counts = _forwards(net)
    for seed in (1, 2):
        if seed == 2:  # new weights of a replayed normalization: that layer runs its forward again, once
            for n in (net, reference):
                layer = n.layer("bn1")
                layer.set_weights({k: np.asarray(v) * 1.5 for k, v in layer.weights.items()})
        for n in (net, reference):
            n.set_input("input", _data(seed))
            n.run()
        np.testing.assert_array_equal(net.output("output"), reference.output("output"))
    assert counts["bn1"] == [1] and all(counts[n] == [0] for n in replayed - {"bn1"})


def test_a_network_of_mixed_precision_replays_with_the_same_results():
    """fp32 layers in an fp16 network (conversions between them): with the replay on, the outputs on new inputs equal
    a network that runs every forward (a call on a copy converted by the forward would replay stale values)."""
    fp32 = {name: "fp32" for name in ("bn1", "bn2", "ln", "mlp", "j2")}

    def open_it(replay: bool) -> Network:
        net = Network(_sequence_model(), default_registry(), NumpyBackend(), TensorFormat.parse("fp16 nhwc"), seed=4,
                      layer_formats=fp32)
        net.replay_calls = replay
        return net

    net, reference = open_it(True), open_it(False)
    for seed in range(3):
        for n in (net, reference):
            n.set_input("input", _data(seed))
            n.run()
        np.testing.assert_array_equal(net.output("output"), reference.output("output"))
    assert any(call is not None for _, call, _ in net.replayer.recorded)


def test_replayed_calls_run_as_sequences_and_a_layer_callback_sees_each_layer(monkeypatch):
    """Without callbacks the recorded calls run as the backend's call sequences (a launch's kernel called straight,
    not through its own Python), the layers between them by their forwards; a ``layer_done`` callback (the
    profiler's) turns the sequences off and is told of every layer in order; new weights set on a layer while the
    sequences ran are seen by the next run."""
    from engine.backends.cpu import runtime as rt

    net, reference = _network(), _network(replay=False)
    for n in (net, reference):
        n.set_input("input", _data(0))
        n.run()
        n.mark_affected("input")
        n.run()
    net.mark_affected("input")
    net.run()  # the reference's weights, given since, were new weights to every network: segmented again
    assert any(seq is not None for _, seq in net.replayer.segments)
    launched: list[object] = []
    real = rt.Launch.__call__
    monkeypatch.setattr(rt.Launch, "__call__", lambda self: launched.append(self) or real(self))
    net.set_input("input", _data(3))
    net.run()
    assert launched == []  # every launch from a sequence
    np.testing.assert_array_equal(net.output("output"), _network_output(_data(3)))
    seen: list[str] = []
    net.hooks.layer_done.append(seen.append)
    net.mark_affected("input")
    order = net.run()
    assert seen == order and launched  # one layer at a time, through the launches' own calls
    net.hooks.layer_done.clear()
    for n in (net, reference):
        layer = n.layer("c5")
        layer.set_weights({k: np.asarray(v) * 0.5 for k, v in layer.weights.items()})
        n.set_input("input", _data(4))
        n.run()
    np.testing.assert_array_equal(net.output("output"), reference.output("output"))
    assert not np.allclose(net.output("output"), _network_output(_data(4)))


class _GraphBackend(NumpyBackend):
    """A backend that "captures" a run of layers: the graph is the layers' run itself, replayed by calling it."""

    supports_graphs = True

    def __init__(self) -> None:
        super().__init__()
        self.captures = 0

    def capture_graph(self, run):  # type: ignore[no-untyped-def]
        self.captures += 1
        return run

    def launch_graph(self, graph) -> None:  # type: ignore[no-untyped-def]
        graph()


def test_new_weights_capture_the_graph_again():
    """A captured graph reads the arrays it was captured with: a layer given new weights makes the next run capture
    again (and compute with them), where it had replayed the old graph."""
    backend = _GraphBackend()
    net = Network(_model(), default_registry(), backend, TensorFormat.parse("fp32 nhwc"), graph_capture=True)
    for seed in range(3):
        net.set_input("input", _data(seed))
        net.run()
    assert backend.captures == 1 and net.graph_status.startswith("captured")
    layer = net.layer("c5")
    layer.set_weights({k: np.asarray(v) * 0.5 for k, v in layer.weights.items()})
    net.set_input("input", _data(7))
    net.run()
    assert backend.captures == 2
    net.run()
    assert backend.captures == 2  # replayed
