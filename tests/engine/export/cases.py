"""Small one-layer networks for the exporter round trips: a few parameter sets per layer (after the layer
tests' choices), every activation, and the reference networks at small sizes. A layer type without an
entry here is exported with its default parameters on one 1x4x8x8 input."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.model import Model
from engine.network import Network
from engine.registry import Registry
from engine.tensor import FP32_NCHW, Dims, TensorFormat
from tests.harness import layer_model


@dataclass(frozen=True)
class Case:
    """One small network: ``layer`` of type ``type`` fed by inputs of ``dims``."""

    type: str
    dims: tuple[tuple[int, int, int, int] | None, ...]
    params: dict[str, Any] = field(default_factory=dict)
    activation: str = "none"
    coefs: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        p = ",".join(f"{k}={v}" for k, v in self.params.items())
        act = f"+{self.activation}" if self.activation != "none" else ""
        return f"{self.type}[{p}]{act}"

    def model(self) -> Model:
        """in0..inK -> L -> out (a None in ``dims`` leaves that input of L unconnected)."""
        dims = [Dims(*d) if d is not None else None for d in self.dims]
        return layer_model(self.type, self.params, dims, self.activation, self.coefs)

    def inputs(self, seed: int = 0, scale: int = 1) -> dict[str, np.ndarray]:
        """Standard-normal inputs (H and W times ``scale``), by input layer name."""
        rng = np.random.default_rng(seed)
        def grow(v: int) -> int:
            return v * scale if v > 1 else v  # broadcast (size 1) axes stay 1

        return {f"in{i}": rng.standard_normal((d[0], d[1], grow(d[2]), grow(d[3]))).astype(np.float32)
                for i, d in enumerate(self.dims) if d is not None}


def C(type_: str, dims: Any, act: str = "none", coefs: dict[str, Any] | None = None, **params: Any) -> Case:
    dims = (dims,) if isinstance(dims[0], int) else dims
    return Case(type_, tuple(tuple(d) if d is not None else None for d in dims), params, act, coefs or {})


CASES: dict[str, list[Case]] = {
    "convolution": [
        C("convolution", (1, 3, 9, 10), num_output_channels=4),
        C("convolution", (2, 4, 8, 7), num_output_channels=6, kernel_size="3x5", stride="2x1", padding="1x2",
          groups=2, dilation=2, bias="false"),
        C("convolution", (1, 3, 8, 9), num_output_channels=4, stride=2, padding=0, padding_end=1),
        C("convolution", (1, 2, 7, 8), num_output_channels=3, kernel_size="2x4", padding="1x2", padding_end="0x1"),
    ],
    "deconvolution": [
        C("deconvolution", (1, 4, 5, 6), num_output_channels=6, groups=2),
        C("deconvolution", (1, 3, 4, 4), num_output_channels=2, kernel_size=3, stride=3, padding=0, output_padding=1,
          bias="false"),
        C("deconvolution", (1, 3, 5, 6), num_output_channels=4, kernel_size=3, padding=1, padding_end=0),
        C("deconvolution", (1, 2, 4, 4), num_output_channels=2, kernel_size=4, padding="0x2", padding_end="1x0",
          output_padding=1),
    ],
    "conv_bn": [C("conv_bn", (1, 3, 8, 8), num_output_channels=4, epsilon=0.001),
                C("conv_bn", (1, 3, 8, 8), num_output_channels=4, kernel_size=2, padding=1, padding_end=0)],
    "conv_pool": [
        C("conv_pool", (1, 3, 8, 9), "relu", num_output_channels=4),
        C("conv_pool", (1, 3, 9, 9), "leaky_tanh", num_output_channels=3, pool_type="average", pool_kernel_size=3,
          pool_padding=1, pool_stride=2),
    ],
    "conv_sum": [
        C("conv_sum", ((1, 3, 8, 9), (1, 4, 8, 9)), "relu", num_output_channels=4),
        C("conv_sum", ((1, 4, 9, 9), (1, 6, 1, 1)), num_output_channels=6, stride=2, groups=2, bias="false"),
    ],
    "conv_depthwise": [
        C("conv_depthwise", (1, 3, 8, 9), "hardswish", num_output_channels=8, kernel_size=1, padding=0,
          conv_activation="clamp(min=0, max=6)", dw_num_output_channels=8, dw_groups=8, dw_stride=2),
        C("conv_depthwise", (1, 4, 9, 9), num_output_channels=6, conv_activation="silu", dw_num_output_channels=6,
          dw_groups=3, dw_kernel_size=5, dw_padding=2, bias="false"),
    ],
    "conv_bn_sum": [
        C("conv_bn_sum", ((1, 3, 8, 8), (1, 4, 8, 8)), "relu", num_output_channels=4, epsilon=0.001),
        C("conv_bn_sum", ((1, 3, 8, 8), (1, 4, 8, 8)), num_output_channels=4, kernel_size=2, padding=1, padding_end=0),
    ],
    "pooling": [
        C("pooling", (1, 3, 8, 9)),
        C("pooling", (1, 2, 9, 8), pool_type="average", kernel_size=3, stride=2, padding=1),
        C("pooling", (1, 2, 9, 8), pool_type="average", kernel_size=3, stride=2, padding=1, count_include_pad="true"),
        C("pooling", (1, 2, 7, 7), kernel_size=3, stride=1, padding=2),
        C("pooling", (1, 2, 7, 7), pool_type="average", kernel_size=3, stride=2, padding=2),
        C("pooling", (2, 3, 5, 6), pool_type="average", **{"global": "true"}),
        C("pooling", (2, 3, 5, 6), **{"global": "true"}),
        C("pooling", (1, 2, 8, 7), kernel_size=3, stride=2, padding=0, padding_end=1),
        C("pooling", (1, 2, 8, 7), pool_type="average", kernel_size=3, stride=2, padding="1x0", padding_end="0x1"),
        C("pooling", (1, 2, 7, 9), kernel_size=3, stride=2, ceil_mode="true"),
        C("pooling", (1, 2, 8, 10), pool_type="average", kernel_size=3, stride=2, padding=1, ceil_mode="true",
          count_include_pad="true"),
        C("pooling", (1, 2, 8, 10), pool_type="average", kernel_size=3, stride=2, padding=1, ceil_mode="true"),
        # a last ceil window starting in the bottom/right padding is dropped (ONNX shape inference before opset
        # 22 keeps it; onnxruntime and PyTorch drop it)
        C("pooling", (1, 2, 5, 5), kernel_size=2, stride=2, padding=1, ceil_mode="true"),
        C("pooling", (1, 2, 5, 7), pool_type="average", kernel_size=2, stride=2, padding=1, ceil_mode="true",
          count_include_pad="true"),
        # ... on one axis while ceil rounding adds a window on the other
        C("pooling", (1, 2, 5, 7), kernel_size=2, stride=2, padding="1x0", ceil_mode="true"),
        C("pooling", (1, 2, 5, 7), pool_type="average", kernel_size=2, stride=2, padding="1x0", ceil_mode="true",
          count_include_pad="true"),
    ],
    "batch_normalization": [C("batch_normalization", (2, 3, 4, 5), epsilon=0.01)],
    "affine": [
        C("affine", (1, 3, 4, 5), scale=1.5, shift=-0.25),
        C("affine", (1, 3, 4, 5), mode="per_channel"),
    ],
    "color_conversion": [
        C("color_conversion", (1, 3, 4, 5)),
        C("color_conversion", (1, 3, 4, 5), conversion="yuv_to_rgb"),
        C("color_conversion", (1, 3, 4, 5), conversion="bgr_to_gray"),
    ],
    "concatenation": [C("concatenation", ((1, 2, 5, 6), (1, 3, 5, 6), (1, 1, 5, 6))),
                      C("concatenation", ((2, 3, 4, 4), (2, 3, 4, 2)), axis=-1),
                      C("concatenation", ((1, 2, 5, 6), (1, 2, 3, 6)), axis=2)],
    "depth_to_space": [C("depth_to_space", (1, 8, 3, 4)), C("depth_to_space", (1, 18, 2, 3), block_size=3, mode="CRD")],
    "space_to_depth": [C("space_to_depth", (1, 3, 4, 6)), C("space_to_depth", (1, 2, 6, 3), block_size=3, mode="CRD")],
    "dropout": [C("dropout", (1, 3, 4, 4), ratio=0.3), C("dropout", (1, 3, 4, 4), "sigmoid")],
    "element_wise": [
        C("element_wise", ((1, 3, 4, 5), (1, 3, 4, 5), (1, 1, 1, 1))),
        C("element_wise", ((1, 3, 4, 5), (1, 3, 1, 5), (1, 3, 4, 5)), operation="sub"),
        C("element_wise", ((1, 3, 4, 5), (1, 3, 4, 5)), operation="product"),
        C("element_wise", ((1, 3, 4, 5), (1, 3, 4, 5), (1, 3, 4, 5)), operation="max"),
        C("element_wise", ((1, 3, 4, 5), (1, 1, 4, 5)), operation="min"),
        C("element_wise", (1, 3, 4, 5)),
        C("element_wise", ((1, 3, 4, 5), (1, 3, 1, 1)), operation="product"),
        C("element_wise", ((1, 3, 4, 5), (1, 1, 1, 1), (1, 3, 4, 5)), operation="mean"),
        C("element_wise", ((1, 3, 4, 5), (1, 3, 1, 1)), operation="div"),
    ],
    "fully_connected": [C("fully_connected", (2, 3, 4, 4), num_outputs=5), C("fully_connected", (1, 2, 3, 3),
                                                                             num_outputs=3, bias="false")],
    "gram_matrix": [C("gram_matrix", (2, 3, 4, 5)), C("gram_matrix", (1, 4, 3, 3), normalization="chw"),
                    C("gram_matrix", (1, 2, 3, 4), normalization="none")],
    "instance_normalization": [C("instance_normalization", (2, 3, 4, 5), epsilon=0.001)],
    "group_normalization": [C("group_normalization", (2, 6, 4, 5), num_groups=3, epsilon=0.001),
                            C("group_normalization", (1, 4, 3, 3), "relu")],
    "prelu": [C("prelu", (2, 3, 4, 5)), C("prelu", (1, 3, 4, 5), shared_slope="true")],
    "lrn": [C("lrn", (1, 6, 4, 4), size=3, alpha=0.5, beta=0.75, bias=2)],
    "mono_four_stack": [C("mono_four_stack", (1, 1, 5, 7)), C("mono_four_stack", (2, 1, 4, 6))],
    "mono_to_rgb": [C("mono_to_rgb", (1, 1, 4, 5))],
    "padding": [
        C("padding", (1, 2, 5, 6), top=1, bottom=2, left=0, right=3),
        C("padding", (1, 2, 6, 7), mode="reflect", top=-1, bottom=2, left=2, right=-2),
        C("padding", (1, 2, 5, 6), mode="replicate", top=2, bottom=0, left=-1, right=1),
    ],
    "resize": [
        C("resize", (1, 2, 5, 7)),
        C("resize", (1, 2, 6, 8), mode="nearest", scale_h=0.5, scale_w=1.5),
        C("resize", (1, 2, 5, 6), mode="bicubic", coordinate_mode="align_corners", size="7x9"),
        C("resize", (1, 2, 6, 5), mode="bilinear", size="4x11"),
        C("resize", (1, 1, 4, 5), mode="nearest", coordinate_mode="align_corners", size="9x3"),
        C("resize", (1, 2, 4, 5), mode="nearest", coordinate_mode="asymmetric", nearest_mode="floor"),
        C("resize", (1, 2, 5, 4), mode="nearest", coordinate_mode="half_pixel", nearest_mode="round_prefer_ceil",
          scale_h=1.5, scale_w=0.5),
        C("resize", (1, 2, 4, 5), mode="bilinear", coordinate_mode="pytorch_half_pixel", size="1x9"),
        C("resize", (1, 2, 4, 5), mode="bilinear", coordinate_mode="asymmetric", scale_h=3, scale_w=2),
        C("resize", (1, 2, 5, 6), mode="bicubic", cubic_coeff_a=-0.5, exclude_outside="true"),
        C("resize", (1, 2, 5, 6), mode="bicubic", coordinate_mode="asymmetric", cubic_coeff_a=-0.5, size="7x9"),
    ],
    "upsample": [C("upsample", (1, 2, 3, 4)), C("upsample", (1, 2, 3, 4), factor="3x2", method="bilinear")],
    "upscale_concat": [
        C("upscale_concat", ((1, 2, 4, 4), (1, 3, 7, 9))),
        C("upscale_concat", ((1, 2, 4, 4), (1, 3, 8, 7)), method="bilinear"),
    ],
    "upscale_concat_two": [C("upscale_concat_two", ((1, 2, 3, 4), (1, 1, 6, 7), (1, 2, 6, 7)), method="bilinear")],
    "upscale_sum": [C("upscale_sum", ((1, 2, 3, 3), (1, 2, 5, 6)), factor=2, method="bilinear")],
    "zero_embed": [
        C("zero_embed", (1, 3, 6, 6), channels=5, height=9, channel_offset=1, top=2),
        C("zero_embed", (1, 2, 4, 5), width=8, left=3),
    ],
    "slice": [
        C("slice", (1, 5, 6, 7), channels="1:3", height="::-1", width="1:-1:2"),
        C("slice", (1, 5, 6, 7), channels="-1", height="4:0:-2", width=":"),
        C("slice", (3, 5, 6, 4), axes="0,-1", ranges="1:,::-2"),
    ],
    "unary": [C("unary", (1, 4, 8, 8)), C("unary", (1, 4, 8, 8), operation="atan"),
              C("unary", (1, 4, 8, 8), operation="round"), C("unary", (1, 4, 8, 8), operation="softsign"),
              C("unary", (1, 4, 8, 8), operation="not")],
    "reduce": [C("reduce", (1, 4, 8, 8)), C("reduce", (2, 3, 4, 5), operation="l2", axes="1,3", keepdims="false"),
               C("reduce", (2, 3, 4, 5), operation="prod", axes="1,2"),
               C("reduce", (2, 3, 4, 5), operation="log_sum_exp", axes="-1"),
               C("reduce", (2, 3, 4, 5), operation="argmax", axes="1", last_index="true"),
               C("reduce", (2, 3, 4, 5), operation="argmin", axes="3", keepdims="false")],
    "softmax": [C("softmax", (1, 4, 8, 8)), C("softmax", (2, 3, 4, 5), axis=1, operation="log_softmax"),
                C("softmax", (2, 3, 4, 5), axis=-1, operation="hardmax")],
    "compare": [C("compare", ((1, 4, 8, 8), (1, 4, 1, 1)), operation="greater"),
                C("compare", ((1, 4, 8, 8), (1, 4, 8, 8)), operation="and")],
    "where": [C("where", ((1, 4, 8, 8), (1, 4, 8, 8), (1, 1, 1, 1)))],
    "constant": [C("constant", (None,), dimensions="1x4x8x8")],
    "gather": [C("gather", (2, 5, 6, 6), axis=-1, indices="4,-1,0"), C("gather", (3, 2, 4, 5), axis=0, indices="1",
                                                                      drop_axis="true")],
    "attention": [C("attention", ((2, 3, 7, 8), (2, 3, 5, 8), (2, 3, 5, 4)), scale=0.3),
                  C("attention", ((2, 3, 7, 8), (2, 3, 8, 5), (2, 3, 5, 4), (1, 3, 7, 5)), scale=0.5,
                    k_transposed="true")],
}

#: every activation, on an affine layer that spreads values to about +-4 (so every branch is used)
ACTIVATION_COEFS: dict[str, dict[str, Any]] = {"leaky_relu": {"alpha": 0.2}, "elu": {"alpha": 0.7},
                                               "clamp": {"min": -1.5, "max": 2.0}, "leaky_sigmoid": {"alpha": 0.1},
                                               "leaky_tanh": {"alpha": 0.05}}


def activation_case(name: str) -> Case:
    return C("affine", (1, 3, 5, 6), name, ACTIVATION_COEFS.get(name), scale=2.5, shift=0.5)


def layer_cases(registry: Registry, support: str) -> list[Case]:
    """Cases of every registered layer type whose ``support`` attribute ('onnx_support' or
    'torch_support') is not 'no' (a default case for types without an entry)."""
    out = []
    for name in registry.layer_names:
        cls = registry.layer_class(name)
        if cls is None or getattr(cls, support) == "no" or name in ("input", "output") or cls.not_runnable:
            continue  # a placeholder does not run: its export is tested with the importer
        out += CASES.get(name, [C(name, (1, 4, 8, 8))])
    return out


def run_labnet(model: Model, inputs: dict[str, np.ndarray], registry: Registry, fmt: TensorFormat = FP32_NCHW,
               fusing: str = "on") -> dict[str, np.ndarray]:
    """LayerLab's outputs (fp32 NCHW) with the seeded random weights of seed 0, as the exporters use."""
    net = Network(model, registry, fmt=fmt, fusing=fusing)
    return net.infer(inputs)
