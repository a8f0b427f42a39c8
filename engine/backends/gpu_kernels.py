"""CUDA kernels of the CuPy backend (compiled by NVRTC on first use), for the layers cuDNN serves badly.

- Upsampling by integer factors (nearest, or bilinear with half-pixel centres), optionally followed by
  the channels of a skip tensor (``upscale_concat``, the U-Net decoder step): one pass over memory. In
  NHWC with channel counts that are multiples of 8 (fp16) or 4 (fp32), every thread moves 16 bytes (8 or 4
  channels of one pixel); in NCHW one thread per output value, a block on a row of one channel plane (no
  divisions: unet 512's three fp32 steps took 0.39 ms as the element-wise kernel below, 12% of the run);
  otherwise one value per thread with its indices divided out, in either layout.
- A direct convolution for inputs of few channels (an RGB image): one thread computes 8 output
  channels of one pixel from weights held in shared memory, reading the unpadded input. cuDNN needs
  the channels padded to 8 for its tensor-core kernels, and even then it spends ~10x the time on
  such a layer (H200: 0.16 ms for 3 -> 32 channels at 512x512).
- A 1x1 convolution to few output channels (a network's last layer, 32 -> 3 say): one thread computes
  every output channel of one pixel, reading its input channels 8 at a time, weights in shared memory.
  cuDNN pads the outputs to 8 channels and copies the result back.

- A 3x3 convolution from 64 to 64 channels (stride 1, padding 1) on Hopper's warpgroup tensor-core
  instructions (``wgmma``, sm_90a, compiled through NVRTC): a denoiser's middle layers. Each warpgroup walks a
  strip of 96 pixels down the image keeping a ring of five input rows in shared memory (the row three below
  the one being computed loads while it computes); one output row is 36 ``wgmma`` with the weights (A) and the
  ring's rows (B) both read from shared memory through 128-byte-swizzled descriptors, then transposed through
  ``stmatrix`` into a staging row written out in 16-byte stores. H100, dncnn's layer at 1080p: 287-300 us
  against cuDNN's 341-353 (``tests/bench/bench_gpu_conv64.py`` times it with the other variants tried).
- A 3x3 convolution from 1-3 channels to 64 (an RGB input layer) on the same machinery: each output row's 9 x C
  taps gathered from the unpadded input into a shared-memory row, two ``wgmma`` a row. H100, dncnn's input layer
  at 1080p: 0.215 ms against cuDNN's 0.315 on channels padded to 8.

Imported only by :mod:`engine.backends.cupy_kernels` (the CuPy backend's kernels by operation name)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import cupy

#: fused epilogues the direct convolution applies itself (``ActivationDesc.epilogue`` -> code)
DIRECT_EPILOGUES = {None: 0, "relu": 1, "leaky_relu": 2}

#: most input channels, and most weight values (shared memory, float32), of the direct convolution
DIRECT_MAX_CHANNELS = 4
DIRECT_MAX_WEIGHTS = 12288

#: most output channels, and most weight values (shared memory, float32), of the 1x1 few-output convolution
POINTWISE_MAX_OUTPUTS = 7
POINTWISE_MAX_WEIGHTS = 8192

_THREADS = 256

_COMMON = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ void source(int o, int f, int n_in, int bilinear, int* i0, int* i1, float* frac) {
    if (!bilinear) {
        int i = o / f;
        *i0 = *i1 = i < n_in ? i : n_in - 1;
        *frac = 0.0f;
        return;
    }
    float s = fmaxf((o + 0.5f) / f - 0.5f, 0.0f);
    int a = (int)s;
    a = a < n_in ? a : n_in - 1;
    *i0 = a;
    *i1 = a + 1 < n_in ? a + 1 : n_in - 1;
    *frac = fminf(s - a, 1.0f);
}
"""

_UPCAT_VEC = _COMMON + r"""
// NHWC, every thread moving 16 bytes: 8 fp16 channels (uint4) or 4 fp32 ones (float4) of one pixel
__device__ __forceinline__ uint4 blend(uint4 a, uint4 b, uint4 c, uint4 d, float lx, float ly) {
    const __half2 *ha = (const __half2*)&a, *hb = (const __half2*)&b, *hc = (const __half2*)&c, *hd = (const __half2*)&d;
    uint4 r;
    __half2* hr = (__half2*)&r;
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 fa = __half22float2(ha[k]), fb = __half22float2(hb[k]), fc = __half22float2(hc[k]), fd = __half22float2(hd[k]);
        float2 o;
        o.x = (1.0f - ly) * ((1.0f - lx) * fa.x + lx * fb.x) + ly * ((1.0f - lx) * fc.x + lx * fd.x);
        o.y = (1.0f - ly) * ((1.0f - lx) * fa.y + lx * fb.y) + ly * ((1.0f - lx) * fc.y + lx * fd.y);
        hr[k] = __float22half2_rn(o);
    }
    return r;
}

__device__ __forceinline__ float4 blend(float4 a, float4 b, float4 c, float4 d, float lx, float ly) {
    float4 r;
    r.x = (1.0f - ly) * ((1.0f - lx) * a.x + lx * b.x) + ly * ((1.0f - lx) * c.x + lx * d.x);
    r.y = (1.0f - ly) * ((1.0f - lx) * a.y + lx * b.y) + ly * ((1.0f - lx) * c.y + lx * d.y);
    r.z = (1.0f - ly) * ((1.0f - lx) * a.z + lx * b.z) + ly * ((1.0f - lx) * c.z + lx * d.z);
    r.w = (1.0f - ly) * ((1.0f - lx) * a.w + lx * b.w) + ly * ((1.0f - lx) * c.w + lx * d.w);
    return r;
}

template <typename V>
__global__ void upcat_nhwc_vec(const V* __restrict__ x, const V* __restrict__ skip, V* __restrict__ y, int H, int W,
                               int c0, int c1, int Ho, int Wo, int fh, int fw, int bilinear, unsigned int total) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    unsigned int ct = c0 + c1, v = i % ct, p = i / ct;
    if (v >= (unsigned int)c0) {
        y[i] = skip[p * c1 + (v - c0)];
        return;
    }
    unsigned int ow = p % Wo, t = p / Wo, oh = t % Ho, n = t / Ho;
    int y0, y1, x0, x1;
    float ly, lx;
    source(oh, fh, H, bilinear, &y0, &y1, &ly);
    source(ow, fw, W, bilinear, &x0, &x1, &lx);
    const V* img = x + (size_t)n * H * W * c0 + v;
    V a = img[((size_t)y0 * W + x0) * c0];
    if (!bilinear) {
        y[i] = a;
        return;
    }
    y[i] = blend(a, img[((size_t)y0 * W + x1) * c0], img[((size_t)y1 * W + x0) * c0], img[((size_t)y1 * W + x1) * c0],
                 lx, ly);
}
"""

_UPCAT_NCHW = _COMMON + r"""
// NCHW: one block row of threads per output row of one channel plane (grid z: image x channel, y: output row), one
// output value a thread, consecutive threads on consecutive columns (coalesced); the row's sources are worked out
// once per thread, without the divisions of the element-wise kernel.
__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(__half v) { return __half2float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }

template <typename T>
__global__ void upcat_nchw(const T* __restrict__ x, const T* __restrict__ skip, T* __restrict__ y, int H, int W,
                           int c0, int c1, int Ho, int Wo, int fh, int fw, int bilinear) {
    const int ow = blockIdx.x * blockDim.x + threadIdx.x;
    if (ow >= Wo) return;
    const int plane = blockIdx.z, oh = blockIdx.y, ct = c0 + c1;
    const int c = plane % ct, n = plane / ct;
    T* out = y + ((size_t)plane * Ho + oh) * Wo + ow;
    if (c >= c0) {
        *out = skip[(((size_t)n * c1 + (c - c0)) * Ho + oh) * Wo + ow];
        return;
    }
    const T* img = x + ((size_t)n * c0 + c) * H * W;
    int y0, y1, x0, x1;
    float ly, lx;
    source(oh, fh, H, bilinear, &y0, &y1, &ly);
    source(ow, fw, W, bilinear, &x0, &x1, &lx);
    const T* r0 = img + (size_t)y0 * W;
    if (!bilinear) {
        *out = r0[x0];
        return;
    }
    const T* r1 = img + (size_t)y1 * W;
    store(out, (1.0f - ly) * ((1.0f - lx) * as_float(r0[x0]) + lx * as_float(r0[x1]))
               + ly * ((1.0f - lx) * as_float(r1[x0]) + lx * as_float(r1[x1])));
}
"""

_UPCAT_SCALAR = r"""
int t = (int)i, n, c, oh, ow;
int ct = c0 + c1;
if (nhwc) { c = t % ct; t /= ct; ow = t % Wo; t /= Wo; oh = t % Ho; n = t / Ho; }
else { ow = t % Wo; t /= Wo; oh = t % Ho; t /= Ho; c = t % ct; n = t / ct; }
if (c >= c0) {
    int k = c - c0;
    y = skip[nhwc ? (((n * Ho + oh) * Wo + ow) * c1 + k) : (((n * c1 + k) * Ho + oh) * Wo + ow)];
} else {
    int y0, y1, x0, x1;
    float ly, lx;
    source(oh, fh, H, bilinear, &y0, &y1, &ly);
    source(ow, fw, W, bilinear, &x0, &x1, &lx);
#define AT(h, w) ((float)x[nhwc ? (((n * H + (h)) * W + (w)) * c0 + c) : (((n * c0 + c) * H + (h)) * W + (w))])
    if (!bilinear) y = (T)AT(y0, x0);
    else y = (T)((1.0f - ly) * ((1.0f - lx) * AT(y0, x0) + lx * AT(y0, x1)) + ly * ((1.0f - lx) * AT(y1, x0) + lx * AT(y1, x1)));
#undef AT
}
"""

_DIRECT_CONV = r"""
#include <cuda_fp16.h>
extern "C" __global__ void conv_direct_h8(const __half* __restrict__ x, const float* __restrict__ w,
        const __half* __restrict__ bias, int has_bias, __half* __restrict__ y, int H, int W, int C, int Ho, int Wo, int K,
        int KH, int KW, int sh, int sw, int ph, int pw, int dh, int dw, int act, float alpha, unsigned int total) {
    extern __shared__ float4 ws_vec[];  // float4: 16-byte aligned
    float* ws = (float*)ws_vec;
    for (int j = threadIdx.x; j < KH * KW * C * K; j += blockDim.x) ws[j] = w[j];
    __syncthreads();
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    unsigned int groups = K / 8, g = i % groups, p = i / groups;
    unsigned int ow = p % Wo, t = p / Wo, oh = t % Ho, n = t / Ho;
    float acc[8];
    #pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = has_bias ? __half2float(bias[g * 8 + j]) : 0.0f;
    const __half* img = x + (size_t)n * H * W * C;
    for (int r = 0; r < KH; ++r) {
        int ih = (int)oh * sh - ph + r * dh;
        if (ih < 0 || ih >= H) continue;
        for (int s = 0; s < KW; ++s) {
            int iw = (int)ow * sw - pw + s * dw;
            if (iw < 0 || iw >= W) continue;
            const __half* px = img + ((size_t)ih * W + iw) * C;
            const float* wk = ws + ((r * KW + s) * C) * K + g * 8;
            for (int c = 0; c < C; ++c) {
                float v = __half2float(px[c]);
                float4 w0 = *(const float4*)(wk + c * K), w1 = *(const float4*)(wk + c * K + 4);  // 2 shared loads, not 8
                acc[0] += v * w0.x; acc[1] += v * w0.y; acc[2] += v * w0.z; acc[3] += v * w0.w;
                acc[4] += v * w1.x; acc[5] += v * w1.y; acc[6] += v * w1.z; acc[7] += v * w1.w;
            }
        }
    }
    uint4 out;
    __half2* h = (__half2*)&out;
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
        float a = acc[2 * j], b = acc[2 * j + 1];
        if (act == 1) { a = fmaxf(a, 0.0f); b = fmaxf(b, 0.0f); }
        else if (act == 2) { a = a < 0.0f ? a * alpha : a; b = b < 0.0f ? b * alpha : b; }
        h[j] = __floats2half2_rn(a, b);
    }
    ((uint4*)y)[i] = out;
}
"""


_POINTWISE = r"""
#include <cuda_fp16.h>
// y (P, K) = act(x (P, C) w (C, K) + b) for fp16 NHWC pixels, K <= 7 outputs, C a multiple of 8: one thread
// per pixel reads its channels 16 bytes at a time; weights (float32, C x K) and bias live in shared memory.
extern "C" __global__ void conv1x1_few(const __half* __restrict__ x, const float* __restrict__ w,
                                       const __half* __restrict__ bias, int has_bias, __half* __restrict__ y,
                                       int C, int K, int act, float alpha, unsigned int pixels) {
    extern __shared__ float ws[];
    for (int i = threadIdx.x; i < C * K; i += blockDim.x) ws[i] = w[i];
    __syncthreads();
    unsigned int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= pixels) return;
    float acc[7];
    #pragma unroll
    for (int j = 0; j < 7; ++j) acc[j] = (has_bias && j < K) ? __half2float(bias[j]) : 0.0f;
    const uint4* px = (const uint4*)(x + (size_t)p * C);
    for (int c8 = 0; c8 < C / 8; ++c8) {
        uint4 v = px[c8];
        const __half2* hv = (const __half2*)&v;
        #pragma unroll
        for (int t = 0; t < 4; ++t) {
            float2 f = __half22float2(hv[t]);
            const float* w0 = ws + (c8 * 8 + 2 * t) * K;
            #pragma unroll
            for (int j = 0; j < 7; ++j)
                if (j < K) acc[j] += f.x * w0[j] + f.y * w0[K + j];
        }
    }
    #pragma unroll
    for (int j = 0; j < 7; ++j) {
        if (j >= K) break;
        float a = acc[j];
        if (act == 1) a = fmaxf(a, 0.0f);
        else if (act == 2) a = a < 0.0f ? a * alpha : a;
        y[(size_t)p * K + j] = __float2half_rn(a);
    }
}
"""


@functools.cache
def _pointwise() -> Any:
    return cupy.RawKernel(_POINTWISE, "conv1x1_few")


@functools.cache
def _vector_upcat(vector: str) -> Any:
    """The 16-byte NHWC kernel for ``uint4`` (8 fp16 channels) or ``float4`` (4 fp32 ones)."""
    name = f"upcat_nhwc_vec<{vector}>"
    return cupy.RawModule(code=_UPCAT_VEC, options=("-std=c++17",), name_expressions=[name]).get_function(name)


@functools.cache
def _nchw_upcat(dtype: str) -> Any:
    name = f"upcat_nchw<{'float' if dtype == 'float32' else '__half'}>"
    return cupy.RawModule(code=_UPCAT_NCHW, options=("-std=c++17",), name_expressions=[name]).get_function(name)


@functools.cache
def _scalar_upcat() -> Any:
    return cupy.ElementwiseKernel(
        "raw T x, raw T skip, int32 nhwc, int32 c0, int32 c1, int32 H, int32 W, int32 Ho, int32 Wo, int32 fh, "
        "int32 fw, int32 bilinear", "T y", _UPCAT_SCALAR, "layerlab_upcat", preamble=_COMMON)


@functools.cache
def _direct_conv() -> Any:
    return cupy.RawKernel(_DIRECT_CONV, "conv_direct_h8")


def _aligned(*arrays: Any) -> bool:
    return all(a.data.ptr % 16 == 0 for a in arrays)


def upscale_concat(x: Any, skip: Any | None, out: Any, factor: tuple[int, int], bilinear: bool, nhwc: bool) -> bool:
    """``out`` = ``x`` upsampled, then the channels of ``skip`` (None: upsampling alone); physical C-contiguous
    arrays of one dtype and layout, the skip (and ``out``) of the upsampled size or within a factor of it
    (edge values repeat, extra rows and columns are cropped). False for a case it does not cover."""
    arrays = [a for a in (x, skip, out) if a is not None]
    if not all(a.flags.c_contiguous and a.dtype == out.dtype for a in arrays) or out.size >= 2**31:
        return False
    if out.dtype not in (cupy.float16, cupy.float32):
        return False
    if nhwc:
        n, h, w, c0 = x.shape
        ho, wo, ct = out.shape[1:]
    else:
        n, c0, h, w = x.shape
        ct, ho, wo = out.shape[1:]
    c1 = ct - c0
    if c1 != (0 if skip is None else (skip.shape[3] if nhwc else skip.shape[1])):
        return False
    fh, fw = factor
    skip_arr = skip if skip is not None else out  # never read when c1 == 0
    if nhwc and out.dtype == cupy.float16 and c0 % 8 == 0 and c1 % 8 == 0 and _aligned(*arrays):
        total = out.size // 8
        _vector_upcat("uint4")(((total + _THREADS - 1) // _THREADS,), (_THREADS,),
                        (x, skip_arr, out, cupy.int32(h), cupy.int32(w), cupy.int32(c0 // 8), cupy.int32(c1 // 8),
                         cupy.int32(ho), cupy.int32(wo), cupy.int32(fh), cupy.int32(fw), cupy.int32(int(bilinear)),
                         cupy.uint32(total)))
        return True
    i32 = cupy.int32
    if nhwc and out.dtype == cupy.float32 and c0 % 4 == 0 and c1 % 4 == 0 and _aligned(*arrays):
        total = out.size // 4
        _vector_upcat("float4")(((total + _THREADS - 1) // _THREADS,), (_THREADS,),
                        (x, skip_arr, out, i32(h), i32(w), i32(c0 // 4), i32(c1 // 4), i32(ho), i32(wo), i32(fh),
                         i32(fw), i32(int(bilinear)), cupy.uint32(total)))
        return True
    if not nhwc and n * ct <= 65535 and ho <= 65535:  # (the grid's y and z limits)
        threads = min(_THREADS, 32 * -(-wo // 32))
        _nchw_upcat(str(out.dtype))(((wo + threads - 1) // threads, ho, n * ct), (threads,),
                                    (x, skip_arr, out, i32(h), i32(w), i32(c0), i32(c1), i32(ho), i32(wo), i32(fh),
                                     i32(fw), i32(int(bilinear))))
        return True
    _scalar_upcat()(x, skip_arr, int(nhwc), c0, c1, h, w, ho, wo, fh, fw, int(bilinear), out)
    return True


def direct_weights(w: Any) -> Any:
    """Weights (logical K, C, R, S) as the float32 (R, S, C, K) array of :func:`conv_direct`."""
    return cupy.ascontiguousarray(w.transpose(2, 3, 1, 0), dtype=cupy.float32)


def direct_applies(x: Any, w: Any, out: Any, groups: int, act: str | None) -> bool:
    """Whether :func:`conv_direct` covers this convolution (fp16 NHWC memory, few input channels)."""
    k, c, kh, kw = w.shape
    return (groups == 1 and act in DIRECT_EPILOGUES and x.dtype == out.dtype == cupy.float16
            and c <= DIRECT_MAX_CHANNELS and k % 8 == 0 and k * c * kh * kw <= DIRECT_MAX_WEIGHTS and out.size < 2**31)


def conv_direct(x: Any, wd: Any, bias: Any | None, out: Any, kernel: tuple[int, int], stride: tuple[int, int],
                padding: tuple[int, int], dilation: tuple[int, int], act: str | None, alpha: float) -> bool:
    """``act(conv(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` (N, H, W, C) and ``out`` (N, Ho, Wo, K),
    ``wd`` from :func:`direct_weights`, ``bias`` fp16 or None. False when the arrays are not contiguous and
    aligned."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous and _aligned(out)):
        return False
    n, h, w, c = x.shape
    ho, wo, k = out.shape[1:]
    if bias is not None and not (bias.dtype == cupy.float16 and bias.flags.c_contiguous):
        return False
    total = n * ho * wo * (k // 8)
    i32 = cupy.int32
    _direct_conv()(((total + _THREADS - 1) // _THREADS,), (_THREADS,),
                   (x, wd, x if bias is None else bias, i32(bias is not None), out, i32(h), i32(w), i32(c), i32(ho),
                    i32(wo), i32(k), i32(kernel[0]), i32(kernel[1]),
                    i32(stride[0]), i32(stride[1]), i32(padding[0]), i32(padding[1]), i32(dilation[0]),
                    i32(dilation[1]), i32(DIRECT_EPILOGUES[act]), cupy.float32(alpha), cupy.uint32(total)),
                   shared_mem=wd.size * 4)
    return True


def pointwise_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                      dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    """Whether :func:`conv_pointwise` covers this convolution (fp16, 1x1 of stride 1 and no padding, at most
    7 output channels, input channels a multiple of 8)."""
    k, c, kh, kw = w.shape
    return (groups == 1 and (kh, kw) == (1, 1) and stride == dilation == (1, 1) and padding == (0, 0)
            and act in DIRECT_EPILOGUES and x.dtype == out.dtype == cupy.float16 and k <= POINTWISE_MAX_OUTPUTS
            and c % 8 == 0 and c * k <= POINTWISE_MAX_WEIGHTS and out.size < 2**31)


def pointwise_weights(w: Any) -> Any:
    """Weights (logical K, C, 1, 1) as the float32 (C, K) matrix of :func:`conv_pointwise`."""
    return cupy.ascontiguousarray(w[:, :, 0, 0].T, dtype=cupy.float32)


def conv_pointwise(x: Any, wp: Any, bias: Any | None, out: Any, act: str | None, alpha: float) -> bool:
    """``act(x @ wp + bias)`` per pixel: physical fp16 NHWC ``x`` (N, H, W, C) and ``out`` (N, H, W, K), ``wp``
    from :func:`pointwise_weights`, ``bias`` fp16 or None. False when the arrays are not contiguous and
    aligned."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous and _aligned(x)):
        return False
    if bias is not None and not (bias.dtype == cupy.float16 and bias.flags.c_contiguous):
        return False
    c, k = wp.shape
    pixels = x.size // c
    i32 = cupy.int32
    _pointwise()(((pixels + _THREADS - 1) // _THREADS,), (_THREADS,),
                 (x, wp, x if bias is None else bias, i32(bias is not None), out, i32(c), i32(k),
                  i32(DIRECT_EPILOGUES[act]), cupy.float32(alpha), cupy.uint32(pixels)),
                 shared_mem=wp.size * 4)
    return True


#: the 64-channel Hopper kernel's strip width (pixels, wgmma's N), warpgroups a block and rows a work item
CONV64_SHAPE = (96, 2, 8)


_CONV64 = r"""
#define ROWB ((NP + 2) * 128)
#define RING 5
#define WG_BYTES (RING * ROWB + NP * 128)
#define W_BYTES (9 * 64 * 128)
#define NACC (NP / 2)

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void keepf(float& r) { asm volatile("" : "+f"(r) :: "memory"); }
__device__ __forceinline__ void wg_barrier(int id) { asm volatile("bar.sync %0, 128;\n" :: "r"(id) : "memory"); }

// 16-byte chunk c of the 128-byte row at address a: swizzled by the row's address bits 7-9, as wgmma reads it
__device__ __forceinline__ unsigned swz(unsigned a, int c) { return a + ((c ^ ((a >> 7) & 7)) << 4); }

__device__ __forceinline__ unsigned long long desc_of(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32)
           | (1ull << 62);
}

// one input row (NP + 2 pixels from x0) into a ring slot, zeros outside the image; one commit group
__device__ __forceinline__ void load_row(unsigned slot, const unsigned short* __restrict__ xn, int gy, int x0, int H,
                                         int W, int t128) {
    const bool row_ok = (unsigned)gy < (unsigned)H;
    for (int i = t128; i < (NP + 2) * 8; i += 128) {
        int p = i >> 3, c = i & 7, gx = x0 + p;
        bool ok = row_ok && (unsigned)gx < (unsigned)W;
        const unsigned short* src = ok ? xn + ((size_t)gy * W + gx) * 64 + c * 8 : xn;
        cp16(swz(slot + p * 128, c), src, ok);
    }
    asm volatile("cp.async.commit_group;\n" ::);
}

// ``rows`` rows of 64 fp16 weights into swizzled shared memory at wbase, by the whole block, waited for
__device__ __forceinline__ void load_weights(unsigned wbase, const unsigned short* __restrict__ wt, int rows) {
    for (int i = threadIdx.x; i < rows * 8; i += blockDim.x) {
        int row = i >> 3, c = i & 7;
        cp16(swz(wbase + row * 128, c), wt + row * 64 + c * 8, true);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
}

// a work item's ring: its first four input rows (y0 - 1 .. y0 + 2) into slots 0-3
__device__ __forceinline__ void ring_start(unsigned ring, const unsigned short* __restrict__ xn, int y0, int x0, int H,
                                           int W, int t128) {
    #pragma unroll
    for (int j = 0; j < 4; ++j) load_row(ring + j * ROWB, xn, y0 - 1 + j, x0, H, W, t128);
}

// before output row y0 + k: the input row three below it starts loading, the three rows it reads are waited for
// (visible to wgmma, the whole warpgroup past them) and their descriptors made
__device__ __forceinline__ void ring_next(unsigned ring, const unsigned short* __restrict__ xn, int y0, int k, int x0,
                                          int H, int W, int t128, int wg, unsigned long long* rdesc) {
    load_row(ring + ((k + 4) % RING) * ROWB, xn, y0 + k + 3, x0, H, W, t128);
    asm volatile("cp.async.wait_group 2;\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    wg_barrier(1 + wg);
    #pragma unroll
    for (int dy = 0; dy < 3; ++dy) rdesc[dy] = desc_of(ring + ((k + dy) % RING) * ROWB);
}

WGMMA_SS

extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_c64_rows(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
                 const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
                 int W, int act, float alpha) {
    // each warpgroup walks strips of NP pixels down SEG rows at a time, keeping a ring of 5 input rows: the row
    // three below the one being computed loads while it computes; one output row = 36 wgmma m64nNPk16 with the
    // weights (A) and the ring's rows (B) both in shared memory, then transposed through stmatrix to a staging row
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_u32(smem);
    const unsigned ring = wbase + W_BYTES + wg * WG_BYTES, stage = ring + RING * ROWB;
    load_weights(wbase, wt, 9 * 64);
    float bv[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned short u = has_bias ? bias[warp * 16 + (lane >> 2) + 8 * h] : (unsigned short)0;
        asm("cvt.f32.f16 %0, %1;\n" : "=f"(bv[h]) : "h"(u));
    }
    const unsigned long long wdesc = desc_of(wbase);
    const int strips = (W + NP - 1) / NP, segs = (H + SEG - 1) / SEG, items = N * strips * segs;
    const int q = lane >> 3, kq = lane & 7;
    for (int item = blockIdx.x * GROUPS + wg; item < items; item += gridDim.x * GROUPS) {
        const int n = item / (strips * segs), rest = item % (strips * segs);
        const int y0 = (rest / strips) * SEG, x0 = (rest % strips) * NP - 1;
        const unsigned short* xn = x + (size_t)n * H * W * 64;
        unsigned short* yn = y + (size_t)n * H * W * 64;
        ring_start(ring, xn, y0, x0, H, W, t128);
        for (int k = 0; k < SEG && y0 + k < H; ++k) {
            unsigned long long rdesc[3];
            ring_next(ring, xn, y0, k, x0, H, W, t128, wg, rdesc);
            float acc[NACC];
            #pragma unroll
            for (int e = 0; e < NACC; ++e) { acc[e] = 0.0f; keepf(acc[e]); }
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            #pragma unroll
            for (int dx = 0; dx < 3; ++dx)
                #pragma unroll
                for (int kc = 0; kc < 4; ++kc)
                    #pragma unroll
                    for (int dy = 0; dy < 3; ++dy)
                        wgmma_ss(acc, wdesc + (unsigned)(((dy * 3 + dx) * 8192 + kc * 32) >> 4),
                                 rdesc[dy] + (unsigned)((dx * 128 + kc * 32) >> 4));
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            #pragma unroll
            for (int e = 0; e < NACC; ++e) keepf(acc[e]);
            #pragma unroll
            for (int j0 = 0; j0 < NP / 8; j0 += 2) {
                unsigned pk[4];
                #pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int j = j0 + (m >> 1), h = m & 1;
                    float v0 = acc[4 * j + 2 * h] + bv[h], v1 = acc[4 * j + 2 * h + 1] + bv[h];
                    if (act == 1) { v0 = v0 < 0.0f ? 0.0f : v0; v1 = v1 < 0.0f ? 0.0f : v1; }
                    else if (act == 2) { v0 = v0 < 0.0f ? v0 * alpha : v0; v1 = v1 < 0.0f ? v1 * alpha : v1; }
                    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(pk[m]) : "f"(v1), "f"(v0));
                }
                const int pixel = 8 * (j0 + (q >> 1)) + kq;
                asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(swz(stage + pixel * 128, 2 * warp + (q & 1))), "r"(pk[0]), "r"(pk[1]),
                                "r"(pk[2]), "r"(pk[3]) : "memory");
            }
            wg_barrier(1 + wg);
            const int gy = y0 + k;
            #pragma unroll 2
            for (int i = t128; i < NP * 8; i += 128) {
                int pixel = i >> 3, c = i & 7, gx = x0 + 1 + pixel;
                if (gx < W) {
                    uint4 v;
                    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(swz(stage + pixel * 128, c)));
                    *(uint4*)(yn + ((size_t)gy * W + gx) * 64 + c * 8) = v;
                }
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        wg_barrier(1 + wg);
    }
}
"""


_PATCH64 = r"""
// A 3x3 convolution (stride 1, padding 1) of an input of C <= 3 channels to 64, fp16 NHWC, on wgmma: for each
// output row of a strip of NP pixels, the 9 x C taps of every pixel are gathered into a 128-byte shared-memory
// row (K = 9C padded to 32; the rest of the row is never read), then two wgmma m64nNPk16 (the weights as A) give
// the row, written out through the same stmatrix staging as the 64-channel kernel. Reads the unpadded input.
extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_patch64(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
                const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
                int W, int C, int act, float alpha) {
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_u32(smem);                       // 64 rows x 128 bytes
    const unsigned pbuf = wbase + 8192 + wg * (2 * NP * 128), stage = pbuf + NP * 128;
    load_weights(wbase, wt, 64);
    float bv[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned short u = has_bias ? bias[warp * 16 + (lane >> 2) + 8 * h] : (unsigned short)0;
        asm("cvt.f32.f16 %0, %1;\n" : "=f"(bv[h]) : "h"(u));
    }
    // this thread always fills K chunk (t128 & 3) (8 taps x channels) of pixels t128 / 4, + 32, + 64
    const int chunk = t128 & 3;
    int dyv[8], dxv[8], cv[8];
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        int k = chunk * 8 + j, tap = k / C;
        bool ok = k < 9 * C;
        dyv[j] = ok ? tap / 3 - 1 : -(1 << 20);  // a padding column of K: out of the image, always zero
        dxv[j] = ok ? tap % 3 - 1 : 0;
        cv[j] = ok ? k % C : 0;
    }
    const unsigned long long wdesc = desc_of(wbase), pdesc = desc_of(pbuf);
    const int q = lane >> 3, kq = lane & 7;
    const int strips = (W + NP - 1) / NP, segs = (H + SEG - 1) / SEG, items = N * strips * segs;
    for (int item = blockIdx.x * GROUPS + wg; item < items; item += gridDim.x * GROUPS) {
        const int n = item / (strips * segs), rest = item % (strips * segs);
        const int y0 = (rest / strips) * SEG, xs = (rest % strips) * NP;
        const unsigned short* xn = x + (size_t)n * H * W * C;
        unsigned short* yn = y + (size_t)n * H * W * 64;
        for (int k = 0; k < SEG && y0 + k < H; ++k) {
            const int gy = y0 + k;
            for (int p = t128 >> 2; p < NP; p += 32) {
                const int gx = xs + p;
                unsigned v[4];
                #pragma unroll
                for (int j = 0; j < 8; j += 2) {
                    unsigned short a = 0, b = 0;
                    int iy = gy + dyv[j], ix = gx + dxv[j];
                    if ((unsigned)iy < (unsigned)H && (unsigned)ix < (unsigned)W) a = xn[((size_t)iy * W + ix) * C + cv[j]];
                    iy = gy + dyv[j + 1]; ix = gx + dxv[j + 1];
                    if ((unsigned)iy < (unsigned)H && (unsigned)ix < (unsigned)W) b = xn[((size_t)iy * W + ix) * C + cv[j + 1]];
                    v[j >> 1] = (unsigned)a | ((unsigned)b << 16);
                }
                asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(swz(pbuf + p * 128, chunk)), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            wg_barrier(1 + wg);  // the patches are in; the last row's staging is written out
            float acc[NACC];
            #pragma unroll
            for (int e = 0; e < NACC; ++e) { acc[e] = 0.0f; keepf(acc[e]); }
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            wgmma_ss(acc, wdesc, pdesc);
            wgmma_ss(acc, wdesc + 2, pdesc + 2);
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            #pragma unroll
            for (int e = 0; e < NACC; ++e) keepf(acc[e]);
            #pragma unroll
            for (int j0 = 0; j0 < NP / 8; j0 += 2) {
                unsigned pk[4];
                #pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int j = j0 + (m >> 1), h = m & 1;
                    float v0 = acc[4 * j + 2 * h] + bv[h], v1 = acc[4 * j + 2 * h + 1] + bv[h];
                    if (act == 1) { v0 = v0 < 0.0f ? 0.0f : v0; v1 = v1 < 0.0f ? 0.0f : v1; }
                    else if (act == 2) { v0 = v0 < 0.0f ? v0 * alpha : v0; v1 = v1 < 0.0f ? v1 * alpha : v1; }
                    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(pk[m]) : "f"(v1), "f"(v0));
                }
                const int pixel = 8 * (j0 + (q >> 1)) + kq;
                asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(swz(stage + pixel * 128, 2 * warp + (q & 1))), "r"(pk[0]), "r"(pk[1]),
                                "r"(pk[2]), "r"(pk[3]) : "memory");
            }
            wg_barrier(1 + wg);  // staging complete; the products are done with the patches
            #pragma unroll 2
            for (int i = t128; i < NP * 8; i += 128) {
                int pixel = i >> 3, c = i & 7, gx = xs + pixel;
                if (gx < W) {
                    uint4 v;
                    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(swz(stage + pixel * 128, c)));
                    *(uint4*)(yn + ((size_t)gy * W + gx) * 64 + c * 8) = v;
                }
            }
        }
    }
}
"""

#: the few-channel kernel's strip width, warpgroups a block and rows a work item
PATCH64_SHAPE = (96, 4, 8)


def wgmma_ss_wrapper(pixels: int, n: int) -> str:
    """``wgmma_ss``: m64n{pixels}k16 with both operands from shared memory, ``n`` accumulators a thread."""
    return (
        "__device__ __forceinline__ void wgmma_ss(float* d, unsigned long long da, unsigned long long db) {\n"
        f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{n + 2}, 0;\\n"\n'
        f'                 "wgmma.mma_async.sync.aligned.m64n{pixels}k16.f32.f16.f16 '
        f'{{{", ".join(f"%{i}" for i in range(n))}}}, %{n}, %{n + 1}, p, 1, 1, 0, 0;\\n}}\\n"\n'
        f'                 : {", ".join(f"{chr(34)}+f{chr(34)}(d[{i}])" for i in range(n))}\n'
        '                 : "l"(da), "l"(db), "r"(1));\n}\n')


@functools.cache
def _sm_count_and_cc() -> tuple[int, int]:
    dev = cupy.cuda.Device()
    return int(dev.attributes["MultiProcessorCount"]), int(dev.compute_capability)


def conv64_smem(pixels: int, groups: int) -> int:
    """Shared memory of the 64-channel kernel: the weights, a ring of five input rows and a staging row per
    warpgroup, the alignment slack."""
    return 9 * 64 * 128 + groups * (5 * (pixels + 2) * 128 + pixels * 128) + 1024


def compile_sm90a(source: str, name: str, smem: int) -> Any:
    """``source`` compiled by NVRTC for sm_90a (CuPy's own compilation names sm_90, which has no ``wgmma``);
    (module, function) with its dynamic shared memory raised to ``smem`` bytes."""
    from cupy.cuda import compiler, driver, function  # noqa: PLC0415

    cubin, _ = compiler._NVRTCProgram(source, f"{name}.cu", method="cubin").compile(
        ("-arch=sm_90a", "-std=c++17", "--device-as-default-execution-space"))
    module = function.Module()
    module.load(cubin)
    fn = module.get_function(name)
    driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    return module, fn


@functools.cache
def _conv64(pixels: int, groups: int, seg: int) -> Any:
    """The 64-channel kernel of one shape, or None where it does not compile or load here."""
    try:
        source = (f"#define NP {pixels}\n#define GROUPS {groups}\n#define SEG {seg}\n"
                  + _CONV64.replace("WGMMA_SS", wgmma_ss_wrapper(pixels, pixels // 2)))
        return compile_sm90a(source, "conv3x3_c64_rows", conv64_smem(pixels, groups))
    except Exception:  # noqa: BLE001 - an NVRTC or driver without sm_90a: cuDNN serves
        return None


def conv64_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                   dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    """Whether :func:`conv3x3_c64` covers this convolution: fp16, 3x3 of stride 1 and padding 1 from 64 to 64
    channels, one group, a fused activation it applies, on a Hopper GPU (compute capability 9.0)."""
    return (groups == 1 and tuple(w.shape) == (64, 64, 3, 3) and tuple(stride) == tuple(dilation) == (1, 1)
            and tuple(padding) == (1, 1) and act in DIRECT_EPILOGUES
            and x.dtype == w.dtype == out.dtype == cupy.float16 and x.shape[1] == 64
            and tuple(x.shape[2:]) == tuple(out.shape[2:]) and _sm_count_and_cc()[1] == 90)


def conv64_weights(w: Any) -> Any:
    """Weights (logical 64, 64, 3, 3) as the fp16 (tap, K, C) array of :func:`conv3x3_c64`."""
    return cupy.ascontiguousarray(w.transpose(2, 3, 0, 1), dtype=cupy.float16).reshape(9, 64, 64)


def conv3x3_c64(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float,
                shape: tuple[int, int, int] | None = None) -> bool:
    """``act(conv3x3(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` and ``out`` (N, H, W, 64), ``wt`` from
    :func:`conv64_weights`, ``bias`` fp16 or None; ``shape`` (pixels, warpgroups, rows a work item) defaults to
    :data:`CONV64_SHAPE`. False when the arrays are not contiguous and aligned or the kernel is unavailable."""
    if not _aligned(x, out, wt):
        return False
    return _run_strips(_conv64, conv64_smem, shape or CONV64_SHAPE, x, wt, bias, out, (), act, alpha)


def _run_strips(compiled: Callable[[int, int, int], Any], smem: Callable[[int, int], int],
                shape: tuple[int, int, int], x: Any, wt: Any, bias: Any | None, out: Any, extra: tuple[int, ...],
                act: str | None, alpha: float) -> bool:
    """Launch one of the strip-walking Hopper kernels (``compiled(pixels, groups, rows)``, dynamic shared memory
    ``smem(pixels, groups)``) on physical NHWC ``x`` and ``out``: one block of ``groups`` warpgroups per SM at
    most, the work items (strips of ``pixels`` down ``rows`` rows) shared out inside. ``extra``: the kernel's
    arguments between the sizes (N, H, W) and the activation. False when an array is not contiguous, the bias not
    fp16, or the kernel unavailable here."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous and wt.flags.c_contiguous):
        return False
    if bias is not None and not (bias.dtype == cupy.float16 and bias.flags.c_contiguous):
        return False
    pixels, groups, seg = shape
    kernel = compiled(pixels, groups, seg)
    if kernel is None:
        return False
    n, h, w = x.shape[:3]
    items = n * -(-h // seg) * -(-w // pixels)
    i32 = cupy.int32
    kernel[1]((min(-(-items // groups), _sm_count_and_cc()[0]),), (128 * groups,),
              (x, wt, x if bias is None else bias, i32(bias is not None), out, i32(n), i32(h), i32(w),
               *(i32(v) for v in extra), i32(DIRECT_EPILOGUES[act]), cupy.float32(alpha)),
              shared_mem=smem(pixels, groups), stream=cupy.cuda.get_current_stream())
    return True

def patch64_smem(pixels: int, groups: int) -> int:
    """Shared memory of the few-channel kernel: the weights, a patch row and a staging row per warpgroup."""
    return 8192 + groups * 2 * pixels * 128 + 1024


@functools.cache
def _patch64(pixels: int, groups: int, seg: int) -> Any:
    """The few-channel kernel of one shape, or None where it does not compile or load here."""
    try:
        head = _CONV64[:_CONV64.index("extern \"C\"")].replace("WGMMA_SS", wgmma_ss_wrapper(pixels, pixels // 2))
        source = f"#define NP {pixels}\n#define GROUPS {groups}\n#define SEG {seg}\n" + head + _PATCH64
        return compile_sm90a(source, "conv3x3_patch64", patch64_smem(pixels, groups))
    except Exception:  # noqa: BLE001 - an NVRTC or driver without sm_90a: the other candidates serve
        return None


def patch64_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                    dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    """Whether :func:`conv3x3_patch64` covers this convolution: fp16, 3x3 of stride 1 and padding 1 from at most
    3 channels to 64 (an RGB input layer), one group, a fused activation it applies, on a Hopper GPU."""
    return (groups == 1 and tuple(w.shape[2:]) == (3, 3) and w.shape[0] == 64 and 1 <= w.shape[1] <= 3
            and tuple(stride) == tuple(dilation) == (1, 1) and tuple(padding) == (1, 1) and act in DIRECT_EPILOGUES
            and x.dtype == w.dtype == out.dtype == cupy.float16 and x.shape[1] == w.shape[1]
            and tuple(x.shape[2:]) == tuple(out.shape[2:]) and _sm_count_and_cc()[1] == 90)


def patch64_weights(w: Any) -> Any:
    """Weights (logical 64, C, 3, 3) as the fp16 (64, 64) rows of :func:`conv3x3_patch64`: column (dy * 3 + dx) * C
    + c, zeros past 9C."""
    k, c = w.shape[:2]
    rows = cupy.zeros((64, 64), cupy.float16)
    rows[:, :9 * c] = w.transpose(0, 2, 3, 1).reshape(k, 9 * c).astype(cupy.float16)
    return rows


def conv3x3_patch64(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float,
                    shape: tuple[int, int, int] | None = None) -> bool:
    """``act(conv3x3(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` (N, H, W, C <= 3) and ``out`` (N, H, W, 64),
    ``wt`` from :func:`patch64_weights`, ``bias`` fp16 or None. False when the arrays are not contiguous and
    aligned or the kernel is unavailable."""
    if not _aligned(out, wt):
        return False
    return _run_strips(_patch64, patch64_smem, shape or PATCH64_SHAPE, x, wt, bias, out, (x.shape[3],), act, alpha)

_OUT64 = r"""
// A 3x3 convolution (stride 1, padding 1) from 64 channels to K <= 8, fp16 NHWC, on wgmma (an output layer to
// RGB): the pixels are M and the outputs N. Each warpgroup walks strips of NP pixels down SEG rows with the same
// ring of five input rows as the 64-channel kernel; one output row is NP / 64 tiles of 36 wgmma m64n8k16, A a
// ring row shifted by dx pixels, B the tap's 8 x 64 weights. Memory-bound: the input is read once, the few
// outputs are stored straight from the accumulators.
extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_out64(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
              const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
              int W, int K, int act, float alpha) {
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_u32(smem);                       // 9 taps x 8 outputs x 128 bytes
    const unsigned ring = wbase + 9 * 1024 + wg * (RING * ROWB);
    load_weights(wbase, wt, 9 * 8);
    const int ch = 2 * (lane & 3);  // this thread's two outputs
    float bv[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned short u = (has_bias && ch + h < K) ? bias[ch + h] : (unsigned short)0;
        asm("cvt.f32.f16 %0, %1;\n" : "=f"(bv[h]) : "h"(u));
    }
    const unsigned long long wdesc = desc_of(wbase);
    const int strips = (W + NP - 1) / NP, segs = (H + SEG - 1) / SEG, items = N * strips * segs;
    for (int item = blockIdx.x * GROUPS + wg; item < items; item += gridDim.x * GROUPS) {
        const int n = item / (strips * segs), rest = item % (strips * segs);
        const int y0 = (rest / strips) * SEG, x0 = (rest % strips) * NP - 1;
        const unsigned short* xn = x + (size_t)n * H * W * 64;
        unsigned short* yn = y + (size_t)n * H * W * K;
        ring_start(ring, xn, y0, x0, H, W, t128);
        for (int k = 0; k < SEG && y0 + k < H; ++k) {
            unsigned long long rdesc[3];
            ring_next(ring, xn, y0, k, x0, H, W, t128, wg, rdesc);
            float acc[NP / 64][4];
            #pragma unroll
            for (int t = 0; t < NP / 64; ++t)
                #pragma unroll
                for (int e = 0; e < 4; ++e) { acc[t][e] = 0.0f; keepf(acc[t][e]); }
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            #pragma unroll
            for (int t = 0; t < NP / 64; ++t)
                #pragma unroll
                for (int dy = 0; dy < 3; ++dy)
                    #pragma unroll
                    for (int dx = 0; dx < 3; ++dx)
                        #pragma unroll
                        for (int kc = 0; kc < 4; ++kc)
                            wgmma_ss(acc[t], rdesc[dy] + (unsigned)(((t * 64 + dx) * 128 + kc * 32) >> 4),
                                     wdesc + (unsigned)(((dy * 3 + dx) * 1024 + kc * 32) >> 4));
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            #pragma unroll
            for (int t = 0; t < NP / 64; ++t)
                #pragma unroll
                for (int e = 0; e < 4; ++e) keepf(acc[t][e]);
            wg_barrier(1 + wg);  // every warp is done reading the ring row the next load overwrites
            const int gy = y0 + k;
            #pragma unroll
            for (int t = 0; t < NP / 64; ++t)
                #pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const int gx = x0 + 1 + t * 64 + warp * 16 + (lane >> 2) + 8 * r;
                    if (gx >= W) continue;
                    unsigned short* dst = yn + ((size_t)gy * W + gx) * K + ch;
                    #pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        if (ch + h >= K) continue;
                        float v = acc[t][2 * r + h] + bv[h];
                        if (act == 1) v = v < 0.0f ? 0.0f : v;
                        else if (act == 2) v = v < 0.0f ? v * alpha : v;
                        unsigned short u;
                        asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(u) : "f"(v));
                        dst[h] = u;
                    }
                }
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        wg_barrier(1 + wg);
    }
}
"""

#: the output-layer kernel's strip width (a multiple of 64), warpgroups a block and rows a work item
OUT64_SHAPE = (64, 4, 16)


def out64_smem(pixels: int, groups: int) -> int:
    """Shared memory of the output-layer kernel: the weights and a ring of five input rows per warpgroup."""
    return 9 * 1024 + groups * 5 * (pixels + 2) * 128 + 1024


@functools.cache
def _out64(pixels: int, groups: int, seg: int) -> Any:
    """The output-layer kernel of one shape, or None where it does not compile or load here."""
    try:
        head = _CONV64[:_CONV64.index("extern \"C\"")].replace("WGMMA_SS", wgmma_ss_wrapper(8, 4))
        source = f"#define NP {pixels}\n#define GROUPS {groups}\n#define SEG {seg}\n" + head + _OUT64
        return compile_sm90a(source, "conv3x3_out64", out64_smem(pixels, groups))
    except Exception:  # noqa: BLE001 - an NVRTC or driver without sm_90a: the other candidates serve
        return None


def out64_applies(x: Any, w: Any, out: Any, stride: tuple[int, int], padding: tuple[int, int],
                  dilation: tuple[int, int], groups: int, act: str | None) -> bool:
    """Whether :func:`conv3x3_out64` covers this convolution: fp16, 3x3 of stride 1 and padding 1 from 64 channels
    to at most 8 (an output layer to RGB), one group, a fused activation it applies, on a Hopper GPU."""
    return (groups == 1 and tuple(w.shape[1:]) == (64, 3, 3) and 1 <= w.shape[0] <= 8
            and tuple(stride) == tuple(dilation) == (1, 1) and tuple(padding) == (1, 1) and act in DIRECT_EPILOGUES
            and x.dtype == w.dtype == out.dtype == cupy.float16 and x.shape[1] == 64 and out.shape[1] == w.shape[0]
            and tuple(x.shape[2:]) == tuple(out.shape[2:]) and _sm_count_and_cc()[1] == 90)


def out64_weights(w: Any) -> Any:
    """Weights (logical K <= 8, 64, 3, 3) as the fp16 (tap, 8, 64) array of :func:`conv3x3_out64`, zero rows past K."""
    wz = cupy.zeros((9, 8, 64), cupy.float16)
    wz[:, :w.shape[0]] = w.transpose(2, 3, 0, 1).reshape(9, w.shape[0], 64).astype(cupy.float16)
    return wz


def conv3x3_out64(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float,
                  shape: tuple[int, int, int] | None = None) -> bool:
    """``act(conv3x3(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` (N, H, W, 64) and ``out`` (N, H, W, K <= 8),
    ``wt`` from :func:`out64_weights`, ``bias`` fp16 (K) or None; ``shape`` (pixels, warpgroups, rows a work item)
    defaults to :data:`OUT64_SHAPE`. False when the arrays are not contiguous and aligned or the kernel is
    unavailable."""
    if not _aligned(x, wt):
        return False
    return _run_strips(_out64, out64_smem, shape or OUT64_SHAPE, x, wt, bias, out, (out.shape[3],), act, alpha)
