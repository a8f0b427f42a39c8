// A 3x3 convolution (stride 1, padding 1) from 64 to 64 channels, fp16 NHWC, on wgmma (a denoiser's middle
// layers): each warpgroup walks strips of NP pixels down SEG rows with a ring of five input rows in shared memory.
#include "wgmma.cuh"

extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_c64_rows(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
                 const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
                 int W, int act, float alpha) {
    // each warpgroup walks strips of NP pixels down SEG rows at a time, keeping a ring of 5 input rows: the row
    // three below the one being computed loads while it computes; one output row = 36 wgmma m64nNPk16 with the
    // weights (A) and the ring's rows (B) both in shared memory, then transposed through stmatrix to a staging row
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_base();
    const unsigned ring = wbase + W_BYTES + wg * WG_BYTES, stage = ring + RING * ROWB;
    load_weights(wbase, wt, 9 * 64);
    float bv[2];
    load_bias2(bv, bias, has_bias, warp, lane);
    const unsigned long long wdesc = desc_of(wbase);
    ring_walk(ring, x, y, N, H, W, 64, t128, wg,
              [&](const unsigned long long* rdesc, unsigned short* yn, int gy, int xs) {
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
        stage_row(acc, bv, act, alpha, stage, warp, lane);
        wg_barrier(1 + wg);
        store_row(stage, yn + (size_t)gy * W * 64, xs, W, t128);
    });
}
