"""conv_pool: convolution followed by max or average pooling, fused into one layer.

The convolution result goes straight into the pooling, without a network buffer in between."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.categories import Category
from engine.descriptors import LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS
from engine.tensor import Dims
from plugins.standard._common_conv import (
    CONV_INPUTS,
    CONV_PARAMS,
    CONV_PARAMS_DOC,
    CONV_WEIGHTS,
    CONV_WEIGHTS_FILES_DOC,
    FUSED_CONV_WEIGHTS_DOC,
    ConvolutionBase,
    inner_buffer,
)
from plugins.standard._common_pool import (
    POOLING_PARAMS,
    global_pool2d,
    pool2d,
    pool_flops,
    pool_onnx,
    pool_output_size,
    pool_param_problem,
    pool_shape_problem,
    pool_torch,
)
from plugins.standard.pooling import GLOBAL_KERNEL_MAX_CELLS


def _pool_name(name: str) -> str:
    """Name in this layer of a pooling layer parameter ('kernel_size' -> 'pool_kernel_size')."""
    return name if name.startswith("pool_") else f"pool_{name}"


#: parameters of convolution and pooling this fused layer does not take (asymmetric padding, ceil mode): a chain
#: using them is not fused
UNFUSED_PARAMS = ("padding_end", "ceil_mode")

POOL_PARAMS: tuple[ParamDesc, ...] = tuple(
    replace(p, name=_pool_name(p.name), legacy_names=(), main=p.name == "pool_type", doc=f"pooling: {p.doc}")
    for p in POOLING_PARAMS if p.name not in UNFUSED_PARAMS
)

DESC = LayerDesc(
    name="conv_pool",
    display_name="Convolution + pooling",
    summary="Convolution followed by max or average pooling, fused into one layer.",
    categories=(Category.CONVOLUTION, Category.POOLING),
    documentation=(
        "<p>Computes the chain <b>convolution</b> (with this layer's activation) -&gt; <b>pooling</b> as "
        "one layer, without an intermediate buffer in the network: "
        "<code>y = pool(activation(conv(x, weights) + bias))</code>. Note that the activation is applied "
        "to the convolution result, before pooling (the usual convolution+ReLU -&gt; pooling pattern; "
        "for max pooling and a non-decreasing activation such as ReLU the order does not matter).</p>"
        "<ul><li><b>input</b> (primary): N x C_in x H x W.</li>"
        + FUSED_CONV_WEIGHTS_DOC
        + CONV_PARAMS_DOC +
        "<li>Pooling parameters, named like the pooling layer's with a <code>pool_</code> prefix and with "
        "the same defaults: <b>pool_type</b> (max or average, default max), <b>pool_kernel_size</b> "
        "(default 2), <b>pool_stride</b> (default 2), <b>pool_padding</b> (default 0, smaller than the "
        "pooling kernel), <b>pool_global</b> (pool over the whole image, default false), "
        "<b>pool_count_include_pad</b> (average pooling divides by the whole window, default false).</li></ul>"
        + CONV_WEIGHTS_FILES_DOC
    ),
    inputs=CONV_INPUTS,
    params=(*(p for p in CONV_PARAMS if p.name not in UNFUSED_PARAMS), *POOL_PARAMS),
    weights=CONV_WEIGHTS,
    legacy_names=("convolution_pool",),
)


class ConvPool(ConvolutionBase):
    desc = DESC

    def _pool(self, name: str) -> Any:
        return self.p[_pool_name(name)]

    def validate(self) -> None:
        super().validate()
        if self._pool("global"):
            return
        problem = pool_param_problem(self._pool("kernel_size"), self._pool("stride"), self._pool("padding"))
        if problem:
            raise self.param_error(_pool_name(problem[0]), problem[1])

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        c = super().output_dims(inputs)
        if self._pool("global"):
            return Dims(c.n, c.c, 1, 1)
        k, s, p = self._pool("kernel_size"), self._pool("stride"), self._pool("padding")
        problem = pool_shape_problem(c.h, c.w, k, p, what="convolution output")
        if problem:
            raise self.shape_error("pooling " + problem)
        return Dims(c.n, c.c, pool_output_size(c.h, k.h, s.h, p.h), pool_output_size(c.w, k.w, s.w, p.w))

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        conv_dims = super().output_dims(inputs)
        pool = pool_flops(conv_dims, output, self._pool("kernel_size"), self._pool("global"), self._pool("pool_type"))
        return super().flops(inputs, conv_dims) + pool

    def forward(self, inputs: list[Any], out: Any) -> None:
        """The convolution (with the activation) through the backend's convolution, into a buffer of its own in
        the tensors' memory layout, then the pooling kernel into the output, as the unfused chain would run: the
        generic NumPy convolution here made an imported ResNet's stem 8.9 ms on 2 cores instead of 4.4. Where both
        are prepared calls (the CPU's), the pair is offered for replay: later runs skip this Python work."""
        w = self.weight("weights", inputs)
        b = self.weight("bias", inputs) if self.p["bias"] else None
        c = super().output_dims(self.input_dims)
        nhwc = self.hw_axes == (1, 2)
        y = inner_buffer(self, (c.n, c.h, c.w, c.c) if nhwc else (c.n, c.c, c.h, c.w))
        self.convolve(inputs[0], w, b, y, cacheable=not self.weights_from_inputs(inputs))
        conv_call = self.replay_call()  # the convolution's prepared call (taken: the layer offers both, below)
        is_max = self._pool("pool_type") == "max"
        kernel = self.backend.kernel("pool2d")
        if self._pool("global"):
            window, stride, padding, include_pad = (c.h, c.w), (1, 1), (0, 0), True
            kernel = kernel if c.h * c.w <= GLOBAL_KERNEL_MAX_CELLS else None  # as the pooling layer does
        else:
            k, ps, pp = self._pool("kernel_size"), self._pool("stride"), self._pool("padding")
            window, stride, padding, include_pad = (k.h, k.w), (ps.h, ps.w), (pp.h, pp.w), self._pool("count_include_pad")
        if kernel is not None and (done := kernel(y, out, is_max, window, stride, padding, include_pad, nhwc)):
            pool_call = done.replay
            if conv_call is not None and pool_call is not None:  # both prepared: the network may replay the pair
                self.offer_replay(lambda: (conv_call(), pool_call()))
            return
        if self._pool("global"):
            self.store(out, global_pool2d(self.xp, self.nchw(y), self._pool("pool_type")))
            return
        self.store_physical(out, pool2d(self.xp, self.physical(y), self._pool("pool_type"), window, stride, padding,
                                        include_pad, self.hw_axes))

    onnx_support = "yes"
    torch_support = "partial: weights and bias from secondary inputs are not exported"
    exports_activation = True  # the activation sits between the convolution and the pooling

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        y = g.activation(self.onnx_conv(g, inputs, "conv"))
        return pool_onnx(g, y, self._pool("pool_type"), self._pool("kernel_size"), self._pool("stride"),
                                 self._pool("padding"), self._pool("global"), self._pool("count_include_pad"))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        y = t.activation(self.torch_conv(t, inputs))
        return pool_torch(t, y, self._pool("pool_type"), self._pool("kernel_size"), self._pool("stride"),
                                  self._pool("padding"), self._pool("global"), self._pool("count_include_pad"))


REPLAYABLE_FORWARDS.add(ConvPool.forward)
LAYER = ConvPool
