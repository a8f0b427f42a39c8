// Shared by the Hopper kernels (sm_90a: wgmma, stmatrix, cp.async): the strip-walking machinery and the epilogue.
// Compiled with NP (strip width in pixels), GROUPS (warpgroups a block), SEG (rows a work item) and WGMMA_N
// (the N of wgmma_ss) defined on the command line.
#ifndef LAYERLAB_WGMMA_CUH
#define LAYERLAB_WGMMA_CUH
#include "epilogue.cuh"
#define ROWB ((NP + 2) * 128)
#define RING 5
#define WG_BYTES (RING * ROWB + NP * 128)
#define W_BYTES (9 * 64 * 128)
#define NACC (NP / 2)

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// the dynamic shared memory, its start aligned to 1024 bytes (the 128-byte swizzle wgmma reads needs it)
__device__ __forceinline__ unsigned smem_base() {
    extern __shared__ unsigned char smem_raw[];
    return smem_u32((const void*)(((size_t)smem_raw + 1023) & ~(size_t)1023));
}

// A work item: the strip of NP output pixels from column xs of image n, rows y0 to y0 + SEG - 1 (those in the image);
// the warpgroups of the grid take the items in turn
struct Strip { int n, y0, xs; };

__device__ __forceinline__ int strip_count(int N, int H, int W) {
    return N * ((W + NP - 1) / NP) * ((H + SEG - 1) / SEG);
}

__device__ __forceinline__ Strip strip_of(int item, int H, int W) {
    const int strips = (W + NP - 1) / NP, segs = (H + SEG - 1) / SEG, rest = item % (strips * segs);
    return {item / (strips * segs), (rest / strips) * SEG, (rest % strips) * NP};
}

__device__ __forceinline__ void cp16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void keepf(float& r) { asm volatile("" : "+f"(r) :: "memory"); }
__device__ __forceinline__ void wg_barrier(int id) { asm volatile("bar.sync %0, 128;\n" :: "r"(id) : "memory"); }

// 16-byte chunk c of the 128-byte row at address a: swizzled by the row's address bits 7-9, as wgmma reads it
__device__ __forceinline__ unsigned swz(unsigned a, int c) { return a + ((c ^ ((a >> 7) & 7)) << 4); }

__device__ __forceinline__ unsigned long long desc_of(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32)
           | (1ull << 62);
}

// one input row (NP + 2 pixels from x0) into a ring slot, zeros outside the image; one commit group
__device__ __forceinline__ void load_row(unsigned slot, const unsigned short* __restrict__ xn, int gy, int x0, int H,
                                         int W, int t128) {
    const bool row_ok = (unsigned)gy < (unsigned)H;
    for (int i = t128; i < (NP + 2) * 8; i += 128) {
        int p = i >> 3, c = i & 7, gx = x0 + p;
        bool ok = row_ok && (unsigned)gx < (unsigned)W;
        const unsigned short* src = ok ? xn + ((size_t)gy * W + gx) * 64 + c * 8 : xn;
        cp16(swz(slot + p * 128, c), src, ok);
    }
    asm volatile("cp.async.commit_group;\n" ::);
}

// ``rows`` rows of 64 fp16 weights into swizzled shared memory at wbase, by the whole block, waited for
__device__ __forceinline__ void load_weights(unsigned wbase, const unsigned short* __restrict__ wt, int rows) {
    for (int i = threadIdx.x; i < rows * 8; i += blockDim.x) {
        int row = i >> 3, c = i & 7;
        cp16(swz(wbase + row * 128, c), wt + row * 64 + c * 8, true);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
}

// a work item's ring: its first four input rows (y0 - 1 .. y0 + 2) into slots 0-3
__device__ __forceinline__ void ring_start(unsigned ring, const unsigned short* __restrict__ xn, int y0, int x0, int H,
                                           int W, int t128) {
    #pragma unroll
    for (int j = 0; j < 4; ++j) load_row(ring + j * ROWB, xn, y0 - 1 + j, x0, H, W, t128);
}

// before output row y0 + k: the input row three below it starts loading, the three rows it reads are waited for
// (visible to wgmma, the whole warpgroup past them) and their descriptors made
__device__ __forceinline__ void ring_next(unsigned ring, const unsigned short* __restrict__ xn, int y0, int k, int x0,
                                          int H, int W, int t128, int wg, unsigned long long* rdesc) {
    load_row(ring + ((k + 4) % RING) * ROWB, xn, y0 + k + 3, x0, H, W, t128);
    asm volatile("cp.async.wait_group 2;\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    wg_barrier(1 + wg);
    #pragma unroll
    for (int dy = 0; dy < 3; ++dy) rdesc[dy] = desc_of(ring + ((k + dy) % RING) * ROWB);
}

// Every work item of this warpgroup, its input rows walked through the ring: row(rdesc, yn, gy, xs) computes output
// row gy of the strip from column xs (rdesc: the descriptors of its three input rows; yn: image n of y, K channels a
// pixel); the ring's loads are all waited for before the next item
template <class Row>
__device__ __forceinline__ void ring_walk(unsigned ring, const unsigned short* __restrict__ x,
                                          unsigned short* __restrict__ y, int N, int H, int W, int K, int t128,
                                          int wg, Row row) {
    const int items = strip_count(N, H, W);
    for (int item = blockIdx.x * GROUPS + wg; item < items; item += gridDim.x * GROUPS) {
        const auto [n, y0, xs] = strip_of(item, H, W);
        const int x0 = xs - 1;  // the ring's first column: the padding left of the strip
        const unsigned short* xn = x + (size_t)n * H * W * 64;
        unsigned short* yn = y + (size_t)n * H * W * K;
        ring_start(ring, xn, y0, x0, H, W, t128);
        for (int k = 0; k < SEG && y0 + k < H; ++k) {
            unsigned long long rdesc[3];
            ring_next(ring, xn, y0, k, x0, H, W, t128, wg, rdesc);
            row(rdesc, yn, y0 + k, xs);
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        wg_barrier(1 + wg);
    }
}

// wgmma_ss(d, a, b): d += A B, one m64nNk16 product (N = WGMMA_N) with both operands read from shared memory
// through descriptors, WGMMA_N / 2 float accumulators a thread
#if WGMMA_N == 96
__device__ __forceinline__ void wgmma_ss(float* d, unsigned long long da, unsigned long long db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
                 : "l"(da), "l"(db), "r"(1));
}
#elif WGMMA_N == 8
__device__ __forceinline__ void wgmma_ss(float* d, unsigned long long da, unsigned long long db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(da), "l"(db), "r"(1));
}
#else
#error "wgmma_ss: no wrapper for this WGMMA_N (96 or 8)"
#endif


// The fused activation every kernel of the family applies (act: an epilogue of one coefficient, epilogue.cuh)
__device__ __forceinline__ float activate(float v, int act, float alpha) { return layerlab_act(act, v, alpha, 0.0f); }

// this thread's bias values for output channels warp * 16 + lane / 4 and 8 further (the rows of its accumulators)
__device__ __forceinline__ void load_bias2(float* bv, const unsigned short* __restrict__ bias, int has_bias, int warp,
                                          int lane) {
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned short u = has_bias ? bias[warp * 16 + (lane >> 2) + 8 * h] : (unsigned short)0;
        asm("cvt.f32.f16 %0, %1;\n" : "=f"(bv[h]) : "h"(u));
    }
}

// The epilogue of the 64-output-channel kernels: one output row's accumulators (64 channels x NP pixels) plus the
// bias, activated, rounded to fp16 and transposed through stmatrix into the swizzled staging row (pixel-major)...
__device__ __forceinline__ void stage_row(const float* acc, const float* bv, int act, float alpha, unsigned stage,
                                          int warp, int lane) {
    const int q = lane >> 3, kq = lane & 7;
    #pragma unroll
    for (int j0 = 0; j0 < NP / 8; j0 += 2) {
        unsigned pk[4];
        #pragma unroll
        for (int m = 0; m < 4; ++m) {
            const int j = j0 + (m >> 1), h = m & 1;
            float v0 = activate(acc[4 * j + 2 * h] + bv[h], act, alpha);
            float v1 = activate(acc[4 * j + 2 * h + 1] + bv[h], act, alpha);
            asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(pk[m]) : "f"(v1), "f"(v0));
        }
        const int pixel = 8 * (j0 + (q >> 1)) + kq;
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                     :: "r"(swz(stage + pixel * 128, 2 * warp + (q & 1))), "r"(pk[0]), "r"(pk[1]),
                        "r"(pk[2]), "r"(pk[3]) : "memory");
    }
}

// ... and, once the warpgroup has passed a barrier, the staging row out to pixels gx0 .. gx0 + NP - 1 (within W) of
// the output row at yrow (64 channels a pixel) in 16-byte stores
__device__ __forceinline__ void store_row(unsigned stage, unsigned short* __restrict__ yrow, int gx0, int W, int t128) {
    #pragma unroll 2
    for (int i = t128; i < NP * 8; i += 128) {
        int pixel = i >> 3, c = i & 7, gx = gx0 + pixel;
        if (gx < W) {
            uint4 v;
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(swz(stage + pixel * 128, c)));
            *(uint4*)(yrow + (size_t)gx * 64 + c * 8) = v;
        }
    }
}
#endif
