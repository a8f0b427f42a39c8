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

// The same with a block of WARPS warps per row, for few long rows (a 7 x 7 image of 768 channels: 49 rows would
// leave most of the GPU idle and each warp walking its row alone): partial sums meet in shared memory.
template <int WARPS>
__device__ __forceinline__ float layerlab_block_sum(float v, float* shared) {
    v = layerlab_warp_sum(v);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();  // the previous use of shared is over
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float t = 0.f;
    #pragma unroll
    for (int w = 0; w < WARPS; ++w) t += shared[w];
    return t;
}

template <typename T, int WARPS>
__global__ void layer_norm_block(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                                 T* __restrict__ y, int n, long long inner, float eps, int act, float ca, float cb) {
    __shared__ float shared[WARPS];
    long long row = blockIdx.x;
    long long base = (row / inner) * n * inner + row % inner;
    const T* xr = x + base;
    T* yr = y + base;
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += 32 * WARPS) s += (float)xr[i * inner];
    float mean = layerlab_block_sum<WARPS>(s, shared) / n;
    float q = 0.f;
    for (int i = threadIdx.x; i < n; i += 32 * WARPS) {
        float d = (float)xr[i * inner] - mean;
        q += d * d;
    }
    float inv = rsqrtf(layerlab_block_sum<WARPS>(q, shared) / n + eps);
    for (int i = threadIdx.x; i < n; i += 32 * WARPS) {
        float v = ((float)xr[i * inner] - mean) * inv * (float)scale[i] + (float)bias[i];
        yr[i * inner] = (T)layerlab_act(act, v, ca, cb);
    }
}
