"""deconvolution: 2-D transposed convolution (like ONNX ConvTranspose and torch.nn.ConvTranspose2d)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims
from plugins.standard._common_conv import end_padding, is_asymmetric, padding_end_doc, padding_end_param


def deconv_output_size(size: int, kernel: int, stride: int, padding: int, output_padding: int, dilation: int,
                       padding_end: int | None = None) -> int:
    """Output length along one axis (``padding_end``: what is removed at the end when it differs from
    ``padding``); <= 0 means the padding removes the whole output."""
    end = padding if padding_end is None else padding_end
    return (size - 1) * stride - padding - end + dilation * (kernel - 1) + output_padding + 1


def deconv2d(xp: Any, x: Any, w: Any, b: Any | None, stride: tuple[int, int], padding: tuple[int, ...],
             output_padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Any:
    """Logical NCHW transposed convolution: ``x`` (N, C_in, H, W), ``w`` (C_in, C_out/groups, KH, KW),
    ``b`` (C_out,) or None. ``padding``: (top, left) removed at each side, or (top, left, bottom, right).

    One batched matrix product per group gives every kernel tap's contribution at every input pixel;
    col2im then adds each tap's plane into the output with the stride (a loop over the KH*KW taps)."""
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // groups
    sh, sw = stride
    ph, pw = padding[:2]
    pb, pr = padding[2:] if len(padding) == 4 else (ph, pw)
    dh, dw = dilation
    ho = deconv_output_size(h, kh, sh, ph, output_padding[0], dh, pb)
    wo = deconv_output_size(wd, kw, sw, pw, output_padding[1], dw, pr)
    # (g, cog*kh*kw, cig) @ (n, g, cig, h*w) -> (n, g, cog*kh*kw, h*w)
    wm = w.reshape(groups, cig, cog * kh * kw).transpose(0, 2, 1)
    cols = xp.matmul(wm[None], x.reshape(n, groups, cig, h * wd))
    cols = cols.reshape(n, groups * cog, kh, kw, h, wd)
    full = xp.zeros((n, groups * cog, ho + ph + pb, wo + pw + pr), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            full[:, :, i * dh:i * dh + sh * (h - 1) + 1:sh, j * dw:j * dw + sw * (wd - 1) + 1:sw] += cols[:, :, i, j]
    y = full[:, :, ph:ph + ho, pw:pw + wo]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


DESC = LayerDesc(
    name="deconvolution",
    display_name="Deconvolution",
    summary="2-D transposed convolution with stride, padding, output padding, dilation, groups and bias.",
    categories=(Category.CONVOLUTION,),
    documentation=(
        "<p>Transposed convolution (the gradient of a convolution with respect to its input), as ONNX "
        "ConvTranspose and PyTorch ConvTranspose2d: every input value x[n,c,h,w] adds "
        "<code>x * w[c,o,kh,kw]</code> to output pixel <code>(h*stride + kh*dilation - pad, "
        "w*stride + kw*dilation - pad)</code> of output channel <code>g*C_out/G + o</code>; then the bias is added.</p>"
        "<p>Output size: <code>H_out = (H - 1)*stride - 2*pad + dilation*(K - 1) + output_padding + 1</code>. "
        "The defaults (kernel 4, stride 2, padding 1) double H and W.</p>"
        "<ul><li><b>input</b> (primary): N x C_in x H x W.</li>"
        "<li><b>weights</b> (secondary): replaces the loaded weights; C_in x C_out/groups x K_h x K_w values.</li>"
        "<li><b>bias</b> (secondary): replaces the loaded bias; C_out values.</li>"
        "<li><b>num_output_channels</b>: C_out, default 16, 1..65536, a multiple of groups.</li>"
        "<li><b>kernel_size</b>: K or KhxKw, default 4, at least 1.</li>"
        "<li><b>stride</b>: default 2. <b>dilation</b>: default 1 (both at least 1).</li>"
        "<li><b>padding</b>: removed from each side of the full output (top and left when padding_end is "
        "set), P or PhxPw, default 1.</li>"
        + padding_end_doc("removed from the full output") +
        "<li><b>output_padding</b>: extra rows/columns added at the bottom/right, default 0; on each "
        "axis smaller than the stride or the dilation.</li>"
        "<li><b>groups</b>: default 1; C_in and C_out must both be multiples of it.</li>"
        "<li><b>bias</b>: add a bias, default true.</li></ul>"
        "<p>Weights files: <code>NAME_weights.npy</code> (C_in, C_out/groups, K_h, K_w) and "
        "<code>NAME_bias.npy</code> (C_out,).</p>"
    ),
    inputs=(
        InputDesc("input", doc="N x C_in x H x W tensor"),
        InputDesc("weights", InputKind.SECONDARY, doc="replaces the weights", weight="weights"),
        InputDesc("bias", InputKind.SECONDARY, doc="replaces the bias", weight="bias"),
    ),
    params=(
        ParamDesc("num_output_channels", "uint", 16, "output channels", min=1, max=65536, main=True,
                  legacy_names=("output_channels",)),
        ParamDesc("kernel_size", "dimension", Dims(1, 1, 4, 4), "kernel size", main=True),
        ParamDesc("stride", "dimension", Dims(1, 1, 2, 2), "stride (upsampling factor)"),
        ParamDesc("padding", "dimension", Dims(1, 1, 1, 1), "removed from each side of the output"),
        ParamDesc("output_padding", "dimension", Dims(1, 1, 0, 0), "added at the bottom/right"),
        ParamDesc("dilation", "dimension", Dims(1, 1, 1, 1), "dilation"),
        ParamDesc("groups", "uint", 1, "number of groups", min=1, max=65536),
        ParamDesc("bias", "bool", True, "add a bias", legacy_names=("apply_bias",)),
        padding_end_param("removed at the bottom/right of the output"),
    ),
    weights=("weights", "bias"),
    legacy_names=("transposed_convolution",),
)


class Deconvolution(Layer):
    desc = DESC

    def validate(self) -> None:
        for name in ("kernel_size", "stride", "dilation"):
            d = self.p[name]
            if d.h < 1 or d.w < 1:
                raise self.param_error(name, f"{d.h}x{d.w} must be at least 1x1")
        op, s, d = self.p["output_padding"], self.p["stride"], self.p["dilation"]
        for axis, o, st, di in (("height", op.h, s.h, d.h), ("width", op.w, s.w, d.w)):
            if o >= max(st, di):
                raise self.param_error("output_padding", f"{op.h}x{op.w}: the {axis} {o} must be smaller than "
                                       f"the stride {st} or the dilation {di}")
        if self.p["num_output_channels"] % self.p["groups"]:
            raise self.param_error("groups", f"num_output_channels {self.p['num_output_channels']} is not a "
                                   f"multiple of groups {self.p['groups']}")

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        k, s, p, op, d = (self.p[n] for n in ("kernel_size", "stride", "padding", "output_padding", "dilation"))
        g = self.p["groups"]
        if x.c % g:
            raise self.shape_error(f"input has {x.c} channels, not a multiple of groups {g}")
        e = end_padding(p, self.p["padding_end"])
        ho = deconv_output_size(x.h, k.h, s.h, p.h, op.h, d.h, e.h)
        wo = deconv_output_size(x.w, k.w, s.w, p.w, op.w, d.w, e.w)
        if ho < 1 or wo < 1:
            what = f"{p.h}x{p.w}" if e == p else f"{p.h}x{p.w} (bottom/right {e.h}x{e.w})"
            raise self.shape_error(f"padding {what} removes the whole output: the unpadded output of "
                                   f"input {x.h}x{x.w} is {ho + p.h + e.h}x{wo + p.w + e.w}")
        return Dims(x.n, self.p["num_output_channels"], ho, wo)

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        x = self.primary(inputs)
        k = self.p["kernel_size"]
        o = self.p["num_output_channels"]
        shapes: dict[str, tuple[int, ...]] = {"weights": (x.c, o // self.p["groups"], k.h, k.w)}
        if self.p["bias"]:
            shapes["bias"] = (o,)
        return shapes

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        x = self.primary(inputs)
        k = self.p["kernel_size"]
        macs = x.elements * (output.c // self.p["groups"]) * k.h * k.w
        return 2 * macs + output.elements * (int(self.p["bias"]) + int(self.activation is not None))

    def forward(self, inputs: list[Any], out: Any) -> None:
        w = self.weight("weights", inputs)
        b = self.weight("bias", inputs) if self.p["bias"] else None
        s, p, op, d = (self.p[n] for n in ("stride", "padding", "output_padding", "dilation"))
        e = end_padding(p, self.p["padding_end"])
        y = deconv2d(self.xp, self.nchw(inputs[0]), w, b, (s.h, s.w), (p.h, p.w, e.h, e.w), (op.h, op.w), (d.h, d.w),
                     self.p["groups"])
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "partial: weights and bias from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        k, s, p, op, d = (self.p[n] for n in ("kernel_size", "stride", "padding", "output_padding", "dilation"))
        ins = [inputs[0], g.weight("weights", inputs)] + ([g.weight("bias", inputs)] if self.p["bias"] else [])
        e = end_padding(p, self.p["padding_end"])
        return g.node("ConvTranspose", ins, kernel_shape=[k.h, k.w], strides=[s.h, s.w], pads=[p.h, p.w, e.h, e.w],
                      output_padding=[op.h, op.w], dilations=[d.h, d.w], group=self.p["groups"])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        k, s, p, op, d = (self.p[n] for n in ("kernel_size", "stride", "padding", "output_padding", "dilation"))
        state = {"weight": t.weight("weights")} | ({"bias": t.weight("bias")} if self.p["bias"] else {})
        e, crop = end_padding(p, self.p["padding_end"]), is_asymmetric(self.p)
        mp = Dims(1, 1, 0, 0) if crop else p  # asymmetric: the module removes nothing, the expression crops
        code = (f"nn.ConvTranspose2d({self.input_dims[0].c}, {self.p['num_output_channels']}, kernel_size=({k.h}, {k.w}), "
                f"stride=({s.h}, {s.w}), padding=({mp.h}, {mp.w}), output_padding=({op.h}, {op.w}), "
                f"groups={self.p['groups']}, bias={bool(self.p['bias'])}, dilation=({d.h}, {d.w}))")
        y = f"{t.module(code, state)}({inputs[0]})"
        return f"{y}[:, :, {p.h}:{-e.h or None}, {p.w}:{-e.w or None}]" if crop else y


LAYER = Deconvolution
