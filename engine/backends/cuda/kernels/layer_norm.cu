// Layer normalization of x seen as (outer, n, inner): every row of n values (index o * n * inner + i * inner + j for
// i < n, one row per (o, j)) becomes (v - mean) / sqrt(var + eps) * scale[i] + bias[i], then the epilogue ACT; mean
// and (biased) variance in float32, two passes over the row (the second reads it from cache). One warp per row:
// inner == 1 (the channels of an NHWC pixel, the trailing axes of a token) reads coalesced.
#include <cuda_fp16.h>
#include "epilogue.cuh"

__device__ __forceinline__ float layerlab_warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T>
__global__ void layer_norm(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                           T* __restrict__ y, int n, long long inner, long long rows, float eps, int act, float ca,
                           float cb) {
    long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    long long base = (row / inner) * n * inner + row % inner;
    const T* xr = x + base;
    T* yr = y + base;
    float s = 0.f;
    for (int i = lane; i < n; i += 32) s += (float)xr[i * inner];
    float mean = layerlab_warp_sum(s) / n;
    float q = 0.f;
    for (int i = lane; i < n; i += 32) {
        float d = (float)xr[i * inner] - mean;
        q += d * d;
    }
    float inv = rsqrtf(layerlab_warp_sum(q) / n + eps);
    for (int i = lane; i < n; i += 32) {
        float v = ((float)xr[i * inner] - mean) * inv * (float)scale[i] + (float)bias[i];
        yr[i * inner] = (T)layerlab_act(act, v, ca, cb);
    }
}
