"""Shared pieces of the importer tests: small ONNX graphs, runs of an imported model, the reference."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from engine.backends import get_backend
from engine.importers.onnx import ImportResult, import_onnx
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import TensorFormat

REGISTRY = default_registry()


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def tensor(name: str, shape: tuple[int, ...] | list[Any] | None, elem: int = TensorProto.FLOAT) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def save_graph(path: Path, nodes: list[Any], inputs: list[Any], outputs: list[Any],
               consts: dict[str, np.ndarray] | None = None, opset: int = 17) -> Path:
    """Write a one-graph ONNX model (``consts`` become initializers) and return its path."""
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def reference(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs (the independent reference)."""
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def run(result: ImportResult, feeds: dict[str, np.ndarray], fmt: str = "fp32 nchw", backend: str = "numpy") -> list[np.ndarray]:
    """Outputs of the imported network (in the ONNX graph's output order, fp32 NCHW)."""
    net = Network(result.model, REGISTRY, get_backend(backend), TensorFormat.parse(fmt), weights=result.weights_source())
    out = net.infer({result.input_layers[k]: np.asarray(v, np.float32) for k, v in feeds.items()})
    return [out[layer] for layer in result.output_layers.values()]


def check_against_ort(path: Path, feeds: dict[str, np.ndarray], tol: float = 1e-4, **options: Any) -> ImportResult:
    """Import ``path``, run it in fp32 NCHW on NumPy and compare every output with onnxruntime."""
    result = import_onnx(path, registry=REGISTRY, **options)
    for got, ref in zip(run(result, feeds), reference(path, feeds)):
        assert rel_l2(got.reshape(ref.shape), ref) < tol
    return result


def types(result: ImportResult) -> list[str]:
    return [s.type for s in result.model.layers.values()]
