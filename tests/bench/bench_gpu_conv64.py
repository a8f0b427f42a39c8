"""dncnn's middle layer (64 -> 64 3x3, bias + ReLU) at 1080p fp16 NHWC: the engine's Hopper kernel
(``gpu_kernels.conv3x3_c64``, "rows") and the other tensor-core designs tried for it in round 2, session 8, against
cuDNN as the engine tunes it and PyTorch's channels-last convolution (``cudnn.benchmark``); each output is checked
against cuDNN's, then each is timed alone with CUDA events:
python -m tests.bench.bench_gpu_conv64 [--size 1080x1920] [--batch 1] [--rows 96x2x8 ...] [--ss ...] [--sh ...]

H100 figures (cuDNN 341-353 us throughout):

* ``mma.sync`` (Ampere-style m16n8k16), 8 warps, weights resident, 16 x 16 tiles, double-buffered cp.async halo,
  each input row's A fragment serving the three output rows that read it: 445-495 us.
* ``wgmma`` (sm_90a, NVRTC) with the input as A through ldmatrix into registers and the weights as B through
  128-byte-swizzled descriptors (``--shapes``: output rows x warpgroups): one warpgroup 485-508 us (Nsight Compute:
  tensor pipe 33% busy, issue-bound on address arithmetic, copies and the epilogue), 3 x 3 354-360 us.
  One m64n128/n192 instruction per input row for two or three output rows gave wrong sums: accumulators of
  different instruction shapes in flight are not ordered. Not kept.
* Both operands from shared memory, the weights as A and the pixels as N, outputs transposed through stmatrix
  (``--ss``: rows x pixels x warpgroups x base-offset flag; the flag must be 0: the hardware swizzles on absolute
  address bits): per-warpgroup halos 311-352 us; ``--sh``: one double-buffered halo shared by the warpgroups
  343-432 us; ``--rowsrs``: the weights as A held in registers 299-640 us.
* ``--rows`` (the engine's kernel): strips of NP pixels walk down SEG rows with a ring of five input rows, the row
  three below loading while one computes: 96 x 2 x 8 287-300 us (the default), 64 x 3 x 8 294-312.
  Issuing the next row's products before writing the current one (two accumulator sets) was slower (398 us).
"""
from __future__ import annotations

import argparse
import functools
from typing import Any

import cupy  # this module runs only on the GPU machine
import numpy as np

from engine.backends import gpu_kernels
from engine.backends.gpu_kernels import compile_sm90a, wgmma_ss_wrapper

#: fused epilogues the kernels apply
EPILOGUES = {None: 0, "relu": 1, "leaky_relu": 2}


def _aligned(*arrays: Any) -> bool:
    return all(a.data.ptr % 16 == 0 for a in arrays)


_CONV64 = r"""
#include <cuda_fp16.h>
// 3x3 convolution of stride 1 and padding 1 from 64 to 64 channels, fp16 NHWC, fp32 accumulation on tensor cores
// (mma.sync m16n8k16). A persistent block (8 warps) keeps all 9 x 64 x 64 weights in shared memory and walks tiles
// of 16 x 16 output pixels; the next tile's 18 x 18 input halo loads (cp.async, zero-filled outside the image)
// while the current one is computed. Warp w computes 4 rows (w % 4) x 16 pixels x 32 output channels (w / 4):
// each input row's A fragment serves the up to three output rows that read it. Shared memory rows are 128 bytes
// (64 channels) with their 16-byte chunks swizzled by the row index, so ldmatrix reads are conflict-free.
#define TH 16
#define TW 16
#define HWID (TW + 2)
#define HALO_PX ((TH + 2) * HWID)
#define HALO_BYTES (HALO_PX * 128)
#define W_BYTES (9 * 64 * 128)

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void ldsm4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

__device__ __forceinline__ void mma16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void load_halo(unsigned char* buf, const __half* __restrict__ x, int tile, int H, int W,
                                          int tiles_x, int tiles_per_image) {
    int n = tile / tiles_per_image, t = tile % tiles_per_image;
    int y0 = (t / tiles_x) * TH - 1, x0 = (t % tiles_x) * TW - 1;
    const __half* xn = x + (size_t)n * H * W * 64;
    unsigned base = smem_u32(buf);
    for (int i = threadIdx.x; i < HALO_PX * 8; i += blockDim.x) {
        int p = i >> 3, c = i & 7;
        int gy = y0 + p / HWID, gx = x0 + p % HWID;
        bool ok = gy >= 0 && gy < H && gx >= 0 && gx < W;
        const __half* src = ok ? xn + ((size_t)gy * W + gx) * 64 + c * 8 : x;
        cp16(base + p * 128 + ((c ^ (p & 7)) << 4), src, ok);
    }
}

extern "C" __global__ void __launch_bounds__(256, 1)
conv3x3_c64(const __half* __restrict__ x, const __half* __restrict__ wt, const __half* __restrict__ bias,
            int has_bias, __half* __restrict__ y, int N, int H, int W, int act, float alpha) {
    extern __shared__ __align__(1024) unsigned char smem[];
    unsigned char* ws = smem;
    unsigned char* halo[2] = {smem + W_BYTES, smem + W_BYTES + HALO_BYTES};
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = warp & 3, h = warp >> 2;
    const int tiles_x = (W + TW - 1) / TW, tiles_per_image = ((H + TH - 1) / TH) * tiles_x;
    const int total = N * tiles_per_image;
    {   // weights: (tap, cout) rows of 64 input channels
        unsigned base = smem_u32(ws);
        for (int i = threadIdx.x; i < 9 * 64 * 8; i += blockDim.x) {
            int row = i >> 3, c = i & 7;
            cp16(base + row * 128 + ((c ^ (row & 7)) << 4), wt + row * 64 + c * 8, true);
        }
    }
    float bv[4][2];
    #pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
        int k = h * 32 + nt * 8 + (lane & 3) * 2;
        bv[nt][0] = has_bias ? __half2float(bias[k]) : 0.0f;
        bv[nt][1] = has_bias ? __half2float(bias[k + 1]) : 0.0f;
    }
    int tile = blockIdx.x;
    if (tile < total) load_halo(halo[0], x, tile, H, W, tiles_x, tiles_per_image);
    asm volatile("cp.async.commit_group;\n" ::);
    // per-lane parts of the ldmatrix addresses
    const int a_px = lane & 15, a_chunk = lane >> 4;
    const int b_row = h * 32 + (lane & 7) + ((lane >> 4) << 3), b_chunk = (lane >> 3) & 1;
    const unsigned wbase = smem_u32(ws);
    for (int it = 0; tile < total; tile += gridDim.x, ++it) {
        int next = tile + gridDim.x;
        if (next < total) load_halo(halo[(it + 1) & 1], x, next, H, W, tiles_x, tiles_per_image);
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncthreads();
        const unsigned hbase = smem_u32(halo[it & 1]);
        float acc[4][4][4];
        #pragma unroll
        for (int r = 0; r < 4; ++r)
            #pragma unroll
            for (int nt = 0; nt < 4; ++nt)
                #pragma unroll
                for (int e = 0; e < 4; ++e) acc[r][nt][e] = 0.0f;
        #pragma unroll 1
        for (int dx = 0; dx < 3; ++dx) {
            #pragma unroll
            for (int kc = 0; kc < 4; ++kc) {
                unsigned b[3][4][2];
                #pragma unroll
                for (int dy = 0; dy < 3; ++dy) {
                    #pragma unroll
                    for (int j = 0; j < 2; ++j) {
                        int row = (dy * 3 + dx) * 64 + b_row + j * 16;
                        int chunk = 2 * kc + b_chunk;
                        ldsm4(wbase + row * 128 + ((chunk ^ (row & 7)) << 4),
                              b[dy][2 * j][0], b[dy][2 * j][1], b[dy][2 * j + 1][0], b[dy][2 * j + 1][1]);
                    }
                }
                #pragma unroll
                for (int i = 0; i < 6; ++i) {
                    unsigned a[4];
                    int p = (g * 4 + i) * HWID + dx + a_px;
                    int chunk = 2 * kc + a_chunk;
                    ldsm4(hbase + p * 128 + ((chunk ^ (p & 7)) << 4), a[0], a[1], a[2], a[3]);
                    #pragma unroll
                    for (int dy = 0; dy < 3; ++dy) {
                        const int r = i - dy;
                        if (r >= 0 && r < 4) {
                            #pragma unroll
                            for (int nt = 0; nt < 4; ++nt) mma16816(acc[r][nt], a, b[dy][nt][0], b[dy][nt][1]);
                        }
                    }
                }
            }
        }
        // epilogue: bias, activation, fp16, straight to the output
        int n = tile / tiles_per_image, t = tile % tiles_per_image;
        int oy = (t / tiles_x) * TH + g * 4, ox = (t % tiles_x) * TW + (lane >> 2);
        __half* yn = y + (size_t)n * H * W * 64;
        #pragma unroll
        for (int r = 0; r < 4; ++r) {
            int gy = oy + r;
            if (gy >= H) break;
            #pragma unroll
            for (int half_ = 0; half_ < 2; ++half_) {
                int gx = ox + half_ * 8;
                if (gx >= W) continue;
                __half* dst = yn + ((size_t)gy * W + gx) * 64 + h * 32 + (lane & 3) * 2;
                #pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    float v0 = acc[r][nt][half_ * 2] + bv[nt][0], v1 = acc[r][nt][half_ * 2 + 1] + bv[nt][1];
                    if (act == 1) { v0 = v0 < 0.0f ? 0.0f : v0; v1 = v1 < 0.0f ? 0.0f : v1; }
                    else if (act == 2) { v0 = v0 < 0.0f ? v0 * alpha : v0; v1 = v1 < 0.0f ? v1 * alpha : v1; }
                    *(__half2*)(dst + nt * 8) = __floats2half2_rn(v0, v1);
                }
            }
        }
        __syncthreads();  // every warp is done with this halo before the next iteration loads into it
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
}
"""

_CONV64_WGMMA = r"""
// The same convolution on Hopper's warpgroup tensor-core instructions (wgmma, sm_90a): one warpgroup (4 warps) a
// block walks tiles of 4 output rows x 64 pixels. Weights (all taps, 128-byte rows of 64 input channels, 16-byte
// chunks swizzled by row: the hardware's 128-byte swizzle) stay in shared memory and feed wgmma as its B operand
// through matrix descriptors; the input halo (6 x 66 pixels, two buffers: the next tile's loads while this one
// computes) feeds A through ldmatrix into registers. Each input row's A fragment serves the up to three output rows
// (one accumulator set of 64 x 64 each) that read it; steps of (dx, 16 channels) are committed as groups, A
// registers double-buffered across them. No headers: fp16 values are moved as raw 16-bit words.
#ifndef TH
#define TH 4
#endif
#ifndef GROUPS
#define GROUPS 2
#endif
#define TW 64
#define HWID (TW + 2)
#define HALO_PX ((TH + 2) * HWID)
#define HALO_BYTES (HALO_PX * 128)
#define W_BYTES (9 * 64 * 128)

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void ldsm4(unsigned addr, unsigned* r) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void keep(unsigned& r) { asm volatile("" : "+r"(r) :: "memory"); }
__device__ __forceinline__ void keepf(float& r) { asm volatile("" : "+f"(r) :: "memory"); }

// wgmma m64n64k16 with A from registers, B from shared memory
__device__ __forceinline__ void wgmma_n64(float* d, const unsigned* a, unsigned long long desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {ACC_OPS32}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : ACC_CONS32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1));
}

__device__ __forceinline__ void load_halo(unsigned buf, const unsigned short* __restrict__ x, int tile, int H,
                                          int W, int tiles_x, int tiles_per_image, int t128) {
    // thread t128 of the warpgroup moves chunk t128 % 8 of pixels t128 / 8, + 16, + 32, ... (no divisions)
    int n = tile / tiles_per_image, t = tile % tiles_per_image;
    int y0 = (t / tiles_x) * TH - 1, x0 = (t % tiles_x) * TW - 1;
    const unsigned short* xn = x + (size_t)n * H * W * 64;
    const int c = t128 & 7;
    int p = t128 >> 3, hy = 0, hx = p;
    #pragma unroll 5
    for (; p < HALO_PX; p += 16) {
        int gy = y0 + hy, gx = x0 + hx;
        bool ok = (unsigned)gy < (unsigned)H && (unsigned)gx < (unsigned)W;
        const unsigned short* src = ok ? xn + ((size_t)gy * W + gx) * 64 + c * 8 : x;
        cp16(buf + p * 128 + ((c ^ (p & 7)) << 4), src, ok);
        hx += 16;
        if (hx >= HWID) { hx -= HWID; ++hy; }
    }
}

__device__ __forceinline__ void wg_barrier(int id) { asm volatile("bar.sync %0, 128;\n" :: "r"(id) : "memory"); }

template <int DX, int KC>
__device__ __forceinline__ void step(float (&acc)[TH * 32], unsigned (&a)[TH + 2][4], unsigned hbase, int a_px,
                                     int a_chunk, unsigned long long wdesc) {
    #pragma unroll
    for (int i = 0; i < TH + 2; ++i) {
        int p = i * HWID + DX + a_px;
        int chunk = 2 * KC + a_chunk;
        ldsm4(hbase + p * 128 + ((chunk ^ (p & 7)) << 4), a[i]);
    }
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    // input row i feeds output rows i - dy (dy = lo..hi); output row r's accumulators are acc[(TH - 1 - r) * 32 ...]
    #pragma unroll
    for (int i = 0; i < TH + 2; ++i) {
        const int lo = i - (TH - 1) > 0 ? i - (TH - 1) : 0, hi = i < 2 ? i : 2;
        #pragma unroll
        for (int dy = lo; dy <= hi; ++dy)
            wgmma_n64(acc + (TH - 1 - (i - dy)) * 32, a[i],
                      wdesc + (unsigned long long)((((DX * 3 + dy) * 8192) + KC * 32) >> 4));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wait_and_keep(unsigned (&a)[TH + 2][4]) {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
    #pragma unroll
    for (int i = 0; i < TH + 2; ++i)
        #pragma unroll
        for (int e = 0; e < 4; ++e) keep(a[i][e]);
}

extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_c64_wgmma(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
                  const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
                  int W, int act, float alpha) {
    // GROUPS warpgroups a block, each on its own tiles with its own halo: while one loads or writes, the others'
    // wgmma keep the tensor cores busy
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_u32(smem), hbase = smem_u32(smem + W_BYTES + wg * HALO_BYTES);
    const int tiles_x = (W + TW - 1) / TW, tiles_per_image = ((H + TH - 1) / TH) * tiles_x;
    const int total = N * tiles_per_image;
    for (int i = threadIdx.x; i < 9 * 64 * 8; i += blockDim.x) {
        // global rows (dy, dx, cout) -> shared rows (dx, dy, cout): the taps of one dx in a row
        int row = i >> 3, c = i & 7, tap = row >> 6;
        int srow = ((tap % 3) * 3 + tap / 3) * 64 + (row & 63);
        cp16(wbase + srow * 128 + ((c ^ (srow & 7)) << 4), wt + row * 64 + c * 8, true);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    // B descriptors: start address, leading offset 16 (unused by 128-byte swizzled K-major), stride 1024 between
    // groups of 8 rows, 128-byte swizzle
    const unsigned long long wdesc = (unsigned long long)((wbase & 0x3FFFF) >> 4) | (1ull << 16)
                                     | ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
    float bv[8][2];
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
        #pragma unroll
        for (int e = 0; e < 2; ++e) {
            unsigned short u = has_bias ? bias[j * 8 + (lane & 3) * 2 + e] : (unsigned short)0;
            asm("cvt.f32.f16 %0, %1;\n" : "=f"(bv[j][e]) : "h"(u));
        }
    }
    const int stride = gridDim.x * GROUPS;
    int tile = blockIdx.x * GROUPS + wg;
    if (tile < total) load_halo(hbase, x, tile, H, W, tiles_x, tiles_per_image, t128);
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // the weights, from every thread's copies
    const int a_px = warp * 16 + (lane & 15), a_chunk = lane >> 4;
    unsigned a0[TH + 2][4], a1[TH + 2][4];
    for (; tile < total; tile += stride) {
        asm volatile("cp.async.wait_group 0;\n" ::);
        wg_barrier(1 + wg);  // this warpgroup's halo
        float acc[TH * 32];
        #pragma unroll
        for (int e = 0; e < TH * 32; ++e) { acc[e] = 0.0f; keepf(acc[e]); }
        step<0, 0>(acc, a0, hbase, a_px, a_chunk, wdesc);
        step<0, 1>(acc, a1, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a0);
        step<0, 2>(acc, a0, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a1);
        step<0, 3>(acc, a1, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a0);
        step<1, 0>(acc, a0, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a1);
        step<1, 1>(acc, a1, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a0);
        step<1, 2>(acc, a0, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a1);
        step<1, 3>(acc, a1, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a0);
        step<2, 0>(acc, a0, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a1);
        step<2, 1>(acc, a1, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a0);
        step<2, 2>(acc, a0, hbase, a_px, a_chunk, wdesc); wait_and_keep<1>(a1);
        step<2, 3>(acc, a1, hbase, a_px, a_chunk, wdesc);
        // every warp of the group has read the halo (its last A fragments are in registers): load the next one
        // while the last products run and the results are written
        wg_barrier(1 + wg);
        if (tile + stride < total) load_halo(hbase, x, tile + stride, H, W, tiles_x, tiles_per_image, t128);
        asm volatile("cp.async.commit_group;\n" ::);
        wait_and_keep<0>(a0);
        wait_and_keep<0>(a1);
        #pragma unroll
        for (int e = 0; e < TH * 32; ++e) keepf(acc[e]);
        // epilogue: bias, activation, fp16, straight to the output
        int n = tile / tiles_per_image, t = tile % tiles_per_image;
        int oy = (t / tiles_x) * TH, ox = (t % tiles_x) * TW + warp * 16 + (lane >> 2);
        unsigned short* yn = y + (size_t)n * H * W * 64;
        #pragma unroll
        for (int r = 0; r < TH; ++r) {
            int gy = oy + r;
            if (gy >= H) break;
            #pragma unroll
            for (int half_ = 0; half_ < 2; ++half_) {
                int gx = ox + half_ * 8;
                if (gx >= W) continue;
                unsigned short* dst = yn + ((size_t)gy * W + gx) * 64 + (lane & 3) * 2;
                #pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const float* ar = acc + (TH - 1 - r) * 32;
                    float v0 = ar[4 * j + half_ * 2] + bv[j][0], v1 = ar[4 * j + half_ * 2 + 1] + bv[j][1];
                    if (act == 1) { v0 = v0 < 0.0f ? 0.0f : v0; v1 = v1 < 0.0f ? 0.0f : v1; }
                    else if (act == 2) { v0 = v0 < 0.0f ? v0 * alpha : v0; v1 = v1 < 0.0f ? v1 * alpha : v1; }
                    unsigned packed;
                    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(packed) : "f"(v1), "f"(v0));
                    *(unsigned*)(dst + j * 8) = packed;
                }
            }
        }
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
}
""".replace("ACC_OPS32", ", ".join(f"%{i}" for i in range(32))).replace(
    "ACC_CONS32(d)", ", ".join(f'"+f"(d[{i}])' for i in range(32)))

#: shared memory of :func:`conv3x3_c64`: the weights and two input halos
CONV64_SMEM = 9 * 64 * 128 + 2 * 18 * 18 * 128


@functools.cache
def _conv64() -> Any:
    fn = cupy.RawKernel(_CONV64, "conv3x3_c64")
    fn.max_dynamic_shared_size_bytes = CONV64_SMEM
    return fn


@functools.cache
def _sm_count_and_cc() -> tuple[int, int]:
    dev = cupy.cuda.Device()
    return int(dev.attributes["MultiProcessorCount"]), int(dev.compute_capability)


#: output rows a warpgroup's tile has, and warpgroups a block, of the Hopper kernel
CONV64_WGMMA_SHAPE = (3, 3)  # the fastest variant measured


def _wgmma_smem(rows: int, groups: int) -> int:
    """Shared memory of the Hopper kernel: the weights, one input halo per warpgroup, the alignment slack."""
    return 9 * 64 * 128 + groups * (rows + 2) * 66 * 128 + 1024


@functools.cache
def _conv64_wgmma(rows: int = 4, groups: int = 2) -> Any:
    """The register-A Hopper kernel of one shape, or None where it does not compile or load."""
    try:
        return compile_sm90a(f"#define TH {rows}\n#define GROUPS {groups}\n" + _CONV64_WGMMA, "conv3x3_c64_wgmma",
                             _wgmma_smem(rows, groups))
    except Exception:  # noqa: BLE001
        return None


conv64_weights = gpu_kernels.conv64_weights


def conv3x3_c64(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float,
                hopper: bool | None = None) -> bool:
    """``act(conv3x3(x) + bias)`` into ``out``: physical fp16 NHWC ``x`` and ``out`` (N, H, W, 64), ``wt`` from
    :func:`conv64_weights`, ``bias`` fp16 or None. On an sm_90 GPU the wgmma kernel runs unless ``hopper`` is
    False (then, and elsewhere, the mma.sync one). False when the arrays are not contiguous and aligned."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous and _aligned(x, out, wt)):
        return False
    if bias is not None and not (bias.dtype == cupy.float16 and bias.flags.c_contiguous):
        return False
    n, h, w = x.shape[:3]
    sms, cc = _sm_count_and_cc()
    i32 = cupy.int32
    rows, groups = CONV64_WGMMA_SHAPE
    hopper_fn = _conv64_wgmma(rows, groups) if cc == 90 and hopper is not False else None
    if hopper_fn is not None:
        tiles = n * -(-h // rows) * -(-w // 64)
        hopper_fn[1]((min(-(-tiles // groups), sms),), (128 * groups,),
                     (x, wt, x if bias is None else bias, i32(bias is not None), out, i32(n), i32(h), i32(w),
                      i32(EPILOGUES[act]), cupy.float32(alpha)),
                     shared_mem=_wgmma_smem(rows, groups), stream=cupy.cuda.get_current_stream())
        return True
    tiles = n * -(-h // 16) * -(-w // 16)
    _conv64()((min(tiles, sms),), (256,),
              (x, wt, x if bias is None else bias, i32(bias is not None), out, i32(n), i32(h), i32(w),
               i32(EPILOGUES[act]), cupy.float32(alpha)), shared_mem=CONV64_SMEM)
    return True


_SS_COMMON = r"""
#define HWID (NP + 2)
#define HALO_PX ((TH + 2) * HWID)
#define HALO_BYTES (HALO_PX * 128)
#define HALO_STRIDE ((HALO_BYTES + 1023) / 1024 * 1024)  // buffers start 1024-aligned: the swizzle follows address bits
#define W_BYTES (9 * 64 * 128)
#define NACC (NP / 2)

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp16(unsigned dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void keepf(float& r) { asm volatile("" : "+f"(r) :: "memory"); }
__device__ __forceinline__ void wg_barrier(int id) { asm volatile("bar.sync %0, 128;\n" :: "r"(id) : "memory"); }

// shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart
__device__ __forceinline__ unsigned long long desc_of(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32)
           | (1ull << 62)
#if BASEOFF
           | ((unsigned long long)((addr >> 7) & 7) << 49)
#endif
        ;
}

__device__ __forceinline__ void load_halo(unsigned buf, const unsigned short* __restrict__ x, int tile, int H,
                                          int W, int tiles_x, int tiles_per_image, int t128) {
    int n = tile / tiles_per_image, t = tile % tiles_per_image;
    int y0 = (t / tiles_x) * TH - 1, x0 = (t % tiles_x) * NP - 1;
    const unsigned short* xn = x + (size_t)n * H * W * 64;
    const int c = t128 & 7;
    int p = t128 >> 3, hy = 0, hx = p;
    #pragma unroll 4
    for (; p < HALO_PX; p += 16) {
        int gy = y0 + hy, gx = x0 + hx;
        bool ok = (unsigned)gy < (unsigned)H && (unsigned)gx < (unsigned)W;
        const unsigned short* src = ok ? xn + ((size_t)gy * W + gx) * 64 + c * 8 : x;
        cp16(buf + p * 128 + ((c ^ (p & 7)) << 4), src, ok);
        hx += 16;
        while (hx >= HWID) { hx -= HWID; ++hy; }
    }
}

WGMMA_SS

extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_c64_ss(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
               const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
               int W, int act, float alpha) {
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_u32(smem), hbase = smem_u32(smem + W_BYTES + wg * HALO_STRIDE);
    const int tiles_x = (W + NP - 1) / NP, tiles_per_image = ((H + TH - 1) / TH) * tiles_x;
    const int total = N * tiles_per_image;
    for (int i = threadIdx.x; i < 9 * 64 * 8; i += blockDim.x) {
        int row = i >> 3, c = i & 7;
        cp16(wbase + row * 128 + ((c ^ (row & 7)) << 4), wt + row * 64 + c * 8, true);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    float bv[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned short u = has_bias ? bias[warp * 16 + (lane >> 2) + 8 * h] : (unsigned short)0;
        asm("cvt.f32.f16 %0, %1;\n" : "=f"(bv[h]) : "h"(u));
    }
    const unsigned long long wdesc = desc_of(wbase), hdesc = desc_of(hbase);
    const int stride = gridDim.x * GROUPS;
    int tile = blockIdx.x * GROUPS + wg;
    if (tile < total) load_halo(hbase, x, tile, H, W, tiles_x, tiles_per_image, t128);
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    for (; tile < total; tile += stride) {
        asm volatile("cp.async.wait_group 0;\n" ::);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        wg_barrier(1 + wg);
        float acc[TH * NACC];
        #pragma unroll
        for (int e = 0; e < TH * NACC; ++e) { acc[e] = 0.0f; keepf(acc[e]); }
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        // descriptors are linear in the address (>> 4, no carry below 256 KB): base + constant offsets
        #pragma unroll
        for (int dx = 0; dx < 3; ++dx)
            #pragma unroll
            for (int kc = 0; kc < 4; ++kc)
                #pragma unroll
                for (int dy = 0; dy < 3; ++dy) {
                    const unsigned long long da = wdesc + (unsigned)(((dy * 3 + dx) * 8192 + kc * 32) >> 4);
                    #pragma unroll
                    for (int r = 0; r < TH; ++r)
                        wgmma_ss(acc + r * NACC, da, hdesc + (unsigned)((((r + dy) * HWID + dx) * 128 + kc * 32) >> 4));
                }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        #pragma unroll
        for (int e = 0; e < TH * NACC; ++e) keepf(acc[e]);
        wg_barrier(1 + wg);  // the group's products are done with the halo: it becomes the staging area
        // accumulators (cout rows, pixel columns) -> staging [pixel][64 channels], transposed by stmatrix
        const int q = lane >> 3, k = lane & 7;
        #pragma unroll
        for (int r = 0; r < TH; ++r) {
            #pragma unroll
            for (int j0 = 0; j0 < NP / 8; j0 += 2) {
                unsigned pk[4];
                #pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int j = j0 + (m >> 1), h = m & 1;
                    float v0 = acc[r * NACC + 4 * j + 2 * h] + bv[h], v1 = acc[r * NACC + 4 * j + 2 * h + 1] + bv[h];
                    if (act == 1) { v0 = v0 < 0.0f ? 0.0f : v0; v1 = v1 < 0.0f ? 0.0f : v1; }
                    else if (act == 2) { v0 = v0 < 0.0f ? v0 * alpha : v0; v1 = v1 < 0.0f ? v1 * alpha : v1; }
                    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(pk[m]) : "f"(v1), "f"(v0));
                }
                const int pixel = r * NP + 8 * (j0 + (q >> 1)) + k, chunk = 2 * warp + (q & 1);
                const unsigned addr = hbase + pixel * 128 + ((chunk ^ (pixel & 7)) << 4);
                asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(addr), "r"(pk[0]), "r"(pk[1]), "r"(pk[2]), "r"(pk[3]) : "memory");
            }
        }
        wg_barrier(1 + wg);
        {
            int n = tile / tiles_per_image, t = tile % tiles_per_image;
            int oy = (t / tiles_x) * TH, ox = (t % tiles_x) * NP;
            unsigned short* yn = y + (size_t)n * H * W * 64;
            #pragma unroll 4
            for (int i = t128; i < TH * NP * 8; i += 128) {
                int pixel = i >> 3, c = i & 7, gy = oy + pixel / NP, gx = ox + pixel % NP;
                if (gy < H && gx < W) {
                    uint4 v;
                    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                                 : "r"(hbase + pixel * 128 + ((c ^ (pixel & 7)) << 4)));
                    *(uint4*)(yn + ((size_t)gy * W + gx) * 64 + c * 8) = v;
                }
            }
        }
        wg_barrier(1 + wg);  // staging read: the halo buffer takes the next tile
        if (tile + stride < total) load_halo(hbase, x, tile + stride, H, W, tiles_x, tiles_per_image, t128);
        asm volatile("cp.async.commit_group;\n" ::);
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
}
"""


def _ss_source(rows: int, pixels: int, groups: int, baseoff: int) -> str:
    """The swapped-operand Hopper kernel: weights as wgmma's A and input pixels as its B, both from shared memory
    (no ldmatrix, no A registers), N = ``pixels`` of one row, outputs transposed through stmatrix."""
    n = pixels // 2
    wrapper = wgmma_ss_wrapper(pixels, n)
    head = f"#define TH {rows}\n#define NP {pixels}\n#define GROUPS {groups}\n#define BASEOFF {baseoff}\n"
    return head + _SS_COMMON.replace("WGMMA_SS", wrapper)


def _halo_stride(rows: int, pixels: int) -> int:
    return -(-(rows + 2) * (pixels + 2) * 128 // 1024) * 1024


def _ss_smem(rows: int, pixels: int, groups: int) -> int:
    return 9 * 64 * 128 + groups * _halo_stride(rows, pixels) + 1024


@functools.cache
def _conv64_ss(rows: int, pixels: int, groups: int, baseoff: int) -> Any:
    return compile_sm90a(_ss_source(rows, pixels, groups, baseoff), "conv3x3_c64_ss", _ss_smem(rows, pixels, groups))


def conv3x3_c64_ss(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float,
                   variant: tuple[int, int, int, int]) -> bool:
    """The swapped-operand kernel ``variant`` = (rows, pixels, warpgroups, base offset on) into ``out``."""
    rows, pixels, groups, _ = variant
    n, h, w = x.shape[:3]
    sms = _sm_count_and_cc()[0]
    tiles = n * -(-h // rows) * -(-w // pixels)
    i32 = cupy.int32
    _conv64_ss(*variant)[1]((min(-(-tiles // groups), sms),), (128 * groups,),
                            (x, wt, x if bias is None else bias, i32(bias is not None), out, i32(n), i32(h), i32(w),
                             i32(EPILOGUES[act]), cupy.float32(alpha)),
                            shared_mem=_ss_smem(rows, pixels, groups), stream=cupy.cuda.get_current_stream())
    return True


_SH_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_c64_sh(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
               const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
               int W, int act, float alpha) {
    // GROUPS warpgroups share one double-buffered halo of TH = GROUPS * ROWS output rows x NP pixels: the next
    // tile's halo loads while this one computes; the buffer just computed becomes the staging area of the outputs
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7;
    const unsigned wbase = smem_u32(smem);
    const unsigned hb[2] = {smem_u32(smem + W_BYTES), smem_u32(smem + W_BYTES + HALO_STRIDE)};
    const int tiles_x = (W + NP - 1) / NP, tiles_per_image = ((H + TH - 1) / TH) * tiles_x;
    const int total = N * tiles_per_image;
    for (int i = threadIdx.x; i < 9 * 64 * 8; i += blockDim.x) {
        int row = i >> 3, c = i & 7;
        cp16(wbase + row * 128 + ((c ^ (row & 7)) << 4), wt + row * 64 + c * 8, true);
    }
    asm volatile("cp.async.commit_group;\n" ::);
    float bv[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned short u = has_bias ? bias[warp * 16 + (lane >> 2) + 8 * h] : (unsigned short)0;
        asm("cvt.f32.f16 %0, %1;\n" : "=f"(bv[h]) : "h"(u));
    }
    const unsigned long long wdesc = desc_of(wbase);
    int tile = blockIdx.x;
    if (tile < total) load_halo(hb[0], x, tile, H, W, tiles_x, tiles_per_image, threadIdx.x);
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    for (int it = 0; tile < total; tile += gridDim.x, ++it) {
        const unsigned cur = hb[it & 1], nxt = hb[(it + 1) & 1];
        if (tile + gridDim.x < total) load_halo(nxt, x, tile + gridDim.x, H, W, tiles_x, tiles_per_image, threadIdx.x);
        asm volatile("cp.async.commit_group;\n" ::);
        float acc[ROWS * NACC];
        #pragma unroll
        for (int e = 0; e < ROWS * NACC; ++e) { acc[e] = 0.0f; keepf(acc[e]); }
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        const unsigned long long hdesc = desc_of(cur + wg * ROWS * HWID * 128);
        #pragma unroll
        for (int dx = 0; dx < 3; ++dx)
            #pragma unroll
            for (int kc = 0; kc < 4; ++kc)
                #pragma unroll
                for (int dy = 0; dy < 3; ++dy) {
                    const unsigned long long da = wdesc + (unsigned)(((dy * 3 + dx) * 8192 + kc * 32) >> 4);
                    #pragma unroll
                    for (int r = 0; r < ROWS; ++r)
                        wgmma_ss(acc + r * NACC, da, hdesc + (unsigned)((((r + dy) * HWID + dx) * 128 + kc * 32) >> 4));
                }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        #pragma unroll
        for (int e = 0; e < ROWS * NACC; ++e) keepf(acc[e]);
        __syncthreads();  // every group is done with this halo: it becomes the staging area
        const int q = lane >> 3, k = lane & 7;
        #pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            #pragma unroll
            for (int j0 = 0; j0 < NP / 8; j0 += 2) {
                unsigned pk[4];
                #pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int j = j0 + (m >> 1), h = m & 1;
                    float v0 = acc[r * NACC + 4 * j + 2 * h] + bv[h], v1 = acc[r * NACC + 4 * j + 2 * h + 1] + bv[h];
                    if (act == 1) { v0 = v0 < 0.0f ? 0.0f : v0; v1 = v1 < 0.0f ? 0.0f : v1; }
                    else if (act == 2) { v0 = v0 < 0.0f ? v0 * alpha : v0; v1 = v1 < 0.0f ? v1 * alpha : v1; }
                    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(pk[m]) : "f"(v1), "f"(v0));
                }
                const int pixel = (wg * ROWS + r) * NP + 8 * (j0 + (q >> 1)) + k, chunk = 2 * warp + (q & 1);
                const unsigned addr = cur + pixel * 128 + ((chunk ^ (pixel & 7)) << 4);
                asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(addr), "r"(pk[0]), "r"(pk[1]), "r"(pk[2]), "r"(pk[3]) : "memory");
            }
        }
        __syncthreads();
        {
            int n = tile / tiles_per_image, t = tile % tiles_per_image;
            int oy = (t / tiles_x) * TH, ox = (t % tiles_x) * NP;
            unsigned short* yn = y + (size_t)n * H * W * 64;
            #pragma unroll 4
            for (int i = threadIdx.x; i < TH * NP * 8; i += blockDim.x) {
                int pixel = i >> 3, c = i & 7, gy = oy + pixel / NP, gx = ox + pixel % NP;
                if (gy < H && gx < W) {
                    uint4 v;
                    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                                 : "r"(cur + pixel * 128 + ((c ^ (pixel & 7)) << 4)));
                    *(uint4*)(yn + ((size_t)gy * W + gx) * 64 + c * 8) = v;
                }
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();  // the next halo is in, the staging area is read
    }
}
"""


def _sh_source(rows: int, pixels: int, groups: int) -> str:
    """The shared-halo variant: ``groups`` warpgroups of ``rows`` output rows each on one double-buffered halo."""
    n = pixels // 2
    head = (f"#define ROWS {rows}\n#define TH ({rows} * {groups})\n#define NP {pixels}\n#define GROUPS {groups}\n"
            "#define BASEOFF 0\n")
    common = _SS_COMMON[:_SS_COMMON.index("WGMMA_SS")]
    common = common.replace("int t128) {", "int t128) {  // t128: the thread's index in the block").replace(
        "p += 16)", "p += (int)blockDim.x / 8)").replace("hx += 16;", "hx += (int)blockDim.x / 8;")
    return head + common + wgmma_ss_wrapper(pixels, n) + _SH_KERNEL


def _sh_smem(rows: int, pixels: int, groups: int) -> int:
    return 9 * 64 * 128 + 2 * _halo_stride(rows * groups, pixels) + 1024


@functools.cache
def _conv64_sh(rows: int, pixels: int, groups: int) -> Any:
    return compile_sm90a(_sh_source(rows, pixels, groups), "conv3x3_c64_sh", _sh_smem(rows, pixels, groups))


def conv3x3_c64_sh(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float,
                   variant: tuple[int, int, int]) -> bool:
    """The shared-halo kernel ``variant`` = (rows a warpgroup, pixels, warpgroups) into ``out``."""
    rows, pixels, groups = variant
    n, h, w = x.shape[:3]
    sms = _sm_count_and_cc()[0]
    tiles = n * -(-h // (rows * groups)) * -(-w // pixels)
    i32 = cupy.int32
    _conv64_sh(*variant)[1]((min(tiles, sms),), (128 * groups,),
                            (x, wt, x if bias is None else bias, i32(bias is not None), out, i32(n), i32(h), i32(w),
                             i32(EPILOGUES[act]), cupy.float32(alpha)),
                            shared_mem=_sh_smem(rows, pixels, groups), stream=cupy.cuda.get_current_stream())
    return True


# the engine kernel's helpers (ring rows, swizzle, descriptors), without the shared weights; then the kernel
_ROWRS_KERNEL = r"""
extern "C" __global__ void __launch_bounds__(128 * GROUPS, 1)
conv3x3_c64_rowsrs(const unsigned short* __restrict__ x, const unsigned short* __restrict__ wt,
                 const unsigned short* __restrict__ bias, int has_bias, unsigned short* __restrict__ y, int N, int H,
                 int W, int act, float alpha) {
    // (the weights as wgmma's A operand held in registers for the whole kernel: only the input rows are read from
    // shared memory by the tensor cores)
    // each warpgroup walks strips of NP pixels down SEG rows at a time, keeping a ring of 5 input rows: the row
    // three below the one being computed loads while it computes; one output row = 36 wgmma m64nNPk16 with the
    // weights (A) and the ring's rows (B) both in shared memory, then transposed through stmatrix to a staging row
    extern __shared__ unsigned char smem_raw[];
    unsigned char* smem = (unsigned char*)(((size_t)smem_raw + 1023) & ~(size_t)1023);
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, wg = threadIdx.x >> 7, t128 = threadIdx.x & 127;
    const unsigned wbase = smem_u32(smem);
    const unsigned ring = wbase + W_BYTES + wg * WG_BYTES, stage = ring + RING * ROWB;
    // A fragments: warp w holds output channels 16w..16w+15 of every (tap, 16 input channels)
    unsigned wa[9][4][4];
    {
        const unsigned* w32 = (const unsigned*)wt;  // (tap, cout, cin) fp16 pairs
        const int co = warp * 16 + (lane >> 2), ci = (lane & 3) * 2;
        #pragma unroll
        for (int tap = 0; tap < 9; ++tap)
            #pragma unroll
            for (int kc = 0; kc < 4; ++kc) {
                wa[tap][kc][0] = w32[((tap * 64 + co) * 64 + kc * 16 + ci) / 2];
                wa[tap][kc][1] = w32[((tap * 64 + co + 8) * 64 + kc * 16 + ci) / 2];
                wa[tap][kc][2] = w32[((tap * 64 + co) * 64 + kc * 16 + ci + 8) / 2];
                wa[tap][kc][3] = w32[((tap * 64 + co + 8) * 64 + kc * 16 + ci + 8) / 2];
            }
    }
    float bv[2];
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned short u = has_bias ? bias[warp * 16 + (lane >> 2) + 8 * h] : (unsigned short)0;
        asm("cvt.f32.f16 %0, %1;\n" : "=f"(bv[h]) : "h"(u));
    }
    const int strips = (W + NP - 1) / NP, segs = (H + SEG - 1) / SEG, items = N * strips * segs;
    const int q = lane >> 3, kq = lane & 7;
    for (int item = blockIdx.x * GROUPS + wg; item < items; item += gridDim.x * GROUPS) {
        const int n = item / (strips * segs), rest = item % (strips * segs);
        const int y0 = (rest / strips) * SEG, x0 = (rest % strips) * NP - 1;
        const unsigned short* xn = x + (size_t)n * H * W * 64;
        unsigned short* yn = y + (size_t)n * H * W * 64;
        #pragma unroll
        for (int j = 0; j < 4; ++j) load_row(ring + j * ROWB, xn, y0 - 1 + j, x0, H, W, t128);
        for (int k = 0; k < SEG && y0 + k < H; ++k) {
            load_row(ring + ((k + 4) % RING) * ROWB, xn, y0 + k + 3, x0, H, W, t128);
            asm volatile("cp.async.wait_group 2;\n" ::);
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
            wg_barrier(1 + wg);
            unsigned long long rdesc[3];
            #pragma unroll
            for (int dy = 0; dy < 3; ++dy) rdesc[dy] = desc_of(ring + ((k + dy) % RING) * ROWB);
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
                        wgmma_rs(acc, wa[dy * 3 + dx][kc], rdesc[dy] + (unsigned)((dx * 128 + kc * 32) >> 4));
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            #pragma unroll
            for (int e = 0; e < NACC; ++e) keepf(acc[e]);
            #pragma unroll
            for (int j0 = 0; j0 < NP / 8; j0 += 2) {
                unsigned pk[4];
                #pragma unroll
                for (int m = 0; m < 4; ++m) {
                    const int j = j0 + (m >> 1), h = m & 1;
                    float v0 = acc[4 * j + 2 * h] + bv[h], v1 = acc[4 * j + 2 * h + 1] + bv[h];
                    if (act == 1) { v0 = v0 < 0.0f ? 0.0f : v0; v1 = v1 < 0.0f ? 0.0f : v1; }
                    else if (act == 2) { v0 = v0 < 0.0f ? v0 * alpha : v0; v1 = v1 < 0.0f ? v1 * alpha : v1; }
                    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(pk[m]) : "f"(v1), "f"(v0));
                }
                const int pixel = 8 * (j0 + (q >> 1)) + kq;
                asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(swz(stage + pixel * 128, 2 * warp + (q & 1))), "r"(pk[0]), "r"(pk[1]),
                                "r"(pk[2]), "r"(pk[3]) : "memory");
            }
            wg_barrier(1 + wg);
            const int gy = y0 + k;
            #pragma unroll 2
            for (int i = t128; i < NP * 8; i += 128) {
                int pixel = i >> 3, c = i & 7, gx = x0 + 1 + pixel;
                if (gx < W) {
                    uint4 v;
                    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(swz(stage + pixel * 128, c)));
                    *(uint4*)(yn + ((size_t)gy * W + gx) * 64 + c * 8) = v;
                }
            }
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
        wg_barrier(1 + wg);
    }
}
"""


def _rs_wrapper(pixels: int, n: int) -> str:
    """``wgmma_rs``: m64n{pixels}k16 with A from registers and B from shared memory."""
    return (
        "__device__ __forceinline__ void wgmma_rs(float* d, const unsigned* a, unsigned long long db) {\n"
        f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{n + 5}, 0;\\n"\n'
        f'                 "wgmma.mma_async.sync.aligned.m64n{pixels}k16.f32.f16.f16 '
        f'{{{", ".join(f"%{i}" for i in range(n))}}}, {{%{n}, %{n + 1}, %{n + 2}, %{n + 3}}}, %{n + 4}, p, 1, 1, 0;\\n}}\\n"\n'
        f'                 : {", ".join(f"{chr(34)}+f{chr(34)}(d[{i}])" for i in range(n))}\n'
        '                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));\n}\n')


def _rowrs_smem(pixels: int, groups: int) -> int:
    return groups * (5 * (pixels + 2) * 128 + pixels * 128) + 1024


@functools.cache
def _conv64_rowsrs(pixels: int, groups: int, seg: int) -> Any:
    head = gpu_kernels._CONV64[:gpu_kernels._CONV64.index('extern "C"')].replace(
        "WGMMA_SS", wgmma_ss_wrapper(pixels, pixels // 2))
    source = (f"#define NP {pixels}\n#define GROUPS {groups}\n#define SEG {seg}\n" + head
              + "#undef W_BYTES\n#define W_BYTES 0\n" + _rs_wrapper(pixels, pixels // 2) + _ROWRS_KERNEL)
    return compile_sm90a(source, "conv3x3_c64_rowsrs", _rowrs_smem(pixels, groups))


def conv3x3_c64_rowsrs(x: Any, wt: Any, bias: Any | None, out: Any, act: str | None, alpha: float,
                       variant: tuple[int, int, int]) -> bool:
    """The row-ring kernel with the weights in registers, ``variant`` = (pixels, warpgroups, rows a segment)."""
    pixels, groups, seg = variant
    n, h, w = x.shape[:3]
    sms = _sm_count_and_cc()[0]
    items = n * -(-h // seg) * -(-w // pixels)
    i32 = cupy.int32
    _conv64_rowsrs(*variant)[1]((min(-(-items // groups), sms),), (128 * groups,),
                                (x, wt, x if bias is None else bias, i32(bias is not None), out, i32(n), i32(h),
                                 i32(w), i32(EPILOGUES[act]), cupy.float32(alpha)),
                                shared_mem=_rowrs_smem(pixels, groups), stream=cupy.cuda.get_current_stream())
    return True


def main() -> None:
    from engine.backends import get_backend

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1080x1920")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--shapes", nargs="*", default=["3x3", "2x3", "2x4", "4x2"],
                    help="Hopper kernel variants: output rows a warpgroup x warpgroups a block")
    ap.add_argument("--ss", nargs="*", default=["4x64x3x0", "1x128x3x0", "2x128x2x0", "1x96x4x0"],
                    help="swapped-operand variants: rows x pixels x warpgroups x base-offset")
    ap.add_argument("--sh", nargs="*", default=["2x64x3", "1x96x4"],
                    help="shared-halo variants: rows a warpgroup x pixels x warpgroups")
    ap.add_argument("--rows", nargs="*", default=["96x2x8", "96x2x16", "64x3x8", "64x3x16", "96x2x34", "64x3x34"],
                    help="row-ring variants: pixels a strip x warpgroups x rows a segment")
    ap.add_argument("--rowsrs", nargs="*", default=["128x2x8", "96x2x8", "128x2x4", "64x2x8", "192x1x8"],
                    help="row-ring variants with the weights in registers: pixels x warpgroups x rows a segment")
    a = ap.parse_args()
    h, w = (int(v) for v in a.size.split("x"))
    backend = get_backend("cupy", notice=None)
    backend.activate()
    rng = np.random.default_rng(0)

    def timed(fn) -> float:
        for _ in range(3):
            fn()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(a.repeat):
            fn()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / a.repeat

    x = cupy.asarray(rng.standard_normal((a.batch, h, w, 64)).astype(np.float16))
    wt = cupy.asarray((rng.standard_normal((64, 64, 3, 3)) / 24.0).astype(np.float16))
    b = cupy.asarray(rng.standard_normal(64).astype(np.float16))
    ours, theirs = cupy.empty_like(x), cupy.empty_like(x)
    wl = cupy.ascontiguousarray(wt.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    w64 = conv64_weights(wt)
    runs = {
        "cuDNN (engine, tuned)": lambda: backend.cudnn.conv(x.transpose(0, 3, 1, 2), wl, b, theirs.transpose(0, 3, 1, 2),
                                                             (1, 1), (1, 1), (1, 1), "relu", {}),
        "conv3x3_c64 mma.sync": lambda: conv3x3_c64(x, w64, b, ours, "relu", 0.0, False),
    }
    if _sm_count_and_cc()[1] == 90:
        def hopper(shape: tuple[int, int]):
            def run() -> bool:
                globals()["CONV64_WGMMA_SHAPE"] = shape
                return conv3x3_c64(x, w64, b, ours, "relu", 0.0)
            return run

        for shape in [tuple(int(v) for v in s.split("x")) for s in a.shapes]:
            if _conv64_wgmma(*shape) is not None:
                runs[f"conv3x3_c64 wgmma {shape[0]} rows x {shape[1]} groups"] = hopper(shape)
            else:
                print(f"wgmma kernel {shape} does not compile or load")
        for v in a.ss:
            variant = tuple(int(t) for t in v.split("x"))
            try:
                _conv64_ss(*variant)
            except Exception as exc:  # noqa: BLE001
                print(f"ss kernel {v}: {type(exc).__name__}: {str(exc)[-800:]}")
                continue
            runs[f"conv3x3_c64 ss {v}"] = functools.partial(conv3x3_c64_ss, x, w64, b, ours, "relu", 0.0, variant)
        for v in a.sh:
            variant = tuple(int(t) for t in v.split("x"))
            try:
                _conv64_sh(*variant)
            except Exception as exc:  # noqa: BLE001
                print(f"sh kernel {v}: {type(exc).__name__}: {str(exc)[-800:]}")
                continue
            runs[f"conv3x3_c64 sh {v}"] = functools.partial(conv3x3_c64_sh, x, w64, b, ours, "relu", 0.0, variant)
        for v in a.rows:
            variant = tuple(int(t) for t in v.split("x"))
            if gpu_kernels._conv64(*variant) is None:
                print(f"rows kernel {v} does not compile or load")
                continue
            runs[f"engine conv3x3_c64 rows {v}"] = functools.partial(gpu_kernels.conv3x3_c64, x, w64, b, ours, "relu",
                                                                     0.0, variant)
        for v in a.rowsrs:
            variant = tuple(int(t) for t in v.split("x"))
            try:
                _conv64_rowsrs(*variant)
            except Exception as exc:  # noqa: BLE001
                print(f"rowsrs kernel {v}: {type(exc).__name__}: {str(exc)[-800:]}")
                continue
            runs[f"conv3x3_c64 rowsrs {v}"] = functools.partial(conv3x3_c64_rowsrs, x, w64, b, ours, "relu", 0.0,
                                                                 variant)
    runs["cuDNN (engine, tuned)"]()
    print(f"64 -> 64 3x3 + bias + ReLU, {a.batch} x {h} x {w}, fp16 NHWC")
    for name, fn in list(runs.items())[1:]:
        ours[...] = cupy.nan
        fn()
        cupy.cuda.get_current_stream().synchronize()
        diff = float(cupy.abs(ours.astype(cupy.float32) - theirs.astype(cupy.float32)).max())
        scale = float(cupy.abs(theirs.astype(cupy.float32)).max())
        print(f"  {name}: max |ours - cuDNN| {diff:.4g} (max |out| {scale:.3g})")
    fn = _conv64()
    print(f"  mma.sync kernel: {fn.num_regs} registers, {fn.local_size_bytes} bytes of local memory a thread")
    flop = 2.0 * a.batch * h * w * 64 * 64 * 9
    for name, fn in runs.items():
        ms = timed(fn)
        print(f"  {name:24s} {ms * 1000:8.1f} us  {flop / ms / 1e9:6.0f} TFLOP/s")
    try:
        import torch
    except ImportError:
        return
    torch.backends.cudnn.benchmark = True
    tx = torch.as_tensor(x, device="cuda").permute(0, 3, 1, 2)
    tw = torch.as_tensor(wl, device="cuda")
    tb = torch.as_tensor(b, device="cuda")

    def torch_run() -> None:
        torch.relu_(torch.nn.functional.conv2d(tx, tw, tb, padding=1))

    for _ in range(3):
        torch_run()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(a.repeat):
        torch_run()
    e.record()
    e.synchronize()
    ms = s.elapsed_time(e) / a.repeat
    print(f"  {'PyTorch conv2d + relu_':24s} {ms * 1000:8.1f} us  {flop / ms / 1e9:6.0f} TFLOP/s")


if __name__ == "__main__":
    main()
