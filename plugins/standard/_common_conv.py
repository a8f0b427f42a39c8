"""Shared by the convolution-like layers (convolution, conv_bn, conv_pool, fully_connected on the GPU): the
convolution maths, its parameter descriptors and the layer base that computes it."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.layer_kernels import backend_convolve, physical_weight
from engine.backends.selection import Launched
from engine.descriptors import InputDesc, InputKind, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, nchw_view


def conv_output_size(size: int, kernel: int, stride: int, pad_before: int, pad_after: int, dilation: int) -> int:
    """Output length along one axis; <= 0 means the kernel does not fit."""
    return (size + pad_before + pad_after - dilation * (kernel - 1) - 1) // stride + 1


#: default of the ``padding_end`` parameters: -1 on an axis means "the same as ``padding``" (what files
#: written before the parameter existed mean), so ``padding`` alone stays symmetric padding
SAME_AS_PADDING = Dims(1, 1, -1, -1)


def padding_end_param(doc: str = "padding at the bottom/right") -> ParamDesc:
    """The ``padding_end`` parameter of convolution-like layers: bottom x right padding, -1 = same as padding."""
    return ParamDesc("padding_end", "dimension", SAME_AS_PADDING, f"{doc}; -1: same as padding", min=-1)


def end_padding(padding: Dims, padding_end: Dims | None) -> Dims:
    """Bottom and right padding (as a spatial Dims): ``padding_end``, except that an axis where it is
    negative (the default -1, and files written before it existed) takes ``padding``'s value."""
    if padding_end is None:
        return padding
    return Dims(1, 1, padding.h if padding_end.h < 0 else padding_end.h,
                padding.w if padding_end.w < 0 else padding_end.w)


def pad_to_symmetric(xp: Any, x: Any, pads: tuple[int, int, int, int], axes: tuple[int, int]) -> tuple[Any, tuple[int, int]]:
    """``x`` (any layout; H and W on ``axes``) zero-padded on the side of each axis that pads more, by the
    difference, and the padding (h, w) then left to apply on both sides: a convolution with top, left,
    bottom, right ``pads`` of ``x`` equals one with that symmetric padding of the result (so the backends'
    symmetric kernels serve asymmetric padding, for the cost of one copy)."""
    top, left, bottom, right = pads
    common = (min(top, bottom), min(left, right))
    shape = list(x.shape)
    shape[axes[0]] += abs(top - bottom)
    shape[axes[1]] += abs(left - right)
    out = xp.zeros(tuple(shape), dtype=x.dtype)
    index = [slice(None)] * x.ndim
    index[axes[0]] = slice(top - common[0], top - common[0] + x.shape[axes[0]])
    index[axes[1]] = slice(left - common[1], left - common[1] + x.shape[axes[1]])
    out[tuple(index)] = x
    return out, common


def padding_end_doc(what: str = "zero padding") -> str:
    """Documentation line of a ``padding_end`` parameter."""
    return (f"<li><b>padding_end</b>: {what} at the bottom and right, P or PhxPw, for asymmetric padding (ONNX "
            "<code>pads</code> end values, TensorFlow SAME); then <b>padding</b> is the top and left padding. "
            "Default -1 (on either axis): the same as padding.</li>")


CPU_BLOCK_BYTES = 4 << 20


def _conv_rows(xp: Any, xpad: Any, w: Any, r0: int, r1: int, wo: int, kernel: tuple[int, int],
               stride: tuple[int, int], dilation: tuple[int, int], groups: int) -> Any:
    """Output rows r0..r1 of a convolution of the padded input: im2col of those rows, one matrix product."""
    n, c = xpad.shape[:2]
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    rows = r1 - r0
    cols = xp.empty((n, c, kh, kw, rows, wo), dtype=xpad.dtype)
    for i in range(kh):
        top = i * dh + sh * r0
        for j in range(kw):
            cols[:, :, i, j] = xpad[:, :, top:top + sh * (rows - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
    wm = w.reshape(groups, o // groups, cg * kh * kw)
    return xp.matmul(wm[None], cols.reshape(n, groups, cg * kh * kw, rows * wo)).reshape(n, o, rows, wo)


def conv2d(xp: Any, x: Any, w: Any, b: Any | None, stride: tuple[int, int], padding: tuple[int, ...],
           dilation: tuple[int, int], groups: int) -> Any:
    """Logical NCHW convolution: ``x`` (N, C, H, W), ``w`` (O, C/groups, KH, KW), ``b`` (O,) or None.
    ``padding``: (top, left), the same at the bottom and right, or (top, left, bottom, right).

    im2col over the kernel taps (a loop over KH*KW taps, never over pixels or channels), then one
    batched matrix product per group (BLAS on the CPU, cuBLAS on the GPU)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = stride
    ph, pw = padding[:2]
    pb, pr = padding[2:] if len(padding) == 4 else (ph, pw)
    dh, dw = dilation
    ho = conv_output_size(h, kh, sh, ph, pb, dh)
    wo = conv_output_size(wd, kw, sw, pw, pr, dw)
    if kh == kw == 1 and sh == sw == 1 and ph == pw == pb == pr == 0 and groups == 1:
        cols = x.reshape(n, 1, c, h * wd)
    else:
        if ph or pw or pb or pr:
            xpad = xp.zeros((n, c, h + ph + pb, wd + pw + pr), dtype=x.dtype)
            xpad[:, :, ph:ph + h, pw:pw + wd] = x
        else:
            xpad = x
        # on the CPU, im2col goes by blocks of output rows that stay in cache (a few MB), not all at once
        rows = ho if xp is not np else max(1, min(ho, CPU_BLOCK_BYTES // max(1, c * kh * kw * wo * x.itemsize)))
        if rows < ho:
            y = xp.empty((n, o, ho, wo), dtype=np.result_type(x.dtype, w.dtype))
            for r0 in range(0, ho, rows):
                r1 = min(ho, r0 + rows)
                y[:, :, r0:r1] = _conv_rows(xp, xpad, w, r0, r1, wo, (kh, kw), stride, dilation, groups)
        else:
            y = _conv_rows(xp, xpad, w, 0, ho, wo, (kh, kw), stride, dilation, groups)
        if b is not None:
            y += b.reshape(1, o, 1, 1)
        return y
    wm = w.reshape(groups, o // groups, cg * kh * kw)
    y = xp.matmul(wm[None], cols).reshape(n, o, ho, wo)
    if b is not None:
        y += b.reshape(1, o, 1, 1)
    return y


def conv_onnx_attributes(p: dict[str, Any]) -> dict[str, Any]:
    """Attributes of the ONNX Conv equal to the convolution parameters ``p``."""
    k, s, pad, d = (p[n] for n in ("kernel_size", "stride", "padding", "dilation"))
    e = end_padding(pad, p.get("padding_end"))
    return dict(kernel_shape=[k.h, k.w], strides=[s.h, s.w], pads=[pad.h, pad.w, e.h, e.w], dilations=[d.h, d.w],
                group=p["groups"])


def is_asymmetric(p: dict[str, Any]) -> bool:
    """True when the parameters ``p`` pad the bottom/right differently from the top/left."""
    return end_padding(p["padding"], p.get("padding_end")) != p["padding"]


def torch_padded_input(p: dict[str, Any], x: str) -> str:
    """The PyTorch expression of the input ``x`` of a convolution module made by ``conv_torch_module``:
    explicitly zero-padded when the padding is asymmetric (the module then pads nothing)."""
    if not is_asymmetric(p):
        return x
    pad, e = p["padding"], end_padding(p["padding"], p.get("padding_end"))
    return f"F.pad({x}, ({pad.w}, {e.w}, {pad.h}, {e.h}))"


def conv_torch_module(p: dict[str, Any], in_channels: int) -> str:
    """Source of the ``nn.Conv2d`` equal to the convolution parameters ``p`` (without padding when it is
    asymmetric: see ``torch_padded_input``)."""
    k, s, pad, d = (p[n] for n in ("kernel_size", "stride", "padding", "dilation"))
    pad = Dims(1, 1, 0, 0) if is_asymmetric(p) else pad
    return (f"nn.Conv2d({in_channels}, {p['num_output_channels']}, kernel_size=({k.h}, {k.w}), stride=({s.h}, {s.w}), "
            f"padding=({pad.h}, {pad.w}), dilation=({d.h}, {d.w}), groups={p['groups']}, bias={bool(p['bias'])})")


def inner_buffer(layer: Layer, shape: tuple[int, ...]) -> Any:
    """An intermediate result inside a fused layer (a convolution's before its pooling or its depthwise convolution):
    on the CPU one buffer kept by the layer (a new 3 MB array a run, resnet18's stem, was fresh pages to fault in
    every time; the CPU kernels also replay their prepared calls on the same arrays), elsewhere from the device's
    memory pool. The CPU's comes from the backend as its tensors do (starting a cache line: the stem's convolution
    stores whole vectors of channels into it)."""
    if layer.backend.device_kind != "cpu":
        return layer.xp.empty(shape, dtype=layer.fmt.dtype)
    buf = layer.__dict__.get("_inner_buffer")
    if buf is None or buf.shape != shape or buf.dtype != layer.fmt.dtype:
        buf = layer.__dict__["_inner_buffer"] = layer.backend.empty(shape, layer.fmt.dtype)
    return buf


#: inputs, parameters and weights of a convolution (layers that compute one share them)
CONV_INPUTS: tuple[InputDesc, ...] = (
    InputDesc("input"),
    InputDesc("weights", InputKind.SECONDARY, weight="weights"),
    InputDesc("bias", InputKind.SECONDARY, weight="bias"),
)
CONV_PARAMS: tuple[ParamDesc, ...] = (
    ParamDesc("num_output_channels", "uint", 16, "output channels", min=1, max=65536, main=True,
              legacy_names=("output_channels",)),
    ParamDesc("kernel_size", "dimension", Dims(1, 1, 3, 3), "kernel size", main=True),
    ParamDesc("stride", "dimension", Dims(1, 1, 1, 1), "stride"),
    ParamDesc("padding", "dimension", Dims(1, 1, 1, 1), "zero padding on each side"),
    ParamDesc("dilation", "dimension", Dims(1, 1, 1, 1), "dilation"),
    ParamDesc("groups", "uint", 1, "number of groups", min=1, max=65536),
    ParamDesc("bias", "bool", True, "add a bias", legacy_names=("apply_bias",)),
    padding_end_param("zero padding at the bottom/right"),
)
CONV_WEIGHTS: tuple[str, ...] = ("weights", "bias")
#: the layer documentation's item on the convolution parameters, for the layers that fuse a convolution
CONV_PARAMS_DOC = (
    "<li>Convolution parameters, with the same names and defaults as the convolution layer: "
    "<b>num_output_channels</b> (default 16, at least 1), <b>kernel_size</b> (default 3), "
    "<b>stride</b> (default 1), <b>padding</b> (default 1), <b>dilation</b> (default 1), "
    "<b>groups</b> (default 1, divides C_in and C_out), <b>bias</b> (default true).</li>"
)

#: the layer documentation's item on the replaceable convolution weights, for the layers that fuse a convolution
FUSED_CONV_WEIGHTS_DOC = (
    "<li><b>weights</b>, <b>bias</b> (secondary): replace the convolution weights "
    "(C_out x C_in/groups x K_h x K_w values) and bias (C_out values).</li>"
)
#: the layer documentation's paragraph on the weights files of a convolution
CONV_WEIGHTS_FILES_DOC = (
    "<p>Weights files: <code>NAME_weights.npy</code> (C_out, C_in/groups, K_h, K_w) and "
    "<code>NAME_bias.npy</code> (C_out,).</p>"
)


class ConvolutionBase(Layer):
    """A layer computing a convolution with the ``CONV_PARAMS`` parameters (subclasses set ``desc``)."""

    def validate(self) -> None:
        for name in ("kernel_size", "stride", "dilation"):
            d = self.p[name]
            if d.h < 1 or d.w < 1:
                raise self.param_error(name, f"{d.h}x{d.w} must be at least 1x1")
        o, g = self.p["num_output_channels"], self.p["groups"]
        if o % g:
            raise self.param_error("groups", f"num_output_channels {o} is not a multiple of groups {g}")

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        k, s, p, d = (self.p[n] for n in ("kernel_size", "stride", "padding", "dilation"))
        g = self.p["groups"]
        if x.c % g:
            raise self.shape_error(f"input has {x.c} channels, not a multiple of groups {g}")
        e = end_padding(p, self.p.get("padding_end"))
        ho = conv_output_size(x.h, k.h, s.h, p.h, e.h, d.h)
        wo = conv_output_size(x.w, k.w, s.w, p.w, e.w, d.w)
        if ho < 1 or wo < 1:
            eh, ew = d.h * (k.h - 1) + 1, d.w * (k.w - 1) + 1
            raise self.shape_error(f"kernel {eh}x{ew} (dilated) is larger than the padded input "
                                   f"{x.h + p.h + e.h}x{x.w + p.w + e.w}")
        return Dims(x.n, self.p["num_output_channels"], ho, wo)

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        x = self.primary(inputs)
        k = self.p["kernel_size"]
        o = self.p["num_output_channels"]
        shapes: dict[str, tuple[int, ...]] = {"weights": (o, x.c // self.p["groups"], k.h, k.w)}
        if self.p["bias"]:
            shapes["bias"] = (o,)
        return shapes

    def weight_input_problem(self, weight: str, source: str, got: Dims, needed: tuple[int, ...]) -> str | None:
        if weight == "weights" and got.elements != int(np.prod(needed)) and (got.n, got.h, got.w) == (
                needed[0], needed[2], needed[3]) and got.c != needed[1]:
            g = self.p["groups"]
            return f"input has {needed[1] * g} channels, weights expect {got.c * g}"
        return super().weight_input_problem(weight, source, got, needed)

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        x = self.primary(inputs)
        k = self.p["kernel_size"]
        macs = output.elements * (x.c // self.p["groups"]) * k.h * k.w
        return 2 * macs + output.elements * (int(self.p["bias"]) + int(self.activation is not None))

    def forward(self, inputs: list[Any], out: Any) -> None:
        w = self.weight("weights", inputs)
        b = self.weight("bias", inputs) if self.p["bias"] else None
        self.convolve(inputs[0], w, b, out, cacheable=not self.weights_from_inputs(inputs))

    def convolve(self, x: Any, w: Any, b: Any | None, out: Any, cacheable: bool = True,
                 activation: bool = True) -> None:
        """``act(conv(x, w) + b)`` into ``out``: the backend's fused kernel (cuDNN) when it has one for
        this case, otherwise im2col + a matrix product (BLAS / cuBLAS) and the activation (left out when
        ``activation`` is False)."""
        self.offer_replay(None)
        s, p, d = (self.p[n] for n in ("stride", "padding", "dilation"))
        geometry = ((s.h, s.w), (p.h, p.w), (d.h, d.w))
        has_kernel = self.backend.kernel("conv2d") is not None
        if is_asymmetric(self.p):  # the backends' kernels pad symmetrically
            e = end_padding(p, self.p["padding_end"])
            if has_kernel:
                xs, common = pad_to_symmetric(self.xp, x, (p.h, p.w, e.h, e.w), self.hw_axes)
                if self._backend_conv(xs, w, b, out, ((s.h, s.w), common, (d.h, d.w)), cacheable,
                                      activation=activation):
                    return
            geometry = ((s.h, s.w), (p.h, p.w, e.h, e.w), (d.h, d.w))
        elif has_kernel and (done := self._backend_conv(x, w, b, out, geometry, cacheable, activation=activation)):
            self.offer_replay(done.replay)
            return
        y = conv2d(self.xp, self.nchw(x), w, b, *geometry, self.p["groups"])
        self.store(out, self.activate(y) if activation else y)

    def convolve_sum(self, x: Any, w: Any, b: Any | None, residual: Any, out: Any, cacheable: bool = True) -> None:
        """``act(conv(x, w) + b + residual)`` into ``out``: one kernel where the backend has one (the CPU adds the
        residual in its kernels' epilogues), else the convolution into ``out`` and one pass adding the residual and
        activating in place (broadcasting a residual with axes of size 1 as element_wise does)."""
        s, p, d = (self.p[n] for n in ("stride", "padding", "dilation"))
        if (not is_asymmetric(self.p) and residual.shape == out.shape and residual.dtype == out.dtype
                and (done := self._backend_conv(x, w, b, out, ((s.h, s.w), (p.h, p.w), (d.h, d.w)), cacheable,
                                                residual=residual))):
            self.offer_replay(done.replay)
            return
        self.offer_replay(None)  # (the convolution below offers its own call: the sum pass is more work)
        if self.backend.overwrites_inputs and self.xp.may_share_memory(residual, out):
            residual = residual.copy()  # the output is written over the residual (``overwritable_inputs``)
        conv_dims = ConvolutionBase.output_dims(self, self.input_dims)
        if tuple(conv_dims) != tuple(self.output_dims(self.input_dims)):  # the residual broadcasts the result
            shape = (conv_dims.n, conv_dims.h, conv_dims.w, conv_dims.c) if self.hw_axes == (1, 2) else tuple(conv_dims)
            y = self.xp.empty(shape, dtype=out.dtype)
            self.convolve(x, w, b, y, cacheable, activation=False)
            self.offer_replay(None)
            self.store(out, self.activate(self.nchw(y) + self.nchw(residual)))
            return
        self.convolve(x, w, b, out, cacheable, activation=False)
        self.offer_replay(None)
        act = self.activation
        kernel = self.backend.kernel("element_wise") if residual.shape == out.shape else None
        if kernel is not None and (act is None or act.epilogue is not None) and kernel(
                "sum", out, residual, out, act.epilogue if act is not None else None, act.coefs if act is not None else {}):
            return
        self.store(out, self.activate(self.nchw(out) + self.nchw(residual)))

    def _backend_conv(self, x: Any, w: Any, b: Any | None, out: Any, geometry: tuple[Any, ...], cacheable: bool,
                      residual: Any = None, activation: bool = True) -> Launched | None:
        # fp16 tensors with float32 weights: the CPU's fp16 storage (it computes in float32); otherwise one dtype
        if x.dtype != w.dtype and not (x.dtype == np.float16 and w.dtype == self.cdtype == np.float32):
            return None
        return backend_convolve(self, nchw_view(x, self.fmt), physical_weight(self, w, cacheable), b,
                                nchw_view(out, self.fmt), geometry, self.p["groups"], cacheable,
                                None if residual is None else nchw_view(residual, self.fmt), activation)

    # ---- export: the convolution part of the layer's ONNX graph and PyTorch module ---------------------------
    def onnx_conv(self, g: Any, inputs: list[str | None], suffix: str = "") -> str:
        """Add the ONNX Conv of this layer's convolution (weights and bias as loaded or connected) to the graph
        ``g``; returns its output name."""
        ins = [inputs[0], g.weight("weights", inputs)] + ([g.weight("bias", inputs)] if self.p["bias"] else [])
        return g.node("Conv", ins, suffix, **conv_onnx_attributes(self.p))

    def torch_conv_state(self, t: Any, prefix: str = "") -> dict[str, Any]:
        """The PyTorch state of the convolution module (``prefix``: where it sits in an enclosing module)."""
        return {f"{prefix}weight": t.weight("weights")} | ({f"{prefix}bias": t.weight("bias")} if self.p["bias"] else {})

    def torch_conv(self, t: Any, inputs: list[str | None]) -> str:
        """The PyTorch expression of this layer's convolution of ``inputs[0]``."""
        module = t.module(conv_torch_module(self.p, self.input_dims[0].c), self.torch_conv_state(t))
        return f"{module}({torch_padded_input(self.p, inputs[0])})"


REPLAYABLE_FORWARDS.add(ConvolutionBase.forward)  # the plain convolution's: one convolve call
