"""attention: scaled dot-product attention as one layer, softmax(scale * q @ k^T + bias) @ v (a transformer's or a
window attention's core; ONNX MatMul, Softmax, MatMul recognised at import)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from engine.backends.layer_kernels import kernel_cache
from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, InputKind, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, broadcast_dims, nchw_view

#: ``product(a, b, out_dtype, alpha, out)``: ``alpha * a @ b`` as a new array of ``out_dtype``, or written into
#: ``out`` when given (C-contiguous, of that dtype)
Product = Callable[..., Any]
#: ``softmax(s, out_dtype, bias)``: the softmax of float32 ``s + bias`` (bias None: none) along its last axis
#: (``s`` may be overwritten)
Softmax = Callable[[Any, Any, Any], Any]


def attention(xp: Any, q: Any, k: Any, v: Any, scale: float, bias: Any | None = None,
              matmul_dtype: Any = np.float32, k_transposed: bool = False, product: Product | None = None,
              softmax: Softmax | None = None, out: Any | None = None) -> Any:
    """``softmax(scale * q @ k^T + bias, last axis) @ v`` with the leading axes broadcast (``k_transposed``: ``k`` is
    given as k^T). The two products run in
    ``matmul_dtype`` (float16 on the GPU: cuBLAS on tensor cores, float32 accumulation); the scores, the bias and the
    softmax in float32, the maximum subtracted first (no overflow). Returns ``matmul_dtype`` values, written into
    ``out`` when given (C-contiguous, of ``matmul_dtype`` and the result's shape).
    ``product`` and ``softmax``: the backend's (default: the array module's)."""
    def array_product(a: Any, b: Any, out_dtype: Any, alpha: float, into: Any | None = None) -> Any:
        if alpha != 1.0 and a.shape[-1] <= b.shape[-1]:  # the scale on the smaller operand: one pass less
            a, alpha = a * a.dtype.type(alpha), 1.0
        if into is not None and a.dtype == b.dtype == into.dtype and alpha == 1.0:
            return xp.matmul(a, b, out=into)  # straight into the output buffer
        y = xp.matmul(a, b).astype(out_dtype, copy=False)
        if alpha != 1.0:
            y *= np.float32(alpha)
        if into is not None:
            into[...] = y
            return into
        return y

    def array_softmax(s: Any, out_dtype: Any, add: Any | None) -> Any:
        if add is not None:
            s += add.astype(np.float32, copy=False)
        s -= s.max(axis=-1, keepdims=True)
        xp.exp(s, out=s)
        total = s.sum(axis=-1, keepdims=True)
        s *= xp.reciprocal(total, out=total)  # a product per value instead of a quotient
        return s.astype(out_dtype, copy=False)

    mul = product or array_product
    kt = k.astype(matmul_dtype, copy=False)
    s = mul(q.astype(matmul_dtype, copy=False), kt if k_transposed else xp.swapaxes(kt, -1, -2), np.float32, scale)
    p = (softmax or array_softmax)(s, matmul_dtype, bias)
    return mul(p, v.astype(matmul_dtype, copy=False), matmul_dtype, 1.0, out)


DESC = LayerDesc(
    name="attention",
    display_name="Attention",
    summary="Scaled dot-product attention in one layer: softmax(scale * q @ k^T + bias) @ v.",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p><code>y = softmax(scale * q @ k<sup>T</sup> + bias) @ v</code>, the softmax along the last axis: the "
        "core of a transformer block, of Swin's and MaxViT's window attention (torch's "
        "scaled_dot_product_attention with a float mask). The leading axes (batch, windows, heads) broadcast as in a "
        "matrix product. The ONNX importer makes one attention layer of MatMul(q, k<sup>T</sup>) [x or / a scale] "
        "[+ bias or mask] -> Softmax -> MatMul(., v).</p>"
        "<p>On the GPU in fp16 both products run on tensor cores (float32 accumulation) and the softmax in float32; "
        "on the CPU everything runs in float32.</p>"
        "<p><b>Inputs</b>: <b>q</b> ... x L x D, <b>k</b> ... x S x D, <b>v</b> ... x S x Dv (primary), <b>bias</b> "
        "(secondary, optional) broadcast onto the scores ... x L x S (a relative-position bias, an additive mask; "
        "a constant layer holds a fixed one). The output is ... x L x Dv.</p>"
        "<ul><li><b>scale</b>: the factor of the scores (1/sqrt(D) in most networks).</li>"
        "<li><b>k_transposed</b>: input k is given as k<sup>T</sup>, ... x D x S (as a graph that computes "
        "<code>q @ k.transpose(-2, -1)</code> has it).</li></ul>"
    ),
    inputs=(InputDesc("q"), InputDesc("k"), InputDesc("v"),
            InputDesc("bias", InputKind.SECONDARY, doc="added to the scores before the softmax")),
    params=(ParamDesc("scale", "float", 0.125, "the factor of the scores q @ k^T (1/sqrt(D) in most networks)",
                      main=True),
            ParamDesc("k_transposed", "bool", False, "input k is k^T (... x D x S)")),
    ranks=tuple(r for r in ANY_RANK if r >= 2),
)


class Attention(Layer):
    desc = DESC
    layout_role = "logical"

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        q, k, v = inputs[0], inputs[1], inputs[2]
        assert q is not None and k is not None and v is not None  # primary inputs: connected in a built network
        if self.p["k_transposed"]:
            k = Dims(*k[:-2], k[-1], k[-2])
        if q[-1] != k[-1] or k[-2] != v[-2]:
            raise self.shape_error(f"q {q}, k {k}, v {v}: q and k need the same last size (D), k and v the same "
                                   "next-to-last size (S)")
        try:
            batch = tuple(broadcast_dims([Dims(*(d[:-2] or (1,))) for d in (q, k, v)])) if len(q) > 2 or \
                len(k) > 2 or len(v) > 2 else ()
        except ValueError:
            raise self.shape_error(f"the leading axes of q {q}, k {k} and v {v} do not broadcast") from None
        scores = Dims(*batch, q[-2], k[-2])
        bias = inputs[3] if len(inputs) > 3 else None
        if bias is not None:
            try:
                if tuple(broadcast_dims([scores, bias])) != tuple(scores):
                    raise ValueError
            except ValueError:
                raise self.shape_error(f"bias {bias} does not broadcast onto the scores {scores}") from None
        return Dims(*batch, q[-2], v[-1])

    def forward(self, inputs: list[Any], out: Any) -> None:
        xp = self.xp
        q, k, v = (self.nchw(x) for x in inputs[:3])
        bias = self.nchw(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else None
        dtype = self.cdtype if xp is not np else np.float32  # NumPy's float16 products are slow and widen anyway
        y = nchw_view(out, self.fmt)
        direct = self.activation is None and y.flags.c_contiguous and y.dtype == dtype
        self.offer_replay(None)
        if direct and xp is np:
            fused = self.backend.kernel("attention")  # the CPU's: each matrix's scores kept in the core's cache
            done = None if fused is None else fused(q, k, v, bias, y, float(self.p["scale"]),
                                                    bool(self.p["k_transposed"]), kernel_cache(self))
            if done is not None:
                operands = list(zip((q, k, v, bias), inputs, strict=False))
                if all(a is None or np.may_share_memory(a, given) for a, given in operands):
                    self.offer_replay(done.replay)  # read in place from the network's buffers
                return
        r = attention(xp, q, k, v, float(self.p["scale"]), bias, dtype, bool(self.p["k_transposed"]),
                      self._backend_product(), self._backend_softmax(), out=y if direct else None)
        if not direct:
            self.store(out, self.activate(r.astype(self.cdtype, copy=False)))

    def _backend_product(self) -> Product | None:
        """The backend's matrix product (on the GPU: cuBLAS, which CUDA graphs capture; on the CPU: the stack of
        products shared out over the cores) into a new array of the asked dtype (or into ``into``), falling back to
        the array module's where the backend does not serve a case."""
        kernel = self.backend.kernel("matmul")
        if kernel is None:
            return None
        xp = self.xp

        def product(a: Any, b: Any, out_dtype: Any, alpha: float, into: Any | None = None) -> Any:
            shape = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + (a.shape[-2], b.shape[-1])
            out = into if into is not None else xp.empty(shape, out_dtype)
            if kernel(a, b, out, self.tf32, alpha) is None:
                out[...] = xp.matmul(a, b)
                if alpha != 1.0:
                    out *= np.float32(alpha)
            return out
        return product

    def _backend_softmax(self) -> Softmax | None:
        """The backend's one-pass softmax of float32 rows, the bias added as it reads where the kernel
        serves its shape, falling back to the array code."""
        kernel = self.backend.kernel("softmax_rows")
        if kernel is None:
            return None
        xp = self.xp

        def softmax(s: Any, out_dtype: Any, bias: Any | None) -> Any:
            s = xp.ascontiguousarray(s)
            # on the CPU in place (the scores are the layer's own); the GPU's kernel writes another array
            out = s if xp is np and s.dtype == out_dtype else xp.empty(s.shape, out_dtype)
            if bias is not None and kernel(s, out, xp.ascontiguousarray(bias)) is not None:
                return out
            if bias is not None:
                s += bias.astype(np.float32, copy=False)
            if kernel(s, out) is None:
                s -= s.max(axis=-1, keepdims=True)
                xp.exp(s, out=s)
                s /= s.sum(axis=-1, keepdims=True)
                out[...] = s
            return out
        return softmax

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        q, k = inputs[0], inputs[1]
        assert q is not None and k is not None
        s = k[-1] if self.p["k_transposed"] else k[-2]
        scores = output.elements // output[-1] * s
        return 2 * scores * q[-1] + 2 * output.elements * s + 5 * scores

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        rank = len(self.input_dims[1])
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        kt = inputs[1] if self.p["k_transposed"] else g.node("Transpose", [inputs[1]], "k_t", perm=perm)
        s = g.node("MatMul", [inputs[0], kt], "scores")
        s = g.node("Mul", [s, g.value("scale", np.float32(self.p["scale"]))], "scaled")
        if len(inputs) > 3 and inputs[3] is not None:
            s = g.node("Add", [s, inputs[3]], "biased")
        p = g.node("Softmax", [s], "softmax", axis=-1)
        return g.node("MatMul", [p, inputs[2]])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        q, k, v = inputs[:3]
        kt = k if self.p["k_transposed"] else f"{k}.transpose(-2, -1)"
        s = f"torch.matmul({q}, {kt}) * {float(self.p['scale'])!r}"
        if len(inputs) > 3 and inputs[3] is not None:
            s = f"{s} + {inputs[3]}"
        return f"torch.matmul(torch.softmax({s}, -1), {v})"


REPLAYABLE_FORWARDS.add(Attention.forward)  # one attention call, where it offers it

LAYER = Attention
