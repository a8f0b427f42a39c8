"""lrn: local response normalization across channels (ONNX LRN, AlexNet)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims


def lrn(xp: Any, x: Any, size: int, alpha: float, beta: float, bias: float) -> Any:
    """``x / (bias + alpha / size * sum of x^2 over the channel window) ** beta``.

    The window of channel c covers ``c - floor((size-1)/2)`` to ``c + ceil((size-1)/2)``, clipped to the
    existing channels (ONNX LRN; the layer only allows odd sizes, so the window is centred). A loop over the
    ``size`` window taps; float32 arithmetic."""
    xf = x.astype(np.float32, copy=False)
    n, c, h, w = xf.shape
    before = (size - 1) // 2
    padded = xp.zeros((n, c + size - 1, h, w), dtype=np.float32)
    padded[:, before:before + c] = xf * xf
    total = padded[:, 0:c].copy()
    for k in range(1, size):
        total += padded[:, k:k + c]
    return xf / (np.float32(bias) + np.float32(alpha / size) * total) ** np.float32(beta)


DESC = LayerDesc(
    name="lrn",
    display_name="Local Response Normalization",
    summary="Divide each value by a power of the sum of squares over neighbouring channels (ONNX LRN).",
    categories=(Category.NORMALIZATION,),
    documentation=(
        "<p>Computes <code>y[n,c,h,w] = x[n,c,h,w] / (bias + alpha / size * S)^beta</code> where <code>S</code> is "
        "the sum of <code>x[n,i,h,w]^2</code> over the channels <code>i</code> from "
        "<code>c - (size-1)/2</code> to <code>c + (size-1)/2</code> that exist (channels beyond the edges count as "
        "0), as ONNX LRN and <code>torch.nn.LocalResponseNorm</code>. "
        "The output has the input's dimensions.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x C x H x W.</p>"
        "<p><b>Parameters</b></p><ul>"
        "<li><b>size</b>: number of channels in the window, odd, default 5, in [1, 255].</li>"
        "<li><b>alpha</b>: default 0.0001, at least 0.</li>"
        "<li><b>beta</b>: exponent, default 0.75, in (0, 16].</li>"
        "<li><b>bias</b>: default 1, greater than 0 (so the base is always positive).</li></ul>"
        "<p>Example: size 1, alpha 1, beta 1, bias 1 gives <code>y = x / (1 + x^2)</code>.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(
        ParamDesc("size", "uint", 5, "channels in the window (odd)", min=1, max=255, main=True),
        ParamDesc("alpha", "float", 1e-4, "scale of the sum of squares", min=0.0),
        ParamDesc("beta", "float", 0.75, "exponent (greater than 0)", min=0.0, max=16.0),
        ParamDesc("bias", "float", 1.0, "added before the power (greater than 0)", min=0.0),
    ),
)


class LRN(Layer):
    desc = DESC

    def validate(self) -> None:
        if self.p["size"] % 2 == 0:
            raise self.param_error("size", f"{self.p['size']}: must be odd (the window is centred on each channel)")
        if self.p["beta"] <= 0:
            raise self.param_error("beta", f"{self.p['beta']:g}: must be greater than 0")
        if self.p["bias"] <= 0:
            raise self.param_error("bias", f"{self.p['bias']:g}: must be greater than 0")

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        return x

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = lrn(self.xp, self.nchw(inputs[0]), self.p["size"], self.p["alpha"], self.p["beta"], self.p["bias"])
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("LRN", [inputs[0]], size=self.p["size"], alpha=float(self.p["alpha"]), beta=float(self.p["beta"]),
                      bias=float(self.p["bias"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        p = self.p
        code = (f"nn.LocalResponseNorm({p['size']}, alpha={float(p['alpha'])!r}, beta={float(p['beta'])!r}, "
                f"k={float(p['bias'])!r})")
        return f"{t.module(code)}({inputs[0]})"


LAYER = LRN
