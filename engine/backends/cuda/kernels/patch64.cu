#include "wgmma.cuh"

// A 3x3 convolution (stride 1, padding 1) of an input of C <= 3 channels to 64, fp16 NHWC, on wgmma: for each
// output row of a strip of NP pixels, the 9 x C taps of every pixel are gathered into a 128-byte shared-memory
// row (K = 9C padded to 32; the rest of the row is never read), then two wgmma m64nNPk16 (the weights as A) give
// the row, written out through the same stmatrix staging as the 64-channel kernel. Reads the unpadded input.
extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_patch64(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
                const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
                int W, int C, int act, float alpha) {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_base();  // 64 rows x 128 bytes
    const unsigned pbuf = wbase + 8192 + wg * (2 * NP * 128), stage = pbuf + NP * 128;
    load_weights(wbase, wt, 64);
    float bv[2];
    load_bias2(bv, bias, has_bias, warp, lane);
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
    const int items = strip_count(N, H, W);
    for (int item = blockIdx.x * GROUPS + wg; item < items; item += gridDim.x * GROUPS) {
        const auto [n, y0, xs] = strip_of(item, H, W);
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
            stage_row(acc, bv, act, alpha, stage, warp, lane);
            wg_barrier(1 + wg);  // staging complete; the products are done with the patches
            store_row(stage, yn + (size_t)gy * W * 64, xs, W, t128);
        }
    }
}
