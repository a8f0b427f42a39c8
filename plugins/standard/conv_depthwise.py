"""conv_depthwise: a convolution and the depthwise convolution reading it, fused into one layer (an inverted residual
block's expansion and depthwise layer: MobileNet, EfficientNet, MnasNet).

On the CPU a 1x1 expansion of stride 1 and a depthwise layer run as one kernel that never writes the expanded tensor
(``engine.backends.cpu.expand_depthwise``); elsewhere the two convolutions run one after the other through a buffer
of the layer's own, each as the convolution layer computes it."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.backends.layer_kernels import kernel_cache, physical_weight
from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.errors import ShapeError
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, nchw_view
from plugins.standard._common_conv import (
    CONV_PARAMS,
    CONV_PARAMS_DOC,
    SAME_AS_PADDING,
    conv_onnx_attributes,
    conv_torch_module,
    inner_buffer,
)
from plugins.standard.convolution import Convolution

#: the convolution parameters this fused layer does not take (asymmetric padding): a chain using them is not fused
UNFUSED_PARAMS = ("padding_end",)
#: the prefix of the depthwise convolution's parameters and weights
DW = "dw_"


#: defaults that differ from the convolution's: a 1x1 expansion, and a depthwise convolution of the default 16
#: channels (a layer placed from the palette is the pair the fusing rule makes)
DEFAULTS = {"kernel_size": Dims(1, 1, 1, 1), "padding": Dims(1, 1, 0, 0), DW + "groups": 16}


def _params(prefix: str) -> tuple[ParamDesc, ...]:
    what = "depthwise convolution" if prefix else "convolution"
    return tuple(replace(p, name=prefix + p.name, legacy_names=(), main=p.main and not prefix, doc=f"{what}: {p.doc}",
                         default=DEFAULTS.get(prefix + p.name, p.default))
                 for p in CONV_PARAMS if p.name not in UNFUSED_PARAMS)


INNER_ACTIVATION = ParamDesc(
    "conv_activation", "string", "none",
    "the convolution's activation, before the depthwise convolution: a name, or name(coefficient=value, ...)")

DESC = LayerDesc(
    name="conv_depthwise",
    display_name="Convolution + depthwise",
    summary="A convolution, its activation and the depthwise convolution reading it, fused into one layer.",
    categories=(Category.CONVOLUTION,),
    documentation=(
        "<p>Computes the chain <b>convolution</b> -&gt; <b>convolution</b> (depthwise: one group per channel) as one "
        "layer: <code>y = activation(dwconv(conv_activation(conv(x, weights) + bias), dw_weights) + dw_bias)</code> "
        "(an inverted residual block's expansion and depthwise layer). The built-in fusing rule makes it from a 1x1 "
        "convolution of stride 1 read only by a depthwise convolution, in fp32 NHWC networks: on the CPU the two run "
        "as one kernel that never writes the expanded tensor to memory; elsewhere one after the other.</p>"
        "<ul><li><b>input</b> (primary): N x C_in x H x W.</li>"
        + CONV_PARAMS_DOC +
        "<li>Here <b>kernel_size</b> defaults to 1 and <b>padding</b> to 0 (an expansion).</li>"
        "<li>Depthwise convolution parameters, named like the convolution's with a <code>dw_</code> prefix and "
        "with the same defaults but <b>dw_groups</b> (16: a depthwise convolution of the default 16 channels; the "
        "channel count for a depthwise convolution): <b>dw_num_output_channels</b>, <b>dw_kernel_size</b>, "
        "<b>dw_stride</b>, <b>dw_padding</b>, <b>dw_dilation</b>, <b>dw_groups</b>, <b>dw_bias</b>.</li>"
        "<li><b>conv_activation</b>: the first convolution's activation (the layer's own activation follows the "
        "depthwise convolution): an activation name, with its coefficients in parentheses where it has any, "
        "<code>clamp(min=0, max=6)</code>; default none.</li></ul>"
        "<p>Weights files: <code>NAME_weights.npy</code> (C_mid, C_in/groups, K_h, K_w), <code>NAME_bias.npy</code> "
        "(C_mid,), <code>NAME_dw_weights.npy</code> (C_out, C_mid/dw_groups, DK_h, DK_w) and "
        "<code>NAME_dw_bias.npy</code> (C_out,).</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(*_params(""), *_params(DW), INNER_ACTIVATION),
    weights=("weights", "bias", "dw_weights", "dw_bias"),
    inner_activation=INNER_ACTIVATION.name,
)

#: the names of a plain convolution's parameters this layer holds (the first convolution's; the depthwise one's
#: prefixed)
_CONV_NAMES = tuple(p.name for p in CONV_PARAMS if p.name not in UNFUSED_PARAMS)


class ConvDepthwise(Layer):
    desc = DESC

    def _part(self, prefix: str) -> dict[str, Any]:
        """The parameters of one of the two convolutions, as a convolution layer takes them."""
        return {n: self.p[prefix + n] for n in _CONV_NAMES} | {"padding_end": SAME_AS_PADDING}

    def _convolutions(self) -> tuple[Convolution, Convolution]:
        """The two convolutions as convolution layers of their own (the first with ``conv_activation``, the
        second with this layer's activation), made once: each keeps what its kernels derive from its weights."""
        parts = self.__dict__.get("_parts")
        if parts is None or parts[0].activation is not self.inner_activation:
            parts = self.__dict__["_parts"] = (
                Convolution(self.name, self._part(""), self.inner_activation, self.fmt, self.backend),
                Convolution(self.name, self._part(DW), self.activation, self.fmt, self.backend))
        return parts

    def validate(self) -> None:
        for prefix in ("", DW):
            for name in ("kernel_size", "stride", "dilation"):
                d = self.p[prefix + name]
                if d.h < 1 or d.w < 1:
                    raise self.param_error(prefix + name, f"{d.h}x{d.w} must be at least 1x1")
            o, g = self.p[prefix + "num_output_channels"], self.p[prefix + "groups"]
            if o % g:
                raise self.param_error(prefix + "groups", f"{prefix}num_output_channels {o} is not a multiple of "
                                                          f"{prefix}groups {g}")

    def _middle(self, inputs: list[Dims | None]) -> Dims:
        return self._part_dims(0, inputs)

    def _part_dims(self, which: int, inputs: list[Dims | None]) -> Dims:
        """The output dimensions of one of the two convolutions; its shape error named as this layer's."""
        try:
            return self._convolutions()[which].output_dims(inputs)
        except ShapeError as exc:
            what = ("convolution", "depthwise convolution")[which]
            raise self.shape_error(f"{what}: {str(exc).split(': ', 1)[-1]}") from None

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self._part_dims(1, [self._middle(inputs)])

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        first, second = self._convolutions()
        shapes = first.weight_shapes(inputs)
        shapes |= {DW + n: s for n, s in second.weight_shapes([self._middle(inputs)]).items()}
        return shapes

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        first, second = self._convolutions()
        mid = self._middle(inputs)
        return first.flops(inputs, mid) + second.flops([mid], output)

    def forward(self, inputs: list[Any], out: Any) -> None:
        """The CPU's one kernel where it takes the pair, else the two convolutions through the layer's buffer;
        where both are prepared calls (the CPU's), the pair is offered for replay."""
        first, second = self._convolutions()
        w1, w2 = self.weights["weights"], self.weights[DW + "weights"]
        b1 = self.weights["bias"] if self.p["bias"] else None
        b2 = self.weights[DW + "bias"] if self.p[DW + "bias"] else None
        self.offer_replay(None)
        kernel = self.backend.kernel("expand_depthwise")
        acts = (self.inner_activation, self.activation)
        if kernel is not None and self._one_kernel() and all(a is None or a.epilogue is not None for a in acts):
            (e1, c1), (e2, c2) = ((a.epilogue, a.coefs) if a is not None else (None, {}) for a in acts)
            s, p = self.p[DW + "stride"], self.p[DW + "padding"]
            done = kernel(nchw_view(inputs[0], self.fmt), physical_weight(self, w1, True), b1, e1, c1,
                          physical_weight(self, w2, True), b2, e2, c2, nchw_view(out, self.fmt), (s.h, s.w),
                          (p.h, p.w), kernel_cache(self))
            if done is not None:
                self.offer_replay(done.replay)
                return
        first.tf32 = second.tf32 = self.tf32
        d = first.output_dims(self.input_dims)
        mid = inner_buffer(self, (d.n, d.h, d.w, d.c) if self.hw_axes == (1, 2) else (d.n, d.c, d.h, d.w))
        first.convolve(inputs[0], w1, b1, mid)
        calls = [first.replay_call()]
        second.convolve(mid, w2, b2, out)
        calls.append(second.replay_call())
        if all(c is not None for c in calls):
            self.offer_replay(lambda: (calls[0](), calls[1]()))

    def _one_kernel(self) -> bool:
        """What the kernel cannot see in the arrays: the first convolution of stride 1 and no padding, the second
        undilated (the kernel refuses the rest itself: weights of another shape, other data)."""
        one = Dims(1, 1, 1, 1)
        return self.p["stride"] == one and self.p["padding"] == Dims(1, 1, 0, 0) and self.p[DW + "dilation"] == one

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        ins = [inputs[0], g.weight("weights")] + ([g.weight("bias")] if self.p["bias"] else [])
        y = g.node("Conv", ins, "conv", **conv_onnx_attributes(self._part("")))
        act = self.inner_activation
        if act is not None:
            y = act.impl.to_onnx(g, y, act.coefs)
        ins = [y, g.weight(DW + "weights")] + ([g.weight(DW + "bias")] if self.p[DW + "bias"] else [])
        return g.node("Conv", ins, "dw", **conv_onnx_attributes(self._part(DW)))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        state = {"0.weight": t.weight("weights"), "1.weight": t.weight(DW + "weights")}
        if self.p["bias"]:
            state["0.bias"] = t.weight("bias")
        if self.p[DW + "bias"]:
            state["1.bias"] = t.weight(DW + "bias")
        mid = self.p["num_output_channels"]
        module = t.module(f"nn.ModuleList([{conv_torch_module(self._part(''), self.input_dims[0].c)}, "
                          f"{conv_torch_module(self._part(DW), mid)}])", state)
        t.line(f"{t.attr} = {module}[0]({inputs[0]})")
        y = t.attr
        act = self.inner_activation
        if act is not None:
            y = act.impl.torch_expr(y, act.coefs)
        return f"{module}[1]({y})"


REPLAYABLE_FORWARDS.add(ConvDepthwise.forward)
LAYER = ConvDepthwise
