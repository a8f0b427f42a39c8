"""affine_transform: rotate, scale and translate the image plane (geometric transform), nearest or bilinear."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.tensor import Dims
from plugins.analysis._options import OptionsLayer, OptionSpec

INTERPOLATIONS = ("nearest", "bilinear")
BORDERS = ("zeros", "edge")


def sampling_taps(h: int, w: int, rotation: float, scale: float, tx: float, ty: float, interpolation: str,
                  border: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Host taps ``(row index, column index, weight)``, each H x W, of the transform.

    An input pixel at ``p`` moves to ``c + t + scale * R(rotation) (p - c)`` where ``c`` is the image
    centre and R turns counter-clockwise on screen (rows grow downwards), by ``rotation`` degrees.
    Every output pixel samples the input at the inverse position; outside the image it reads 0
    (border zeros) or the nearest edge pixel (border edge)."""
    cy, cx = (h - 1) / 2.0, (w - 1) / 2.0
    yy, xx = np.meshgrid(np.arange(h, dtype=np.float64), np.arange(w, dtype=np.float64), indexing="ij")
    th = math.radians(rotation)
    cos, sin = math.cos(th), math.sin(th)
    dx, dy = xx - cx - tx, yy - cy - ty
    sx = cx + (cos * dx - sin * dy) / scale
    sy = cy + (sin * dx + cos * dy) / scale
    if interpolation == "nearest":
        corners = [(np.floor(sy + 0.5), np.floor(sx + 0.5), np.ones_like(sx))]
    else:
        y0, x0 = np.floor(sy), np.floor(sx)
        fy, fx = sy - y0, sx - x0
        corners = [(y0, x0, (1 - fy) * (1 - fx)), (y0, x0 + 1, (1 - fy) * fx),
                   (y0 + 1, x0, fy * (1 - fx)), (y0 + 1, x0 + 1, fy * fx)]
    taps = []
    for ry, rx, wt in corners:
        if border == "zeros":
            inside = (ry >= 0) & (ry <= h - 1) & (rx >= 0) & (rx <= w - 1)
            wt = np.where(inside, wt, 0.0)
        taps.append((np.clip(ry, 0, h - 1).astype(np.int64), np.clip(rx, 0, w - 1).astype(np.int64), wt))
    return taps


def apply_taps(x: Any, taps: list[tuple[Any, Any, Any]]) -> Any:
    """Resample logical NCHW ``x`` with device taps from ``sampling_taps``."""
    y = None
    for ry, rx, wt in taps:
        term = x[:, :, ry, rx] * wt
        y = term if y is None else y + term
    return y


DESC = LayerDesc(
    name="affine_transform",
    display_name="Affine Transform",
    summary="Rotates, scales and translates the image plane (nearest or bilinear sampling).",
    categories=(Category.ANALYSIS,),
    documentation=(
        "<p>A geometric transform of every channel: the image turns by <b>rotation</b> degrees "
        "counter-clockwise around its centre, is scaled by <b>scale</b> around the centre, then moves "
        "by <b>translate_x</b> pixels to the right and <b>translate_y</b> pixels down. Use it to check "
        "that a network is robust to small rotations, zooms and shifts. All parameters are "
        "<b>runtime options</b>, changed live during analysis. The output has the input's size.</p>"
        "<ul><li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>rotation</b>: degrees, -360 to 360, default 0.</li>"
        "<li><b>scale</b>: 0.01 to 100, default 1.</li>"
        "<li><b>translate_x</b>, <b>translate_y</b>: pixels, -10000 to 10000, default 0.</li>"
        "<li><b>interpolation</b>: <code>nearest</code> or <code>bilinear</code> (default).</li>"
        "<li><b>border</b>: what is read outside the input: <code>zeros</code> (default) or "
        "<code>edge</code> (the nearest edge pixel).</li></ul>"
    ),
    inputs=(InputDesc("input", doc="tensor to transform"),),
    params=(
        ParamDesc("rotation", "float", 0.0, "degrees, counter-clockwise", min=-360.0, max=360.0, main=True),
        ParamDesc("scale", "float", 1.0, "zoom around the centre", min=0.01, max=100.0, main=True),
        ParamDesc("translate_x", "float", 0.0, "pixels to the right", min=-10000.0, max=10000.0),
        ParamDesc("translate_y", "float", 0.0, "pixels down", min=-10000.0, max=10000.0),
        ParamDesc("interpolation", "enum", "bilinear", "sampling", enum_values=INTERPOLATIONS),
        ParamDesc("border", "enum", "zeros", "value outside the input", enum_values=BORDERS),
    ),
)


class AffineTransform(OptionsLayer):
    desc = DESC
    OPTIONS = (
        OptionSpec("rotation", "Rotation (degrees)", step=1.0, extras={"slider": True, "unit": "°"}),
        OptionSpec("scale", "Scale", step=0.05),
        OptionSpec("translate_x", "Translate X (pixels)", step=1.0, extras={"unit": "px"}),
        OptionSpec("translate_y", "Translate Y (pixels)", step=1.0, extras={"unit": "px"}),
        OptionSpec("interpolation", "Interpolation"),
        OptionSpec("border", "Border"),
    )
    _taps: list[tuple[Any, Any, Any]] | None = None

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        assert inputs[0] is not None
        return inputs[0]

    def _prepare(self, h: int, w: int) -> None:
        """Upload the sampling taps now, not inside ``forward`` (which a captured GPU graph replays)."""
        p = self.p
        host = sampling_taps(h, w, p["rotation"], p["scale"], p["translate_x"], p["translate_y"],
                             p["interpolation"], p["border"])
        dev = self.backend.to_device
        self._taps = [(dev(ry), dev(rx), dev(wt.astype(self.cdtype))) for ry, rx, wt in host]

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        self._prepare(output.h, output.w)

    def option_changed(self, name: str, old: Any) -> bool:
        self._taps = None
        if self.out_dims is not None:
            self._prepare(self.out_dims.h, self.out_dims.w)
        return False

    def forward(self, inputs: list[Any], out: Any) -> None:
        x = self.nchw(inputs[0])
        if self._taps is None:
            self._prepare(x.shape[2], x.shape[3])
        self.store(out, self.activate(apply_taps(x, self._taps)))


LAYER = AffineTransform
