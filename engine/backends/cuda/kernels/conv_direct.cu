// A direct convolution for inputs of few channels (an RGB image), fp16 NHWC: one thread computes 8 output
// channels of one pixel from float32 weights (R, S, C, K) held in shared memory, reading the unpadded input.
#include <cuda_fp16.h>
#include "epilogue.cuh"
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
        a = layerlab_act(act, a, alpha, 0.0f);
        b = layerlab_act(act, b, alpha, 0.0f);
        h[j] = __floats2half2_rn(a, b);
    }
    ((uint4*)y)[i] = out;
}
