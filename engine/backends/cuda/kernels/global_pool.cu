// Global average or max pooling as a reduction with float32 accumulation, many blocks per image: each block reduces
// one chunk of the image's pixels (a split) and writes its partial result, or the final value when there is one
// split; gpool_finish combines the splits. NaN propagates through max as numpy.maximum does.
#include <cuda_fp16.h>

template <int MAX>
__device__ __forceinline__ float gpool_combine(float acc, float v) {
    if (MAX) return (v > acc || v != v) ? v : acc;
    return acc + v;
}

template <int MAX>
__device__ __forceinline__ float gpool_start() { return MAX ? __int_as_float(0xff800000) : 0.0f; }

// NHWC, blocks of 32 x 8 threads: x over 32 channels, y over the pixels of the chunk; grid (channel tiles, N, splits).
template <typename T, int MAX>
__global__ void gpool_nhwc(const T* __restrict__ x, float* __restrict__ part, T* __restrict__ y, int HW, int C,
                           int splits, int chunk, float scale) {
    __shared__ float red[8][33];
    int c = blockIdx.x * 32 + threadIdx.x, n = blockIdx.y, sp = blockIdx.z;
    int p0 = sp * chunk, p1 = min(HW, p0 + chunk);
    float acc = gpool_start<MAX>();
    if (c < C) {
        const T* img = x + (size_t)n * HW * C + c;
        for (int p = p0 + threadIdx.y; p < p1; p += 8) acc = gpool_combine<MAX>(acc, (float)img[(size_t)p * C]);
    }
    red[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    #pragma unroll
    for (int j = 1; j < 8; ++j) acc = gpool_combine<MAX>(acc, red[j][threadIdx.x]);
    if (splits == 1) y[(size_t)n * C + c] = (T)(MAX ? acc : acc * scale);
    else part[((size_t)n * splits + sp) * C + c] = acc;
}

// NCHW: one warp reduces one chunk of one channel plane (a row of HW values); warps = rows * splits.
template <typename T, int MAX>
__global__ void gpool_nchw(const T* __restrict__ x, float* __restrict__ part, T* __restrict__ y, int rows, int HW,
                           int splits, int chunk, float scale) {
    unsigned int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= (unsigned int)rows * splits) return;
    int row = warp / splits, sp = warp % splits;
    int p0 = sp * chunk, p1 = min(HW, p0 + chunk);
    const T* plane = x + (size_t)row * HW;
    float acc = gpool_start<MAX>();
    for (int p = p0 + lane; p < p1; p += 32) acc = gpool_combine<MAX>(acc, (float)plane[p]);
    #pragma unroll
    for (int d = 16; d > 0; d /= 2) acc = gpool_combine<MAX>(acc, __shfl_down_sync(0xffffffffu, acc, d));
    if (lane != 0) return;
    if (splits == 1) y[row] = (T)(MAX ? acc : acc * scale);
    else part[(size_t)row * splits + sp] = acc;
}

// The splits' partial results of each output value (n, c) combined: partial s of value i is at
// part[((i / C) * splits + s) * C + i % C] (NHWC) or part[i * splits + s] (NCHW).
template <typename T, int MAX>
__global__ void gpool_finish(const float* __restrict__ part, T* __restrict__ y, int total, int C, int splits,
                             int nhwc, float scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    size_t base = nhwc ? (size_t)(i / C) * splits * C + i % C : (size_t)i * splits;
    size_t step = nhwc ? (size_t)C : 1;
    float acc = gpool_start<MAX>();
    for (int s = 0; s < splits; ++s) acc = gpool_combine<MAX>(acc, part[base + s * step]);
    y[i] = (T)(MAX ? acc : acc * scale);
}
