"""upscale_concat: upsample input 0 to the size of input 1, then concatenate their channels (U-Net decoder step).

Also holds ``UpscaleLayer``, the base of upscale_concat_two and upscale_sum."""
from __future__ import annotations

from typing import Any

from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

from .resize import Taps, resample
from .upsample import FACTOR_DOC, UPSAMPLE_METHODS, check_factor, upsample_onnx, upsample_taps

UPSCALE_PARAMS = (
    ParamDesc("factor", "dimension", Dims(1, 1, 2, 2), "integer factors input 0 is upsampled by", main=True),
    ParamDesc("method", "enum", "nearest", "interpolation", enum_values=UPSAMPLE_METHODS, main=True),
)

UPSCALE_DOC = (
    "<p>Input 0 is upsampled by the integer <b>factor</b> (as the <b>upsample</b> layer does) and then "
    "made exactly as large as input 1: extra rows/columns at the bottom/right are dropped, missing ones repeat "
    "the last row/column. So input 0's height must be <code>floor(H1/Fh)</code> or <code>ceil(H1/Fh)</code> "
    "(likewise the width), which covers skip connections of odd size. Both inputs must have the same N.</p>"
    "<p><b>Parameters</b></p><ul>" + FACTOR_DOC + "</ul>"
)


def upscale_concat(xp: Any, x: Any, skips: list[Any], taps_h: Taps, taps_w: Taps) -> Any:
    """Channels of upscaled ``x`` followed by the channels of each skip tensor, in order.

    The taps (``upsample_taps`` to the skip size) already hold the crop or edge extension."""
    return xp.concatenate([resample(xp, x, taps_h, taps_w), *skips], axis=1)


_TORCH_UPSCALE = """
def upscale_to(x: torch.Tensor, like: torch.Tensor, factor: tuple[int, int], mode: str) -> torch.Tensor:
    \"\"\"x upsampled by ``factor`` then made as large as ``like``: the last rows/columns repeat where it is
    smaller, extra ones are dropped where it is larger.\"\"\"
    extra = {"align_corners": False} if mode == "bilinear" else {}
    y = F.interpolate(x, scale_factor=factor, mode=mode, **extra)
    grow_h, grow_w = max(like.shape[2] - y.shape[2], 0), max(like.shape[3] - y.shape[3], 0)
    if grow_h or grow_w:
        y = F.pad(y, (0, grow_w, 0, grow_h), mode="replicate")
    return y[:, :, :like.shape[2], :like.shape[3]]
"""


class UpscaleLayer(Layer):
    """A layer that upsamples input 0 to the spatial size of input 1 (which it then combines with)."""

    def validate(self) -> None:
        check_factor(self)

    def target_dims(self, inputs: list[Dims | None]) -> Dims:
        """Input 1's dimensions, after checking input 0 can be upscaled to them."""
        x, skip = inputs[0], inputs[1]
        assert x is not None and skip is not None
        if x.n != skip.n:
            raise self.shape_error(f"input 0 ({x}) and input 1 ({skip}) have different batch sizes N ({x.n} vs {skip.n})")
        f = self.p["factor"]
        if self.fused and (x.h * f.h, x.w * f.w) != (skip.h, skip.w):
            raise self.shape_error(
                f"this layer joins an upsample and a concatenation (fusing rule): input 0 ({x}) upsampled by "
                f"{f.h}x{f.w} is {x.h * f.h}x{x.w * f.w}, input 1 ({skip}) is {skip.h}x{skip.w}; the concatenation "
                "joins along C, so H and W must be equal")
        for axis, a, b, k in (("H", x.h, skip.h, f.h), ("W", x.w, skip.w, f.w)):
            lo, hi = b // k, -(-b // k)
            if a not in (lo, hi):
                need = str(hi) if lo in (0, hi) else f"{lo} or {hi}"
                raise self.shape_error(
                    f"input 0 ({x}) upsampled by {f.h}x{f.w} is {x.h * f.h}x{x.w * f.w}, too far from input 1 ({skip}): "
                    f"input 0 must have {axis} = {need} to be cropped or edge-extended to {axis} = {b}")
        return skip

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        x, skip = inputs[0], inputs[1]
        assert x is not None and skip is not None
        f, m = self.p["factor"], self.p["method"]
        self._taps_h = upsample_taps(self.xp, x.h, skip.h, f.h, m, self.cdtype)
        self._taps_w = upsample_taps(self.xp, x.w, skip.w, f.w, m, self.cdtype)

    def upscaled_onnx(self, g: Any, inputs: list[str | None]) -> str:
        """ONNX nodes upsampling input 0 by the factor, then making it input 1's size: edge rows/columns
        repeated where it is smaller, cropped where larger (sizes read at run time)."""
        up = upsample_onnx(g, inputs[0], self.p["factor"], self.p["method"], "upsample")  # type: ignore[arg-type]
        target = g.shape(inputs[1], 2, 4, "target")
        missing = g.node("Sub", [target, g.shape(up, 2, 4, "upsampled")], "missing")
        grow = g.node("Max", [missing, g.ints("zero", [0, 0])], "grow")
        pads = g.node("Concat", [g.ints("pads_before", [0, 0, 0, 0, 0, 0]), grow], "pads", axis=0)
        extended = g.node("Pad", [up, pads], "extended", mode="edge")
        return g.node("Slice", [extended, g.ints("starts", [0, 0]), target, g.ints("axes", [2, 3])], "fitted")

    def upscaled_torch(self, t: Any, inputs: list[str | None]) -> str:
        """PyTorch expression of input 0 upsampled and fitted to input 1's size."""
        f, m = self.p["factor"], self.p["method"]
        return f"{t.helper('upscale_to', _TORCH_UPSCALE)}({inputs[0]}, {inputs[1]}, ({f.h}, {f.w}), {m!r})"


DESC = LayerDesc(
    name="upscale_concat",
    display_name="Upscale + Concat",
    summary="Upsample input 0 to input 1's size and concatenate the channels of both.",
    categories=("Resampling", "Merge"),
    documentation=(
        "<p>A decoder step of a U-Net: <code>y = concat(upsample(input 0), input 1)</code> along channels, "
        "the upsampled channels first. N x C0 x H0 x W0 and N x C1 x H1 x W1 give N x (C0+C1) x H1 x W1.</p>"
        + UPSCALE_DOC +
        "<p><b>Inputs</b>: <b>input</b> (primary): the coarse tensor; <b>skip</b> (primary): the tensor whose "
        "size the result takes.</p>"
        "<p>Example: factor 2, input 0 1x64x8x8 and input 1 1x32x16x16 give 1x96x16x16; with input 1 "
        "1x32x15x15 the upsampled 16x16 is cropped to 15x15 and the result is 1x96x15x15.</p>"
    ),
    inputs=(InputDesc("input", doc="coarse tensor, upsampled"), InputDesc("skip", doc="skip connection")),
    params=UPSCALE_PARAMS,
)


class UpscaleConcat(UpscaleLayer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        t = self.target_dims(inputs)
        return Dims(t.n, inputs[0].c + t.c, t.h, t.w)  # type: ignore[union-attr]

    def forward(self, inputs: list[Any], out: Any) -> None:
        x, skip, f = inputs[0], inputs[1], self.p["factor"]
        d, s = self.input_dims[0], self.input_dims[1]
        exact = d is not None and s is not None and (d.h * f.h, d.w * f.w) == (s.h, s.w)
        kernel = self.backend.kernel("upsample_concat") if exact else None
        if kernel is not None and kernel(x, skip, out, (f.h, f.w), self.p["method"] == "bilinear", self.hw_axes == (1, 2)):
            self.activate_inplace(out)
            return
        y = upscale_concat(self.xp, self.nchw(inputs[0]), [self.nchw(inputs[1])], self._taps_h, self._taps_w)
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        return g.node("Concat", [self.upscaled_onnx(g, inputs), inputs[1]], axis=1)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return f"torch.cat([{self.upscaled_torch(t, inputs)}, {inputs[1]}], dim=1)"


LAYER = UpscaleConcat
