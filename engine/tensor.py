"""Tensor formats (fp32/fp16 x NCHW/NHWC), tensor dimensions and conversions between formats."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from operator import itemgetter
from typing import Any

import numpy as np

from engine.errors import LayerLabError

#: the ranks a tensor may have (N x C x H x W is rank 4; tokens, matrices and windows need the others)
MIN_RANK, MAX_RANK = 1, 6


class Dims(tuple):
    """Logical tensor dimensions of rank 1 to 6, in logical order whatever the memory layout.

    Rank 4 is N, C, H, W (``.n .c .h .w``, valid for rank 4 only), what every image layer reads; the other ranks
    are plain sizes in order. Built positionally (``Dims(1, 3, 64, 64)``), compared and hashed as a tuple."""

    __slots__ = ()

    def __new__(cls, *sizes: int) -> Dims:
        if not MIN_RANK <= len(sizes) <= MAX_RANK:
            raise LayerLabError(f"a tensor has rank {MIN_RANK} to {MAX_RANK}, got {len(sizes)} sizes {sizes}")
        return tuple.__new__(cls, sizes)

    def __getnewargs__(self) -> tuple[int, ...]:  # pickles (and copies) as Dims(*sizes)
        return tuple(self)

    n = property(itemgetter(0), doc="batch size (rank 4)")
    c = property(itemgetter(1), doc="channels (rank 4)")
    h = property(itemgetter(2), doc="height (rank 4)")
    w = property(itemgetter(3), doc="width (rank 4)")

    @property
    def rank(self) -> int:
        return len(self)

    @property
    def elements(self) -> int:
        return math.prod(self)

    def __str__(self) -> str:
        return "x".join(map(str, self))

    def __repr__(self) -> str:
        return f"Dims({', '.join(map(str, self))})"

    @classmethod
    def parse(cls, text: str) -> Dims:
        """Parse "NxCxHxW", or 1 to 6 sizes of any other rank ("8x64", "1x49x96"); also accepts ',' or '×'
        as separators."""
        parts = [p for p in re.split(r"[x×,\s]+", str(text).strip()) if p]
        if not MIN_RANK <= len(parts) <= MAX_RANK or not all(p.isascii() and p.isdigit() for p in parts):
            raise LayerLabError(f"bad dimensions {text!r}: expected N x C x H x W (e.g. 1x3x256x256), or 1 to 6 "
                                "sizes of another rank (e.g. 1x49x96)")
        return cls(*(int(p) for p in parts))


def parse_range(text: str) -> slice:
    """A range of one axis as the slice layer's parameters and the importer write it: ``start:end:step`` (each
    part optional, Python meaning) or a single index ``i`` (that one element).

    Raises ValueError for anything else, including a step of 0."""
    raw = str(text).strip()
    parts = raw.split(":")
    if len(parts) > 3:
        raise ValueError("more than two ':'")
    vals = [int(p) if p.strip() else None for p in parts]
    if len(parts) == 1:
        if vals[0] is None:
            return slice(None)
        i = vals[0]
        return slice(i, i + 1 if i != -1 else None)
    step = vals[2] if len(parts) == 3 else None
    if step == 0:
        raise ValueError("the step is 0")
    return slice(vals[0], vals[1], step)


def broadcast_dims(dims: list[Dims]) -> Dims:
    """The dimensions of tensors of ``dims`` combined element by element as ONNX and NumPy broadcast them: sizes
    aligned from the last axis, missing leading ones taken as 1, a size 1 stretched. ValueError when they do not
    broadcast."""
    rank = max(len(d) for d in dims)
    out = [1] * rank
    for d in dims:
        for i, size in enumerate(d, rank - len(d)):
            if size != out[i] and 1 not in (size, out[i]):
                raise ValueError(f"sizes {size} and {out[i]} on axis {i}")
            out[i] = max(size, out[i]) if size != 1 else out[i]
    return Dims(*out)


class Precision(str, Enum):
    FP32 = "fp32"
    FP16 = "fp16"


class Layout(str, Enum):
    NCHW = "nchw"
    NHWC = "nhwc"


@dataclass(frozen=True)
class TensorFormat:
    """Element type and memory layout of the tensors a network computes on."""

    precision: Precision = Precision.FP32
    layout: Layout = Layout.NCHW

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float16 if self.precision is Precision.FP16 else np.float32)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __str__(self) -> str:
        return f"{self.precision.value}|{self.layout.value}"

    def shape(self, dims: Dims) -> tuple[int, ...]:
        """Array shape of a tensor of these dimensions in this layout (the layout orders rank 4 only: the other
        ranks are stored in logical order)."""
        if len(dims) != 4:
            return tuple(dims)
        if self.layout is Layout.NHWC:
            return (dims.n, dims.h, dims.w, dims.c)
        return (dims.n, dims.c, dims.h, dims.w)

    def dims_of(self, array: Any) -> Dims:
        """Logical dimensions of an array stored in this layout."""
        s = array.shape
        if self.layout is Layout.NHWC and len(s) == 4:
            return Dims(s[0], s[3], s[1], s[2])
        return Dims(*s)

    @classmethod
    def parse(cls, text: str | None) -> TensorFormat:
        """Parse 'fp16|nhwc', 'fp32,nchw', 'fp16 nhwc' or a single token (the other part defaults)."""
        precision, layout = Precision.FP32, Layout.NCHW
        tokens = [t for t in re.split(r"[|,\s]+", (text or "").strip().lower()) if t]
        for tok in tokens:
            if tok in ("fp32", "fp16"):
                precision = Precision(tok)
            elif tok in ("nchw", "nhwc"):
                layout = Layout(tok)
            else:
                raise LayerLabError(f"unknown tensor format {tok!r}: expected fp32 or fp16, nchw or nhwc")
        return cls(precision, layout)


FORMATS = tuple(TensorFormat(p, lo) for p in Precision for lo in Layout)

FP32_NCHW = TensorFormat(Precision.FP32, Layout.NCHW)


def nchw_view(array: Any, fmt: TensorFormat) -> Any:
    """The array seen in logical NCHW order (a view, no copy); a tensor of another rank is already in logical order."""
    return array.transpose(0, 3, 1, 2) if fmt.layout is Layout.NHWC and array.ndim == 4 else array


def is_nhwc_memory(array: Any) -> bool:
    """True when the logical N,C,H,W array (NumPy or CuPy) is a view of C-contiguous NHWC memory."""
    return array.ndim == 4 and array.transpose(0, 2, 3, 1).flags.c_contiguous


#: channels up to which :func:`copy_into` copies an NCHW array into NHWC memory channel by channel
FEW_CHANNELS = 4


def copy_into(out: Any, data: Any) -> None:
    """``out[...] = data`` for arrays of one shape. Where ``out`` is the logical NCHW view of NHWC NumPy memory with
    at most FEW_CHANNELS channels and ``data`` is C-contiguous NCHW (an image given to an input layer), one copy
    per channel: NumPy's transposing copy runs its innermost loop over the three channels (224x224 RGB: 234 against
    54 us on one Zen 3 core). Nothing to do where ``out`` is ``data`` (an input held in its own output buffer)."""
    if out is data:
        return
    if (type(out) is np.ndarray and type(data) is np.ndarray and out.ndim == 4 and out.shape[1] <= FEW_CHANNELS
            and data.flags.c_contiguous and is_nhwc_memory(out) and out.shape == data.shape):
        mem = out.transpose(0, 2, 3, 1)
        for c in range(out.shape[1]):
            mem[..., c] = data[:, c]
        return
    out[...] = data


def from_nchw_view(array: Any, fmt: TensorFormat) -> Any:
    """A logical NCHW array seen in the layout of ``fmt`` (a view, no copy); other ranks stay in logical order."""
    return array.transpose(0, 2, 3, 1) if fmt.layout is Layout.NHWC and array.ndim == 4 else array


def convert(array: Any, src: TensorFormat, dst: TensorFormat, xp: Any = np) -> Any:
    """Copy of ``array`` (stored in ``src``) in format ``dst``, contiguous (never a view)."""
    out = from_nchw_view(nchw_view(array, src), dst)
    return out.astype(dst.dtype, order="C", copy=True)
