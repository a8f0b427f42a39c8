"""Hopper convolutions on warpgroup tensor-core instructions (``wgmma``, sm_90a, compiled by NVRTC): three 3x3
convolutions of stride 1 and padding 1, fp16 NHWC, sharing the strip-walking machinery and the epilogue of
``kernels/wgmma.cuh``:

- ``conv64.cu``, 64 to 64 channels (a denoiser's middle layers): each warpgroup walks a strip of 96 pixels down the
  image keeping a ring of five input rows in shared memory (the row three below the one being computed loads while
  it computes); one output row is 36 ``wgmma`` with the weights (A) and the ring's rows (B) both read from shared
  memory through 128-byte-swizzled descriptors, then transposed through ``stmatrix`` into a staging row written out
  in 16-byte stores. H100, dncnn's layer at 1080p: 287-300 us against cuDNN's 341-353;
- ``patch64.cu``, 1-3 channels to 64 (an RGB input layer): each output row's 9 x C taps gathered from the unpadded
  input into a shared-memory row, two ``wgmma`` a row. H100, dncnn's input layer at 1080p: 0.215 ms against cuDNN's
  0.315 on channels padded to 8;
- ``out64.cu``, 64 channels to at most 8 (an output layer to RGB): the pixels are M and the outputs N; the same ring;
  the few outputs stored straight from the accumulators. H100, dncnn's output layer at 1080p: 0.139 ms against
  cuDNN's 0.385.

Each kernel is compiled for one shape (strip width, warpgroups a block, rows a work item) on first use; where it
does not compile or load (no sm_90a), its candidate declines and the others serve."""
from __future__ import annotations

import functools
from typing import Any

import cupy

from engine.backends.cuda import runtime
from engine.backends.cuda.conv_direct import EPILOGUES
from engine.backends.selection import Launched

#: (strip width in pixels, warpgroups a block, rows a work item) of each kernel
CONV64_SHAPE = (96, 2, 8)
PATCH64_SHAPE = (96, 4, 8)
OUT64_SHAPE = (64, 4, 16)



def _conv64_smem(pixels: int, groups: int) -> int:
    # the weights, a ring of five input rows and a staging row per warpgroup, the alignment slack
    return 9 * 64 * 128 + groups * (5 * (pixels + 2) * 128 + pixels * 128) + 1024


def _patch64_smem(pixels: int, groups: int) -> int:
    # the weights, a patch row and a staging row per warpgroup, the alignment slack
    return 8192 + groups * 2 * pixels * 128 + 1024


def _out64_smem(pixels: int, groups: int) -> int:
    # the weights and a ring of five input rows per warpgroup, the alignment slack
    return 9 * 1024 + groups * 5 * (pixels + 2) * 128 + 1024


#: kernel -> (file, C name, shape, shared memory, the N of its wgmma products)
_KERNELS = {
    "conv64": ("conv64.cu", "conv3x3_c64_rows", CONV64_SHAPE, _conv64_smem, CONV64_SHAPE[0]),
    "patch64": ("patch64.cu", "conv3x3_patch64", PATCH64_SHAPE, _patch64_smem, PATCH64_SHAPE[0]),
    "out64": ("out64.cu", "conv3x3_out64", OUT64_SHAPE, _out64_smem, 8),
}


def defines(kernel: str) -> tuple[str, ...]:
    """The ``-D`` definitions ``kernel`` (conv64, patch64, out64) is compiled with: its shape and wgmma's N."""
    pixels, groups, seg = _KERNELS[kernel][2]
    return f"NP={pixels}", f"GROUPS={groups}", f"SEG={seg}", f"WGMMA_N={_KERNELS[kernel][4]}"


@functools.cache
def _compiled(kernel: str, device: int) -> Any:
    file, name, (pixels, groups, _), smem, _n = _KERNELS[kernel]
    try:
        return runtime.loaded(file, name, "sm_90a", defines(kernel), smem(pixels, groups), device)
    except Exception:  # noqa: BLE001 - an NVRTC or driver without sm_90a: the other candidates serve
        return None


def is_hopper() -> bool:
    """Whether the current GPU is a Hopper (compute capability 9.0), where these kernels run."""
    return runtime.compute_capability() == 90


def available(kernel: str) -> bool:
    """Whether ``kernel`` (conv64, patch64, out64) compiles and loads on the current GPU (compiling it now)."""
    return is_hopper() and _compiled(kernel, cupy.cuda.Device().id) is not None


def _geometry_3x3(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                  dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    return (groups == 1 and tuple(w.shape[2:]) == (3, 3) and tuple(stride) == tuple(dilation) == (1, 1)
            and tuple(padding) == (1, 1) and act in EPILOGUES and x.dtype == w.dtype == out.dtype == cupy.float16
            and tuple(x.shape[2:]) == tuple(out.shape[2:]))


def conv64_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                   dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    """Whether :func:`conv3x3_c64` covers this convolution: fp16, 3x3 of stride 1 and padding 1 from 64 to 64
    channels, one group, a fused activation it applies, on a Hopper GPU."""
    return (tuple(w.shape) == (64, 64, 3, 3) and x.shape[1] == 64
            and _geometry_3x3(x, w, out, stride, padding, dilation, groups, act) and is_hopper())


def conv64_weights(w: Any) -> Any:
    """Weights (logical 64, 64, 3, 3) as the fp16 (tap, K, C) array of :func:`conv3x3_c64`."""
    return cupy.ascontiguousarray(w.transpose(2, 3, 0, 1), dtype=cupy.float16).reshape(9, 64, 64)


def conv3x3_c64(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float) -> Launched | None:
    """``act(conv3x3(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` and ``out`` (N, H, W, 64), ``wt`` from
    :func:`conv64_weights`, ``bias`` fp16 or None. None when the arrays are not contiguous and aligned or the kernel
    is unavailable."""
    if not runtime.aligned(x, out, wt):
        return None
    return _run_strips("conv64", x, wt, bias, out, (), act, alpha)


def patch64_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                    dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    """Whether :func:`conv3x3_patch64` covers this convolution: fp16, 3x3 of stride 1 and padding 1 from at most
    3 channels to 64 (an RGB input layer), one group, a fused activation it applies, on a Hopper GPU."""
    return (w.shape[0] == 64 and 1 <= w.shape[1] <= 3 and x.shape[1] == w.shape[1]
            and _geometry_3x3(x, w, out, stride, padding, dilation, groups, act) and is_hopper())


def patch64_weights(w: Any) -> Any:
    """Weights (logical 64, C, 3, 3) as the fp16 (64, 64) rows of :func:`conv3x3_patch64`: column (dy * 3 + dx) * C
    + c, zeros past 9C."""
    k, c = w.shape[:2]
    rows = cupy.zeros((64, 64), cupy.float16)
    rows[:, :9 * c] = w.transpose(0, 2, 3, 1).reshape(k, 9 * c).astype(cupy.float16)
    return rows


def conv3x3_patch64(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float) -> Launched | None:
    """``act(conv3x3(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` (N, H, W, C <= 3) and ``out`` (N, H, W, 64),
    ``wt`` from :func:`patch64_weights`, ``bias`` fp16 or None. None when the arrays are not contiguous and
    aligned or the kernel is unavailable."""
    if not runtime.aligned(out, wt):
        return None
    return _run_strips("patch64", x, wt, bias, out, (x.shape[3],), act, alpha)


def out64_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                  dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    """Whether :func:`conv3x3_out64` covers this convolution: fp16, 3x3 of stride 1 and padding 1 from 64 channels
    to at most 8 (an output layer to RGB), one group, a fused activation it applies, on a Hopper GPU."""
    return (w.shape[1] == 64 and 1 <= w.shape[0] <= 8 and x.shape[1] == 64 and out.shape[1] == w.shape[0]
            and _geometry_3x3(x, w, out, stride, padding, dilation, groups, act) and is_hopper())


def out64_weights(w: Any) -> Any:
    """Weights (logical K <= 8, 64, 3, 3) as the fp16 (tap, 8, 64) array of :func:`conv3x3_out64`, zero rows past K."""
    wz = cupy.zeros((9, 8, 64), cupy.float16)
    wz[:, :w.shape[0]] = w.transpose(2, 3, 0, 1).reshape(9, w.shape[0], 64).astype(cupy.float16)
    return wz


def conv3x3_out64(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float) -> Launched | None:
    """``act(conv3x3(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` (N, H, W, 64) and ``out`` (N, H, W, K <= 8),
    ``wt`` from :func:`out64_weights`, ``bias`` fp16 (K) or None. None when the arrays are not contiguous and
    aligned or the kernel is unavailable."""
    if not runtime.aligned(x, wt):
        return None
    return _run_strips("out64", x, wt, bias, out, (out.shape[3],), act, alpha)


def _run_strips(kernel: str, x: Any, wt: Any, bias: Any | None, out: Any, extra: tuple[int, ...], act: str | None,
                alpha: float) -> Launched | None:
    """Launch one of the strip-walking kernels on physical NHWC ``x`` and ``out``: one block of its warpgroups per
    SM at most, the work items (strips of its width down its rows) shared out inside. ``extra``: the kernel's
    arguments between the sizes (N, H, W) and the activation. None when an array is not contiguous, the bias not
    fp16, or the kernel unavailable here."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous and wt.flags.c_contiguous and runtime.fp16_bias(bias)):
        return None
    _, _, (pixels, groups, seg), smem, _n = _KERNELS[kernel]
    compiled = _compiled(kernel, cupy.cuda.Device().id)
    if compiled is None:
        return None
    n, h, w = x.shape[:3]
    items = n * -(-h // seg) * -(-w // pixels)
    i32 = cupy.int32
    compiled[1]((min(-(-items // groups), runtime.sm_count()),), (128 * groups,),
                (x, wt, x if bias is None else bias, i32(bias is not None), out, i32(n), i32(h), i32(w),
                 *(i32(v) for v in extra), i32(EPILOGUES[act]), cupy.float32(alpha)),
                shared_mem=smem(pixels, groups), stream=cupy.cuda.get_current_stream())
    return Launched(kernel)
