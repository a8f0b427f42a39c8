"""Small ONNX models for the hostile-input tests, made with onnx.helper: a valid convolution network to mutate,
deep chains, and hand-made malformed files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model: onnx.ModelProto, path: Path) -> Path:
    """Write ``model`` as it is (no checker: malformed models are the point)."""
    path.write_bytes(model.SerializeToString())
    return path


def model(nodes: list, inputs: list, outputs: list, initializers: list = (), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def small_net() -> onnx.ModelProto:
    """Conv (with bias) -> Relu -> MaxPool -> Conv -> Add (skip) -> GlobalAveragePool -> Flatten -> Gemm: the kinds
    of nodes, attributes and initializers a fuzzer should mutate."""
    rng = np.random.default_rng(0)
    w = lambda name, *shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)  # noqa: E731
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="/stem/conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="/stem/relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="/stem/pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="/block/conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         group=2),
        helper.make_node("Add", ["c2", "p1"], ["a2"], name="/block/add"),
        helper.make_node("GlobalAveragePool", ["a2"], ["g"], name="/head/gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="/head/flatten", axis=1),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="/head/fc", transB=1),
    ]
    inits = [w("w1", 4, 3, 3, 3), w("b1", 4), w("w2", 4, 2, 3, 3), w("w3", 5, 4), w("b3", 5)]
    return model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)


def chain(n: int, channels: int = 4, size: int = 8) -> onnx.ModelProto:
    """``n`` 1x1 convolutions one after another (each becomes one layer)."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(n):
        inits.append(numpy_helper.from_array((rng.standard_normal((channels, channels, 1, 1)) * 0.5).astype(np.float32),
                                             f"w{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"t{i}"], name=f"/layers/{i}/conv", kernel_shape=[1, 1]))
        x = f"t{i}"
    return model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
                 [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, channels, size, size])], inits)


if __name__ == "__main__":  # python -m tests.hostile.onnx_models N PATH: write a chain of N nodes
    import sys

    save(chain(int(sys.argv[1])), Path(sys.argv[2]))
