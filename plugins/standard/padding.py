"""padding: add rows and columns around H and W (zero, reflect or replicate); negative amounts crop."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

MODES = ("zero", "reflect", "replicate")
SIDES = ("top", "bottom", "left", "right")


def pad_index(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """Host source index of every output position along one axis of length ``size`` (already cropped),
    padded by ``before``/``after`` >= 0: reflect mirrors about the edge pixel, replicate repeats it."""
    i = np.arange(-before, size + after)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    i = np.abs(i)  # reflect (requires before, after <= size - 1)
    return np.where(i > size - 1, 2 * (size - 1) - i, i)


def pad2d(xp: Any, x: Any, top: int, bottom: int, left: int, right: int, mode: str,
          index_h: Any = None, index_w: Any = None) -> Any:
    """Logical NCHW padding: negative amounts first crop that side, then positive amounts pad.

    ``index_h``/``index_w`` may hold ``pad_index`` on the backend (computed once per size)."""
    x = x[:, :, max(-top, 0):x.shape[2] - max(-bottom, 0), max(-left, 0):x.shape[3] - max(-right, 0)]
    t, b, lt, r = (max(v, 0) for v in (top, bottom, left, right))
    n, c, h, w = x.shape
    if mode == "zero":
        y = xp.zeros((n, c, h + t + b, w + lt + r), dtype=x.dtype)
        y[:, :, t:t + h, lt:lt + w] = x
        return y
    if index_h is None:
        index_h = xp.asarray(pad_index(h, t, b, mode))
    if index_w is None:
        index_w = xp.asarray(pad_index(w, lt, r, mode))
    return xp.take(xp.take(x, index_h, axis=2), index_w, axis=3)


DESC = LayerDesc(
    name="padding",
    display_name="Padding",
    summary="Pad or crop H and W on each side: zeros, reflection or replication of the edge.",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Adds <b>top</b> rows above, <b>bottom</b> rows below, <b>left</b> and <b>right</b> columns on the sides "
        "of every channel: N x C x H x W becomes N x C x (H+top+bottom) x (W+left+right). A negative amount "
        "removes that many rows or columns from that side instead (cropping happens first, then padding "
        "applies to the cropped tensor), like ONNX Pad.</p>"
        "<p><b>mode</b>:</p><ul>"
        "<li><code>zero</code> (default): new values are 0 (ONNX mode constant).</li>"
        "<li><code>reflect</code>: mirror about the edge pixel, which is not repeated: the row "
        "<code>[a, b, c]</code> padded by 2 on the left gives <code>[c, b, a, b, c]</code>. Each amount must be "
        "smaller than the (cropped) size along its axis.</li>"
        "<li><code>replicate</code>: repeat the edge pixel: <code>[a, a, a, b, c]</code> (ONNX mode edge).</li></ul>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x C x H x W.</p>"
        "<p><b>Parameters</b></p><ul>"
        "<li><b>mode</b>: zero, reflect or replicate; default zero.</li>"
        "<li><b>top</b>, <b>bottom</b>, <b>left</b>, <b>right</b>: integers in [-65536, 65536], default 1 each. "
        "The output must be at least 1x1 and cropping must leave at least one row and one column.</li></ul>"
    ),
    inputs=(InputDesc("input"),),
    params=(
        ParamDesc("mode", "enum", "zero", "how new values are made", enum_values=MODES, main=True),
        *(ParamDesc(side, "int", 1, f"rows or columns added at the {side} (negative: removed)", min=-65536, max=65536,
                    main=True) for side in SIDES),
    ),
)


class Padding(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        t, b, lt, r = (self.p[s] for s in SIDES)
        for axis, size, sides in (("H", x.h, ("top", "bottom")), ("W", x.w, ("left", "right"))):
            lo, hi = (self.p[s] for s in sides)
            kept = size - max(-lo, 0) - max(-hi, 0)
            if kept < 1:
                raise self.shape_error(f"{sides[0]}={lo} and {sides[1]}={hi} crop away all of the input's {axis} = {size}; "
                                       "at least one row and one column must remain")
            for side in sides:
                if self.p["mode"] == "reflect" and self.p[side] > kept - 1:
                    raise self.shape_error(f"reflect padding {side}={self.p[side]} needs {axis} > {self.p[side]}, but the "
                                           f"{'cropped ' if kept < size else ''}input has {axis} = {kept}")
        return Dims(x.n, x.c, x.h + t + b, x.w + lt + r)

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        x = self.primary(inputs)
        self._index_h = self._index_w = None
        if self.p["mode"] != "zero":
            t, b, lt, r = (self.p[s] for s in SIDES)
            h = x.h - max(-t, 0) - max(-b, 0)
            w = x.w - max(-lt, 0) - max(-r, 0)
            self._index_h = self.xp.asarray(pad_index(h, max(t, 0), max(b, 0), self.p["mode"]))
            self._index_w = self.xp.asarray(pad_index(w, max(lt, 0), max(r, 0), self.p["mode"]))

    def forward(self, inputs: list[Any], out: Any) -> None:
        t, b, lt, r = (self.p[s] for s in SIDES)
        y = pad2d(self.xp, self.nchw(inputs[0]), t, b, lt, r, self.p["mode"], self._index_h, self._index_w)
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        t, b, lt, r = (self.p[s] for s in SIDES)
        x = inputs[0]
        if min(t, b, lt, r) < 0:  # crop first (negative amounts), then pad the cropped tensor
            end = 2 ** 63 - 1
            x = g.node("Slice", [x, g.ints("crop_starts", [max(-t, 0), max(-lt, 0)]),
                                 g.ints("crop_ends", [b if b < 0 else end, r if r < 0 else end]),
                                 g.ints("crop_axes", [2, 3])], "crop")
        pads = g.ints("pads", [0, 0, max(t, 0), max(lt, 0), 0, 0, max(b, 0), max(r, 0)])
        return g.node("Pad", [x, pads], mode={"zero": "constant", "reflect": "reflect", "replicate": "edge"}[self.p["mode"]])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        top, bottom, left, right = (self.p[s] for s in SIDES)
        x = inputs[0]
        if min(top, bottom, left, right) < 0:
            rows = f"{max(-top, 0) or ''}:{bottom if bottom < 0 else ''}"
            cols = f"{max(-left, 0) or ''}:{right if right < 0 else ''}"
            x = f"{x}[:, :, {rows}, {cols}]"
        amounts = f"({max(left, 0)}, {max(right, 0)}, {max(top, 0)}, {max(bottom, 0)})"
        mode = {"zero": "constant", "reflect": "reflect", "replicate": "replicate"}[self.p["mode"]]
        return f"F.pad({x}, {amounts}, mode={mode!r})"


LAYER = Padding
