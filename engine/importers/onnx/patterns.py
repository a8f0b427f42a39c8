"""Patterns: groups of ONNX nodes that exporters write for one LayerLab layer or activation, recognised at
their first node before the one-node mappings are tried.

* ``Mul(x, Sigmoid(x))`` -> silu; ``Mul(x, Tanh(Softplus(x)))`` -> mish; ``Mul(x, HardSigmoid(x))`` with
  alpha 1/6 and beta 1/2 -> hardswish;
* ``Reshape -> Transpose -> Reshape`` of a pixel shuffle -> depth_to_space (DCR or CRD).

(Flatten/Reshape feeding Gemm/MatMul needs no pattern: the reshape is a view that fully_connected reads,
and squeeze-excitation maps node by node: global pooling, 1x1 convolutions, sigmoid, broadcast product.)"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.importers.onnx.context import Context
from engine.importers.onnx.ops_tensor import pixel_shuffle_mode


def _gated(ctx: Context, inner: Any, act: str) -> bool:
    """``Mul(x, f(x))`` where ``f`` runs from the current node to ``inner``: activation ``act`` of x."""
    x = ctx.node.input[0]
    mul = ctx.only_reader(inner.output[0])
    if mul is None or mul.op_type != "Mul" or sorted(mul.input) != sorted([x, inner.output[0]]):
        return False
    if not ctx.has_activation(act) or x not in ctx.sources:
        return False
    nodes = tuple(n for n in (inner, mul) if n is not ctx.node)
    ctx.set_activation(x, mul.output[0], act, {}, pattern=nodes)
    ctx.consumed.update(id(n) for n in nodes)
    return True


def silu(ctx: Context) -> bool:
    return ctx.node.op_type == "Sigmoid" and _gated(ctx, ctx.node, "silu")


def hardswish(ctx: Context) -> bool:
    if ctx.node.op_type != "HardSigmoid":
        return False
    a = ctx.attrs()
    if abs(float(a.get("alpha", 0.2)) - 1 / 6) > 1e-6 or float(a.get("beta", 0.5)) != 0.5:
        return False
    return _gated(ctx, ctx.node, "hardswish")


def mish(ctx: Context) -> bool:
    if ctx.node.op_type != "Softplus":
        return False
    tanh = ctx.only_reader(ctx.node.output[0])
    return tanh is not None and tanh.op_type == "Tanh" and _gated(ctx, tanh, "mish")


def pixel_shuffle(ctx: Context) -> bool:
    first = ctx.node
    if first.op_type != "Reshape" or not ctx.is_const(first.input[1]) or first.input[0] not in ctx.sources:
        return False
    tr = ctx.only_reader(first.output[0])
    if tr is None or tr.op_type != "Transpose":
        return False
    last = ctx.only_reader(tr.output[0])
    if last is None or last.op_type != "Reshape":
        return False
    try:
        found = pixel_shuffle_mode(ctx.shape(first.output[0]), list(ctx.attrs(tr).get("perm", [])),
                                   ctx.shape(first.input[0]), ctx.shape(last.output[0]))
    except Exception:  # noqa: BLE001 - unknown shapes: not this pattern
        return False
    if found is None:
        return False
    mode, block = found
    ctx.add("depth_to_space", {"block_size": block, "mode": mode}, [ctx.tensor(first.input[0])], last.output[0])
    ctx.consumed.update((id(tr), id(last)))
    ctx.folded.append(f"Reshape+Transpose+Reshape {ctx.node_name} -> depth_to_space ({mode}, block {block})")
    return True


PATTERNS: tuple[Callable[[Context], bool], ...] = (silu, hardswish, mish, pixel_shuffle)


def match(ctx: Context) -> bool:
    """Map the current node and the rest of a pattern starting at it; False when no pattern starts there."""
    return any(p(ctx) for p in PATTERNS)
