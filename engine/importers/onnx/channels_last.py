"""Channels-last regions computed on N x C x H x W: PyTorch's ConvNeXt (and MetaFormer, NAFNet-like blocks...) permute
an image to N x H x W x C, apply LayerNorm and Linear layers to each pixel's channel vector, then permute back. Each
permute is a copy of every value, and the Linear layers run as matrix products where 1x1 convolutions would take the
engine's convolution paths. After the view folding, each such region is rewritten as the same computation on
N x C x H x W without the permutes: layer normalization over the channels, 1x1 convolutions (weights transposed to
O x I x 1 x 1, bias and activation kept), per-channel affine layers, the element-wise layers as they were.

A region starts at views that permute an N x C x H x W tensor to channels-last (``perm 0,2,3,1``, perhaps with the
leading axes merged), holds only layers that act on each pixel's last-axis vector alone, and ends at views that move
the values back (``perm 0,3,1,2`` or a folded transpose that also reshapes). No value may leave it otherwise: a
permuted tensor also read elsewhere leaves the region (and the graph) as it is. The entry and exit checks are exact:
the views are applied to an index array and compared with the channels-last order, as ``views`` checks its plans."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.importers.onnx.views import MAX_VALUES, apply_steps, is_view, view_steps
from engine.model import LayerSpec
from engine.tensor import Dims

Grid = tuple[int, int, int]  # N, H, W of a region's pixels

#: layer types that may act on each pixel's channel vector alone (``_per_pixel`` checks their parameters)
PER_PIXEL = frozenset({"layer_normalization", "matmul", "fully_connected", "unary", "element_wise", "affine", "softmax",
                       "reshape"})
#: element-wise operations with a constant vector that become a per-channel affine layer
AFFINE_OPS = frozenset({"sum", "sub", "product", "div"})


@dataclass
class Region:
    """A channels-last region: the views that enter and leave it, the layers inside (in layer order) and the
    constants its element-wise layers read; ``grid`` is N, H, W."""

    grid: Grid
    entries: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    exits: list[str] = field(default_factory=list)
    constants: list[str] = field(default_factory=list)


@dataclass
class Rewrite:
    """What one region became: the layers removed (each with the layer that now computes its values), the layers
    rewritten (old type -> new type) and the layers the region held before and after."""

    region: Region
    removed: dict[str, str]
    converted: dict[str, tuple[str, str]]
    before: int
    after: int


def channel_axis(dims: tuple[int, ...], pixels: int) -> int | None:
    """The axis holding the channels of a region tensor of ``dims`` for an image of ``pixels`` pixels (N x H x W):
    the last one when the leading axes hold the pixels (channels-last), 1 for the pixels as rows of an
    R x C x 1 x 1 tensor (how the N x C x H x W mappings hold a matrix); None when it holds no such tensor. Both
    forms keep each pixel's channels together, pixel after pixel."""
    if dims and math.prod(dims[:-1]) == pixels:
        return len(dims) - 1
    if len(dims) == 4 and dims[0] == pixels and dims[2:] == (1, 1):
        return 1
    return None


def _held(n: int, c: int, h: int, w: int, dims: tuple[int, ...]) -> np.ndarray:
    """The index (in N x C x H x W order) of each value of a region tensor of ``dims`` holding that image."""
    return np.arange(n * c * h * w).reshape(n, c, h, w).transpose(0, 2, 3, 1).reshape(dims)


def entry_grid(spec: LayerSpec, dims: dict[str, Dims]) -> Grid | None:
    """N, H, W when ``spec`` is a view moving an N x C x H x W tensor to channels-last (its leading axes perhaps
    merged or split, the last axis C); None otherwise."""
    if not is_view(spec) or spec.inputs[0] not in dims or spec.name not in dims:
        return None
    x, y = tuple(dims[spec.inputs[0]]), tuple(dims[spec.name])
    if len(x) != 4 or math.prod(y) != math.prod(x) or math.prod(x) > MAX_VALUES:
        return None
    axis = channel_axis(y, x[0] * x[2] * x[3])
    if axis is None or y[axis] != x[1]:
        return None
    got = apply_steps(np.arange(math.prod(x)).reshape(x), view_steps(x, [spec]))
    if got.shape != y or not np.array_equal(got, _held(*x, y)):
        return None
    return x[0], x[2], x[3]


def is_exit(spec: LayerSpec, dims: dict[str, Dims], grid: Grid) -> bool:
    """Whether the view ``spec`` moves a region tensor of pixels ``grid`` back to N x C x H x W order (its output
    that tensor, or that tensor reshaped)."""
    if not is_view(spec) or spec.inputs[0] not in dims or spec.name not in dims:
        return False
    src, y = tuple(dims[spec.inputs[0]]), tuple(dims[spec.name])
    n, h, w = grid
    axis = channel_axis(src, n * h * w)
    if axis is None:
        return False
    c = src[axis]
    size = n * c * h * w
    if math.prod(y) != size or size > MAX_VALUES:
        return False
    got = apply_steps(_held(n, c, h, w, src), view_steps(src, [spec]))
    return got.shape == y and np.array_equal(got.reshape(-1), np.arange(size))


def _axis(text: str, rank: int) -> int | None:
    try:
        axis = int(text)
    except ValueError:
        return None
    return axis % rank if -rank <= axis < rank else None


class _Finder:
    """Grows regions over ``layers`` (read only)."""

    def __init__(self, layers: dict[str, LayerSpec], dims: dict[str, Dims], weights: dict[str, dict[str, np.ndarray]],
                 elementwise: Callable[[str], bool]) -> None:
        self.layers, self.dims, self.weights, self.elementwise = layers, dims, weights, elementwise
        self.readers: dict[str, list[str]] = {}
        for spec in layers.values():
            for i in dict.fromkeys(spec.inputs):
                if i is not None:
                    self.readers.setdefault(i, []).append(spec.name)

    def per_pixel(self, spec: LayerSpec, grid: Grid) -> bool:
        """Whether ``spec`` computes each pixel's output channels from that pixel's input channels alone, its
        input and output being region tensors of pixels ``grid`` (an element-wise layer's other inputs are checked
        by ``valid``)."""
        if spec.type not in PER_PIXEL or spec.format or spec.name not in self.dims or not spec.inputs or \
                spec.inputs[0] not in self.dims:
            return False
        if spec.activation != "none" and not self.elementwise(spec.activation):
            return False
        pixels = grid[0] * grid[1] * grid[2]
        x, y, p = tuple(self.dims[spec.inputs[0]]), tuple(self.dims[spec.name]), spec.params
        ax, ay = channel_axis(x, pixels), channel_axis(y, pixels)
        if ay is None or (ax is None and spec.type != "element_wise"):
            return False
        if spec.type == "reshape":
            return is_view(spec) and x[ax] == y[ay]
        if spec.type == "layer_normalization":
            if p.get("over", "trailing") == "channels":
                return ax == 1
            first = _axis(p.get("axis", "-1"), len(x))
            return first is not None and first <= ax and all(x[a] == 1 for a in range(first, len(x)) if a != ax)
        if spec.type == "softmax":
            return _axis(p.get("axis", "-1"), len(x)) == ax
        if spec.type in ("matmul", "fully_connected"):
            w = self.weights.get(spec.name, {}).get("weights")
            if any(spec.inputs[1:]) or w is None or w.ndim != 2:
                return False
            k = w.shape[0] if spec.type == "matmul" else w.shape[1]
            return k == x[ax] and (ax == len(x) - 1 if spec.type == "matmul" else (ax, ay) == (1, 1))
        if spec.type == "affine":
            return not any(spec.inputs[1:]) and (p.get("mode", "per_tensor") == "per_tensor" or ax == 1)
        return True

    def grow(self, start: str, grid: Grid) -> Region | None:
        """The region entered by the view ``start``; None when a value leaves it other than through an exit."""
        region = Region(grid, entries=[start])
        inside = {start}
        exits: set[str] = set()
        constants: set[str] = set()
        todo = [start]
        while todo:
            name = todo.pop()
            spec = self.layers[name]
            if name not in region.entries:
                for i in spec.inputs:
                    if i is None or i in inside:
                        continue
                    src = self.layers.get(i)
                    if src is None:
                        return None
                    if spec.type == "element_wise" and src.type == "constant":
                        constants.add(i)
                    elif entry_grid(src, self.dims) == grid:
                        region.entries.append(i)
                    elif self.per_pixel(src, grid):
                        region.members.append(i)
                    else:
                        return None
                    if src.type != "constant":
                        inside.add(i)
                        todo.append(i)
            for r in self.readers.get(name, []):
                if r in inside or r in exits:
                    continue
                spec_r = self.layers[r]
                if r in region.entries or r in constants:
                    return None
                if is_exit(spec_r, self.dims, grid):
                    exits.add(r)
                elif self.per_pixel(spec_r, grid):
                    region.members.append(r)
                    inside.add(r)
                    todo.append(r)
                else:
                    return None
        order = {n: k for k, n in enumerate(self.layers)}
        region.members.sort(key=order.__getitem__)
        region.exits = sorted(exits, key=order.__getitem__)
        region.constants = sorted(constants, key=order.__getitem__)
        return region if self.valid(region, inside) else None

    def valid(self, region: Region, inside: set[str]) -> bool:
        """The exits lead out, the entries read from outside, each element-wise layer's tensors have its output's
        sizes and its constants broadcast over the channels alone."""
        if not region.exits or any(self.layers[e].inputs[0] in inside for e in region.entries):
            return False
        pixels = math.prod(region.grid)
        for name in region.members:
            spec = self.layers[name]
            tensors = [i for i in spec.inputs if i is not None and i not in region.constants]
            if any(i not in inside for i in tensors):
                return False
            if spec.type == "element_wise":
                d = tuple(self.dims[name])
                if any(tuple(self.dims[i]) != d for i in tensors):
                    return False
                if any(i in region.constants and self.vector(self.dims[i], d, pixels) is None for i in spec.inputs):
                    return False
        for const in region.constants:  # a vector reshaped to 1 x C x 1 x 1 for the region is read in it alone
            readers = self.readers.get(const, [])
            if math.prod(self.dims[const]) != 1 and any(r not in inside for r in readers) and \
                    any(not self.affine_form(self.layers[r], region) for r in readers if r in inside):
                return False
        return True

    @staticmethod
    def vector(c: Dims, d: Dims, pixels: int) -> int | None:
        """The number of values of a constant of dims ``c`` broadcast against a region tensor of dims ``d``: 1 (one
        value) or the channels (one per channel); None for any other broadcast."""
        axis = channel_axis(tuple(d), pixels)
        if axis is None or len(c) > len(d):
            return None
        aligned = (1,) * (len(d) - len(c)) + tuple(c)
        if any(v != 1 for a, v in enumerate(aligned) if a != axis) or aligned[axis] not in (1, d[axis]):
            return None
        return aligned[axis]

    def regions(self) -> list[Region]:
        """Every region, grown from its first entry in layer order."""
        seen: set[str] = set()
        regions = []
        for name, spec in self.layers.items():
            if name in seen:
                continue
            grid = entry_grid(spec, self.dims)
            if grid is None:
                continue
            region = self.grow(name, grid)
            seen.add(name)
            if region is not None:
                seen.update(region.entries)
                regions.append(region)
        return regions

    def affine_form(self, spec: LayerSpec, region: Region) -> bool:
        """An element-wise layer of one region tensor and one constant vector, computed as a per-channel affine."""
        if spec.type != "element_wise" or len(spec.inputs) != 2:
            return False
        op, (a, b) = spec.params.get("operation", "sum"), spec.inputs
        const = b if b in region.constants else a if a in region.constants else None
        if const is None or (a in region.constants and b in region.constants) or math.prod(self.dims[const]) == 1:
            return False
        if op == "div":
            return const == b and bool(np.all(self.weights[const]["value"] != 0))
        return op in AFFINE_OPS


def find_regions(layers: dict[str, LayerSpec], dims: dict[str, Dims], weights: dict[str, dict[str, np.ndarray]],
                 elementwise: Callable[[str], bool]) -> list[Region]:
    """The channels-last regions of ``layers`` (see the module documentation), each what ``rewrite_channels_last``
    rewrites; ``elementwise(name)`` says whether an activation acts on each value alone."""
    return _Finder(layers, dims, weights, elementwise).regions()


def _text(values: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(int(v)) for v in values)


class _Rewriter:
    """Rewrites one region of ``layers`` in place (its dims and weights too)."""

    def __init__(self, finder: _Finder, region: Region) -> None:
        self.finder, self.region = finder, region
        self.layers, self.dims, self.weights = finder.layers, finder.dims, finder.weights
        self.redirect: dict[str, str] = {}
        self.converted: dict[str, tuple[str, str]] = {}

    def resolve(self, name: str) -> str:
        while name in self.redirect:
            name = self.redirect[name]
        return name

    def apply(self) -> Rewrite:
        region, layers, dims = self.region, self.layers, self.dims
        n, h, w = region.grid
        before = len(region.entries) + len(region.members) + len(region.exits)
        for e in region.entries:
            self.redirect[e] = layers[e].inputs[0]
        for m in region.members:
            if layers[m].type == "reshape":
                self.redirect[m] = layers[m].inputs[0]
        for x in region.exits:
            if tuple(dims[x]) == (n, self._channels(layers[x].inputs[0]), h, w):
                self.redirect[x] = layers[x].inputs[0]
        for m in region.members:
            if m not in self.redirect:
                self._member(layers[m], Dims(n, self._channels(m), h, w))
        for x in region.exits:
            if x not in self.redirect:  # the image, reshaped: what the view gave
                spec = layers[x]
                self.converted[x] = (spec.type, "reshape")
                spec.type, spec.params = "reshape", {"shape": _text(tuple(dims[x]))}
        removed = {name: self.resolve(name) for name in self.redirect}
        for spec in layers.values():
            spec.inputs = [None if i is None else self.resolve(i) for i in spec.inputs]
        for name in removed:
            del layers[name]
            dims.pop(name, None)
            self.weights.pop(name, None)
        return Rewrite(region, removed, self.converted, before, before - len(removed))

    def _channels(self, name: str) -> int:
        d = tuple(self.dims[name])
        axis = channel_axis(d, math.prod(self.region.grid))
        assert axis is not None  # (every region tensor has one: ``_Finder.per_pixel``)
        return d[axis]

    def _member(self, spec: LayerSpec, out: Dims) -> None:
        old = spec.type
        if spec.type == "layer_normalization":
            spec.params = {k: v for k, v in spec.params.items() if k != "axis"} | {"over": "channels"}
        elif spec.type == "softmax":
            spec.params = spec.params | {"axis": "1"}
        elif spec.type in ("matmul", "fully_connected"):
            self._convolution(spec, out.c)
        elif spec.type == "element_wise":
            self._element_wise(spec, out.c)
        self.dims[spec.name] = out
        if spec.type in ("layer_normalization", "softmax"):
            self.converted[spec.name] = (old, f"{old} over the channels")
        elif spec.type != old:
            self.converted[spec.name] = (old, spec.type)

    def _convolution(self, spec: LayerSpec, m: int) -> None:
        """A Linear layer on the channels (a matmul's K x M weights, a fully_connected's M x K) as a 1 x 1
        convolution (activation kept)."""
        weights = self.weights[spec.name]
        w = weights["weights"] if spec.type == "fully_connected" else weights["weights"].T  # M x K
        default = "true" if spec.type == "fully_connected" else "false"
        bias = spec.params.get("bias", default).lower() in ("true", "1")
        spec.type = "convolution"
        spec.params = {"num_output_channels": str(m), "kernel_size": "1x1x1x1", "stride": "1x1x1x1",
                       "padding": "1x1x0x0", "dilation": "1x1x1x1", "groups": "1", "bias": "true" if bias else "false"}
        moved = {"weights": np.ascontiguousarray(w.reshape(m, w.shape[1], 1, 1))}
        if bias:
            moved["bias"] = weights["bias"]
        self.weights[spec.name] = moved

    def _element_wise(self, spec: LayerSpec, c: int) -> None:
        """With a constant vector: a per-channel affine layer where the operation allows, else the vector read as
        1 x C x 1 x 1."""
        consts = [i for i in spec.inputs if i in self.region.constants]
        if not consts:
            return
        if self.finder.affine_form(spec, self.region):
            const = consts[0]
            v = self.weights[const]["value"].reshape(-1).astype(np.float64)
            x = next(i for i in spec.inputs if i != const)
            op = spec.params.get("operation", "sum")
            scale, shift = {"product": (v, 0.0), "sum": (1.0, v), "div": (1.0 / v, 0.0),
                            "sub": (1.0, -v) if spec.inputs[0] == x else (-1.0, v)}[op]
            spec.type, spec.params, spec.inputs = "affine", {"mode": "per_channel"}, [x]
            self.weights[spec.name] = {k: np.broadcast_to(np.asarray(a, np.float64), (c,)).astype(np.float32)
                                       for k, a in (("scale", scale), ("shift", shift))}
            return
        for const in consts:
            if math.prod(self.dims[const]) != 1 and tuple(self.dims[const]) != (1, c, 1, 1):
                self.dims[const] = Dims(1, c, 1, 1)
                self.layers[const].params = self.layers[const].params | {"dimensions": f"1x{c}x1x1"}
                self.weights[const]["value"] = self.weights[const]["value"].reshape(1, c, 1, 1)


def rewrite_channels_last(layers: dict[str, LayerSpec], dims: dict[str, Dims],
                          weights: dict[str, dict[str, np.ndarray]], elementwise: Callable[[str], bool]) -> list[Rewrite]:
    """Rewrite every channels-last region of ``layers`` (``find_regions``) on N x C x H x W; changes ``layers``,
    ``dims`` and ``weights`` in place. The layers keep their names (and so their groups); the views and the
    reshapes inside a region are removed, what read them reads the layer that now computes their values. Constants
    no layer reads any more are removed too."""
    finder = _Finder(layers, dims, weights, elementwise)
    rewrites = [_Rewriter(finder, region).apply() for region in finder.regions()]
    read = {i for spec in layers.values() for i in spec.inputs}
    for rw in rewrites:
        for const in rw.region.constants:
            if const in layers and const not in read:
                reader = next(m for m in rw.region.members if m in layers)
                del layers[const]
                dims.pop(const, None)
                weights.pop(const, None)
                rw.removed[const] = reader
    return rewrites
