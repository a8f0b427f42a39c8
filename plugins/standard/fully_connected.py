"""fully_connected: every output is a weighted sum of all C*H*W input values (ONNX Gemm on the flattened input)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.backends.layer_kernels import backend_convolve, physical_weight
from engine.backends.selection import Launched
from engine.categories import Category
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, nchw_view


def fully_connected(xp: Any, x: Any, w: Any, b: Any | None) -> Any:
    """Logical NCHW ``x`` (N, C, H, W) flattened in C, H, W order, times ``w`` (O, C*H*W) transposed,
    plus ``b`` (O,); the result is (N, O, 1, 1)."""
    n = x.shape[0]
    y = xp.matmul(x.reshape(n, -1), w.T)
    if b is not None:
        y += b
    return y.reshape(n, -1, 1, 1)


DESC = LayerDesc(
    name="fully_connected",
    display_name="Fully connected",
    summary="Dense layer: each output is a weighted sum of all C*H*W inputs plus a bias.",
    categories=(Category.CONVOLUTION,),
    documentation=(
        "<p>Flattens each item of the batch in C, H, W order (index <code>(c*H + h)*W + w</code>, "
        "whatever the memory layout) and computes <code>y[n,o] = sum over k of weights[o,k] * x[n,k] + bias[o]</code> "
        "(ONNX Gemm with transB, PyTorch Linear). The output is N x num_outputs x 1 x 1.</p>"
        "<ul><li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>weights</b> (secondary): replaces the loaded weights; num_outputs x C*H*W values.</li>"
        "<li><b>bias</b> (secondary): replaces the loaded bias; num_outputs values.</li>"
        "<li><b>num_outputs</b>: output size, default 16, 1..1048576.</li>"
        "<li><b>bias</b>: add a bias, default true.</li></ul>"
        "<p>Weights files: <code>NAME_weights.npy</code> (num_outputs, C*H*W) and <code>NAME_bias.npy</code> "
        "(num_outputs,). The weights depend on the input size: changing H or W needs new weights.</p>"
    ),
    inputs=(
        InputDesc("input", doc="N x C x H x W tensor"),
        InputDesc("weights", InputKind.SECONDARY, doc="replaces the weights", weight="weights"),
        InputDesc("bias", InputKind.SECONDARY, doc="replaces the bias", weight="bias"),
    ),
    params=(
        ParamDesc("num_outputs", "uint", 16, "output size", min=1, max=1048576, main=True,
                  legacy_names=("outputs", "num_output_channels")),
        ParamDesc("bias", "bool", True, "add a bias", legacy_names=("apply_bias",)),
    ),
    weights=("weights", "bias"),
    legacy_names=("dense", "inner_product"),
)


class FullyConnected(Layer):
    desc = DESC

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        return Dims(x.n, self.p["num_outputs"], 1, 1)

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        x = self.primary(inputs)
        o = self.p["num_outputs"]
        shapes: dict[str, tuple[int, ...]] = {"weights": (o, x.c * x.h * x.w)}
        if self.p["bias"]:
            shapes["bias"] = (o,)
        return shapes

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        x = self.primary(inputs)
        extra = int(self.p["bias"]) + int(self.activation is not None)
        return output.elements * (2 * x.c * x.h * x.w + extra)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        w = self.weight("weights", inputs)
        b = self.weight("bias", inputs) if self.p["bias"] else None
        if self.backend.device_kind == "gpu" and self._backend_fc(inputs, w, b, out):
            return
        if done := self._backend_dense(inputs, w, b, out):
            if not self.weights_from_inputs(inputs):
                self.offer_replay(done.replay)
            return
        y = fully_connected(self.xp, self.nchw(inputs[0]), w, b)
        if self.activation is not None and self.activation.impl.elementwise:
            self.store(out, y)  # then the activation in one pass over the output (the backend's kernel where it has one)
            self.activate_inplace(out)
        else:
            self.store(out, self.activate(y))

    def _backend_dense(self, inputs: list[Any], w: Any, b: Any | None, out: Any) -> Launched | None:
        """The backend's matrix-vector kernel for small batches (the CPU's), the activation fused when it can be;
        its prepared call where it is the whole forward and reads the input in place (``Layer.replay_call``)."""
        kernel = self.backend.kernel("dense")
        act = self.activation
        if kernel is None or out.dtype != w.dtype or (act is not None and act.epilogue is None):
            return None
        if not out.flags.c_contiguous:
            return None
        n = out.shape[0]
        x = self.xp.ascontiguousarray(self.nchw(inputs[0]).reshape(n, -1))  # C, H, W order: a view when H = W = 1
        y = out.reshape(n, -1)  # (N, O, 1, 1) or (N, 1, 1, O) memory: a view
        done = kernel(x, w, b, y, act.epilogue if act is not None else None, act.coefs if act is not None else {})
        if done is not None and not np.may_share_memory(x, inputs[0]):
            return Launched(done.candidate)  # the input was copied: the call reads that copy, not next run's input
        return done

    def _backend_fc(self, inputs: list[Any], w: Any, b: Any | None, out: Any) -> Launched | None:
        """On the GPU: a convolution whose kernel covers the whole input (cuDNN, fused epilogue)."""
        x = self.nchw(inputs[0])
        if x.dtype != w.dtype:
            return None
        n, c, h, wd = x.shape
        wk = physical_weight(self, w, not self.weights_from_inputs(inputs), (w.shape[0], c, h, wd))
        return backend_convolve(self, x, wk, b, nchw_view(out, self.fmt), ((1, 1), (0, 0), (1, 1)), 1)


    onnx_support = "yes"
    torch_support = "partial: weights and bias from secondary inputs are not exported"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        flat = g.node("Flatten", [inputs[0]], "flatten", axis=1)
        ins = [flat, g.weight("weights", inputs)] + ([g.weight("bias", inputs)] if self.p["bias"] else [])
        y = g.node("Gemm", ins, "gemm", transB=1)
        return g.node("Unsqueeze", [y, g.ints("axes", [2, 3])])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        t.no_weight_inputs(inputs)
        x = self.input_dims[0]
        state = {"weight": t.weight("weights")} | ({"bias": t.weight("bias")} if self.p["bias"] else {})
        ref = t.module(f"nn.Linear({x.c * x.h * x.w}, {self.p['num_outputs']}, bias={bool(self.p['bias'])})", state)
        return f"{ref}(torch.flatten({inputs[0]}, 1))[:, :, None, None]"


REPLAYABLE_FORWARDS.add(FullyConnected.forward)
LAYER = FullyConnected
