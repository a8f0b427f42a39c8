"""Normalizations: BatchNormalization, InstanceNormalization, GroupNormalization, LRN."""
from __future__ import annotations

import numpy as np

from engine.importers.onnx.context import Context, Unsupported
from engine.importers.onnx.mapping import maps


@maps("BatchNormalization", "batch_normalization", "`epsilon`; inference mode only (training_mode=1 and the "
      "running-statistics outputs refused)")
def batch_normalization(ctx: Context) -> None:
    a = ctx.attrs()
    if int(a.get("training_mode", 0)) or any(ctx.node.output[1:]):
        raise Unsupported("training mode (running statistics outputs) is not supported")
    scale, bias, mean, var = (ctx.const(ctx.node.input[i], n) for i, n in
                              ((1, "scale"), (2, "bias"), (3, "mean"), (4, "variance")))
    ctx.add("batch_normalization", {"epsilon": float(a.get("epsilon", 1e-5))}, [ctx.tensor(ctx.node.input[0])],
            ctx.node.output[0], {"mean": mean, "variance": var, "scale": scale, "bias": bias})


@maps("InstanceNormalization", "instance_normalization", "`epsilon`")
def instance_normalization(ctx: Context) -> None:
    a = ctx.attrs()
    scale, bias = ctx.const(ctx.node.input[1], "scale"), ctx.const(ctx.node.input[2], "bias")
    ctx.add("instance_normalization", {"epsilon": float(a.get("epsilon", 1e-5))}, [ctx.tensor(ctx.node.input[0])],
            ctx.node.output[0], {"scale": scale, "bias": bias})


@maps("GroupNormalization", "group_normalization", "`num_groups`, `epsilon`; scale and bias per channel (opset 21) "
      "or per group (opset 18, repeated over each group's channels)")
def group_normalization(ctx: Context) -> None:
    ctx.require_layer("group_normalization")
    a = ctx.attrs()
    x = ctx.node.input[0]
    c, groups = ctx.dims(x).c, int(a["num_groups"])
    if int(a.get("stash_type", 1)) != 1:
        raise Unsupported(f"stash_type {a['stash_type']}: only float32 statistics are supported")
    scale, bias = (ctx.const(ctx.node.input[i], n).reshape(-1) for i, n in ((1, "scale"), (2, "bias")))
    if scale.size == groups and groups != c:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    ctx.add("group_normalization", {"num_groups": groups, "epsilon": float(a.get("epsilon", 1e-5))}, [ctx.tensor(x)],
            ctx.node.output[0], {"scale": scale, "bias": bias})


@maps("LRN", "lrn", "`size`, `alpha`, `beta`, `bias`")
def lrn(ctx: Context) -> None:
    a = ctx.attrs()
    params = {"size": int(a["size"]), "alpha": float(a.get("alpha", 1e-4)), "beta": float(a.get("beta", 0.75)),
              "bias": float(a.get("bias", 1.0))}
    ctx.add("lrn", params, [ctx.tensor(ctx.node.input[0])], ctx.node.output[0])
