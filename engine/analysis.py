"""The pure work behind the analysis panels (no Qt): the channel inspector's grid and red/green
colormap, per-channel statistics, downsampling for display, the network overview data, and the
precision drift comparison (the same inputs in two precisions or on two backends, layer by layer).

Everything here takes and returns host NumPy arrays or plain dataclasses, so a worker thread can
prepare it and a widget only paints it."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.errors import LayerLabError
from engine.format_conversion import chose_layout, fused_note
from engine.model import Model
from engine.network import Network
from engine.registry import Registry
from engine.run import RunSpec, open_network
from engine.tensor import FP32_NCHW, TensorFormat
from engine.weights import WeightsSource

#: colours of the channel grid that are not values
GAP_RGB = (60, 60, 60)
NAN_RGB = (40, 90, 255)


# ---- colormap and channel grid ---------------------------------------------------------------------
def redgreen(values: Any, shift: float = 0.0, scale: float = 1.0, xp: Any = np) -> Any:
    """Values -> 8-bit RGB (shape + (3,)): ``v = (value + shift) * scale``; negative v is red, positive
    green, with intensity ``min(|v|, 1)``; zero is black; NaN is blue; +-inf saturate. ``xp``: the array
    module of ``values`` (NumPy, or CuPy to map on the GPU)."""
    v = (xp.asarray(values, dtype=xp.float32) + xp.float32(shift)) * xp.float32(scale)
    nan = xp.isnan(v)
    v = xp.nan_to_num(v, nan=0.0, posinf=1.0, neginf=-1.0)
    out = xp.zeros(v.shape + (3,), dtype=xp.uint8)
    out[..., 0] = xp.rint(xp.clip(-v, 0.0, 1.0) * 255.0).astype(xp.uint8)
    out[..., 1] = xp.rint(xp.clip(v, 0.0, 1.0) * 255.0).astype(xp.uint8)
    return xp.where(nan[..., None], xp.asarray(NAN_RGB, dtype=xp.uint8), out)


@dataclass(frozen=True)
class GridLayout:
    """Where each slice of an N x C x H x W tensor sits in a channel grid image.

    Slice k = n * C + c is at row k // cols, column k % cols; each cell shows the slice downsampled by
    ``factor`` (every factor-th pixel) as ``cell_h`` x ``cell_w`` pixels, cells separated by ``gap``."""

    n: int
    c: int
    h: int
    w: int
    rows: int
    cols: int
    factor: int
    gap: int = 1

    @property
    def cell_h(self) -> int:
        return -(-self.h // self.factor)

    @property
    def cell_w(self) -> int:
        return -(-self.w // self.factor)

    @property
    def height(self) -> int:
        return self.rows * (self.cell_h + self.gap) - self.gap

    @property
    def width(self) -> int:
        return self.cols * (self.cell_w + self.gap) - self.gap

    def locate(self, x: int, y: int) -> tuple[int, int, int, int] | None:
        """(n, c, row, column) in the tensor of the grid pixel at (x, y), or None over a gap/blank."""
        if x < 0 or y < 0 or x >= self.width or y >= self.height:
            return None
        row, yin = divmod(int(y), self.cell_h + self.gap)
        col, xin = divmod(int(x), self.cell_w + self.gap)
        if yin >= self.cell_h or xin >= self.cell_w:
            return None
        k = row * self.cols + col
        if k >= self.n * self.c:
            return None
        n, c = divmod(k, self.c)
        return n, c, yin * self.factor, xin * self.factor

    def cell_origin(self, n: int, c: int) -> tuple[int, int]:
        """(x, y) of the top-left pixel of slice (n, c) in the grid."""
        row, col = divmod(n * self.c + c, self.cols)
        return col * (self.cell_w + self.gap), row * (self.cell_h + self.gap)


def as_nchw(array: Any) -> Any:
    """A tensor or a weight as 4-D N x C x H x W for display: 4-D stays, (C,) -> 1xCx1x1,
    (A, B) -> 1x1xAxB, (C, H, W) -> 1xCxHxW, 5-D and more fold the leading axes into N. An array (NumPy or a
    device array such as CuPy's) stays on its device; anything else becomes a NumPy array."""
    a = array if hasattr(array, "ndim") and hasattr(array, "reshape") else np.asarray(array)
    if a.ndim == 0:
        return a.reshape(1, 1, 1, 1)
    if a.ndim == 1:
        return a.reshape(1, -1, 1, 1)
    if a.ndim == 2:
        return a.reshape(1, 1, *a.shape)
    if a.ndim == 3:
        return a.reshape(1, *a.shape)
    return a.reshape(-1, *a.shape[-3:])


def grid_layout(n: int, c: int, h: int, w: int, max_pixels: int = 4_000_000, gap: int = 1,
                cols: int | None = None) -> GridLayout:
    """A near-square arrangement of the N*C slices, downsampled so the grid has at most
    ``max_pixels`` pixels (N rows of C columns when N > 1 and C <= 16)."""
    k = n * c
    if cols is None:
        cols = c if n > 1 and c <= 16 else math.ceil(math.sqrt(k * h / max(w, 1)))
    cols = min(max(1, cols), k)
    rows = -(-k // cols)
    factor = 1
    while True:
        layout = GridLayout(n, c, h, w, rows, cols, factor, gap)
        if layout.height * layout.width <= max_pixels or (layout.cell_h == 1 and layout.cell_w == 1):
            return layout
        factor += max(1, factor // 4)


def fit_slices(tensor: Any, xp: Any = np) -> Any:
    """Each N x C slice divided by its own largest finite magnitude (a slice of zeros stays zeros), so every
    channel uses the whole colormap whatever its range; NaN and Inf stay as they are."""
    a = as_nchw(tensor).astype(xp.float32, copy=False)
    peak = xp.where(xp.isfinite(a), xp.abs(a), xp.float32(0)).max(axis=(2, 3), keepdims=True)
    return a / xp.where(peak > 0, peak, xp.float32(1))


def grid_cells(tensor: Any, layout: GridLayout, xp: Any = np) -> Any:
    """The slices of an N x C x H x W tensor as the grid shows them: every ``layout.factor``-th pixel, float32,
    N x C x cell_h x cell_w (contiguous; on the tensor's device)."""
    f = layout.factor
    return xp.ascontiguousarray(as_nchw(tensor)[:, :, ::f, ::f], dtype=xp.float32)


def channel_grid(tensor: Any, shift: float = 0.0, scale: float = 1.0, max_pixels: int = 4_000_000,
                 gap: int = 1, cols: int | None = None, fit: bool = False, xp: Any = np) -> tuple[Any, GridLayout]:
    """The N x C slices of a tensor as one RGB image (red/green colormap) and its layout. ``fit``: each cell
    divided by its own largest finite magnitude first (``fit_slices`` of the cells shown). ``xp``: the array
    module of ``tensor`` (the image is made on its device)."""
    t = as_nchw(tensor)
    n, c, h, w = t.shape
    layout = grid_layout(n, c, h, w, max_pixels, gap, cols)
    cells = grid_cells(t, layout, xp)
    if fit:
        cells = fit_slices(cells, xp)
    return _tiled(cells, layout, lambda v: redgreen(v, shift, scale, xp), xp), layout


def _tiled(cells: Any, layout: GridLayout, colour: Any, xp: Any) -> Any:
    """The N x C x cell_h x cell_w ``cells`` tiled as ``layout`` places them and coloured by ``colour`` (float32
    values -> 8-bit RGB); gaps and blank cells grey."""
    n, c, gap = layout.n, layout.c, layout.gap
    cells = cells.reshape(n * c, layout.cell_h, layout.cell_w)
    total = layout.rows * layout.cols
    ch, cw = layout.cell_h + gap, layout.cell_w + gap
    grid = xp.zeros((total, ch, cw), dtype=xp.float32)
    blank = xp.ones((total, ch, cw), dtype=bool)
    grid[: n * c, : layout.cell_h, : layout.cell_w] = cells
    blank[: n * c, : layout.cell_h, : layout.cell_w] = False

    def tile(a: Any) -> Any:
        a = a.reshape(layout.rows, layout.cols, ch, cw).transpose(0, 2, 1, 3).reshape(layout.rows * ch, layout.cols * cw)
        return a[: layout.height, : layout.width]

    return xp.where(tile(blank)[..., None], xp.asarray(GAP_RGB, dtype=xp.uint8), colour(tile(grid)))


# ---- heat map (tensors of rank 2 and 3) --------------------------------------------------------------
#: the heat map's colour scale from the smallest value to the largest (viridis: dark blue, teal, green, yellow)
HEAT_STOPS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
HEAT_NAN_RGB = (255, 255, 255)

#: the ranks the analysis panels show as a heat map (a matrix, or a batch of matrices such as tokens x features)
HEAT_RANKS = (2, 3)


@dataclass(frozen=True)
class HeatMap:
    """A heat map image and what it shows: ``layout`` places each batch item's matrix (one above the other,
    slice (0, b) for item b), ``lo`` and ``hi`` are the values of the first and last colour of the scale."""

    image: Any
    layout: GridLayout
    lo: float
    hi: float


def heat_colours(values: Any, lo: float, hi: float, xp: Any = np) -> Any:
    """Values -> 8-bit RGB on the heat map's scale (``HEAT_STOPS``): ``lo`` and below the first colour, ``hi`` and
    above the last, linear between the stops; NaN white; all one colour (the middle) when ``hi == lo``."""
    v = xp.asarray(values, dtype=xp.float32)
    span = hi - lo
    u = (v - xp.float32(lo)) / xp.float32(span) if span > 0 else xp.full(v.shape, 0.5, dtype=xp.float32)
    nan = xp.isnan(u)
    u = xp.clip(xp.nan_to_num(u, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0) * (len(HEAT_STOPS) - 1)
    lut = xp.asarray(HEAT_STOPS, dtype=xp.float32)
    i = xp.minimum(u.astype(xp.int32), len(HEAT_STOPS) - 2)
    f = (u - i)[..., None]
    rgb = xp.rint(lut[i] * (1 - f) + lut[i + 1] * f).astype(xp.uint8)
    return xp.where(nan[..., None], xp.asarray(HEAT_NAN_RGB, dtype=xp.uint8), rgb)


def value_range(values: Any, xp: Any = np) -> tuple[float, float]:
    """The smallest and largest finite values ((0, 0) when there is none)."""
    v = xp.asarray(values, dtype=xp.float32)
    finite = xp.isfinite(v)
    if not bool(finite.any()):
        return 0.0, 0.0
    return float(xp.where(finite, v, xp.inf).min()), float(xp.where(finite, v, -xp.inf).max())


def heat_map(tensor: Any, max_pixels: int = 4_000_000, gap: int = 1, xp: Any = np) -> HeatMap:
    """A tensor of rank 2 (rows x columns) or 3 (batch x rows x columns: tokens x features) as a heat map, each
    batch item's matrix one above the other, downsampled to at most ``max_pixels``; coloured from its smallest
    value to its largest. An N x C x H x W array of 1 x batch x rows x columns (the cells the inspector receives)
    is taken as it is. ``xp``: the array module of ``tensor`` (the image is made on its device)."""
    t = as_nchw(tensor)
    n, c, h, w = t.shape
    layout = grid_layout(n, c, h, w, max_pixels, gap, cols=1)
    cells = grid_cells(t, layout, xp)
    lo, hi = value_range(cells, xp)
    return HeatMap(_tiled(cells, layout, lambda v: heat_colours(v, lo, hi, xp), xp), layout, lo, hi)


def channel_image(tensor: np.ndarray, n: int, c: int, shift: float = 0.0, scale: float = 1.0,
                  region: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """One slice at full resolution (optionally the region y0, x0, y1, x1) in the red/green colormap."""
    t = as_nchw(tensor)
    s = t[n, c]
    if region is not None:
        y0, x0, y1, x1 = region
        s = s[y0:y1, x0:x1]
    return redgreen(s, shift, scale)


def auto_scale(tensor: np.ndarray) -> tuple[float, float]:
    """(shift, scale) that maps the tensor's finite values into the colormap: no shift, and a scale
    that brings the largest magnitude to full intensity."""
    t = np.asarray(tensor, dtype=np.float32)
    finite = t[np.isfinite(t)]
    peak = float(np.max(np.abs(finite))) if finite.size else 0.0
    return 0.0, (1.0 / peak if peak > 0 else 1.0)


# ---- statistics ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChannelStats:
    """Per-slice statistics, arrays of shape (N, C). min, max and mean are over the finite values
    (NaN where a slice has none); ``nan`` and ``inf`` count the values that are not finite."""

    min: np.ndarray
    max: np.ndarray
    mean: np.ndarray
    nan: np.ndarray
    inf: np.ndarray

    def row(self, n: int, c: int) -> dict[str, float | int]:
        return {"min": float(self.min[n, c]), "max": float(self.max[n, c]), "mean": float(self.mean[n, c]),
                "nan": int(self.nan[n, c]), "inf": int(self.inf[n, c])}

    def total(self) -> dict[str, float | int]:
        """The same statistics for the whole tensor."""
        count = np.isfinite(self.mean)
        return {"min": float(np.nanmin(self.min)) if count.any() else math.nan,
                "max": float(np.nanmax(self.max)) if count.any() else math.nan,
                "nan": int(self.nan.sum()), "inf": int(self.inf.sum())}


def channel_stats(tensor: Any, xp: Any = np) -> ChannelStats:
    """Min, max, mean, NaN and Inf counts of every N x C slice (sums accumulate in float64; a tensor
    without NaN or Inf takes a fast path without temporary copies). ``xp``: the array module of ``tensor``
    (the statistics are computed on its device and are arrays of that module).

    Each statistic is reduced row by row first (contiguous rows of W values, N x C x H of them) and then over the
    rows: one reduction per slice over a channels-last buffer reads memory C values apart from only N x C
    threads, which on a GPU is a hundred times slower than these two passes."""
    t = xp.ascontiguousarray(as_nchw(tensor))
    if t.dtype.kind != "f":
        t = t.astype(xp.float32)
    row_sums = t.sum(axis=3, dtype=xp.float64)
    total = row_sums.sum(axis=2)
    if bool(xp.isfinite(total).all()):  # a NaN or an infinity would make its slice's float64 sum NaN or infinite
        zeros = xp.zeros(t.shape[:2], dtype=xp.int64)
        return ChannelStats(t.min(axis=3).min(axis=2).astype(xp.float64), t.max(axis=3).max(axis=2).astype(xp.float64),
                            total / (t.shape[2] * t.shape[3]), zeros, zeros.copy())
    finite = xp.isfinite(t)
    count = finite.sum(axis=3).sum(axis=2)
    some = count > 0
    lo = xp.where(finite, t, xp.inf).min(axis=3).min(axis=2).astype(xp.float64)
    hi = xp.where(finite, t, -xp.inf).max(axis=3).max(axis=2).astype(xp.float64)
    total = xp.where(finite, t, 0).sum(axis=3, dtype=xp.float64).sum(axis=2)
    mean = total / xp.where(some, count, 1)
    return ChannelStats(xp.where(some, lo, xp.nan), xp.where(some, hi, xp.nan), xp.where(some, mean, xp.nan),
                        xp.isnan(t).sum(axis=3).sum(axis=2), xp.isinf(t).sum(axis=3).sum(axis=2))


def downsample(image: np.ndarray, max_side: int) -> tuple[np.ndarray, int]:
    """An image (H x W or H x W x C) reduced by an integer stride so its longer side is at most
    ``max_side``; returns (image, stride)."""
    h, w = image.shape[:2]
    f = max(1, math.ceil(max(h, w) / max(1, max_side)))
    return (image[::f, ::f] if f > 1 else image), f


def display_stride(shape: tuple[int, ...], max_side: int = 2048, max_values: int | None = None) -> int:
    """The stride on H and W that brings an N x C x H x W tensor under ``max_side`` pixels a side and
    (when given) under ``max_values`` values in all."""
    n, c, h, w = shape
    f = max(1, math.ceil(max(h, w) / max(1, max_side)))
    if max_values is not None:
        while f < max(h, w) and n * c * -(-h // f) * -(-w // f) > max_values:
            f += 1
    return f


def display_tensor(tensor: np.ndarray, max_side: int = 2048, max_values: int | None = None) -> np.ndarray:
    """A host copy of a tensor small enough to send to the GUI: H and W strided by ``display_stride``
    (the N and C axes are kept)."""
    t = as_nchw(tensor)
    f = display_stride(t.shape, max_side, max_values)
    return np.ascontiguousarray(t[:, :, ::f, ::f]) if f > 1 else t


# ---- network overview ------------------------------------------------------------------------------
@dataclass
class OverviewItem:
    """One glyph of the network overview."""

    name: str
    type: str
    shape: str
    inputs: list[str | None]
    status: str = ""
    fused_from: list[str] = field(default_factory=list)
    rule: str = ""
    is_input: bool = False
    is_output: bool = False
    has_weights: bool = False


def network_overview(net: Network) -> list[OverviewItem]:
    """The built network in execution order: each layer with its type, current output shape, input
    links and a status (fused layers name what they replaced and the rule; bypass layers say so)."""
    merged_into: dict[str, list[str]] = {}
    rules: dict[str, str] = {}
    if net.fused is not None:
        for gone, into in net.fused.merged.items():
            merged_into.setdefault(into, []).append(gone)
        for rule, _inner, outer, fused in net.fused.applied:
            rules[fused or outer] = rule
    items = []
    for name in net.order:
        layer = net.layer(name)
        nd = net.nodes[name]
        try:
            shape = str(net.dims(name))
        except LayerLabError as exc:
            shape = f"? ({exc})"
        status = []
        if name in merged_into:
            status.append(f"fused: {' + '.join([*merged_into[name], name])}")
        if layer.bypass_input() is not None and layer.activation is None:
            status.append("bypass (no copy)")
        if nd.permanent:
            status.append("permanent")
        status.extend(format_status(net, name))
        items.append(OverviewItem(name, layer.desc.name, shape, list(nd.inputs), "; ".join(status),
                                  merged_into.get(name, []), rules.get(name, ""),
                                  bool(getattr(layer, "is_network_input", False)), name in net.output_names,
                                  bool(layer.weights)))
    return items


def format_status(net: Network, name: str) -> list[str]:
    """The overview's format badge of a layer: ``pinned fp32|nhwc`` for a layer in another format than the network's
    by its setting, ``logical order fp32|nchw`` for a token layer holding its tensors in logical order by its own choice,
    ``conversion fp16|nhwc -> fp32|nhwc`` for an inserted format conversion (``..., fused into c2`` where the network
    fused it into that layer); nothing for the others."""
    for conv, _src, a, b in net.conversions:
        if conv == name:
            return [f"conversion {a} -> {b}{fused_note(net, conv)}"]
    if chose_layout(net, name):
        return [f"logical order {net.pinned[name]}"]  # a token layer's own choice, no setting
    return [f"pinned {net.pinned[name]}"] if name in net.pinned else []


def links(items: list[OverviewItem]) -> list[tuple[str, str, int]]:
    """(source, target, input index) of every link between overview items."""
    return [(s, it.name, i) for it in items for i, s in enumerate(it.inputs) if s is not None]


def link_roles(items: list[OverviewItem], selected: str | None) -> dict[tuple[str, str, int], str]:
    """'input' for the links entering the selected layer, 'output' for those leaving it, '' otherwise
    (the overview draws them yellow, blue and grey)."""
    out = {}
    for s, t, i in links(items):
        out[(s, t, i)] = "input" if t == selected else "output" if s == selected else ""
    return out


# ---- precision drift -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """One way of running a network: a backend name and a tensor format."""

    backend: str = "numpy"
    fmt: TensorFormat = FP32_NCHW

    def __str__(self) -> str:
        return f"{self.backend}:{self.fmt}"

    @classmethod
    def parse(cls, text: str) -> Variant:
        """'fp16', 'fp16 nhwc', 'cupy:fp16|nhwc', 'numpy' -> Variant (backend default numpy)."""
        raw = (text or "").strip()
        backend, sep, fmt = raw.partition(":")
        if not sep:
            if raw.lower() in ("numpy", "cupy", "auto"):
                backend, fmt = raw, ""
            else:
                backend, fmt = "numpy", raw
        return cls(backend.strip().lower() or "numpy", TensorFormat.parse(fmt))


@dataclass(frozen=True)
class LayerDrift:
    """How far one layer's output in the candidate run is from the reference run.

    ``rel_error`` = ||candidate - reference||_2 / ||reference||_2 (inf when the candidate has NaN or
    Inf where the reference is finite); ``max_abs`` the largest absolute difference."""

    name: str
    type: str
    rel_error: float
    max_abs: float
    ref_norm: float
    nonfinite: int = 0


@dataclass
class DriftResult:
    reference: str
    candidate: str
    threshold: float
    layers: list[LayerDrift]

    @property
    def first_over(self) -> LayerDrift | None:
        """The first layer, in execution order, whose relative error exceeds the threshold."""
        return next((d for d in self.layers if d.rel_error > self.threshold), None)

    def by_name(self) -> dict[str, LayerDrift]:
        return {d.name: d for d in self.layers}

    def table(self) -> str:
        """A plain-text table of every layer, with the first layer over the threshold marked."""
        first = self.first_over
        width = max([len(d.name) for d in self.layers] + [5])
        lines = [f"precision drift: {self.candidate} against {self.reference} (threshold {self.threshold:g})",
                 f"{'layer':<{width}}  {'type':<22} {'rel. error':>11} {'max |diff|':>11}"]
        for d in self.layers:
            mark = "  <-- first over the threshold" if first is not None and d.name == first.name else ""
            extra = f"  ({d.nonfinite} non-finite)" if d.nonfinite else ""
            lines.append(f"{d.name:<{width}}  {d.type:<22} {d.rel_error:>11.3e} {d.max_abs:>11.3e}{extra}{mark}")
        lines.append(f"first layer over the threshold: {first.name} ({first.type}, relative error {first.rel_error:.3e})"
                     if first is not None else "no layer exceeds the threshold")
        return "\n".join(lines)


def layer_drift(name: str, type_: str, ref: np.ndarray, cand: np.ndarray) -> LayerDrift:
    """Relative and absolute error of one layer's candidate output against the reference."""
    ref = np.asarray(ref, dtype=np.float64)
    cand = np.asarray(cand, dtype=np.float64)
    if ref.shape != cand.shape:
        raise LayerLabError(f"layer {name}: the runs disagree on its shape ({ref.shape} vs {cand.shape})")
    ok = np.isfinite(ref)
    bad = int(np.count_nonzero(ok & ~np.isfinite(cand)))
    diff = np.where(ok, cand - ref, 0.0)
    norm = float(np.linalg.norm(ref[ok])) if ok.any() else 0.0
    if bad:
        return LayerDrift(name, type_, math.inf, math.inf, norm, bad)
    err = float(np.linalg.norm(diff))
    rel = err / norm if norm > 0 else (0.0 if err == 0 else math.inf)
    return LayerDrift(name, type_, rel, float(np.max(np.abs(diff))) if diff.size else 0.0, norm)


def compare_precision(model: Model, registry: Registry, inputs: dict[str, np.ndarray] | None = None,
                      reference: Variant | str = Variant(), candidate: Variant | str = "fp16",
                      weights: WeightsSource | None = None, seed: int = 0, threshold: float = 1e-2,
                      device: int | None = None, layer_formats: Mapping[str, str] | None = None) -> DriftResult:
    """Run the same inputs and weights as ``reference`` and ``candidate`` and compare every layer (``device``: the
    GPU of the variants on the cupy backend; ``layer_formats``: the candidate's per-layer formats).

    Both networks are built with fusing rules off, so every layer of the model is compared. ``layer_formats``:
    per-layer format settings of the candidate run (``engine.formats``); the reference runs the model as it is.
    The format conversions a run inserts are not compared."""
    ref_v = Variant.parse(reference) if isinstance(reference, str) else reference
    cand_v = Variant.parse(candidate) if isinstance(candidate, str) else candidate
    if not threshold > 0:
        raise LayerLabError(f"the drift threshold must be a positive number, got {threshold}")
    if device is not None and ref_v.backend == cand_v.backend == "numpy":
        raise LayerLabError(f"device {device}: both runs are on the numpy backend (a device chooses the GPU of "
                            "cupy runs)")
    outputs = []
    for v, pins in ((ref_v, ()), (cand_v, tuple((layer_formats or {}).items()))):
        spec = RunSpec(backend=v.backend, format=str(v.fmt), seed=seed, fusing="off", layer_formats=pins,
                       device=device if v.backend != "numpy" else None)
        net = open_network(model, spec, registry, weights=weights, reuse_buffers=False)
        for name, arr in (inputs or {}).items():
            net.set_input(name, arr)
        names = [n for n in net.order if n not in {c[0] for c in net.conversions}]
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is what this looks for
            net.run()
            outputs.append({n: net.output(n) for n in names})
        order = [(n, net.layer(n).desc.name) for n in names]
    layers = [layer_drift(n, t, outputs[0][n], outputs[1][n]) for n, t in order]
    return DriftResult(str(ref_v), str(cand_v), threshold, layers)


def drift_colour(rel_error: float, threshold: float) -> tuple[int, int, int]:
    """An RGB colour for a layer's drift: green well under the threshold, yellow near it, red over."""
    if not math.isfinite(rel_error):
        return (200, 30, 30)
    t = 0.0 if rel_error <= 0 else min(1.0, max(0.0, (math.log10(rel_error / threshold) + 2) / 2))
    if rel_error > threshold:
        return (220, 50, 40)
    return (int(60 + 180 * t), int(170 + 30 * t), 60)

