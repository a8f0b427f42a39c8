"""layer_normalization: normalize over the trailing axes, or over the channels of N x C x H x W (ConvNeXt)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, nchw_view
from plugins.standard._common_rank import axis_index

OVER = ("trailing", "channels")


def layer_norm(xp: Any, x: Any, axes: tuple[int, ...], scale: Any, bias: Any, epsilon: float) -> Any:
    """``(x - mean) / sqrt(var + epsilon) * scale + bias``, mean and (biased) variance over ``axes`` of the logical
    array ``x``, computed in float32; ``scale`` and ``bias`` broadcast against ``x``."""
    xf = x.astype(np.float32)
    mean = xf.mean(axis=axes, keepdims=True)
    d = xf - mean
    var = (d * d).mean(axis=axes, keepdims=True)
    return (d / xp.sqrt(var + np.float32(epsilon)) * scale.astype(np.float32) + bias.astype(np.float32)).astype(x.dtype)


def layer_norm_rows(x: Any, scale: Any, bias: Any, epsilon: float, out: Any) -> None:
    """``layer_norm`` of each row of the float32 matrix ``x`` into ``out`` (NumPy, in place, no temporaries of ``x``'s
    size: the CPU path of the trailing form)."""
    n = x.shape[1]
    mean = x.mean(axis=1, keepdims=True, dtype=np.float32)
    np.subtract(x, mean, out=out)
    var = np.einsum("ij,ij->i", out, out)[:, None]
    var *= np.float32(1.0 / n)
    var += np.float32(epsilon)
    np.sqrt(var, out=var)
    np.divide(np.float32(1.0), var, out=var)
    out *= var
    out *= scale
    out += bias


DESC = LayerDesc(
    name="layer_normalization",
    display_name="Layer normalization",
    summary="Normalize over the trailing axes (ONNX LayerNormalization), or over the channels of each pixel.",
    categories=(Category.NORMALIZATION,),
    documentation=(
        "<p><code>y = (x - mean) / sqrt(var + epsilon) * scale + bias</code>. With <b>over</b> "
        "<code>trailing</code>, mean and variance are taken over the axes from <b>axis</b> to the last (ONNX "
        "LayerNormalization, torch.nn.LayerNorm); <b>scale</b> and <b>bias</b> have the sizes of those axes. With "
        "<code>channels</code>, over the channels of each pixel of N x C x H x W (ConvNeXt's channels-first "
        "LayerNorm2d); scale and bias have C values.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), a tensor of any rank (rank 4 for <code>channels</code>).</p>"
        "<ul><li><b>over</b>: trailing (default) or channels.</li><li><b>axis</b>: the first normalized axis "
        "(negative: from the end), default -1.</li><li><b>epsilon</b>: default 1e-5.</li></ul>"
        "<p><b>Weights</b>: scale, bias.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=(
        ParamDesc("over", "enum", "trailing", "trailing axes (from axis) or the channels of each pixel",
                  enum_values=OVER, main=True),
        ParamDesc("axis", "int", -1, "first normalized axis (trailing); negative: from the end", min=-6, max=5),
        ParamDesc("epsilon", "float", 1e-5, "added to the variance", min=0.0),
    ),
    weights=("scale", "bias"),
    ranks=ANY_RANK,
)


class LayerNormalization(Layer):
    desc = DESC

    @classmethod
    def layout_for(cls, params: Mapping[str, Any]) -> str:
        """Over the channels of each pixel: an image layer; over the trailing axes: a token layer (logical order)."""
        return "image" if params.get("over") == "channels" else "logical"

    def _axes(self, x: Dims) -> tuple[int, ...]:
        if self.p["over"] == "channels":
            if len(x) != 4:
                raise self.shape_error(f"over channels takes N x C x H x W, got a tensor of rank {len(x)} ({x})")
            return (1,)
        try:
            first = axis_index(self.p["axis"], len(x))
        except ValueError as exc:
            raise self.shape_error(str(exc)) from None
        return tuple(range(first, len(x)))

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        self._axes(x)
        return x

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        x = self.primary(inputs)
        shape = tuple(x[a] for a in self._axes(x))
        return {"scale": shape, "bias": shape}

    def init_weight(self, weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.ones(shape, np.float32) if weight == "scale" else np.zeros(shape, np.float32)

    def _broadcast(self, w: Any, rank: int) -> Any:
        return w.reshape(w.shape + (1, 1)) if self.p["over"] == "channels" else w

    def _rows(self, x: Any, axes: tuple[int, ...]) -> tuple[int, int] | None:
        """(n, inner) of the normalized values of physical ``x`` seen as (outer, n, inner), or None where they are
        not one axis of its memory (or a C-contiguous block of trailing ones)."""
        if not x.flags.c_contiguous:
            return None
        view = nchw_view(x, self.fmt)
        if len(axes) > 1:
            return (int(np.prod([view.shape[a] for a in axes])), 1) if view.flags.c_contiguous else None
        k = axes[0]
        for p in range(x.ndim):
            if x.strides[p] == view.strides[k] and x.shape[p] == view.shape[k]:
                return x.shape[p], int(np.prod(x.shape[p + 1:], dtype=np.int64))
        return None

    def _backend_norm(self, inputs: list[Any], axes: tuple[int, ...], out: Any) -> bool:
        """The backend's one-pass kernel, the activation fused where it has an epilogue (the CPU's takes the
        normalized values as the rows of a matrix: the trailing form, and the channels of NHWC memory)."""
        kernel = self.backend.kernel("layer_norm")
        act = self.activation
        if kernel is None or (act is not None and act.epilogue is None):
            return False
        x = self.physical(inputs[0])
        rows = self._rows(x, axes)
        if rows is None or out.shape != x.shape or out.dtype != x.dtype:
            return False
        xp = self.xp
        scale, bias = (xp.ascontiguousarray(self.weight(w, inputs).reshape(-1), dtype=x.dtype) for w in ("scale", "bias"))
        done = kernel(x, scale, bias, out, rows[0], rows[1], float(self.p["epsilon"]),
                      act.epilogue if act is not None else None, act.coefs if act is not None else {})
        if done is None:
            return False
        if x is inputs[0] and not self.weights_from_inputs(inputs):  # one call on the network's buffers: replayable
            self.offer_replay(done.replay)
        return True

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        x = self.nchw(inputs[0])
        axes = self._axes(Dims(*x.shape))
        if self._backend_norm(inputs, axes, out):
            return
        scale, bias = (self._broadcast(self.weight(w, inputs), x.ndim) for w in ("scale", "bias"))
        if self.xp is np and self.p["over"] == "trailing" and x.dtype == out.dtype == np.float32:
            n = int(np.prod([x.shape[a] for a in axes]))
            y = nchw_view(out, self.fmt)
            rows = y.reshape(-1, n) if y.flags.c_contiguous else np.empty((x.size // n, n), np.float32)
            layer_norm_rows(x.reshape(-1, n), scale.reshape(-1).astype(np.float32, copy=False),
                            bias.reshape(-1).astype(np.float32, copy=False), self.p["epsilon"], rows)
            if not y.flags.c_contiguous:
                y[...] = rows.reshape(y.shape)
            self.activate_inplace(out)
            return
        self.store(out, self.activate(layer_norm(self.xp, x, axes, scale, bias, self.p["epsilon"])))

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return output.elements * 8

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        x = inputs[0]
        if self.p["over"] == "channels":
            t = g.node("Transpose", [x], "to_last", perm=[0, 2, 3, 1])
            y = g.node("LayerNormalization", [t, g.weight("scale", inputs), g.weight("bias", inputs)], "norm",
                       axis=-1, epsilon=float(self.p["epsilon"]))
            return g.node("Transpose", [y], perm=[0, 3, 1, 2])
        first = self._axes(self.input_dims[0])[0]
        return g.node("LayerNormalization", [x, g.weight("scale", inputs), g.weight("bias", inputs)],
                      axis=first, epsilon=float(self.p["epsilon"]))

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        state = {"weight": t.weight("scale"), "bias": t.weight("bias")}
        shape = tuple(state["weight"].shape)
        ref = t.module(f"nn.LayerNorm({shape}, eps={float(self.p['epsilon'])!r})", state)
        if self.p["over"] == "channels":
            return f"{ref}({inputs[0]}.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)"
        return f"{ref}({inputs[0]})"


LAYER = LayerNormalization


REPLAYABLE_FORWARDS.add(LayerNormalization.forward)  # one layer_norm call, where it offers it
