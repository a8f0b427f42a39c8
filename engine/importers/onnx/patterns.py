"""Patterns: groups of ONNX nodes that exporters write for one LayerLab layer or activation, recognised at
their first node before the one-node mappings are tried.

* ``Mul(x, Sigmoid(x))`` -> silu; ``Mul(x, Tanh(Softplus(x)))`` -> mish; ``Mul(x, HardSigmoid(x))`` with
  alpha 1/6 and beta 1/2 -> hardswish;
* GELU as the exporters decompose it before opset 20: ``0.5 * x * (1 + Erf(x / sqrt(2)))`` -> gelu and
  ``0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` -> gelu_tanh (the TorchScript and dynamo orders);
* ``Where(Greater(x, t), x, Softplus(x))`` with t >= 16 -> softplus (torch.nn.Softplus from the dynamo exporter);
* ``Reshape -> Transpose -> Reshape`` of a pixel shuffle -> depth_to_space (DCR or CRD);
* ``MatMul(q, k^T) [* scale] [+ bias] -> Softmax -> MatMul(., v)`` -> attention (``ops_attention.attention``).

(Flatten/Reshape feeding Gemm/MatMul needs no pattern: the reshape is a view that fully_connected reads,
and squeeze-excitation maps node by node: global pooling, 1x1 convolutions, sigmoid, broadcast product.)"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.importers.onnx.context import Context
from engine.importers.onnx.ops_attention import attention
from engine.importers.onnx.ops_tensor import pixel_shuffle_mode
from engine.tensor import Dims


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


#: a chain step: (op type, operands) with operands "x" (the pattern's input), "p" (the previous step's output)
#: or a number (a scalar constant); Add and Mul match their operands in any order
Step = tuple[str, tuple[Any, ...]]
SQRT2, SQRT_2_PI = math.sqrt(2.0), math.sqrt(2.0 / math.pi)
_GELU_TAIL_TS: list[Step] = [("Add", ("p", 1.0)), ("Mul", ("x", "p")), ("Mul", ("p", 0.5))]
_GELU_TAIL_DYNAMO: list[Step] = [("Add", ("p", 1.0)), ("Mul", ("p", 0.5)), ("Mul", ("x", "p"))]
_CUBE_TS: list[Step] = [("Mul", ("x", "x")), ("Mul", ("x", "p"))]
_CUBE_DYNAMO: list[Step] = [("Pow", ("x", 3.0))]
_TANH_INNER: list[Step] = [("Mul", ("p", 0.044715)), ("Add", ("x", "p")), ("Mul", ("p", SQRT_2_PI)), ("Tanh", ("p",))]
CHAINS: dict[str, list[list[Step]]] = {
    "silu": [[("Sigmoid", ("x",)), ("Mul", ("x", "p"))]],
    "mish": [[("Softplus", ("x",)), ("Tanh", ("p",)), ("Mul", ("x", "p"))]],
    "gelu": [[(op, ("x", k)), ("Erf", ("p",)), *tail] for op, k in (("Div", SQRT2), ("Mul", 1 / SQRT2))
             for tail in (_GELU_TAIL_TS, _GELU_TAIL_DYNAMO)],
    "gelu_tanh": [[*cube, *_TANH_INNER, *tail] for cube in (_CUBE_TS, _CUBE_DYNAMO)
                  for tail in (_GELU_TAIL_TS, _GELU_TAIL_DYNAMO)],
}


def _operands_match(ctx: Context, node: Any, want: tuple[Any, ...], x: str, prev: str | None) -> bool:
    got = [t for t in node.input]
    if len(got) != len(want):
        return False

    def ok(t: str, w: Any) -> bool:
        if w == "x":
            return t == x
        if w == "p":
            return t == prev
        if not ctx.is_const(t) or ctx.consts[t].size != 1:
            return False
        v = float(np.asarray(ctx.consts[t]).reshape(()))
        return abs(v - w) <= 1e-6 * max(1.0, abs(w))
    if node.op_type in ("Add", "Mul") and len(want) == 2:
        return (ok(got[0], want[0]) and ok(got[1], want[1])) or (ok(got[0], want[1]) and ok(got[1], want[0]))
    return all(ok(t, w) for t, w in zip(got, want))


def _chain(ctx: Context, steps: list[Step]) -> list[Any] | None:
    """The nodes of ``steps`` starting at the current node (each later one the only reader of the one before)."""
    first = ctx.node
    x = next((t for t in first.input if t and not ctx.is_const(t)), None)
    if x is None or x not in ctx.sources:
        return None
    nodes, prev = [], None
    node = first
    for op, want in steps:
        if node is None or node.op_type != op or node.domain not in ("", "ai.onnx") or \
                not _operands_match(ctx, node, want, x, prev):
            return None
        nodes.append(node)
        prev = node.output[0]
        node = ctx.only_reader(prev) if len(nodes) < len(steps) else None
    return nodes


def chains(ctx: Context) -> bool:
    """An activation written as a chain of element-wise nodes (``CHAINS``)."""
    for act, variants in CHAINS.items():
        for steps in variants:
            if steps[0][0] != ctx.node.op_type:
                continue
            nodes = _chain(ctx, steps)
            if nodes is None or not ctx.has_activation(act):
                continue
            x = next(t for t in ctx.node.input if t and not ctx.is_const(t))
            ctx.set_activation(x, nodes[-1].output[0], act, {}, pattern=tuple(nodes[1:]))
            ctx.consumed.update(id(n) for n in nodes[1:])
            return True
    return False


def hardswish(ctx: Context) -> bool:
    if ctx.node.op_type != "HardSigmoid":
        return False
    a = ctx.attrs()
    if abs(float(a.get("alpha", 0.2)) - 1 / 6) > 1e-6 or float(a.get("beta", 0.5)) != 0.5:
        return False
    return _gated(ctx, ctx.node, "hardswish")


#: Softplus thresholds above which softplus(x) rounds to x in float32 (exp(-t) below half an ulp of t)
EXACT_SOFTPLUS_THRESHOLD = 16.0


def softplus_threshold(ctx: Context) -> bool:
    """``Where(Greater(x, t), x, Softplus(x))`` (torch.nn.Softplus from the dynamo exporter): softplus, exactly
    so in float32 when t >= 16."""
    node = ctx.node
    if node.op_type != "Softplus" or node.input[0] not in ctx.sources:
        return False
    x, where = node.input[0], ctx.only_reader(node.output[0])
    if where is None or where.op_type != "Where" or list(where.input[1:]) != [x, node.output[0]]:
        return False
    greater = next((r for r in ctx.readers(x) if r.op_type == "Greater" and r.output[0] == where.input[0]), None)
    if greater is None or greater.input[0] != x or not ctx.is_const(greater.input[1]) or \
            ctx.consts[greater.input[1]].size != 1 or len(ctx.readers(greater.output[0])) != 1:
        return False
    if float(np.asarray(ctx.consts[greater.input[1]]).reshape(())) < EXACT_SOFTPLUS_THRESHOLD:
        return False
    ctx.set_activation(x, where.output[0], "softplus", {}, pattern=(greater, where))
    ctx.consumed.update((id(greater), id(where)))
    return True


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
    n, c, h, w = ctx.shape(first.input[0])
    dims = Dims(n, c // (block * block), h * block, w * block)
    layer = ctx.add("depth_to_space", {"block_size": block, "mode": mode}, [ctx.tensor(first.input[0])], dims=dims)
    ctx.bind(last.output[0], layer, flat=ctx.rank(last.output[0]) == 2)
    ctx.consumed.update((id(tr), id(last)))
    ctx.folded.append(f"Reshape+Transpose+Reshape {ctx.node_name} -> depth_to_space ({mode}, block {block})")
    return True


PATTERNS: tuple[Callable[[Context], bool], ...] = (chains, hardswish, softplus_threshold, pixel_shuffle, attention)


def match(ctx: Context) -> bool:
    """Map the current node and the rest of a pattern starting at it; False when no pattern starts there."""
    return any(p(ctx) for p in PATTERNS)
