"""Joins of slices of one tensor folded into one gather: a concatenation whose inputs are all slices of the same
tensor, each cutting only the joined axis and read by the join alone, picks entries of that axis in a new order.
Exporters write ``torch.roll`` (Swin's shifted windows) and such reorderings as Slice, Slice, Concat; imported as
they are, each slice and the join copy the tensor, while one gather layer with the entries' indices copies it once.

The indices are exact: each slice's range is resolved against the source's size along the axis (Python's clamping),
and the join's indices are the slices' in order."""
from __future__ import annotations

import dataclasses

from engine.importers.onnx.folding import layer_readers
from engine.model import LayerSpec
from engine.tensor import Dims, parse_range

_NAMED = {"channels": 1, "height": 2, "width": 3}  # a slice's named ranges of N x C x H x W


def index_text(indices: list[int]) -> str:
    """``indices`` as the gather layer's ``indices`` parameter reads them: consecutive ascending runs of three or
    more as ``start:end`` (end excluded), the others one by one."""
    parts, i = [], 0
    while i < len(indices):
        j = i
        while j + 1 < len(indices) and indices[j + 1] == indices[j] + 1 and indices[i] >= 0:
            j += 1
        parts.append(f"{indices[i]}:{indices[j] + 1}" if j - i >= 2 else ",".join(map(str, indices[i:j + 1])))
        i = j + 1
    return ",".join(parts)


def single_cut(spec: LayerSpec, rank: int) -> tuple[int, slice] | None:
    """(axis, range) of a slice layer that cuts exactly one axis of a tensor of ``rank``; None otherwise."""
    cuts: list[tuple[int, slice]] = []
    axes = [a.strip() for a in str(spec.params.get("axes", "")).split(",") if a.strip()]
    ranges = [r for r in str(spec.params.get("ranges", "")).split(",") if r.strip()]
    if axes:
        if len(axes) != len(ranges):
            return None
        for a, r in zip(axes, ranges):
            try:
                rng, axis = parse_range(r), int(a)
            except ValueError:
                return None
            if not -rank <= axis < rank:
                return None
            cuts.append((axis % rank, rng))
    for name, axis in _NAMED.items():
        text = str(spec.params.get(name, ":")).strip()
        if text != ":":
            try:
                rng = parse_range(text)
            except ValueError:
                return None
            if rank != 4:
                return None
            cuts.append((axis, rng))
    cuts = [(a, r) for a, r in cuts if r != slice(None)]
    return cuts[0] if len(cuts) == 1 else None


def fold_slice_joins(layers: dict[str, LayerSpec], dims: dict[str, Dims]) -> list[tuple[list[str], str]]:
    """Replace every concatenation of slices of one tensor along the slices' one cut axis by a gather layer of the
    same name (its activation kept); the slices go. Changes ``layers`` in place; returns (slices, join) pairs."""
    readers = layer_readers(layers)
    folded = []
    for name, spec in list(layers.items()):
        if spec.type != "concatenation" or len(spec.inputs) < 2 or name not in dims:
            continue
        slices = [layers.get(i) if i is not None else None for i in spec.inputs]
        if any(s is None or s.type != "slice" or s.activation != "none" or len(s.inputs) != 1
               or readers.get(s.name) != [name] for s in slices):
            continue
        sources = {s.inputs[0] for s in slices}  # type: ignore[union-attr]
        src = sources.pop() if len(sources) == 1 else None
        if src is None or src not in dims or len(set(spec.inputs)) != len(spec.inputs):
            continue
        rank = len(dims[src])
        try:
            axis = int(spec.params.get("axis", 1))
        except ValueError:
            continue
        if not -rank <= axis < rank:
            continue
        axis %= rank
        cuts = [single_cut(s, rank) for s in slices]  # type: ignore[arg-type]
        if any(c is None or c[0] != axis for c in cuts):
            continue
        indices = [i for c in cuts for i in range(*c[1].indices(dims[src][axis]))]  # type: ignore[index]
        if len(indices) != dims[name][axis]:
            continue
        layers[name] = dataclasses.replace(spec, type="gather", inputs=[src], params={
            "axis": str(axis), "indices": index_text(indices), "drop_axis": "false"})
        for s in spec.inputs:
            del layers[s]  # type: ignore[arg-type]
            dims.pop(s, None)  # type: ignore[arg-type]
        folded.append((list(spec.inputs), name))  # type: ignore[arg-type]
    return folded
