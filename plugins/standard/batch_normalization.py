"""batch_normalization: per-channel normalization with stored statistics (inference form)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.layer_kernels import kernel_cache
from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.errors import WeightsError
from engine.layer import REPLAYABLE_FORWARDS
from engine.tensor import Dims, Layout
from plugins.standard._common_norm import (
    BN_WEIGHTS,
    ScaleShiftBase,
    batch_norm,
    batch_norm_coefficients,
    bn_init_weight,
    variance_problem,
)

DESC = LayerDesc(
    name="batch_normalization",
    display_name="Batch normalization",
    summary="Per-channel (x - mean) / sqrt(variance + epsilon) * scale + bias.",
    categories=(Category.NORMALIZATION,),
    documentation=(
        "<p>Normalizes every channel c with stored statistics (inference form, as ONNX "
        "BatchNormalization):<br><code>y = (x - mean[c]) / sqrt(variance[c] + epsilon) * scale[c] + bias[c]</code></p>"
        "<ul><li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>mean</b>, <b>variance</b>, <b>scale</b>, <b>bias</b> (secondary): replace the loaded "
        "weight of the same name; C values each (any dimensions with C elements). A variance from an "
        "input is not checked: variance + epsilon &lt;= 0 gives NaN or infinity.</li>"
        "<li><b>epsilon</b>: added to the variance, default 1e-5, at least 0.</li></ul>"
        "<p>Weights files: <code>NAME_mean.npy</code>, <code>NAME_variance.npy</code>, "
        "<code>NAME_scale.npy</code>, <code>NAME_bias.npy</code>, each of shape (C,). Loaded variances "
        "must satisfy variance + epsilon &gt; 0. Random weights: mean in [-0.1, 0.1], variance in "
        "[0.5, 1.5], scale in [0.75, 1.25], bias in [-0.1, 0.1].</p>"
    ),
    inputs=(
        InputDesc("input", doc="N x C x H x W tensor to normalize"),
        *(InputDesc(w, InputKind.SECONDARY, doc=f"replaces the {w} weight (C values)", weight=w) for w in BN_WEIGHTS),
    ),
    params=(
        ParamDesc("epsilon", "float", 1e-5, "added to the variance", min=0.0, legacy_names=("eps",)),
    ),
    weights=BN_WEIGHTS,
)


class BatchNormalization(ScaleShiftBase):
    desc = DESC

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        x = self.primary(inputs)
        return {w: (x.c,) for w in BN_WEIGHTS}

    def init_weight(self, weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return bn_init_weight(weight, shape, rng)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        if "variance" in weights:
            problem = variance_problem(weights["variance"], self.p["epsilon"])
            if problem:
                raise WeightsError(f"{self.desc.name} {self.name}: weight 'variance': {problem}")
        super().set_weights(weights)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        mean, var, scale, bias = (self.weight(w, inputs) for w in BN_WEIGHTS)
        if self._scale_shift(inputs[0], out, (mean, var, scale, bias), not self.weights_from_inputs(inputs)):
            return
        y = batch_norm(self.xp, self.nchw(inputs[0]), mean, var, scale, bias, self.p["epsilon"])
        self.store(out, self.activate(y))

    def _scale_shift(self, x: Any, out: Any, stats: tuple[Any, ...], cacheable: bool) -> bool:
        """``act(x * mul + add)`` in one pass of the backend's ``scale_shift`` kernel, in the tensor's own precision,
        with ``mul`` and ``add`` folded from the statistics in float32 once per weight arrays; False where the
        backend has no kernel for the case (the generic path then runs)."""
        kernel = self.backend.kernel("scale_shift")
        act = self.activation
        if kernel is None or x.ndim != 4 or (act is not None and act.epilogue is None):
            return False
        cache = kernel_cache(self) if cacheable else {}
        key = (*stats, self.p["epsilon"])
        found = cache.get("scale_shift")
        if found is None or len(found[0]) != len(key) or not all(a is b for a, b in zip(found[0], key)):
            found = (key, batch_norm_coefficients(self.xp, *stats, self.p["epsilon"], np.float32))
            cache["scale_shift"] = found
        mul, add = found[1]
        epilogue, coefs = (act.epilogue, act.coefs) if act is not None else (None, {})
        # a precision conversion fused into the layer: computed in the compute dtype as unfused, rounded once
        y = out if out.dtype == self.cdtype else self.xp.empty_like(out, dtype=self.cdtype)
        source = self.physical(x)
        done = kernel(source, mul, add, y, self.fmt.layout is Layout.NHWC, epilogue, coefs)
        if done is None:
            return False
        if y is not out:
            out[...] = y
        elif cacheable and source is x:  # one call on the network's buffers and arrays kept with the weights
            self.offer_replay(done.replay)
        return True

    onnx_support = "yes"
    torch_support = "partial: statistics from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        stats = [g.weight(w, inputs) for w in ("scale", "bias", "mean", "variance")]
        return g.node("BatchNormalization", [inputs[0], *stats], epsilon=float(self.p["epsilon"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        state = {"weight": t.weight("scale"), "bias": t.weight("bias"), "running_mean": t.weight("mean"),
                 "running_var": t.weight("variance")}
        c = self.input_dims[0].c
        ref = t.module(f"nn.BatchNorm2d({c}, eps={float(self.p['epsilon'])!r})", state)
        return f"{ref}({inputs[0]})"


LAYER = BatchNormalization


REPLAYABLE_FORWARDS.add(BatchNormalization.forward)  # one scale_shift call on the network's buffers
