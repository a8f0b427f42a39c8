#include "wgmma.cuh"

// A 3x3 convolution (stride 1, padding 1) from 64 channels to K <= 8, fp16 NHWC, on wgmma (an output layer to
// RGB): the pixels are M and the outputs N. Each warpgroup walks strips of NP pixels down SEG rows with the same
// ring of five input rows as the 64-channel kernel; one output row is NP / 64 tiles of 36 wgmma m64n8k16, A a
// ring row shifted by dx pixels, B the tap's 8 x 64 weights. Memory-bound: the input is read once, the few
// outputs are stored straight from the accumulators.
extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_out64(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
              const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
              int W, int K, int act, float alpha) {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_base();  // 9 taps x 8 outputs x 128 bytes
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
    ring_walk(ring, x, y, N, H, W, K, t128, wg,
              [&](const unsigned long long* rdesc, unsigned short* yn, int gy, int xs) {
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
        #pragma unroll
        for (int t = 0; t < NP / 64; ++t)
            #pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int gx = xs + t * 64 + warp * 16 + (lane >> 2) + 8 * r;
                if (gx >= W) continue;
                unsigned short* dst = yn + ((size_t)gy * W + gx) * K + ch;
                #pragma unroll
                for (int h = 0; h < 2; ++h) {
                    if (ch + h >= K) continue;
                    float v = activate(acc[t][2 * r + h] + bv[h], act, alpha);
                    unsigned short u;
                    asm("cvt.rn.f16.f32 %0, %1;\n" : "=h"(u) : "f"(v));
                    dst[h] = u;
                }
            }
    });
}
