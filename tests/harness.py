"""Shared test harness for layers: run one layer in a tiny network on every backend and format,
and compute independent references with onnxruntime.

Tolerances (stated once, used by every layer test): fp32 results must match the reference within
``rtol=1e-4`` and ``atol=1e-4 * scale``; fp16 results within ``rtol=1e-2`` and ``atol=1e-2 * scale``,
where ``scale = max(1, max|reference|)``. fp16 inputs and weights are rounded to fp16 before the
reference is computed, so the remaining error is the fp16 rounding of intermediate and output values."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends import cupy_usable, get_backend
from engine.layer import Layer
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS, Dims, Precision, TensorFormat
from engine.weights import RandomWeights, WeightsSource

BACKENDS = ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)]
FORMAT_IDS = [str(f) for f in FORMATS]


def each_backend_and_format(test: Any) -> Any:
    """Runs ``test`` once per backend (the GPU one marked ``gpu``) and tensor format, given as its arguments
    ``backend`` (a name) and ``fmt``: the sweep every layer's reference check makes."""
    return pytest.mark.parametrize("backend", BACKENDS)(pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)(test))


def backend_param(name: str):
    return get_backend(name, notice=None)


class DictWeights(WeightsSource):
    """Weights given explicitly per (layer, weight); missing ones fall back to seeded random values."""

    def __init__(self, weights: dict[str, dict[str, np.ndarray]] | None = None, seed: int = 0) -> None:
        self.weights = weights or {}
        self.random = RandomWeights(seed)
        self.used: dict[str, dict[str, np.ndarray]] = {}

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        given = self.weights.get(layer.name, {}).get(weight)
        arr = np.asarray(given, dtype=np.float32) if given is not None else self.random.get(layer, weight, shape)
        assert arr.shape == tuple(shape), f"{layer.name}.{weight}: test gave {arr.shape}, layer needs {shape}"
        self.used.setdefault(layer.name, {})[weight] = arr
        return arr


def layer_model(layer_type: str, params: dict[str, Any] | None, input_dims: list[Dims | None],
                activation: str = "none", coefs: dict[str, Any] | None = None) -> Model:
    """in0..inK -> L -> out. ``None`` in ``input_dims`` leaves that input unconnected."""
    m = Model("harness")
    names: list[str | None] = []
    for i, d in enumerate(input_dims):
        if d is None:
            names.append(None)
            continue
        m.add_layer("input", f"in{i}", params={"dimensions": str(Dims(*d))})
        names.append(f"in{i}")
    m.add_layer(layer_type, "L", params={k: str(v) for k, v in (params or {}).items()}, inputs=names,
                activation=activation, act_coefs=coefs)
    m.add_layer("output", "out", inputs=["L"])
    return m


def run_layer(layer_type: str, params: dict[str, Any] | None, inputs: list[np.ndarray | None],
              fmt: TensorFormat, backend: str = "numpy", activation: str = "none",
              coefs: dict[str, Any] | None = None, weights: dict[str, np.ndarray] | None = None,
              seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray], Network]:
    """Run layer ``L`` on host NCHW fp32 inputs. Returns (output fp32 NCHW, weights used, network).

    With fp16 formats the inputs are rounded to fp16 first (so a reference can use the same values)."""
    dims = [Dims(*x.shape) if x is not None else None for x in inputs]
    model = layer_model(layer_type, params, dims, activation, coefs)
    src = DictWeights({"L": weights} if weights else None, seed)
    net = Network(model, default_registry(), backend_param(backend), fmt, weights=src)
    for i, x in enumerate(inputs):
        if x is not None:
            net.set_input(f"in{i}", x.astype(np.float32))
    net.run()
    out = net.output("out")
    return out, src.used.get("L", {}), net


#: one layer of a chain: (layer type, name, parameters, activation)
ChainLayer = tuple[str, str, dict[str, Any], str]


def chain_model(dims: str, chain: Sequence[ChainLayer], name: str = "chain", source: str = "in0") -> Model:
    """Input ``source`` of ``dims`` -> each layer of ``chain``, reading the one before -> output 'out': the straight
    chain most network tests build (parameter values are written as text, as a model file holds them)."""
    m = Model(name)
    m.add_layer("input", source, params={"dimensions": dims})
    for layer_type, layer_name, params, activation in chain:
        m.add_layer(layer_type, layer_name, params={k: str(v) for k, v in params.items()}, inputs=[source],
                    activation=activation)
        source = layer_name
    m.add_layer("output", "out", inputs=[source])
    return m


def run_unfused(x: np.ndarray, chain: Sequence[ChainLayer],
                weights: dict[str, dict[str, np.ndarray]], fmt: TensorFormat, backend: str = "numpy") -> np.ndarray:
    """Run ``x`` through ``chain`` (layer type, name, parameters, activation; each reading the one before) with
    fusing rules off, checking that no layer was fused: the plain chain a fused layer must equal."""
    m = chain_model(str(Dims(*x.shape)), chain)
    net = Network(m, default_registry(), backend_param(backend), fmt, weights=DictWeights(weights), fusing="off")
    assert [net.layer(name).desc.name for _, name, _, _ in chain] == [t for t, _, _, _ in chain]  # really unfused
    return net.infer({"in0": x})["out"]


def round_like(x: np.ndarray, fmt: TensorFormat) -> np.ndarray:
    """What the network actually sees of a host tensor in this format."""
    return x.astype(np.float16).astype(np.float32) if fmt.precision is Precision.FP16 else x.astype(np.float32)


def assert_close(actual: np.ndarray, expected: np.ndarray, fmt: TensorFormat, what: str = "") -> None:
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != reference {expected.shape}"
    scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
    tol = 1e-2 if fmt.precision is Precision.FP16 else 1e-4
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale, err_msg=what)


def ort_run(nodes: list[Any], inputs: dict[str, np.ndarray], initializers: dict[str, np.ndarray],
            output_names: list[str] | None = None, opset: int = 17) -> list[np.ndarray]:
    """Run a small ONNX graph (float32) in onnxruntime: the independent reference."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    outs = output_names or [nodes[-1].output[0]]
    graph = helper.make_graph(
        nodes, "ref",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(np.asarray(v, dtype=np.float32), k) for k, v in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(outs, {k: np.asarray(v, dtype=np.float32) for k, v in inputs.items()})


def gpu_available() -> bool:
    return cupy_usable()


def drift_model(dims: str = "1x2x6x6", weight: str = "1e5", restore: bool = False, name: str = "drift") -> Model:
    """inp -> c1 -> c2 -> amp -> out, 'amp' multiplying by ``weight`` (beyond fp16's range, 65504): a network whose
    fp16 run drifts from its fp32 run at 'amp', for the precision tools. ``restore``: a layer 'back' divides by
    ``weight`` again before the output."""
    chain: list[ChainLayer] = [("convolution", conv, {"num_output_channels": 4}, "none") for conv in ("c1", "c2")]
    chain.append(("linear_blend", "amp", {"weight_a": weight}, "none"))
    if restore:
        chain.append(("linear_blend", "back", {"weight_a": repr(1 / float(weight))}, "none"))
    return chain_model(dims, chain, name, source="inp")


def conv_bn_model(dims: str, channels: int, conv: str = "conv") -> Model:
    """inp -> ``conv`` -> bn -> out: the chain the built-in fusing rule folds into the batch normalization."""
    return chain_model(dims, [("convolution", conv, {"num_output_channels": channels}, "none"),
                              ("batch_normalization", "bn", {}, "none")], "fused", source="inp")


def assert_replays_match(net: Network, ref: Network, shape: tuple[int, ...], runs: int = 4) -> None:
    """Run ``net`` (a GPU network that captures a CUDA graph: eager, capture, then replays) and ``ref`` on ``runs``
    seeded random inputs of ``shape`` at 'inp': every run of ``net`` runs all its layers and its 'out' matches
    ``ref``'s within fp16 tolerance."""
    rng = np.random.default_rng(9)
    for i in range(runs):
        x = rng.random(shape, dtype=np.float32)
        net.set_input("inp", x)
        ref.set_input("inp", x)
        assert net.run() == net.order
        ref.run()
        np.testing.assert_allclose(net.output("out"), ref.output("out"), rtol=2e-2, atol=2e-2, err_msg=f"run {i}")


def plugin_folder(folder: Path, collection: str, broken: str) -> Path:
    """A new plugin folder holding ``<collection>.py``, a collection of that name with metadata and no layers, and
    ``broken.py`` with the source ``broken``, a plugin that fails to load."""
    folder.mkdir()
    (folder / f"{collection}.py").write_text(
        "from engine.registry import PluginMeta\n"
        f"PLUGIN = PluginMeta({collection!r}, '1.0', 'someone', 'metadata only')\n"
        "def register(r):\n    pass\n")
    (folder / "broken.py").write_text(broken)
    return folder


def scale_bias(c: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded random per-channel ``scale`` (0.5 to 2) and ``bias`` weights of ``c`` channels, as the normalization
    layers take them."""
    rng = np.random.default_rng(seed)
    return {"scale": rng.uniform(0.5, 2.0, c).astype(np.float32), "bias": rng.standard_normal(c).astype(np.float32)}
