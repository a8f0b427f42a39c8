"""Tensor formats (fp32/fp16 x NCHW/NHWC), tensor dimensions and conversions between formats."""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

import numpy as np

from engine.errors import LayerLabError


class Dims(NamedTuple):
    """Logical tensor dimensions, always in N, C, H, W order whatever the memory layout."""

    n: int
    c: int
    h: int
    w: int

    @property
    def elements(self) -> int:
        return self.n * self.c * self.h * self.w

    def __str__(self) -> str:
        return f"{self.n}x{self.c}x{self.h}x{self.w}"

    @classmethod
    def parse(cls, text: str) -> Dims:
        """Parse "NxCxHxW" (also accepts ',' or '×' as separators)."""
        parts = [p for p in re.split(r"[x×,\s]+", str(text).strip()) if p]
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            raise LayerLabError(f"bad dimensions {text!r}: expected N x C x H x W, e.g. 1x3x256x256")
        return cls(*(int(p) for p in parts))


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

    def shape(self, dims: Dims) -> tuple[int, int, int, int]:
        """Array shape of a tensor of these dimensions in this layout."""
        if self.layout is Layout.NHWC:
            return (dims.n, dims.h, dims.w, dims.c)
        return (dims.n, dims.c, dims.h, dims.w)

    def dims_of(self, array: Any) -> Dims:
        """Logical dimensions of an array stored in this layout."""
        s = array.shape
        if self.layout is Layout.NHWC:
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
    """The array seen in logical NCHW order (a view, no copy)."""
    return array.transpose(0, 3, 1, 2) if fmt.layout is Layout.NHWC else array


def is_nhwc_memory(array: Any) -> bool:
    """True when the logical N,C,H,W array (NumPy or CuPy) is a view of C-contiguous NHWC memory."""
    return array.ndim == 4 and array.transpose(0, 2, 3, 1).flags.c_contiguous


def from_nchw_view(array: Any, fmt: TensorFormat) -> Any:
    """A logical NCHW array seen in the layout of ``fmt`` (a view, no copy)."""
    return array.transpose(0, 2, 3, 1) if fmt.layout is Layout.NHWC else array


def convert(array: Any, src: TensorFormat, dst: TensorFormat, xp: Any = np) -> Any:
    """Copy of ``array`` (stored in ``src``) in format ``dst``, contiguous (never a view)."""
    out = from_nchw_view(nchw_view(array, src), dst)
    return out.astype(dst.dtype, order="C", copy=True)
