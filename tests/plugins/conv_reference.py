"""The ONNX reference of the convolution family (convolution, conv_bn, conv_pool, conv_sum): one Conv node built
from a layer's parameters, shared by each layer's test."""
from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto, helper

from tests.harness import ort_run

#: the parameters of the plain convolution layer (a fused layer's others belong to its second part)
CONV_KEYS = ("num_output_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias")
#: ONNX BatchNormalization's inputs after x, named as the fused layers' weights
BN_ORDER = ("bn_scale", "bn_bias", "bn_mean", "bn_variance")


def hw(params: dict[str, Any], name: str, default: int) -> list[int]:
    """Layer parameter ``name`` (``3`` or ``3x5``) as ONNX's [height, width]."""
    v = str(params.get(name, default)).split("x")
    return [int(v[0]), int(v[-1])]


def conv_node(params: dict[str, Any], weights: dict[str, np.ndarray], y: str = "y") -> NodeProto:
    """ONNX Conv of layer ``params`` from ``x`` to ``y``, with the initializers ``weights`` (and ``bias`` when
    ``weights`` has one); the kernel size comes from the weights."""
    pads = hw(params, "padding", 1)
    end = [p if e < 0 else e for p, e in zip(pads, hw(params, "padding_end", -1))]
    return helper.make_node("Conv", ["x", "weights"] + (["bias"] if "bias" in weights else []), [y],
                            strides=hw(params, "stride", 1), pads=pads + end, dilations=hw(params, "dilation", 1),
                            group=int(params.get("groups", 1)))


def onnx_conv(x: np.ndarray, weights: dict[str, np.ndarray], params: dict[str, Any]) -> np.ndarray:
    """The convolution layer's output by onnxruntime; ``weights``: ``weights`` and optionally ``bias``."""
    return ort_run([conv_node(params, weights)], {"x": x}, weights)[0]
