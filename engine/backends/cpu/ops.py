"""The operations of the NumPy backend by name (``Backend.kernel``): adapters from the layers' calls to the Numba
kernel families of this package, and the convolution's candidates as rows of one
:class:`~engine.backends.selection.OperationTable`.

Each function named after an operation makes that operation's kernel for a backend. A kernel returns a
:class:`~engine.backends.selection.Launched` (the candidate that ran and, where it is one prepared call, that call to
run again on the same arrays) or None for what it does not serve (then the layer computes it with NumPy). The
kernels ask the backend on every call whether its Numba kernels are in use (``backend.cpu_kernels()``), so
``LAYERLAB_CPU_KERNELS=off`` takes effect at once. The CPU's choices are heuristic: the first applicable row of a
table, never timed."""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.backends.base import Backend, ConvOperands, derived
from engine.backends.cpu import attention as attention_kernels
from engine.backends.cpu import (
    channels,
    depthwise,
    elementwise,
    few_outputs,
    grouped,
    im2col,
    panels,
    pointwise,
    pooling,
    runtime,
    taps,
    winograd,
)
from engine.backends.cpu import dense as dense_kernels
from engine.backends.cpu import expand_depthwise as expand_kernels
from engine.backends.cpu import microkernel as mk
from engine.backends.cpu import upsample as upsample_kernels
from engine.backends.cpu.epilogue import FUSED_EPILOGUES, epilogue_alpha, kernel_alpha
from engine.backends.selection import Candidate, Launched, OperationTable, Selector, note_served
from engine.tensor import is_nhwc_memory

Kernel = Callable[..., Launched | None]

#: smallest input channel count and tile count (4x4 output pixels each) worth a Winograd convolution
WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_TILES = 12
#: most F(4x4, 3x3) tiles of an NHWC image computed as F(2x2, 3x3) instead (fewer weight bytes, more products)
WINOGRAD2_MAX_TILES = 16

#: whether a 3x3 convolution of stride 1 that Winograd takes (WINOGRAD_MIN_TILES) goes there before the panels: on
#: AVX2 (8-wide micro-kernel, Zen 3) resnet18's 14x14 256 -> 256 layer took 0.90 ms by Winograd against 1.35 by
#: panels (tests/bench/bench_cpu_panels.py), while the 7x7 ones (4 tiles) stay on panels (1.8 against 3.9); on
#: AVX-512 the panels keep their place except for layers of many channels (WINOGRAD_BEFORE_PANELS_MIN_CHANNELS)
WINOGRAD_BEFORE_PANELS = mk.PANEL_VECTOR < 16
#: fewest input and output channels of such a convolution that goes to Winograd before the panels where
#: WINOGRAD_BEFORE_PANELS does not send them all: on AVX-512 (2 Zen 5 cores, each alone, weights in cache) 14x14
#: 256 -> 256 took 0.39 ms by F(2x2, 3x3) against 0.52 by the panels, 512 -> 512 1.51 against 2.13, 128 -> 128 0.11
#: against 0.13, while 128 -> 32 (densenet's: 0.046 against 0.035) and 64 -> 64 (0.047 against 0.035) stay faster on
#: the panels; in a network, where the weights come from memory (F(2x2, 3x3)'s are 16/9 as large), resnet50 ran in
#: 0.987 of the time with its 14x14 layers on Winograd, densenet121 in 1.015 with all its 3x3 layers there
WINOGRAD_BEFORE_PANELS_MIN_CHANNELS = 128


def pool2d(backend: Backend) -> Kernel:
    def run(x: Any, out: Any, is_max: bool, kernel: tuple[int, int], stride: tuple[int, int],
            padding: tuple[int, int], count_include_pad: bool, nhwc: bool) -> Launched | None:
        if backend.cpu_kernels() is None or not nhwc or not (  # type: ignore[attr-defined]
                x.dtype == out.dtype == np.float32 and x.flags.c_contiguous and out.flags.c_contiguous):
            return None
        return _ran("pool_nhwc", pooling.pool_nhwc_plan(x, out, is_max, kernel, stride, padding, count_include_pad))
    return run


def global_pool(backend: Backend) -> Kernel:
    def run(x: Any, out: Any, is_max: bool, nhwc: bool) -> Launched | None:
        if backend.cpu_kernels() is None or x.ndim != 4 or not (  # type: ignore[attr-defined]
                x.dtype == out.dtype == np.float32 and x.flags.c_contiguous and out.flags.c_contiguous):
            return None
        n, c = x.shape[0], x.shape[3 if nhwc else 1]
        if out.size != n * c:
            return None
        return _ran("global_pool", channels.global_pool_plan(x, out, is_max, nhwc))
    return run


def channel_scale(backend: Backend) -> Kernel:
    def run(x: Any, g: Any, out: Any, nhwc: bool, epilogue: str | None,
            coefs: dict[str, float]) -> Launched | None:
        if backend.cpu_kernels() is None or epilogue not in FUSED_EPILOGUES or x.ndim != 4:  # type: ignore[attr-defined]
            return None
        if not (x.dtype == g.dtype == out.dtype == np.float32 and x.shape == out.shape
                and x.flags.c_contiguous and g.flags.c_contiguous and out.flags.c_contiguous):
            return None
        if g.size != x.shape[0] * x.shape[3 if nhwc else 1]:
            return None
        return _ran("channel_scale", channels.channel_scale_plan(x, g, out, nhwc, FUSED_EPILOGUES[epilogue],
                                                                 epilogue_alpha(epilogue, coefs)))
    return run


def element_wise(backend: Backend) -> Kernel:
    def run(op: str, a: Any, b: Any, out: Any, epilogue: str | None, coefs: dict[str, float]) -> Launched | None:
        if backend.cpu_kernels() is None or op not in elementwise.ELEMENT_WISE_OPS or epilogue not in FUSED_EPILOGUES:  # type: ignore[attr-defined]
            return None
        dtypes = {a.dtype, b.dtype, out.dtype}
        if np.float16 in dtypes and np.float32 in dtypes and dtypes <= {np.dtype(np.float16), np.dtype(np.float32)}:
            # a conversion fused into an fp32 layer: the float32 kernel on widened inputs, rounded once at the end
            f32 = [v if v.dtype == np.float32 else v.astype(np.float32) for v in (a, b)]
            out32 = out if out.dtype == np.float32 else np.empty_like(out, dtype=np.float32)
            if run(op, f32[0], f32[1], out32, epilogue, coefs) is None:
                return None
            if out32 is not out:
                out[...] = out32
            return Launched("element_wise")
        if not (a.dtype == b.dtype == out.dtype == np.float32 and a.shape == b.shape == out.shape):
            return None
        if not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
            return None
        return _ran("element_wise", elementwise.element_wise_plan(a, b, out, elementwise.ELEMENT_WISE_OPS[op],
                                                                  FUSED_EPILOGUES[epilogue],
                                                                  epilogue_alpha(epilogue, coefs)))
    return run


def _product(backend: Backend, name: str, applies: Callable[[Any, Any], bool]) -> Kernel:
    """The kernel ``name`` of :mod:`engine.backends.cpu.dense` (``dense`` or ``linear``): act(x @ w + b) over float32
    C-contiguous arrays, where ``applies(x, w)``."""
    def run(x: Any, w: Any, b: Any | None, out: Any, epilogue: str | None,
            coefs: dict[str, float]) -> Launched | None:
        if (backend.cpu_kernels() is None or epilogue not in FUSED_EPILOGUES  # type: ignore[attr-defined]
                or not applies(x, w)):
            return None
        arrays = (x, w, out) if b is None else (x, w, b, out)
        if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays):
            return None
        args = (x, w, b, out, FUSED_EPILOGUES[epilogue], epilogue_alpha(epilogue, coefs))
        return _ran(name, dense_kernels.dense_plan(*args) if name == "dense"
                    else functools.partial(dense_kernels.linear, *args))
    return run


def dense(backend: Backend) -> Kernel:
    return _product(backend, "dense", lambda x, w: x.shape[0] <= dense_kernels.DENSE_MAX_ITEMS)


def linear(backend: Backend) -> Kernel:
    """``linear`` (``engine.backends.base``): with ``cache`` (the weights stay the same array between calls), an
    epilogue the micro-kernel applies itself and its vectors on this CPU, the product over weights packed once in
    panels (``panels.conv_panels``, the rows as the pixels of a one-column image); else the rows shared out over
    the cores, one OpenBLAS product each, which packs the weights again on every call. swin_t's products, in turns
    on two Zen 3 cores: 0.71-0.89 of the OpenBLAS time (3136 x 96 -> 384 with GELU 3.52 against 4.00 ms, 49 x 3072
    -> 768 2.11 against 2.96)."""
    blas = _product(backend, "linear", lambda x, w: runtime.blas_sgemm() is not None and _linear_rows(x, w))

    def run(x: Any, w: Any, b: Any | None, out: Any, epilogue: str | None, coefs: dict[str, float],
            cache: dict[str, Any] | None = None) -> Launched | None:
        if (cache is None or backend.cpu_kernels() is None  # type: ignore[attr-defined]
                or not _linear_panels_apply(x, w, b, out, epilogue)):
            return blas(x, w, b, out, epilogue, coefs)
        alpha = epilogue_alpha(epilogue, coefs)
        # the same arrays as last call (a network's buffers): the prepared call, no Python work
        key = (_address(x), x.shape, _address(out), out.shape, id(w), id(b), epilogue, alpha)
        ready = cache.get("linear_call")
        if ready is not None and ready[0] == key:
            ready[1].replay()
            return ready[1]
        (m, k), o = x.shape, w.shape[1]
        wp = derived(cache, "linear_panels", w,
                     lambda: panels.panel_weights(np.ascontiguousarray(w.T).reshape(o, k, 1, 1)))
        done = _ran("linear_panels", panels.conv_panels_plan(
            x.reshape(1, m, 1, k).transpose(0, 3, 1, 2), wp, (1, 1), b, out.reshape(1, m, 1, o).transpose(0, 3, 1, 2),
            (1, 1), (0, 0), (1, 1), FUSED_EPILOGUES[epilogue], alpha))
        cache["linear_call"] = (key, done, w, b)  # keeps w and b alive, so that their ids in the key stay theirs
        return done
    return run


def _linear_rows(x: Any, w: Any) -> bool:
    """A product of rows ``x`` (M, K) and weights ``w`` (K, O) large enough to share out over the cores."""
    return x.ndim == 2 and x.shape[0] * x.shape[1] * w.shape[1] >= dense_kernels.LINEAR_SPLIT_MIN


def _linear_panels_apply(x: Any, w: Any, b: Any | None, out: Any, epilogue: str | None) -> bool:
    arrays = (x, w, out) if b is None else (x, w, b, out)
    return (_linear_rows(x, w) and w.ndim == 2 and epilogue in FUSED_EPILOGUES
            and FUSED_EPILOGUES[epilogue] in mk.MICROKERNEL_EPILOGUES and mk.panels_available()
            and all(a.dtype == np.float32 and a.flags.c_contiguous for a in arrays))


def layer_norm(backend: Backend) -> Kernel:
    def run(x: Any, scale: Any, bias: Any, out: Any, n: int, inner: int, epsilon: float, epilogue: str | None,
            coefs: dict[str, float]) -> Launched | None:
        if (backend.cpu_kernels() is None or epilogue not in FUSED_EPILOGUES  # type: ignore[attr-defined]
                or inner != 1 or n < 1 or x.size % n):
            return None
        if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in (x, scale, bias, out)):
            return None
        rows = x.size // n
        # read-only weights (an imported model's, straight from its file) are another type to Numba: a copy of
        # these few values instead of a second compile of the kernel (2.3-2.9 s)
        scale, bias = (np.require(a, requirements="W") for a in (scale, bias))
        return _ran("layer_norm", functools.partial(pointwise.layer_norm_rows, x.reshape(rows, n), scale, bias,
                                                    out.reshape(rows, n), epsilon, FUSED_EPILOGUES[epilogue],
                                                    epilogue_alpha(epilogue, coefs)))
    return run


def attention(backend: Backend) -> Kernel:
    """Scaled dot-product attention, each matrix's scores kept in the core's cache (see
    :func:`engine.backends.cpu.attention.attention`)."""
    def run(q: Any, k: Any, v: Any, bias: Any | None, out: Any, scale: float, k_transposed: bool = False,
            cache: dict[str, Any] | None = None) -> Launched | None:
        if backend.cpu_kernels() is None:  # type: ignore[attr-defined]
            return None
        # the same arrays as last call (a network's buffers): the prepared call, no Python work
        key = tuple(None if a is None else (_address(a), a.shape, a.strides, a.dtype.str) for a in (q, k, v, bias, out))
        key += (scale, k_transposed)
        ready = None if cache is None else cache.get("attention_call")
        if ready is not None and ready[0] == key:
            ready[1].replay()
            return ready[1]
        call = attention_kernels.attention_call(q, k, v, bias, out, scale, k_transposed)
        if call is None:
            return None
        done = _ran("attention", call)
        if cache is not None:
            cache["attention_call"] = (key, done)
        return done
    return run


def matmul(backend: Backend) -> Kernel:
    """``out = alpha * a @ b`` over stacks of matrices, shared out over the cores (see
    :func:`engine.backends.cpu.dense.matmul`); ``tf32`` has no meaning on the CPU."""
    def run(a: Any, b: Any, out: Any, tf32: bool = False, alpha: float = 1.0) -> Launched | None:
        if backend.cpu_kernels() is None or not dense_kernels.matmul(a, b, out, alpha):  # type: ignore[attr-defined]
            return None
        return Launched("matmul")
    return run


def resize_taps(backend: Backend) -> Kernel:
    """Resampling by separable taps in one pass (see :func:`engine.backends.cpu.upsample.resize_taps`)."""
    def run(x: Any, out: Any, taps_h: Any, taps_w: Any, nhwc: bool) -> Launched | None:
        if backend.cpu_kernels() is None:  # type: ignore[attr-defined]
            return None
        if not upsample_kernels.resize_taps(x, out, taps_h.index, taps_h.weight, taps_w.index, taps_w.weight, nhwc):
            return None
        return Launched("resize_taps")
    return run


def softmax_rows(backend: Backend) -> Kernel:
    """The softmax along the last axis, a bias repeated over the leading axes added as it reads (see
    :func:`engine.backends.cpu.pointwise.softmax_rows`; ``out`` may be ``x``)."""
    def run(x: Any, out: Any, bias: Any | None = None) -> Launched | None:
        if backend.cpu_kernels() is None or not pointwise.softmax_rows(x, out, bias):  # type: ignore[attr-defined]
            return None
        return Launched("softmax_rows")
    return run


def upsample(backend: Backend) -> Kernel:
    def run(x: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> Launched | None:
        if backend.cpu_kernels() is None or not (  # type: ignore[attr-defined]
                x.dtype == out.dtype == np.float32 and x.flags.c_contiguous and out.flags.c_contiguous):
            return None
        upsample_kernels.upsample(x, out, factor, bilinear, nhwc)
        return Launched("upsample")
    return run


def upsample_concat(backend: Backend) -> Kernel:
    def run(x: Any, skip: Any, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> Launched | None:
        if backend.cpu_kernels() is None or x.ndim != 4 or not x.dtype == skip.dtype == out.dtype == np.float32:  # type: ignore[attr-defined]
            return None
        if not (x.flags.c_contiguous and skip.flags.c_contiguous and out.flags.c_contiguous):
            return None
        h_axis, c_axis = (1, 3) if nhwc else (2, 1)
        n, c0, h, w = x.shape[0], x.shape[c_axis], x.shape[h_axis], x.shape[h_axis + 1]
        expected = list(skip.shape)
        expected[c_axis] += c0
        if (skip.shape[0], skip.shape[h_axis], skip.shape[h_axis + 1]) != (n, h * factor[0], w * factor[1]):
            return None  # crop or edge extension to the skip size: the generic path
        if out.shape != tuple(expected):
            return None
        upsample_kernels.upscale_concat(x, skip, out, factor, bilinear, nhwc)
        return Launched("upsample_concat")
    return run


# ---- convolution: the candidates, one row each ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class ConvProblem(ConvOperands):
    """One float32 convolution as the candidates see it: the operands (logical NCHW views), the epilogue's code and
    coefficients, the layer's kernel cache (None: the weights change between runs), a residual of ``out``'s shape and
    strides (or None), and what the rows' tests share."""

    code: int
    #: the epilogue's coefficients (``epilogue.epilogue_alpha``: one, or a pair)
    alpha: float | tuple[float, float]
    cache: dict[str, Any] | None
    residual: Any
    #: NHWC memory, and rows of (pixels, K) the NHWC kernels write
    nhwc: bool
    pixel_rows: bool
    #: 4x4 output tiles, and whether a Winograd convolution is worth it
    tiles: int
    winograd: bool
    #: the convolution's groups (the rows of a plain convolution take 1 only)
    groups: int = 1

    @classmethod
    def of(cls, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int], code: int, alpha: float | tuple[float, float], cache: dict[str, Any] | None,
           residual: Any, groups: int = 1) -> ConvProblem:
        nhwc = is_nhwc_memory(out)
        ho, wo = out.shape[2:]
        tiles = -(-ho // 4) * -(-wo // 4)
        winograd = (groups == 1 and w.shape[2:] == (3, 3) and stride == dilation == (1, 1)
                    and w.shape[1] >= WINOGRAD_MIN_CHANNELS and tiles >= WINOGRAD_MIN_TILES)
        pixel_rows = nhwc and out.transpose(0, 2, 3, 1).flags.c_contiguous
        return cls(x, w, b, out, stride, padding, dilation, code, alpha, cache, residual, nhwc, pixel_rows, tiles,
                   winograd, groups)

    @property
    def geometry(self) -> tuple[Any, ...]:
        return self.stride, self.padding, self.dilation, self.code, self.alpha


def _depthwise_applies(p: ConvProblem) -> bool:
    """One filter per channel, NHWC memory whose input is C-contiguous too, no residual (the layer adds it)."""
    return (p.pixel_rows and p.residual is None and depthwise.depthwise_applies(p.w.shape, p.groups, p.x.shape[1])
            and p.x.transpose(0, 2, 3, 1).flags.c_contiguous)


def _depthwise_launch(p: ConvProblem, wd: Any) -> Launched:
    return _ran("depthwise", depthwise.depthwise_plan(p.x, wd, p.b, p.out, *p.geometry))


def _grouped_applies(p: ConvProblem) -> bool:
    """More than one group, not depthwise, NHWC memory, no residual (the layer adds it)."""
    return (p.pixel_rows and p.residual is None and p.groups > 1
            and not depthwise.depthwise_applies(p.w.shape, p.groups, p.x.shape[1])
            and grouped.grouped_applies(p.w.shape, p.groups, p.x.shape[1]))


def _grouped_launch(p: ConvProblem, packed: Any) -> Launched:
    return _ran("grouped", grouped.grouped_plan(p.x, packed, p.w.shape[2:], p.b, p.out, *p.geometry))


def _pixels_dense_applies(p: ConvProblem) -> bool:
    """A 1x1 convolution over a few pixels in all (squeeze-excitation's 1x1 images): a fully connected layer of
    the pixels as items, the weights (the traffic) read once."""
    n, _, h, w = p.x.shape
    return (p.pixel_rows and p.groups == 1 and p.residual is None and p.w.shape[2:] == (1, 1)
            and p.stride == (1, 1) and p.padding == (0, 0) and n * h * w <= dense_kernels.DENSE_MAX_ITEMS
            and p.x.transpose(0, 2, 3, 1).flags.c_contiguous)


def _pixels_dense_launch(p: ConvProblem, wm: Any) -> Launched:
    c, k = p.x.shape[1], p.w.shape[0]
    x2, y2 = p.x.transpose(0, 2, 3, 1).reshape(-1, c), p.out.transpose(0, 2, 3, 1).reshape(-1, k)
    b = None if p.b is None else np.ascontiguousarray(p.b, dtype=np.float32)
    return _ran("pixels_dense", dense_kernels.dense_plan(x2, wm, b, y2, p.code, p.alpha))


def _few_outputs_shape(p: ConvProblem) -> bool:
    """Few output channels over enough input channels: the few-outputs kernel's case (which takes no residual:
    the layer adds it then)."""
    return (p.pixel_rows and p.groups == 1 and p.w.shape[0] <= few_outputs.FEW_OUTPUTS_MAX
            and p.w.shape[1] >= few_outputs.FEW_OUTPUTS_MIN_CHANNELS)


def _few_outputs_applies(p: ConvProblem) -> bool:
    return _few_outputs_shape(p) and p.residual is None


def _few_outputs_launch(p: ConvProblem, wr: Any) -> Launched:
    return _ran("few_outputs", few_outputs.conv_few_outputs_plan(p.x, wr, p.w.shape[2:], p.b, p.out, *p.geometry))


def _panels_applies(p: ConvProblem) -> bool:
    pixels = p.out.shape[2] * p.out.shape[3]
    winograd_first = p.winograd and (WINOGRAD_BEFORE_PANELS or min(p.w.shape[:2]) >= WINOGRAD_BEFORE_PANELS_MIN_CHANNELS)
    return (p.pixel_rows and p.groups == 1 and not _few_outputs_shape(p) and not winograd_first
            and (panels.panels_apply(pixels, p.w.shape[0]) or panels.stem_panels_apply(p.w.shape, p.dilation, pixels)
                 or panels.pointwise_panels_apply(p.w.shape, p.code)
                 or ((not p.winograd or panels.panels_before_winograd(p.w.shape))
                     and panels.large_panels_apply(p.w.shape, p.dilation, pixels))))


def _panels_launch(p: ConvProblem, wp: Any) -> Launched:
    return _ran("panels", panels.conv_panels_plan(p.x, wp, p.w.shape[2:], p.b, p.out, *p.geometry, p.residual))


def _winograd_tile(p: ConvProblem) -> int:
    """F(2x2, 3x3) for a small NHWC image, else F(4x4, 3x3)."""
    return 2 if p.nhwc and p.tiles <= WINOGRAD2_MAX_TILES else 4


def _winograd_row(tile: int) -> Candidate:
    """The Winograd F(``tile`` x ``tile``, 3x3) candidate: its products on the micro-kernel (weights in panels)
    where it takes them, else BLAS."""
    def applies(p: ConvProblem) -> bool:
        return p.winograd and not _few_outputs_shape(p) and not _panels_applies(p) and _winograd_tile(p) == tile

    def prepare(p: ConvProblem) -> Any:
        w = p.w
        if p.nhwc and winograd.winograd_panels_apply(w.shape[0]):
            return derived(p.cache, f"winograd{tile}_panels", w,
                           lambda: winograd.winograd_panels(winograd.transform_weights(w, True, tile)))
        return derived(p.cache, f"winograd{tile}_{'nhwc' if p.nhwc else 'nchw'}", w,
                       lambda: winograd.transform_weights(w, p.nhwc, tile))

    def launch(p: ConvProblem, u: Any) -> Launched:
        return _ran(f"winograd_f{tile}x{tile}",
                    winograd.winograd_plan(p.x, u, p.b, p.out, p.padding, p.code, p.alpha, p.residual))

    return Candidate(f"winograd_f{tile}x{tile}", applies, launch, prepare)


def _taps_applies(p: ConvProblem) -> bool:
    """A stride-1 convolution whose taps mostly read padding (an atrous convolution on a small image), NHWC memory,
    no residual, more output pixels than the panels take (their packed weights and windows in place serve smaller
    images better than a BLAS product per tap): each tap over the pixels it reads inside the image (``taps``)."""
    kernel = p.w.shape[2:]
    return (p.pixel_rows and p.groups == 1 and p.residual is None and p.stride == (1, 1) and kernel != (1, 1)
            and p.out.shape[2] * p.out.shape[3] > panels.PANEL_MAX_PIXELS
            and runtime.blas_sgemm() is not None and p.x.transpose(0, 2, 3, 1).flags.c_contiguous
            and taps.inside_share(p.x.shape[2:], p.out.shape[2:], kernel, p.padding, p.dilation)
            <= taps.TAPS_MAX_SHARE)


def _tap_panels_applies(p: ConvProblem) -> bool:
    """The taps' convolutions (``_taps_applies``) through the micro-kernel, where it runs them (AVX-512)."""
    return taps.tap_panels_apply() and _taps_applies(p)


def _tap_panels_launch(p: ConvProblem, wp: Any) -> Launched:
    return _ran("tap_panels", taps.conv_tap_panels_plan(p.x.transpose(0, 2, 3, 1), wp, p.w.shape[2:], p.b,
                                                        p.out.transpose(0, 2, 3, 1), p.padding, p.dilation, p.code,
                                                        kernel_alpha(p.alpha)))


def _taps_launch(p: ConvProblem, wt: Any) -> Launched:
    return _ran("taps", taps.conv_taps_plan(p.x.transpose(0, 2, 3, 1), wt, p.w.shape[2:], p.b,
                                            p.out.transpose(0, 2, 3, 1), p.padding, p.dilation, p.code,
                                            kernel_alpha(p.alpha)))


def _im2col_applies(p: ConvProblem) -> bool:
    return (p.pixel_rows and p.groups == 1 and not p.winograd and not _few_outputs_shape(p)
            and not _panels_applies(p))


def _im2col_launch(p: ConvProblem, wm: Any) -> Launched:
    return _ran("im2col", im2col.conv_nhwc_plan(p.x, wm, p.w.shape[2:], p.b, p.out, *p.geometry, p.residual))


def _ran(name: str, call: Callable[[], None]) -> Launched:
    """Run ``call`` and return it as the launch of ``name``, ready to run again on the same arrays
    (``Layer.replay_call``)."""
    call()
    return Launched(name, call)


#: the float32 convolution's candidates, in order of preference (the first applicable one runs)
CONV2D_CANDIDATES = (
    Candidate("depthwise", _depthwise_applies, _depthwise_launch,
              lambda p: derived(p.cache, "depthwise", p.w, lambda: depthwise.depthwise_weights(p.w))),
    Candidate("grouped", _grouped_applies, _grouped_launch,
              lambda p: derived(p.cache, "grouped", p.w, lambda: grouped.grouped_weights(p.w, p.groups))),
    Candidate("pixels_dense", _pixels_dense_applies, _pixels_dense_launch,
              lambda p: derived(p.cache, "pixels_dense", p.w,
                                lambda: np.ascontiguousarray(p.w[:, :, 0, 0], dtype=np.float32))),
    Candidate("few_outputs", _few_outputs_applies, _few_outputs_launch,
              lambda p: derived(p.cache, "few_outputs", p.w, lambda: few_outputs.few_output_weights(p.w))),
    Candidate("tap_panels", _tap_panels_applies, _tap_panels_launch,
              lambda p: derived(p.cache, "tap_panels", p.w, lambda: taps.tap_panel_weights(p.w))),
    Candidate("taps", _taps_applies, _taps_launch,
              lambda p: derived(p.cache, "taps", p.w, lambda: taps.tap_weights(p.w))),
    Candidate("panels", _panels_applies, _panels_launch,
              lambda p: derived(p.cache, "gemm_panels", p.w, lambda: panels.panel_weights(p.w))),
    _winograd_row(2),
    _winograd_row(4),
    Candidate("im2col", _im2col_applies, _im2col_launch,
              lambda p: derived(p.cache, "gemm_nhwc", p.w, lambda: im2col.gemm_weights(p.w))),
)


def conv2d(backend: Backend) -> Kernel:
    """The convolution: a :class:`Launched` whose ``replay`` is the whole convolution ready to run again on the
    same arrays where the layer gave its kernel cache, without one where it gave none; None where no kernel
    serves the case. ``tf32`` is accepted for the GPU's sake: the CPU computes strict float32."""
    table = OperationTable("conv2d", CONV2D_CANDIDATES, Selector(None, "cpu"))

    def prepared(problem: ConvProblem) -> Callable[[Candidate], Any]:
        return lambda c: c.prepare(problem) if c.prepare is not None else None

    def run(x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
            dilation: tuple[int, int], groups: int, epilogue: str | None, coefs: dict[str, float],
            cache: dict[str, Any] | None = None, *, memo: bool = True, residual: Any = None,
            tf32: bool = False) -> Launched | None:
        if (backend.cpu_kernels() is None or epilogue not in FUSED_EPILOGUES  # type: ignore[attr-defined]
                or runtime.blas_sgemm() is None):
            return None
        if groups != 1 and not (depthwise.depthwise_applies(w.shape, groups, x.shape[1])
                                or grouped.grouped_applies(w.shape, groups, x.shape[1])):
            return None  # other grouped convolutions: the generic path
        if residual is not None and (residual.dtype != np.float32 or residual.shape != out.shape
                                     or residual.strides != out.strides):
            return None  # fp16 storage or another layout: the layer adds it in a pass of its own
        if np.float16 in (x.dtype, out.dtype) and w.dtype == np.float32:
            # fp16 storage (an fp16 layer, or a conversion fused into an fp32 one): float32 kernels, one rounding
            out32 = out if out.dtype == np.float32 else np.empty_like(out, dtype=np.float32)  # same memory layout
            x32 = x if x.dtype == np.float32 else x.astype(np.float32)
            done = run(x32, w, b, out32, stride, padding, dilation, groups, epilogue, coefs, cache, memo=False)
            if done is None:
                return None
            if out32 is not out:
                out[...] = out32
            return Launched(done.candidate)
        if not x.dtype == out.dtype == np.float32 or w.dtype != np.float32:
            return None
        code, alpha = FUSED_EPILOGUES[epilogue], epilogue_alpha(epilogue, coefs)
        key = None
        if cache is not None and memo:  # the same arrays as last run (a network's buffers): the prepared call, no Python work
            key = (_address(x), x.shape, x.strides, _address(out), out.shape, out.strides, id(w), id(b), stride,
                   padding, dilation, code, alpha, None if residual is None else _address(residual))
            ready = cache.get("conv2d_call")
            if ready is not None and ready[0] == key:
                ready[1].replay()
                note_served(ready[1].candidate)  # a profile learns the candidate from every run, this one too
                return ready[1]
        problem = ConvProblem.of(x, w, b, out, stride, padding, dilation, code, alpha, cache, residual, groups)
        done = table.run(problem, None, prepared(problem))
        if done is None:
            return None
        if key is None:
            return Launched(done.candidate)
        cache["conv2d_call"] = (key, done, w, b)  # keeps w and b alive, so that their ids in the key stay theirs
        return done  # the whole convolution, ready to run again on these arrays (``Layer.replay_call``)
    return run


def _address(a: Any) -> int:
    return a.__array_interface__["data"][0]


def conv2d_sum(backend: Backend) -> Kernel:
    def run(x: Any, w: Any, b: Any | None, residual: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
            dilation: tuple[int, int], groups: int, epilogue: str | None, coefs: dict[str, float],
            cache: dict[str, Any] | None = None, *, tf32: bool = False) -> Launched | None:
        return backend.kernel("conv2d")(x, w, b, out, stride, padding, dilation, groups,  # type: ignore[misc]
                                        epilogue, coefs, cache, residual=residual)
    return run


def expand_depthwise(backend: Backend) -> Kernel:
    """A 1x1 expansion and the depthwise layer reading it in one launch (``expand_depthwise.expand_depthwise_plan``):
    float32 NHWC memory, the expansion of stride 1 and no padding, the depthwise layer square and undilated; its
    replay is that launch, prepared once for the same arrays."""
    def run(x: Any, w1: Any, b1: Any | None, epilogue1: str | None, coefs1: dict[str, float], w2: Any,
            b2: Any | None, epilogue2: str | None, coefs2: dict[str, float], out: Any, stride: tuple[int, int],
            padding: tuple[int, int], cache: dict[str, Any] | None = None) -> Launched | None:
        k, c = w1.shape[:2]
        if (backend.cpu_kernels() is None or epilogue1 not in FUSED_EPILOGUES or epilogue2 not in FUSED_EPILOGUES
                or not _float32_arrays(w1, w2) or x.dtype != np.float32 or out.dtype != np.float32
                or w1.shape[2:] != (1, 1) or x.shape[1] != c or out.shape[1] != k
                or not (is_nhwc_memory(x) and x.transpose(0, 2, 3, 1).flags.c_contiguous)
                or not (is_nhwc_memory(out) and out.transpose(0, 2, 3, 1).flags.c_contiguous)
                or not expand_kernels.expand_depthwise_applies(c, k, w2.shape, stride, (1, 1))):
            return None
        code1, alpha1 = FUSED_EPILOGUES[epilogue1], epilogue_alpha(epilogue1, coefs1)
        code2, alpha2 = FUSED_EPILOGUES[epilogue2], epilogue_alpha(epilogue2, coefs2)
        key = (_address(x), x.shape, _address(out), out.shape, id(w1), id(b1), id(w2), id(b2), code1, alpha1, code2,
               alpha2, stride, padding)
        ready = None if cache is None else cache.get("expand_depthwise_call")
        if ready is not None and ready[0] == key:
            ready[1]()
            note_served("expand_depthwise")
            return Launched("expand_depthwise", ready[1])
        wp = derived(cache, "expand_panels", w1, lambda: panels.panel_weights(w1))
        wd = derived(cache, "expand_depthwise_filters", w2, lambda: depthwise.depthwise_weights(w2))
        call = expand_kernels.expand_depthwise_plan(x, wp, b1, code1, alpha1, wd, b2, code2, alpha2, out, stride,
                                                      padding)
        call()
        note_served("expand_depthwise")
        if cache is None:
            return Launched("expand_depthwise")
        cache["expand_depthwise_call"] = (key, call, w1, b1, w2, b2)  # keeps the arrays whose ids the key holds
        return Launched("expand_depthwise", call)
    return run


def _float32_arrays(*arrays: Any) -> bool:
    return all(a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)


def to_channels_last(backend: Backend) -> Kernel:
    """An NCHW image into channels-last memory in one pass (see :func:`engine.backends.cpu.pointwise.to_channels_last`):
    float32, at most 8 channels (more copy fast enough by planes)."""
    def run(data: Any, out: Any) -> Launched | None:
        if (backend.cpu_kernels() is None or not isinstance(data, np.ndarray)  # type: ignore[attr-defined]
                or not isinstance(out, np.ndarray) or data.ndim != 4 or data.shape != out.shape
                or data.shape[1] > 8 or not is_nhwc_memory(out)):
            return None
        nhwc = out.transpose(0, 2, 3, 1)
        if not _float32_arrays(data, nhwc):
            return None
        pointwise.to_channels_last(data, nhwc)
        return Launched("to_channels_last")
    return run


def activation(backend: Backend) -> Kernel:
    """An activation by its fused epilogue in one pass (see :func:`engine.backends.cpu.pointwise.activation`)."""
    def run(x: Any, out: Any, epilogue: str | None, coefs: dict[str, float]) -> Launched | None:
        if (backend.cpu_kernels() is None or epilogue is None or epilogue not in FUSED_EPILOGUES  # type: ignore[attr-defined]
                or x.shape != out.shape or not _float32_arrays(x, out)):
            return None
        pointwise.activation(x, out, epilogue, coefs)
        return Launched("activation")
    return run


def scale_shift(backend: Backend) -> Kernel:
    """Per-channel ``act(x * scale + shift)`` in one pass (see :func:`engine.backends.cpu.pointwise.scale_shift`)."""
    def run(x: Any, scale: Any, shift: Any, out: Any, nhwc: bool, epilogue: str | None,
            coefs: dict[str, float]) -> Launched | None:
        if (backend.cpu_kernels() is None or epilogue not in FUSED_EPILOGUES  # type: ignore[attr-defined]
                or x.ndim != 4 or x.shape != out.shape or x.dtype != np.float32
                or not _float32_arrays(out, scale, shift)):
            return None
        c = x.shape[3] if nhwc else x.shape[1]
        call = None if scale.size != c or shift.size != c else pointwise.scale_shift_call(x, scale, shift, out, nhwc,
                                                                                          epilogue, coefs)
        return None if call is None else _ran("scale_shift", call)
    return run
