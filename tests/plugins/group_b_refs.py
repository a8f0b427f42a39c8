"""ONNX reference graphs shared by the group-B layer tests (resampling and padding built from ONNX operators)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from tests.harness import ort_run

ONNX_RESIZE_MODE = {"nearest": "nearest", "bilinear": "linear", "bicubic": "cubic"}


def int64_const(name: str, values: list[int]):
    """A Constant node producing an int64 vector (ort_run's initializers are float32 only)."""
    return helper.make_node("Constant", [], [name],
                            value=helper.make_tensor(name, TensorProto.INT64, [len(values)], [int(v) for v in values]))


def resize_node(inp: str, out: str, mode: str, coords: str = "half_pixel", scales: str = "", sizes: str = ""):
    """ONNX Resize; nearest rounds half down and cubic uses A = -0.75 (the ONNX defaults, spelled out)."""
    inputs = [inp, "", scales] + ([sizes] if sizes else [])
    return helper.make_node("Resize", inputs, [out], mode=ONNX_RESIZE_MODE[mode], coordinate_transformation_mode=coords,
                            nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75)


def onnx_upscale_to(x: np.ndarray, factor: tuple[int, int], method: str, target_hw: tuple[int, int]):
    """Nodes and initializers computing 'u': Resize x by the integer factors, then ONNX Pad in edge mode to
    the target size (negative pads crop the bottom/right, positive ones repeat the last row/column)."""
    fh, fw = factor
    h, w = x.shape[2] * fh, x.shape[3] * fw
    pads = [0, 0, 0, 0, 0, 0, target_hw[0] - h, target_hw[1] - w]
    nodes = [resize_node("x0", "r", method, scales="s"), int64_const("p", pads),
             helper.make_node("Pad", ["r", "p"], ["u"], mode="edge")]
    return nodes, {"s": np.array([1, 1, fh, fw], np.float32)}


def onnx_pad(x: np.ndarray, pads_begin: list[int], pads_end: list[int], mode: str) -> np.ndarray:
    """ONNX Pad over the 4 NCHW axes (mode constant, reflect or edge; negative pads crop)."""
    nodes = [int64_const("p", list(pads_begin) + list(pads_end)), helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)]
    return ort_run(nodes, {"x": x}, {})[0]
