"""The CuPy backend's operations (``Backend.kernel``: one factory per operation name): for each, its candidates as
rows of an :class:`~engine.backends.selection.OperationTable`, chosen by the backend's one selector. A kernel
returns :class:`~engine.backends.selection.Launched` (naming the candidate that ran) or None when no candidate
serves the case (the caller computes it with the generic array code).

``conv2d``'s rows, in order of preference where nothing is timed: our depthwise kernel (one filter per channel), our
direct and pointwise kernels (few channels in or out), cuDNN, a 1x1 convolution as one cuBLAS product (gemm), a
convolution over whole patches (kernel = stride) as the gathered patches times the weights (patchify), the Hopper
kernels (conv64, patch64, out64) and cuDNN on the space-to-depth form of a strided stem (s2d) or on a few-channel
input's patches (patches). Where several apply, the selector times them once on the real buffers and keeps the fastest
(ours win on small batches, cuDNN or a rewrite on large ones), on disk per GPU, driver and LayerLab version; it does
not time during CUDA-graph capture, with autotuning off or for a small convolution (``cudnn.worth_tuning``; grouped,
1x1 and patch convolutions are always worth it): the first applicable row runs then. ``global_pool`` and
``channel_scale`` (a squeeze-excitation block's pooling and gating) have one row each."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import cupy

from engine.backends.base import Backend, ConvOperands, derived
from engine.backends.cuda import (
    blas,
    conv_direct,
    cudnn,
    depthwise,
    elementwise,
    gather,
    normalization,
    pointwise,
    pooling,
    resize,
    runtime,
    wgmma,
)
from engine.backends.cuda import channel_scale as _channel_scale
from engine.backends.cuda import upsample as _upsample
from engine.backends.selection import Candidate, Launched, OperationTable
from engine.epilogues import EPILOGUE_TABLE, coefficients
from engine.tensor import is_nhwc_memory

Kernel = Callable[..., Launched | None]


@dataclasses.dataclass(frozen=True)
class Convolution(ConvOperands):
    """One ``conv2d`` call: the operands (logical NCHW views), the fused epilogue, and where the layer keeps derived
    weights."""

    groups: int
    epilogue: str | None
    coefs: dict[str, float]
    cache: dict[str, Any] | None
    cudnn: Any
    tf32: bool

    @property
    def alpha(self) -> float:
        return coefficients(self.epilogue, self.coefs)[0]

    @property
    def geometry(self) -> tuple[Any, ...]:
        return self.x, self.w, self.out, self.stride, self.padding, self.dilation, self.groups, self.epilogue

    @property
    def nhwc(self) -> bool:
        return is_nhwc_memory(self.x) and is_nhwc_memory(self.out)

    def physical(self) -> tuple[Any, Any]:
        """``x`` and ``out`` as physical NHWC arrays."""
        return self.x.transpose(0, 2, 3, 1), self.out.transpose(0, 2, 3, 1)

    def key(self) -> tuple[Any, ...]:
        """What the choice among candidates depends on."""
        x, w, out = self.x, self.w, self.out
        return (tuple(x.shape), tuple(x.strides), str(x.dtype), tuple(w.shape), tuple(out.shape), tuple(out.strides),
                tuple(self.stride), tuple(self.padding), tuple(self.dilation), self.groups, self.epilogue,
                self.b is None)


def _direct(p: Convolution, wd: Any) -> Launched | None:
    x, out = p.physical()
    return conv_direct.conv_direct(x, wd, p.b, out, p.w.shape[2:], p.stride, p.padding, p.dilation, p.epilogue,
                                   p.alpha)


def _depthwise(p: Convolution, wd: Any) -> Launched | None:
    return depthwise.conv_depthwise(p.x, wd, p.b, p.out, p.w.shape[2:], p.stride, p.padding, p.epilogue, p.coefs)


def _pointwise(p: Convolution, wp: Any) -> Launched | None:
    x, out = p.physical()
    return conv_direct.conv_pointwise(x, wp, p.b, out, p.epilogue, p.alpha)


def _hopper(launch: Callable[..., Launched | None]) -> Callable[[Convolution, Any], Launched | None]:
    def run(p: Convolution, wt: Any) -> Launched | None:
        x, out = p.physical()
        return launch(x, wt, p.b, out, p.epilogue, p.alpha)
    return run


def _cudnn(p: Convolution, _prepared: Any) -> Launched | None:
    return p.cudnn.conv(p.x, p.w, p.b, p.out, p.stride, p.padding, p.dilation, p.epilogue, p.coefs,
                        tf32=p.tf32 and p.x.dtype == cupy.float32)


def gemm_applies(p: Convolution) -> bool:
    """Whether the convolution is one matrix product: 1x1 weights, stride 1, no padding, one group, float16 or
    float32, input and output dense in the same layout (NHWC: rows of pixels times the weights' transpose; NCHW:
    the weights times each image's channels-by-pixels matrix)."""
    if p.w.shape[2:] != (1, 1) or tuple(p.stride) != (1, 1) or tuple(p.padding) != (0, 0) or p.groups != 1:
        return False
    if p.epilogue is not None and p.epilogue not in EPILOGUE_TABLE:
        return False
    if p.nhwc:
        x, out = p.physical()
        return bool(x.flags.c_contiguous and out.flags.c_contiguous)
    return bool(p.x.flags.c_contiguous and p.out.flags.c_contiguous)


def _gemm_weights(p: Convolution) -> Any:
    k, c = p.w.shape[:2]
    return cupy.ascontiguousarray(p.w.reshape(k, c))


def _gemm(p: Convolution, w2: Any) -> Launched | None:
    """The 1x1 convolution as one cuBLAS product (see :mod:`engine.backends.cuda.blas`), then bias and activation
    in one pass over the output where there are any."""
    n, k, h, wd = p.out.shape
    tf32 = p.tf32 and p.x.dtype == cupy.float32
    if p.nhwc:
        x, out = p.physical()
        blas.matmul(x.reshape(n * h * wd, x.shape[3]), w2.T, out.reshape(n * h * wd, k), tf32)
    else:
        out = p.out
        blas.matmul(w2, p.x.reshape(n, p.x.shape[1], h * wd), out.reshape(n, k, h * wd), tf32)
    return _bias_activation(p, out, "gemm")


def _bias_activation(p: Convolution, out: Any, candidate: str) -> Launched | None:
    """The bias and activation of a convolution computed as a plain product, in one pass over physical ``out``."""
    if p.b is not None:
        ones, shift = derived(p.cache, "gemm_bias", p.b, lambda: (cupy.ones(p.b.size, cupy.float32),
                                                                   p.b.astype(cupy.float32)))
        if pointwise.scale_shift(out, ones, shift, out, p.nhwc, p.epilogue, p.coefs) is None:
            return None
    elif p.epilogue is not None and pointwise.activation(out, out, p.epilogue, p.coefs) is None:
        return None
    return Launched(candidate)


def patchify_applies(p: Convolution) -> bool:
    """Whether the convolution cuts the input into whole patches (kernel = stride >= 2, no padding or dilation, one
    group, NHWC): the patches gathered into rows are one matrix product (ConvNeXt's stem and downsampling layers)."""
    s = tuple(p.stride)
    return (p.nhwc and tuple(p.w.shape[2:]) == s and s[0] >= 2 and s[1] >= 2 and tuple(p.padding) == (0, 0)
            and tuple(p.dilation) == (1, 1) and p.groups == 1 and all(a.flags.c_contiguous for a in p.physical())
            and (p.epilogue is None or p.epilogue in EPILOGUE_TABLE))


def _patchify_weights(p: Convolution) -> Any:
    k, c, r, t = p.w.shape
    cz = -(-c * r * t // 8) * 8  # the gathered channels, padded to a multiple of 8 (zero rows of the weights)
    w2 = cupy.zeros((k, cz), p.w.dtype)
    w2[:, :c * r * t] = p.w.reshape(k, c * r * t)  # channel (c * r_size + r) * t_size + u: tap (r, u) of c
    return w2


def _patchify(p: Convolution, w2: Any) -> Launched | None:
    """Every output pixel's patch gathered into one row (``gather.gathered``), then one cuBLAS product."""
    n, k, ho, wo = p.out.shape
    z = gather.gathered(p.x, (n, ho, wo, w2.shape[1]), p.stride, p.stride, (0, 0), p.cache, "patchify_input")
    out = p.physical()[1]
    blas.matmul(z.transpose(0, 2, 3, 1).reshape(n * ho * wo, w2.shape[1]), w2.T, out.reshape(n * ho * wo, k),
                p.tf32 and p.x.dtype == cupy.float32)
    return _bias_activation(p, out, "patchify")


def _s2d(p: Convolution, w2: Any) -> Launched | None:
    return gather.conv_space_to_depth(p.cudnn, p.x, w2, p.b, p.out, p.stride[0], p.padding, p.epilogue, p.coefs,
                                      p.cache)


def _patches(p: Convolution, wp: Any) -> Launched | None:
    return gather.conv_patches(p.cudnn, p.x, wp, p.b, p.out, p.w.shape[2:], p.stride, p.padding, p.epilogue, p.coefs,
                               p.cache)


#: the rows of ``conv2d``, in order of preference where nothing is timed
CONV2D_CANDIDATES = (
    Candidate("depthwise", lambda p: depthwise.applies(*p.geometry), _depthwise, lambda p: depthwise.weights(p.w)),
    Candidate("direct", lambda p: p.nhwc and conv_direct.direct_applies(p.x, p.w, p.out, p.groups, p.epilogue),
              _direct, lambda p: conv_direct.direct_weights(p.w)),
    Candidate("pointwise", lambda p: p.nhwc and conv_direct.pointwise_applies(*p.geometry),
              _pointwise, lambda p: conv_direct.pointwise_weights(p.w)),
    Candidate("cudnn", lambda p: p.cudnn is not None, _cudnn),
    Candidate("gemm", gemm_applies, _gemm, _gemm_weights),
    Candidate("patchify", patchify_applies, _patchify, _patchify_weights),
    Candidate("conv64", lambda p: p.nhwc and wgmma.conv64_applies(*p.geometry),
              _hopper(wgmma.conv3x3_c64), lambda p: wgmma.conv64_weights(p.w)),
    Candidate("patch64", lambda p: p.nhwc and wgmma.patch64_applies(*p.geometry),
              _hopper(wgmma.conv3x3_patch64), lambda p: wgmma.patch64_weights(p.w)),
    Candidate("out64", lambda p: p.nhwc and wgmma.out64_applies(*p.geometry),
              _hopper(wgmma.conv3x3_out64), lambda p: wgmma.out64_weights(p.w)),
    Candidate("s2d", lambda p: p.cudnn is not None and gather.s2d_applies(p.x, p.w, p.out, p.stride, p.dilation,
                                                                          p.groups),
              _s2d, lambda p: gather.s2d_weights(p.w, p.stride[0])),
    Candidate("patches", lambda p: p.cudnn is not None and gather.patch_applies(p.x, p.w, p.out, p.dilation, p.groups),
              _patches, lambda p: gather.patch_weights(p.w)),
)


def conv2d(backend: Backend) -> Kernel:
    """``act(conv(x, w) + b)`` into ``out`` (see ``KERNEL_OPERATIONS``); ``tf32``: fp32 convolutions may use TF32
    tensor cores (the network's setting), else strict float32."""
    table = OperationTable("conv2d", CONV2D_CANDIDATES, backend.selector)  # type: ignore[attr-defined]

    def run(x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
            dilation: tuple[int, int], groups: int, epilogue: str | None, coefs: dict[str, float],
            cache: dict[str, Any] | None = None, *, tf32: bool = False) -> Launched | None:
        if x.dtype not in (cupy.float16, cupy.float32) or not x.dtype == w.dtype == out.dtype:
            return None  # one precision throughout (mixed: the layer's generic path, which casts)
        p = Convolution(x, w, b, out, stride, padding, dilation, groups, epilogue, coefs, cache,
                        backend.cudnn, tf32)  # type: ignore[attr-defined]

        def prepared(c: Candidate) -> Any:
            return None if c.prepare is None else derived(cache, c.name, w, lambda: c.prepare(p))

        # 1x1 and patch convolutions are always timed against their matrix products: cuDNN's heuristics give small
        # ones a grouped direct kernel, or a legacy one between layout transposes, several times slower
        timed = ((cudnn.worth_tuning(w, out, groups) or gemm_applies(p) or patchify_applies(p))
                 and not runtime.capturing())
        return table.run(p, p.key(), prepared,
                         (lambda c, prep: runtime.elapsed_ms(lambda: c.launch(p, prep))) if timed else None)
    return run


def _one_kernel(kernel: Kernel) -> Callable[[Backend], Kernel]:
    """The factory of an operation one kernel serves on every CuPy backend (no table, nothing to choose)."""
    return lambda backend: kernel


#: ``out = act(a op b)`` in one pass (see :func:`engine.backends.cuda.elementwise.element_wise`)
element_wise = _one_kernel(elementwise.element_wise)
#: upsampling followed by a skip tensor's channels, in one pass
upsample_concat = _one_kernel(_upsample.upscale_concat)
#: max or average pooling in one pass (see :func:`engine.backends.cuda.pooling.pool2d`)
pool2d = _one_kernel(pooling.pool2d)
#: global max or average pooling as a reduction (see :func:`engine.backends.cuda.pooling.global_pool`)
global_pool = _one_kernel(pooling.global_pool)
#: ``x * act(g)`` with a per-channel gate (see :func:`engine.backends.cuda.channel_scale.channel_scale`)
channel_scale = _one_kernel(_channel_scale.channel_scale)
#: an activation by its fused epilogue in one pass (see :func:`engine.backends.cuda.pointwise.activation`)
activation = _one_kernel(pointwise.activation)
#: per-channel ``act(x * scale + shift)`` in one pass (see :func:`engine.backends.cuda.pointwise.scale_shift`)
scale_shift = _one_kernel(pointwise.scale_shift)


def _matmul(a: Any, b: Any, out: Any, tf32: bool, alpha: float = 1.0) -> Launched | None:
    if not blas.serves(a, b, out):
        return None
    blas.matmul(a, b, out, tf32, alpha)
    return Launched("cublas")


#: layer normalization of rows in one pass (see :func:`engine.backends.cuda.normalization.layer_norm`)
layer_norm = _one_kernel(normalization.layer_norm)
#: a Resize of a 4-D tensor by its separable taps in one pass (see :func:`engine.backends.cuda.resize.resize_taps`)
resize_taps = _one_kernel(resize.resize_taps)
#: the softmax of float32 rows in one pass (see :func:`engine.backends.cuda.normalization.softmax_rows`)
softmax_rows = _one_kernel(normalization.softmax_rows)
#: batched matrix products on a cuBLAS handle of LayerLab's own, which CUDA graphs capture (see
#: :mod:`engine.backends.cuda.blas`)
matmul = _one_kernel(_matmul)


def upsample(backend: Backend) -> Kernel:
    """Upsampling by integer factors (see :func:`engine.backends.cuda.upsample.upscale_concat`, without a skip)."""
    def run(x: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> Launched | None:
        return _upsample.upscale_concat(x, None, out, factor, bilinear, nhwc)
    return run
