"""Chains of view changes folded after mapping: a run of reshape and transpose layers, each read only by the next,
moves values without computing any; it is replaced by the fewest layers that move them the same way (at most a
reshape, one transpose and a reshape; often one layer). Exporters write a window partition or a head split as many
Reshape, Transpose, Flatten, Squeeze and Unsqueeze nodes; folded, the designer shows one step and the run copies once.

The plan is exact, not heuristic: the chain is applied to the indices of its input, the resulting order of indices is
read as a permutation of the axes of a refined input shape, and the plan is checked against it before it is used."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.model import LayerSpec
from engine.tensor import MAX_RANK, Dims

VIEW_TYPES = ("reshape", "transpose")
NO_ACTIVATION = ("input", "output", "placeholder", "constant")  # layers an activation is not moved onto
MAX_VALUES = 1 << 24  # larger chains are left as they are (the index array would be large)


@dataclass(frozen=True)
class ViewStep:
    """One layer of a plan: ``kind`` "reshape" (``arg`` the output sizes) or "transpose" (``arg`` the perm)."""

    kind: str
    arg: tuple[int, ...]
    dims: tuple[int, ...]  # the output's dimensions


def apply_steps(indices: np.ndarray, steps: Sequence[ViewStep]) -> np.ndarray:
    """``indices`` moved by ``steps`` (what the layers do to values, applied to an index array)."""
    for s in steps:
        indices = indices.reshape(s.arg) if s.kind == "reshape" else indices.transpose(s.arg)
    return indices


def _axes(order: np.ndarray) -> list[tuple[int, int]] | None:
    """``order`` (a flat permutation of 0..n-1) as axes (extent, input stride), innermost output axis first, each
    axis as long as its run of equal steps; None when ``order`` is no permutation of the axes of a shape."""
    n = order.size
    if n == 1:
        return []
    if order[0] != 0:
        return None
    axes, block = [], 1
    while block < n:
        stride = int(order[block])
        run = order[::block] if block > 1 else order
        steps = run - np.arange(run.size) * stride
        bad = np.flatnonzero(steps != 0)
        extent = int(bad[0]) if bad.size else run.size
        while extent > 1 and (n // block) % extent:
            extent -= 1
        if extent <= 1 or stride <= 0:
            return None
        axes.append((extent, stride))
        block *= extent
    return axes


def _refine(axes: list[tuple[int, int]], in_dims: tuple[int, ...], out_dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """``axes`` split where the input's or the output's own axes begin inside them (so fewer reshapes are needed)."""
    in_bounds = {math.prod(in_dims[i:]) for i in range(len(in_dims))}
    out_bounds = {math.prod(out_dims[i:]) for i in range(len(out_dims))}
    changed = True
    while changed:
        changed = False
        block = 1
        for k, (extent, stride) in enumerate(axes):
            cut = next((b // stride for b in sorted(in_bounds) if stride < b < stride * extent and b % stride == 0
                        and extent % (b // stride) == 0), None)
            if cut is None:
                cut = next((b // block for b in sorted(out_bounds) if block < b < block * extent and b % block == 0
                            and extent % (b // block) == 0), None)
            if cut is not None:
                axes[k:k + 1] = [(cut, stride), (extent // cut, stride * cut)]
                changed = True
                break
            block *= extent
    return axes


def _without_ones(dims: Sequence[int]) -> tuple[int, ...]:
    return tuple(d for d in dims if d != 1)


def view_plan(in_dims: Sequence[int], steps: Sequence[ViewStep]) -> list[ViewStep] | None:
    """The fewest steps (reshape, transpose, reshape; each only where needed) that move the values of a tensor of
    ``in_dims`` as ``steps`` do; None when no such plan of rank 1 to 6 is found (the steps are then kept)."""
    in_dims = tuple(in_dims)
    out_dims = steps[-1].dims
    n = math.prod(in_dims)
    if n > MAX_VALUES:
        return None
    order = apply_steps(np.arange(n).reshape(in_dims), steps).reshape(-1)
    if np.array_equal(order, np.arange(n)):
        return [ViewStep("reshape", out_dims, out_dims)]
    axes = _axes(order)
    if axes is None:
        return None
    axes = _refine(axes, in_dims, out_dims)
    by_stride = sorted(range(len(axes)), key=lambda k: -axes[k][1])
    shape = tuple(axes[k][0] for k in by_stride)  # the refined input, outermost axis first
    perm = tuple(by_stride.index(k) for k in reversed(range(len(axes))))  # output order, outermost first
    if not 1 <= len(shape) <= MAX_RANK:
        return None
    plan: list[ViewStep] = []
    if _without_ones(in_dims) == shape:  # no reshape before: the input's own axes, its ones placed to fit
        real = [i for i, d in enumerate(in_dims) if d != 1]
        ones = [i for i, d in enumerate(in_dims) if d == 1]
        moved = [real[p] for p in perm]
        out_ones = [i for i, d in enumerate(out_dims) if d == 1]
        if len(out_dims) == len(in_dims) and len(out_ones) == len(ones) and len(out_dims) - len(out_ones) == len(moved):
            it_real, it_ones = iter(moved), iter(ones)
            full = tuple(next(it_ones) if d == 1 else next(it_real) for d in out_dims)
        else:
            full = tuple(ones + moved)
        tdims = tuple(in_dims[a] for a in full)
        plan.append(ViewStep("transpose", full, tdims))
    else:
        plan.append(ViewStep("reshape", shape, shape))
        tdims = tuple(shape[p] for p in perm)
        plan.append(ViewStep("transpose", perm, tdims))
    if tdims != tuple(out_dims):
        plan.append(ViewStep("reshape", tuple(out_dims), tuple(out_dims)))
    if not np.array_equal(apply_steps(np.arange(n).reshape(in_dims), plan).reshape(-1), order):
        return None  # (never expected: the plan is checked before it replaces anything)
    return plan


def one_layer(plan: Sequence[ViewStep]) -> tuple[str, dict[str, str]]:
    """A plan as one layer: (type, parameters) of a reshape, or of a transpose reading its input under other sizes
    (``input_shape``) and giving its output other sizes (``shape``) where the plan reshapes before or after."""
    kinds = [s.kind for s in plan]
    if "transpose" not in kinds:
        return "reshape", {"shape": _text(plan[-1].dims)}
    t = kinds.index("transpose")
    params = {"perm": _text(plan[t].arg)}
    if t > 0:
        params["input_shape"] = _text(plan[t - 1].dims)
    if t < len(plan) - 1:
        params["shape"] = _text(plan[-1].dims)
    return "transpose", params


def _text(values: Sequence[int]) -> str:
    return ",".join(str(int(v)) for v in values)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.replace(" ", "").split(",") if v)


def view_steps(in_dims: tuple[int, ...], specs: Sequence[LayerSpec]) -> list[ViewStep]:
    """What each layer does to a tensor of ``in_dims``, as steps (a transpose with ``input_shape`` or ``shape`` as up
    to three)."""
    out: list[ViewStep] = []
    cur = in_dims
    for s in specs:
        if s.type == "reshape":
            cur = reshaped(cur, _ints(s.params.get("shape", "")))
            out.append(ViewStep("reshape", cur, cur))
            continue
        before, after = _ints(s.params.get("input_shape", "")), _ints(s.params.get("shape", ""))
        if before:
            cur = before
            out.append(ViewStep("reshape", cur, cur))
        perm = _ints(s.params.get("perm", "")) or tuple(range(len(cur) - 1, -1, -1))
        cur = tuple(cur[p] for p in perm)
        out.append(ViewStep("transpose", perm, cur))
        if after:
            cur = after
            out.append(ViewStep("reshape", cur, cur))
    return out


def reshaped(dims: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` with ONNX Reshape's 0 (the input's size) and -1 (the rest) resolved for a tensor of ``dims``."""
    out = [dims[i] if v == 0 else v for i, v in enumerate(shape)]
    if -1 in out:
        known = math.prod(v for v in out if v != -1)
        out[out.index(-1)] = math.prod(dims) // known
    return tuple(out)


def is_view(spec: LayerSpec) -> bool:
    """A reshape or transpose layer that only moves values (no activation, no format of its own, one input)."""
    return spec.type in VIEW_TYPES and spec.activation == "none" and not spec.format and len(spec.inputs) == 1


def hoist_activations(layers: dict[str, LayerSpec], elementwise: Callable[[str], bool]) -> list[tuple[str, str]]:
    """Move an element-wise activation (``elementwise(name)``) from a reshape or transpose layer to the layer it reads
    when that layer has none and is read by nothing else: the values are the same (the activation commutes with a
    move), the producer applies it as it writes (a matrix product's or a convolution's epilogue) and the view is free
    to fold. Changes ``layers`` in place; returns (from, to) per move."""
    readers: dict[str, int] = {}
    for spec in layers.values():
        for i in spec.inputs:
            if i is not None:
                readers[i] = readers.get(i, 0) + 1
    moved = []
    for spec in reversed(list(layers.values())):  # the last view first: an activation climbs a chain of views
        if spec.type not in VIEW_TYPES or spec.activation == "none" or len(spec.inputs) != 1 or spec.format:
            continue
        src = layers.get(spec.inputs[0] or "")
        if src is None or src.activation != "none" or src.type in NO_ACTIVATION or readers.get(src.name) != 1 or \
                src.format or not elementwise(spec.activation):
            continue
        src.activation, src.act_coefs = spec.activation, dict(spec.act_coefs)
        spec.activation, spec.act_coefs = "none", {}
        moved.append((spec.name, src.name))
    return moved


def fold_linear_views(layers: dict[str, LayerSpec], dims: dict[str, Dims],
                      weights: dict[str, dict[str, np.ndarray]]) -> list[tuple[list[str], str]]:
    """Replace each reshape -> fully_connected -> reshape that applies a Linear layer to the last axis of a tensor of
    tokens (the leading axes merged into rows, then split again) by one matmul layer with the weights (transposed to
    K x M), its bias and activation: no copies before and after, one product of all rows. Each of the three must be
    read only by the next. Changes ``layers``, ``dims`` and ``weights`` in place; returns (old layers, new) per fold."""
    readers: dict[str, list[str]] = {}
    for spec in layers.values():
        for i in spec.inputs:
            if i is not None:
                readers.setdefault(i, []).append(spec.name)

    def sole(name: str) -> LayerSpec | None:
        r = readers.get(name, [])
        return layers[r[0]] if len(r) == 1 else None

    def rows_of(name: str, width: int, rows: int) -> bool:  # a tensor of ``rows`` x ``width`` values, width last
        d = tuple(dims.get(name, ()))
        return len(d) >= 2 and d[-1] == width and math.prod(d[:-1]) == rows

    folds: list[tuple[list[str], str]] = []
    for fc in [s for s in layers.values() if s.type == "fully_connected"]:
        if len(fc.inputs) != 1 or fc.format or "weights" not in weights.get(fc.name, {}) or fc.inputs[0] not in dims:
            continue
        w = weights[fc.name]["weights"]
        m, k = w.shape
        r = dims[fc.inputs[0]][0]
        if tuple(dims[fc.inputs[0]])[1:] not in ((k,), (k, 1, 1)):
            continue
        sources, back, cur = [], [], layers[fc.inputs[0]]  # where the rows could be read from: (layer, views skipped)
        while is_view(cur) and cur.type == "reshape" and len(readers.get(cur.name, [])) == 1:
            back.append(cur.name)
            if rows_of(cur.inputs[0], k, r):
                sources.append((cur.inputs[0], list(back)))
            if cur.inputs[0] not in layers:
                break
            cur = layers[cur.inputs[0]]
        targets, ahead, nxt = [], [], sole(fc.name)  # where the result could be written: (layer, views skipped)
        while nxt is not None and is_view(nxt) and nxt.type == "reshape":
            ahead.append(nxt.name)
            if rows_of(nxt.name, m, r):
                targets.append((nxt.name, list(ahead)))
            nxt = sole(nxt.name)
        pairs = [(x, skipped, after) for x, skipped in sources for y, after in targets
                 if tuple(dims[x])[:-1] == tuple(dims[y])[:-1]]
        if not pairs:
            continue
        x, skipped, after = max(pairs, key=lambda p: len(p[1]) + len(p[2]))
        gone = skipped + after
        last = gone[-1]
        bias = fc.params.get("bias", "true").lower() in ("true", "1")
        new = LayerSpec(last, "matmul", {"num_outputs": str(m), "bias": "true" if bias else "false"},
                        activation=fc.activation, act_coefs=dict(fc.act_coefs), inputs=[x], note=fc.note, group=fc.group)
        moved = {"weights": np.ascontiguousarray(w.T)}
        if bias:
            moved["bias"] = weights[fc.name]["bias"]
        weights[last] = moved
        weights.pop(fc.name, None)
        removed = set(gone[:-1]) | {fc.name}
        rebuilt = {name: (new if name == last else spec) for name, spec in layers.items() if name not in removed}
        layers.clear()
        layers.update(rebuilt)
        for name in removed:
            dims.pop(name, None)
        readers[x] = [last if q in removed else q for q in readers.get(x, [])]
        folds.append(([*reversed(skipped), fc.name, *after], last))
    return folds


def fold_view_chains(layers: dict[str, LayerSpec], dims: dict[str, Dims], keep: set[str]) -> list[tuple[list[str], list[str]]]:
    """Replace, in ``layers`` (in order, changed in place), each chain of two or more view layers (each read only by
    the next, none in ``keep``) by its plan when the plan has fewer layers. The last layer of a chain keeps its name
    (what reads it is unchanged); ``dims`` gets the new layers' dimensions. Returns (old layers, new layers) per fold."""
    readers: dict[str, list[str]] = {}
    for spec in layers.values():
        for i in spec.inputs:
            if i is not None:
                readers.setdefault(i, []).append(spec.name)
    sole = {name: r[0] for name, r in readers.items() if len(r) == 1}
    chains: list[list[str]] = []
    for name, spec in layers.items():
        if not is_view(spec) or name in keep:
            continue
        src = spec.inputs[0]
        if src in layers and is_view(layers[src]) and src not in keep and sole.get(src) == name:
            continue  # not the start of a chain
        chain = [name]
        while chain[-1] in sole and is_view(layers[sole[chain[-1]]]) and chain[-1] not in keep:
            chain.append(sole[chain[-1]])
        if len(chain) > 1:
            chains.append(chain)
    folds: list[tuple[list[str], list[str]]] = []
    replaced: dict[str, list[LayerSpec]] = {}
    for chain in chains:
        for segment, plan in _segments(chain, layers, dims):
            last = layers[segment[-1]]
            kind, params = one_layer(plan)
            new = LayerSpec(last.name, kind, params, inputs=[layers[segment[0]].inputs[0]], note=last.note,
                            group=last.group)
            replaced[last.name] = [new]
            for c in segment[:-1]:
                replaced[c] = []
                dims.pop(c, None)
            folds.append((segment, [new.name]))
    if folds:
        rebuilt = {}
        for name, spec in layers.items():
            for s in replaced.get(name, [spec]):
                rebuilt[s.name] = s
        layers.clear()
        layers.update(rebuilt)
    return folds


def _segments(chain: list[str], layers: dict[str, LayerSpec],
              dims: dict[str, Dims]) -> list[tuple[list[str], list[ViewStep]]]:
    """The parts of ``chain`` that fold (longest first from each start) with their plans."""
    out, i = [], 0
    while i < len(chain) - 1:
        source = layers[chain[i]].inputs[0]
        for j in range(len(chain), i + 1, -1):
            part = chain[i:j]
            if source not in dims or any(c not in dims for c in part):
                continue
            steps = view_steps(tuple(dims[source]), [layers[c] for c in part])
            if steps[-1].dims != tuple(dims[part[-1]]):
                continue  # (parameters the importer did not write: left alone)
            plan = view_plan(tuple(dims[source]), steps)
            if plan is not None:
                out.append((part, plan))
                i = j
                break
        else:
            i += 1
    return out


