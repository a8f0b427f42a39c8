#include <cuda_fp16.h>
#include "epilogue.cuh"
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
        y[(size_t)p * K + j] = __float2half_rn(layerlab_act(act, acc[j], alpha, 0.0f));
    }
}
