"""color_conversion: RGB <-> BGR, RGB <-> YCbCr (BT.601 full range), RGB <-> YUV (BT.601), RGB/BGR -> gray."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

CONVERSIONS = ("rgb_to_bgr", "bgr_to_rgb", "rgb_to_ycbcr", "ycbcr_to_rgb", "rgb_to_yuv", "yuv_to_rgb",
               "rgb_to_gray", "bgr_to_gray")

#: BT.601 luma weights.
KR, KB = 0.299, 0.114
KG = 1.0 - KR - KB
#: BT.601 analog U and V maxima.
U_MAX, V_MAX = 0.436, 0.615


def _luma_chroma(cb_gain: float, cr_gain: float) -> np.ndarray:
    """Rows Y, gain*(B - Y), gain*(R - Y) as a 3x3 matrix acting on (R, G, B)."""
    y = np.array([KR, KG, KB])
    return np.stack([y, cb_gain * (np.array([0.0, 0.0, 1.0]) - y), cr_gain * (np.array([1.0, 0.0, 0.0]) - y)])


def conversion_matrix(conversion: str, chroma_offset: float) -> tuple[np.ndarray, np.ndarray]:
    """(A, b) in float64 with ``out = A @ in + b`` over the channel axis; A is 3x3 or 1x3."""
    ycbcr = _luma_chroma(0.5 / (1.0 - KB), 0.5 / (1.0 - KR))
    yuv = _luma_chroma(U_MAX / (1.0 - KB), V_MAX / (1.0 - KR))
    offset = np.array([0.0, chroma_offset, chroma_offset])
    swap = np.eye(3)[::-1]
    if conversion in ("rgb_to_bgr", "bgr_to_rgb"):
        return swap, np.zeros(3)
    if conversion == "rgb_to_ycbcr":
        return ycbcr, offset
    if conversion == "ycbcr_to_rgb":
        inv = np.linalg.inv(ycbcr)
        return inv, -inv @ offset
    if conversion == "rgb_to_yuv":
        return yuv, np.zeros(3)
    if conversion == "yuv_to_rgb":
        return np.linalg.inv(yuv), np.zeros(3)
    if conversion == "rgb_to_gray":
        return ycbcr[:1], np.zeros(1)
    if conversion == "bgr_to_gray":
        return ycbcr[:1] @ swap, np.zeros(1)
    raise ValueError(f"unknown conversion {conversion!r}")


def color_convert(xp: Any, x: Any, a: Any, b: Any) -> Any:
    """Logical NCHW ``x`` (N, 3, H, W) -> (N, rows of a, H, W): ``a @ x[n,:,h,w] + b`` at every pixel."""
    n, c, h, w = x.shape
    y = xp.matmul(a[None], x.reshape(n, c, h * w)).reshape(n, a.shape[0], h, w)
    y += b.reshape(1, -1, 1, 1)
    return y


DESC = LayerDesc(
    name="color_conversion",
    display_name="Color conversion",
    summary="RGB/BGR swap, RGB to and from YCbCr or YUV (BT.601), RGB or BGR to gray.",
    categories=(Category.COLOR,),
    documentation=(
        "<p>Converts the 3 channels of every pixel with a fixed matrix (BT.601, Kr = 0.299, "
        "Kb = 0.114, Kg = 0.587). Values are assumed in 0..1 (set <b>chroma_offset</b> to 128 for 0..255).</p>"
        "<ul><li><code>rgb_to_bgr</code>, <code>bgr_to_rgb</code>: reverse the channel order.</li>"
        "<li><code>rgb_to_ycbcr</code> (BT.601 full range, JPEG/JFIF):<br>"
        "<code>Y = 0.299 R + 0.587 G + 0.114 B</code><br>"
        "<code>Cb = (B - Y) / 1.772 + offset = -0.168736 R - 0.331264 G + 0.5 B + offset</code><br>"
        "<code>Cr = (R - Y) / 1.402 + offset = 0.5 R - 0.418688 G - 0.081312 B + offset</code></li>"
        "<li><code>ycbcr_to_rgb</code>: the exact inverse:<br>"
        "<code>R = Y + 1.402 (Cr - offset)</code><br>"
        "<code>G = Y - 0.344136 (Cb - offset) - 0.714136 (Cr - offset)</code><br>"
        "<code>B = Y + 1.772 (Cb - offset)</code></li>"
        "<li><code>rgb_to_yuv</code> (BT.601 analog, U and V centred on 0, no offset):<br>"
        "<code>Y = 0.299 R + 0.587 G + 0.114 B</code><br>"
        "<code>U = 0.436 (B - Y) / 0.886 = -0.147138 R - 0.288862 G + 0.436 B</code><br>"
        "<code>V = 0.615 (R - Y) / 0.701 = 0.615 R - 0.514986 G - 0.100014 B</code></li>"
        "<li><code>yuv_to_rgb</code>: the exact inverse:<br>"
        "<code>R = Y + 1.139837 V</code>, <code>G = Y - 0.394652 U - 0.580599 V</code>, "
        "<code>B = Y + 2.032110 U</code></li>"
        "<li><code>rgb_to_gray</code>, <code>bgr_to_gray</code>: one output channel, "
        "<code>0.299 R + 0.587 G + 0.114 B</code> (BT.601 luma).</li></ul>"
        "<ul><li><b>input</b> (primary): N x 3 x H x W.</li>"
        "<li><b>conversion</b>: one of the conversions above, default rgb_to_ycbcr.</li>"
        "<li><b>chroma_offset</b>: added to Cb and Cr (YCbCr only), any number, default 0.5.</li></ul>"
        "<p>Output: N x 3 x H x W, or N x 1 x H x W for the gray conversions.</p>"
    ),
    inputs=(InputDesc("input", doc="N x 3 x H x W image"),),
    params=(
        ParamDesc("conversion", "enum", "rgb_to_ycbcr", "which conversion", enum_values=CONVERSIONS, main=True),
        ParamDesc("chroma_offset", "float", 0.5, "added to Cb and Cr (0.5 for 0..1 values, 128 for 0..255)"),
    ),
)


class ColorConversion(Layer):
    desc = DESC
    _ab: tuple[Any, Any] | None = None

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        if x.c != 3:
            raise self.shape_error(f"conversion {self.p['conversion']} needs an input with 3 channels, "
                                   f"got {x.c} ({x})")
        return Dims(x.n, 1 if self.p["conversion"].endswith("_gray") else 3, x.h, x.w)

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return output.elements * (6 + int(self.activation is not None))

    def _matrix(self) -> tuple[Any, Any]:
        """The conversion's (A, b) on the device in the compute dtype (made once)."""
        if self._ab is None:
            a, b = conversion_matrix(self.p["conversion"], self.p["chroma_offset"])
            self._ab = (self.backend.to_device(a.astype(self.cdtype)), self.backend.to_device(b.astype(self.cdtype)))
        return self._ab

    def forward(self, inputs: list[Any], out: Any) -> None:
        y = color_convert(self.xp, self.nchw(inputs[0]), *self._matrix())
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        a, b = conversion_matrix(self.p["conversion"], self.p["chroma_offset"])
        return g.node("Conv", [inputs[0], g.value("matrix", a.reshape(-1, 3, 1, 1)), g.value("offset", b)],
                      kernel_shape=[1, 1])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        a, b = conversion_matrix(self.p["conversion"], self.p["chroma_offset"])
        ref = t.params({"matrix": a.reshape(-1, 3, 1, 1), "offset": b}, trainable=False)
        return f'F.conv2d({inputs[0]}, {ref}["matrix"], {ref}["offset"])'


LAYER = ColorConversion
