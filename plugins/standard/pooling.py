"""pooling: max or average pooling over windows, or over the whole image (global pooling)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims
from plugins.standard._common_conv import end_padding, padding_end_doc
from plugins.standard._common_pool import (
    POOLING_PARAMS,
    global_pool2d,
    pool2d,
    pool2d_ext,
    pool_flops,
    pool_onnx,
    pool_output_size,
    pool_output_size_ext,
    pool_param_problem,
    pool_shape_problem,
    pool_torch,
)

DESC = LayerDesc(
    name="pooling",
    display_name="Pooling",
    summary="Max or average pooling with kernel, stride and padding, or global pooling.",
    categories=(Category.POOLING,),
    documentation=(
        "<p>Reduces each KhxKw window of every channel to one value: its maximum (<b>max</b>) or its "
        "mean (<b>average</b>), like ONNX MaxPool / AveragePool (and GlobalMaxPool / "
        "GlobalAveragePool when <b>global</b> is set).</p>"
        "<p>Output size: <code>H_out = floor((H + padding + padding_end - kernel) / stride) + 1</code> "
        "(<code>ceil</code> with ceil_mode); the kernel must fit the padded input.</p>"
        "<ul><li><b>input</b> (primary): N x C x H x W.</li>"
        "<li><b>pool_type</b>: <code>max</code> or <code>average</code>, default max.</li>"
        "<li><b>kernel_size</b>: window K or KhxKw, default 2, at least 1.</li>"
        "<li><b>stride</b>: S or ShxSw, default 2, at least 1.</li>"
        "<li><b>padding</b>: P or PhxPw on each side (top and left when padding_end is set), default 0, "
        "smaller than the kernel. Max pooling ignores padded cells; average pooling counts them as zeros "
        "only with count_include_pad.</li>"
        + padding_end_doc("padding") +
        "<li><b>ceil_mode</b>: round the output size up instead of down (ONNX and PyTorch "
        "<code>ceil_mode</code>), default false. The extra window at the end may reach past the padding; the "
        "cells it reads there never count, and a window that would start in the bottom/right padding is "
        "dropped.</li>"
        "<li><b>global</b>: pool over the whole image (output N x C x 1 x 1; kernel, stride and "
        "padding are ignored), default false.</li>"
        "<li><b>count_include_pad</b>: average pooling divides by Kh*Kw (true) or by the number of "
        "real input cells in the window (false), default false. With count_include_pad the divisor is the "
        "part of the window inside the padded input (smaller than Kh*Kw only for ceil_mode's last "
        "window), as ONNX Runtime and PyTorch count it.</li></ul>"
    ),
    inputs=(InputDesc("input", doc="N x C x H x W tensor to pool"),),
    params=POOLING_PARAMS,
)


#: global pooling over at most this many cells runs as one pooling window (the backend's pooling kernel: one pass,
#: one thread per output value, coalesced over the channels in NHWC; resnet18's 7x7 average pool at batch 64 on an
#: H100 took 0.079 ms as a reduction); larger images keep the reduction (each thread would read the whole image)
GLOBAL_KERNEL_MAX_CELLS = 4096


class Pooling(Layer):
    desc = DESC

    def validate(self) -> None:
        if self.p["global"]:
            return
        problem = pool_param_problem(self.p["kernel_size"], self.p["stride"], self.p["padding"])
        if problem:
            raise self.param_error(*problem)
        k, e = self.p["kernel_size"], self._padding_end
        if e.h >= k.h or e.w >= k.w:
            raise self.param_error("padding_end", f"{e.h}x{e.w} must be smaller than the kernel {k.h}x{k.w} on each axis "
                                   "(a window would hold only padding)")

    @property
    def _padding_end(self) -> Dims:
        return end_padding(self.p["padding"], self.p["padding_end"])

    @property
    def _general(self) -> bool:
        """True when the pooling needs ``pool2d_ext`` (asymmetric padding or ceil mode)."""
        return self.p["ceil_mode"] or self._padding_end != self.p["padding"]

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        if self.p["global"]:
            return Dims(x.n, x.c, 1, 1)
        k, s, p = self.p["kernel_size"], self.p["stride"], self.p["padding"]
        problem = pool_shape_problem(x.h, x.w, k, p, padding_end=self._padding_end)
        if problem:
            raise self.shape_error(problem)
        if self._general:
            e, ceil = self._padding_end, self.p["ceil_mode"]
            return Dims(x.n, x.c, pool_output_size_ext(x.h, k.h, s.h, p.h, e.h, ceil),
                        pool_output_size_ext(x.w, k.w, s.w, p.w, e.w, ceil))
        return Dims(x.n, x.c, pool_output_size(x.h, k.h, s.h, p.h), pool_output_size(x.w, k.w, s.w, p.w))

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        x = self.primary(inputs)
        pool = pool_flops(x, output, self.p["kernel_size"], self.p["global"], self.p["pool_type"])
        return pool + output.elements * int(self.activation is not None)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        x = inputs[0]
        nhwc = self.hw_axes == (1, 2)
        if self.p["global"]:
            if self._global_reduction(x, out, nhwc):
                return
            h, w = (x.shape[1], x.shape[2]) if nhwc else (x.shape[2], x.shape[3])
            kernel = self.backend.kernel("global_pool")
            if kernel is not None and (done := kernel(x, out, self.p["pool_type"] == "max", nhwc)):
                self._offer_replay(done)
                self.activate_inplace(out)
                return
            kernel = self.backend.kernel("pool2d") if h * w <= GLOBAL_KERNEL_MAX_CELLS else None
            if kernel is not None and (done := kernel(x, out, self.p["pool_type"] == "max", (h, w), (1, 1), (0, 0),
                                                      True, nhwc)):
                self._offer_replay(done)
                self.activate_inplace(out)  # one window over the whole image: the pooling kernel, one pass
                return
            self.store(out, self.activate(global_pool2d(self.xp, self.nchw(x), self.p["pool_type"])))
            return
        k, s, p = self.p["kernel_size"], self.p["stride"], self.p["padding"]
        if self._general:  # the kernels below take symmetric padding and floor rounding only
            e = self._padding_end
            y = pool2d_ext(self.xp, self.physical(x), self.p["pool_type"], (k.h, k.w), (s.h, s.w), (p.h, p.w, e.h, e.w),
                           self.p["ceil_mode"], self.p["count_include_pad"], self.hw_axes)
            self.store_physical(out, self.activate_physical(y))
            return
        if (k.h, k.w) == ((x.shape[1], x.shape[2]) if nhwc else (x.shape[2], x.shape[3])) and (p.h, p.w) == (0, 0) \
                and self._global_reduction(x, out, nhwc):  # one window covering the whole image
            return
        kernel = self.backend.kernel("pool2d")
        if kernel is not None and (done := kernel(x, out, self.p["pool_type"] == "max", (k.h, k.w), (s.h, s.w),
                                                  (p.h, p.w), self.p["count_include_pad"], nhwc)):
            self._offer_replay(done)
            self.activate_inplace(out)
            return
        y = pool2d(self.xp, self.physical(x), self.p["pool_type"], (k.h, k.w), (s.h, s.w), (p.h, p.w),
                   self.p["count_include_pad"], self.hw_axes)
        self.store_physical(out, self.activate_physical(y))

    def _global_reduction(self, x: Any, out: Any, nhwc: bool) -> bool:
        """Pooling over the whole image as the backend's ``global_pool`` reduction, where it has one."""
        kernel = self.backend.kernel("global_pool")
        done = kernel(x, out, self.p["pool_type"] == "max", nhwc) if kernel is not None else None
        if done is None:
            return False
        self._offer_replay(done)
        self.activate_inplace(out)
        return True

    def _offer_replay(self, done: Any) -> None:
        """The kernel's prepared call (``Launched.replay``: the CPU's) is the whole forward where no activation pass
        follows it."""
        self.offer_replay(done.replay if done is not None and self.activation is None else None)

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        x = self.input_dims[0]
        return pool_onnx(g, inputs[0], self.p["pool_type"], self.p["kernel_size"], self.p["stride"], self.p["padding"],
                         self.p["global"], self.p["count_include_pad"], self._padding_end, self.p["ceil_mode"],
                         (x.h, x.w) if g.options.explicit_sizes else None)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        return pool_torch(t, inputs[0], self.p["pool_type"], self.p["kernel_size"], self.p["stride"], self.p["padding"],
                          self.p["global"], self.p["count_include_pad"], self._padding_end, self.p["ceil_mode"])


REPLAYABLE_FORWARDS.add(Pooling.forward)
LAYER = Pooling
