#include "upsample.cuh"

// NCHW: one block row of threads per output row of one channel plane (grid z: image x channel, y: output row), one
// output value a thread, consecutive threads on consecutive columns (coalesced); the row's sources are worked out
// once per thread, without the divisions of the element-wise kernel.
__device__ __forceinline__ float as_float(float v) { return v; }
__device__ __forceinline__ float as_float(__half v) { return __half2float(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }

template <typename T>
__global__ void upcat_nchw(const T* __restrict__ x, const T* __restrict__ skip, T* __restrict__ y, int H, int W,
                           int c0, int c1, int Ho, int Wo, int fh, int fw, int bilinear) {
    const int ow = blockIdx.x * blockDim.x + threadIdx.x;
    if (ow >= Wo) return;
    const int plane = blockIdx.z, oh = blockIdx.y, ct = c0 + c1;
    const int c = plane % ct, n = plane / ct;
    T* out = y + ((size_t)plane * Ho + oh) * Wo + ow;
    if (c >= c0) {
        *out = skip[(((size_t)n * c1 + (c - c0)) * Ho + oh) * Wo + ow];
        return;
    }
    const T* img = x + ((size_t)n * c0 + c) * H * W;
    int y0, y1, x0, x1;
    float ly, lx;
    source(oh, fh, H, bilinear, &y0, &y1, &ly);
    source(ow, fw, W, bilinear, &x0, &x1, &lx);
    const T* r0 = img + (size_t)y0 * W;
    if (!bilinear) {
        *out = r0[x0];
        return;
    }
    const T* r1 = img + (size_t)y1 * W;
    store(out, (1.0f - ly) * ((1.0f - lx) * as_float(r0[x0]) + lx * as_float(r0[x1]))
               + ly * ((1.0f - lx) * as_float(r1[x0]) + lx * as_float(r1[x1])));
}
