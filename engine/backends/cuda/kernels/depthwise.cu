// Depthwise convolution (one filter per channel, R x S up to 7 x 7, dilation 1) with bias and the fused epilogue,
// float32 accumulation. Each thread computes TW neighbouring output pixels of one row: every input value of the
// TW outputs' windows is read once per filter row and used by each output whose window holds it (the filter row
// stays in registers). Weights are float32 (R, S, C).
#include <cuda_fp16.h>
#include "epilogue.cuh"
#include "vec.cuh"

// NHWC: a thread covers VEC consecutive channels (one vector access per pixel); consecutive threads take
// consecutive channel groups, so a warp reads whole pixel rows.
template <typename T, int VEC, int S, int SW, int TW>
__global__ void dw_nhwc(const T* __restrict__ x, const float* __restrict__ w, const T* __restrict__ bias, int has_bias,
                        T* __restrict__ y, int H, int W, int C, int Ho, int Wo, int R, int sh, int ph, int pw, int act,
                        float ca, float cb, unsigned int total) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    unsigned int groups = C / VEC, strips = (Wo + TW - 1) / TW;
    int c = (int)(i % groups) * VEC;
    unsigned int t = i / groups;
    int ow0 = (int)(t % strips) * TW;
    t /= strips;
    int oh = (int)(t % Ho), n = (int)(t / Ho);
    float acc[TW][VEC];
    #pragma unroll
    for (int k = 0; k < VEC; ++k) {
        float b0 = has_bias ? (float)bias[c + k] : 0.0f;
        #pragma unroll
        for (int o = 0; o < TW; ++o) acc[o][k] = b0;
    }
    constexpr int IN = (TW - 1) * SW + S;
    const int iw0 = ow0 * SW - pw;
    const T* img = x + (size_t)n * H * W * C + c;
    for (int r = 0; r < R; ++r) {
        int ih = oh * sh - ph + r;
        if (ih < 0 || ih >= H) continue;
        float wr[S][VEC];
        #pragma unroll
        for (int s = 0; s < S; ++s) layerlab_load<float, VEC>(w + (size_t)(r * S + s) * C + c, wr[s]);
        const T* row = img + (size_t)ih * W * C;
        #pragma unroll
        for (int j = 0; j < IN; ++j) {
            int iw = iw0 + j;
            float v[VEC];
            if (iw >= 0 && iw < W) {
                layerlab_load<T, VEC>(row + (size_t)iw * C, v);
            } else {
                #pragma unroll
                for (int k = 0; k < VEC; ++k) v[k] = 0.0f;
            }
            #pragma unroll
            for (int o = 0; o < TW; ++o) {
                const int s = j - o * SW;
                if (s >= 0 && s < S) {
                    #pragma unroll
                    for (int k = 0; k < VEC; ++k) acc[o][k] = fmaf(v[k], wr[s][k], acc[o][k]);
                }
            }
        }
    }
    T* out = y + (((size_t)n * Ho + oh) * Wo + ow0) * C + c;
    #pragma unroll
    for (int o = 0; o < TW; ++o) {
        if (ow0 + o >= Wo) break;
        #pragma unroll
        for (int k = 0; k < VEC; ++k) acc[o][k] = layerlab_act(act, acc[o][k], ca, cb);
        layerlab_store<T, VEC>(out + (size_t)o * C, acc[o]);
    }
}

// NCHW: a thread computes TW outputs of one row of one channel plane; consecutive threads take consecutive strips
// of the row.
template <typename T, int S, int SW, int TW>
__global__ void dw_nchw(const T* __restrict__ x, const float* __restrict__ w, const T* __restrict__ bias, int has_bias,
                        T* __restrict__ y, int H, int W, int C, int Ho, int Wo, int R, int sh, int ph, int pw, int act,
                        float ca, float cb, unsigned int total) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    unsigned int strips = (Wo + TW - 1) / TW;
    int ow0 = (int)(i % strips) * TW;
    unsigned int t = i / strips;
    int oh = (int)(t % Ho);
    t /= Ho;
    int c = (int)(t % C), n = (int)(t / C);
    float acc[TW];
    float b0 = has_bias ? (float)bias[c] : 0.0f;
    #pragma unroll
    for (int o = 0; o < TW; ++o) acc[o] = b0;
    constexpr int IN = (TW - 1) * SW + S;
    const int iw0 = ow0 * SW - pw;
    const T* plane = x + ((size_t)n * C + c) * H * W;
    for (int r = 0; r < R; ++r) {
        int ih = oh * sh - ph + r;
        if (ih < 0 || ih >= H) continue;
        float wr[S];
        #pragma unroll
        for (int s = 0; s < S; ++s) wr[s] = w[(size_t)(r * S + s) * C + c];
        const T* row = plane + (size_t)ih * W;
        #pragma unroll
        for (int j = 0; j < IN; ++j) {
            int iw = iw0 + j;
            float v = (iw >= 0 && iw < W) ? (float)row[iw] : 0.0f;
            #pragma unroll
            for (int o = 0; o < TW; ++o) {
                const int s = j - o * SW;
                if (s >= 0 && s < S) acc[o] = fmaf(v, wr[s], acc[o]);
            }
        }
    }
    T* out = y + (((size_t)n * C + c) * Ho + oh) * Wo + ow0;
    #pragma unroll
    for (int o = 0; o < TW; ++o) {
        if (ow0 + o >= Wo) break;
        out[o] = (T)layerlab_act(act, acc[o], ca, cb);
    }
}
