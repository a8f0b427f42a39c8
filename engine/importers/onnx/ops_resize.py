"""Resampling: Resize (opset 10+) and Upsample (opset 7-9)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps

_METHODS = {"nearest": "nearest", "linear": "bilinear", "cubic": "bicubic"}


def _scales(ctx: Context, scales: np.ndarray | None, x: str, y: str) -> tuple[float, float] | None:
    if scales is None or scales.size == 0:
        return None
    s = [float(v) for v in scales.reshape(-1)]
    if len(s) != 4 or s[0] != 1.0 or s[1] != 1.0:
        raise Unsupported(f"scales {s}: only H and W of N x C x H x W can be resized")
    return s[2], s[3]


def _integer_factors(scale: tuple[float, float] | None, x_hw: tuple[int, ...], y_hw: tuple[int, ...]) -> tuple[int, int] | None:
    f = scale if scale is not None else tuple(o / i for o, i in zip(y_hw, x_hw))
    ints = tuple(int(round(v)) for v in f)
    ok = all(abs(v - i) < 1e-9 and i >= 1 for v, i in zip(f, ints)) and tuple(i * k for i, k in zip(x_hw, ints)) == tuple(y_hw)
    return ints if ok else None  # type: ignore[return-value]


def _resize(ctx: Context, x: str, method: str, coord: str, nearest_mode: str, cubic_a: float,
            scale: tuple[float, float] | None, exclude_outside: bool = False) -> None:
    y = ctx.node.output[0]
    x_hw, y_hw = ctx.shape(x)[2:], ctx.shape(y)[2:]
    if method == "nearest" and coord == "asymmetric" and nearest_mode == "floor":
        factors = _integer_factors(scale, x_hw, y_hw)
        if factors is not None:  # what torch.nn.Upsample(mode='nearest') writes: the upsample layer exactly
            ctx.add("upsample", {"factor": factors, "method": "nearest"}, [ctx.tensor(x)], y)
            return
    if coord == "align_corners" and scale is not None:
        if any(abs(n * s - round(n * s)) > 1e-6 for n, s in zip(x_hw, scale)):
            raise Unsupported(f"align_corners with scales {list(scale)} that do not give whole sizes (ONNX then "
                              "maps positions with the fractional size)")
        scale = None  # the same as resizing to the output size
    if coord == "pytorch_half_pixel" and min(y_hw) > 1:
        coord = "half_pixel"  # they differ only for an output size of 1
    if coord not in ("half_pixel", "align_corners"):
        ctx.require_param("resize", "coordinate_mode", coord, why=f"coordinate_transformation_mode {coord}")
    params: dict[str, Any] = {"mode": method, "coordinate_mode": coord}
    if method == "nearest":
        if ctx.has_param("resize", "nearest_mode", nearest_mode):
            params["nearest_mode"] = nearest_mode
        elif nearest_mode != "round_prefer_floor":
            ctx.require_param("resize", "nearest_mode", nearest_mode, why=f"nearest_mode {nearest_mode}")
    if method == "bicubic" and cubic_a != -0.75:
        ctx.require_param("resize", "cubic_coeff_a", why=f"cubic_coeff_a {cubic_a}")
        params["cubic_coeff_a"] = cubic_a
    if exclude_outside and method != "nearest":
        ctx.require_param("resize", "exclude_outside", why="exclude_outside=1")
        params["exclude_outside"] = True
    if scale is not None:
        params.update(size=(0, 0), scale_h=scale[0], scale_w=scale[1])
    else:
        params["size"] = tuple(y_hw)
    ctx.add("resize", params, [ctx.tensor(x)], y)


@maps("Resize", "resize or upsample", "modes nearest, linear, cubic (`cubic_coeff_a` -0.75, other values with the "
      "resize layer's `cubic_coeff_a`); coordinate modes half_pixel, pytorch_half_pixel, align_corners, asymmetric "
      "(nearest + floor with integer factors becomes upsample); `nearest_mode`; `exclude_outside`; scales or sizes of "
      "H and W; `antialias`, `keep_aspect_ratio_policy` other than stretch, tf_crop_and_resize and "
      "half_pixel_symmetric refused")
def resize(ctx: Context) -> None:
    x = ctx.node.input[0]
    a = ctx.attrs()
    if int(a.get("antialias", 0)):
        raise Unsupported("antialias is not supported")
    if a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Unsupported(f"keep_aspect_ratio_policy {a['keep_aspect_ratio_policy']}")
    if "axes" in a and sorted(int(v) % 4 for v in a["axes"]) != [2, 3]:
        raise Unsupported(f"axes {a['axes']}: only H and W")
    if ctx.rank(x) != 4:
        raise Unsupported(f"input of rank {ctx.rank(x)}")
    mode = a.get("mode", "nearest")
    default_coord = "asymmetric" if ctx.opset < 11 else "half_pixel"
    coord = a.get("coordinate_transformation_mode", default_coord)
    scales = ctx.optional_const(1 if ctx.opset < 11 else 2)
    if scales is not None and scales.size == 2 and "axes" in a:
        by_axis = dict(zip((int(v) % 4 for v in a["axes"]), scales.reshape(-1).tolist()))
        scales = np.asarray([1.0, 1.0, by_axis[2], by_axis[3]])
    if ctx.opset >= 11 and ctx.input(3) is not None:
        scales = None  # sizes given: the output size is known statically
    _resize(ctx, x, _METHODS[mode], coord, a.get("nearest_mode", "round_prefer_floor"),
            float(a.get("cubic_coeff_a", -0.75)), _scales(ctx, scales, x, ctx.node.output[0]),
            bool(int(a.get("exclude_outside", 0))))


@maps("Upsample", "upsample or resize", "opset 7-9: nearest (integer factors) and linear (needs the asymmetric "
      "coordinate mode of resize)")
def upsample(ctx: Context) -> None:
    a = ctx.attrs()
    x = ctx.node.input[0]
    scales = np.asarray(a["scales"]) if "scales" in a else ctx.const(ctx.node.input[1], "scales")
    mode = a.get("mode", "nearest")
    if mode not in _METHODS:
        raise Unsupported(f"mode {mode!r}")
    _resize(ctx, x, _METHODS[mode], "asymmetric", "floor", -0.75, _scales(ctx, scales, x, ctx.node.output[0]))
