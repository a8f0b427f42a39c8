"""matmul: batched matrix product of two tensors, or of a tensor and a weight matrix (ONNX MatMul, Gemm)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.base import derived
from engine.backends.layer_kernels import kernel_cache
from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, InputKind, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, broadcast_dims, nchw_view


def matmul(xp: Any, a: Any, b: Any, bias: Any | None = None) -> Any:
    """``a @ b (+ bias)`` with NumPy's batched matrix product rules (fp16 on the GPU: tensor cores)."""
    y = xp.matmul(a, b.astype(a.dtype, copy=False))
    return y if bias is None else y + bias.astype(y.dtype, copy=False)


DESC = LayerDesc(
    name="matmul",
    display_name="Matrix product",
    summary="Batched matrix product of two tensors, or of a tensor and a weight matrix (ONNX MatMul, a Linear layer).",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p><code>y = a @ b (+ bias)</code> over the last two axes, the leading ones broadcast (ONNX MatMul, "
        "numpy.matmul). Without a second input, <b>b</b> is the weight <b>weights</b> of <b>num_outputs</b> columns "
        "(K x num_outputs, K the input's last size): a linear layer on the last axis, as a transformer's or "
        "ConvNeXt's channels-last MLP; <b>bias</b> adds a bias of num_outputs values.</p>"
        "<p><b>Inputs</b>: <b>a</b> (primary), <b>b</b> (secondary), tensors of any rank (a rank-1 <b>b</b> "
        "is a vector, as in ONNX).</p><p><b>Weights</b>: weights, bias (when <b>b</b> is not connected).</p>"
    ),
    inputs=(InputDesc("a"), InputDesc("b", InputKind.SECONDARY, doc="the right-hand matrix (else the weights)")),
    params=(
        ParamDesc("num_outputs", "uint", 1, "columns of the weight matrix (without input b)", min=1, max=1 << 24,
                  main=True),
        ParamDesc("bias", "bool", False, "add a bias of num_outputs values (without input b)"),
    ),
    weights=("weights", "bias"),
    ranks=ANY_RANK,
)


class MatMul(Layer):
    desc = DESC
    layout_role = "logical"

    def _b(self, inputs: list[Dims | None]) -> tuple[int, ...]:
        a = self.primary(inputs)
        return tuple(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else (a[-1], self.p["num_outputs"])

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        a, b = tuple(self.primary(inputs)), self._b(inputs)
        a2 = (1,) + a if len(a) == 1 else a
        b2 = b + (1,) if len(b) == 1 else b
        if a2[-1] != b2[-2]:
            raise self.shape_error(f"a {'x'.join(map(str, a))} and b {'x'.join(map(str, b))}: {a2[-1]} columns of a "
                                   f"against {b2[-2]} rows of b")
        try:
            batch = tuple(broadcast_dims([Dims(*a2[:-2] or (1,)), Dims(*b2[:-2] or (1,))])) if \
                len(a2) > 2 or len(b2) > 2 else ()
        except ValueError:
            raise self.shape_error(f"the batch axes of a {a} and b {b} do not broadcast") from None
        out = batch + (a2[-2],) * (len(a) > 1) + (b2[-1],) * (len(b) > 1)
        return Dims(*(out or (1,)))

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        if len(inputs) > 1 and inputs[1] is not None:
            return {}
        shapes = {"weights": self._b(inputs)}
        if self.p["bias"]:
            shapes["bias"] = (self.p["num_outputs"],)
        return shapes

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        a = self.nchw(inputs[0])
        b = self.nchw(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
        if (self.xp is not np or b is not None) and self._backend_product(a, b, out):  # CPU: stacks of products
            return
        if b is not None:
            y = matmul(self.xp, a, b)
        elif self.xp is np and a.dtype == out.dtype == self.weights["weights"].dtype == np.float32:
            self._linear(a, out, inputs[0])
            return
        else:
            y = matmul(self.xp, a, self.weights["weights"], self.weights.get("bias"))
        self.store(out, self.activate(y.reshape(self.out_dims)))

    def _backend_product(self, a: Any, b: Any | None, out: Any) -> bool:
        """The backend's matrix product (on the GPU: cuBLAS, which CUDA graphs capture; on the CPU a product of two
        inputs, stacks of matrices shared out over the cores) written into the output
        buffer, then the bias and the activation in place; False where the backend does not serve the case."""
        kernel = self.backend.kernel("matmul")
        if kernel is None:
            return False
        y = nchw_view(out, self.fmt)
        direct = y.flags.c_contiguous and y.dtype == a.dtype
        target = y if direct else self.xp.empty(y.shape, a.dtype)
        if kernel(a, self.weights["weights"] if b is None else b, target, self.tf32) is None:
            return False
        bias = self.weights.get("bias") if b is None else None
        if direct and self._bias_and_activation(target, bias):
            return True
        if bias is not None:
            target += bias.astype(target.dtype, copy=False)
        if not direct:
            y[...] = target
        self.activate_inplace(out)
        return True

    def _bias_and_activation(self, y: Any, bias: Any | None) -> bool:
        """The bias and the activation of ``y``'s rows in one pass (the backend's ``scale_shift`` over the last
        axis); True when done (or nothing to do)."""
        act = self.activation
        if bias is None and act is None:
            return True
        kernel = self.backend.kernel("scale_shift")
        if kernel is None or (act is not None and act.epilogue is None) or y.ndim < 1:
            return False
        n = y.shape[-1]
        xp = self.xp
        cache = self.__dict__.setdefault("_derived", {})  # float32 vectors made once (kept while the bias is)
        ones = derived(cache, f"ones{n}", None, lambda: xp.ones(n, np.float32))
        if bias is None:
            shift = derived(cache, f"zeros{n}", None, lambda: xp.zeros(n, np.float32))
        else:
            shift = derived(cache, "shift", bias, lambda: bias.astype(np.float32))
        rows = y.reshape(1, 1, -1, n)
        return kernel(rows, ones, shift, rows, True, act.epilogue if act is not None else None,
                      act.coefs if act is not None else {}) is not None

    def _linear(self, a: Any, out: Any, source: Any) -> None:
        """The CPU path of ``a @ weights (+ bias)``: the leading axes as rows of one product written into the output
        buffer (the backend's ``linear``, which may keep the weights packed in the layer's kernel cache), the bias
        and the activation added in place (not one small product per leading index). ``source``: the layer's input as
        given (``a`` is read from it: the call is offered for replay only where ``a`` is a view of it)."""
        w = self.weights["weights"]
        y = nchw_view(out, self.fmt)
        rows = y.reshape(-1, w.shape[1]) if y.flags.c_contiguous else np.empty((a.size // w.shape[0], w.shape[1]),
                                                                                 np.float32)
        bias = self.weights.get("bias")
        act = self.activation
        fused = act is None or act.epilogue is not None
        kernel = self.backend.kernel("linear")
        if kernel is not None and (done := kernel(np.ascontiguousarray(a.reshape(-1, w.shape[0])), w, bias, rows,
                                                  act.epilogue if fused and act is not None else None,
                                                  act.coefs if fused and act is not None else {},
                                                  kernel_cache(self))) is not None:
            # the rows shared out over the cores, the bias and a fused activation added while in cache
            if not y.flags.c_contiguous:
                y[...] = rows.reshape(y.shape)
            if not fused:
                self.activate_inplace(out)
            elif y.flags.c_contiguous and a.flags.c_contiguous and np.may_share_memory(a, source):  # replayable
                self.offer_replay(done.replay)
            return
        x = a.reshape(-1, w.shape[0])
        b = None if bias is None else bias.astype(np.float32, copy=False)

        def product() -> None:
            np.matmul(x, w, out=rows)
            if b is not None:
                np.add(rows, b, out=rows)
            if not y.flags.c_contiguous:
                y[...] = rows.reshape(y.shape)
            self.activate_inplace(out)
        product()
        if a.flags.c_contiguous and np.may_share_memory(a, source):  # the network's buffers, the weights: replayable
            self.offer_replay(product)

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return 2 * output.elements * self.primary(inputs)[-1]

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        if len(inputs) > 1 and inputs[1] is not None:
            return g.node("MatMul", [inputs[0], inputs[1]])
        y = g.node("MatMul", [inputs[0], g.weight("weights")], "matmul" if self.p["bias"] else "")
        return g.node("Add", [y, g.weight("bias")]) if self.p["bias"] else y

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        if len(inputs) > 1 and inputs[1] is not None:
            return f"torch.matmul({inputs[0]}, {inputs[1]})"
        w = t.weight("weights")
        state = {"weight": np.ascontiguousarray(w.T)} | ({"bias": t.weight("bias")} if self.p["bias"] else {})
        ref = t.module(f"nn.Linear({w.shape[0]}, {w.shape[1]}, bias={bool(self.p['bias'])})", state)
        return f"{ref}({inputs[0]})"


LAYER = MatMul


REPLAYABLE_FORWARDS.add(MatMul.forward)  # one linear call, where it offers it
