"""What the layers of tensors of any rank share: integer lists written as text, axes counted from either end."""
from __future__ import annotations

import re

from engine.tensor import MAX_RANK


def int_list(text: str) -> list[int]:
    """The integers of ``text``, separated by commas or spaces, brackets allowed ("0, 2, 3, 1", "[-1]"); empty text is
    no integer. ValueError for anything else."""
    parts = [p for p in re.split(r"[,\s\[\]()]+", str(text)) if p]
    if len(parts) > MAX_RANK * 4:
        raise ValueError("too many values")
    return [int(p) for p in parts]


def axis_index(axis: int, rank: int) -> int:
    """``axis`` (negative: counted from the end, as ONNX) as an index in ``0..rank-1``; ValueError when outside."""
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is outside a tensor of rank {rank} (-{rank}..{rank - 1})")
    return axis % rank


def ints_text(values: list[int] | tuple[int, ...]) -> str:
    """The parameter text of a list of integers ("0,2,3,1")."""
    return ",".join(str(int(v)) for v in values)
