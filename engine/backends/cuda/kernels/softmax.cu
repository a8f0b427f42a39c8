// Softmax along the last axis of float32 rows of n values (attention scores, plus a bias broadcast onto them):
// y = exp(v - max) / sum, written in
// the output's type (fp16 for the next product on tensor cores, or fp32). One warp per row, three passes over the
// row (the second and third read it from cache).
#include <cuda_fp16.h>

__device__ __forceinline__ float layerlab_warp_max(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float layerlab_warp_add(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T, typename B>
__global__ void softmax_rows(const float* __restrict__ x, T* __restrict__ y, int n, long long rows,
                             const B* __restrict__ bias, long long bias_rows) {
    // bias (may be null when bias_rows is 0): added to every row before the softmax, row r reading bias row
    // r % bias_rows (a bias whose leading axes broadcast onto the scores' leading axes)
    long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + row * n;
    const B* br = bias_rows ? bias + (row % bias_rows) * n : nullptr;
    T* yr = y + row * n;
    float m = __int_as_float(0xff800000);  // -infinity (NVRTC has no INFINITY macro)
    for (int i = lane; i < n; i += 32) m = fmaxf(m, xr[i] + (br ? (float)br[i] : 0.f));
    m = layerlab_warp_max(m);
    float s = 0.f;
    for (int i = lane; i < n; i += 32) s += __expf(xr[i] + (br ? (float)br[i] : 0.f) - m);
    float inv = 1.f / layerlab_warp_add(s);
    for (int i = lane; i < n; i += 32) yr[i] = (T)(__expf(xr[i] + (br ? (float)br[i] : 0.f) - m) * inv);
}
