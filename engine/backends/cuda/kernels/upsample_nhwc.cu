#include "upsample.cuh"

// NHWC, every thread moving 16 bytes: 8 fp16 channels (uint4) or 4 fp32 ones (float4) of one pixel
__device__ __forceinline__ uint4 blend(uint4 a, uint4 b, uint4 c, uint4 d, float lx, float ly) {
    const __half2 *ha = (const __half2*)&a, *hb = (const __half2*)&b, *hc = (const __half2*)&c, *hd = (const __half2*)&d;
    uint4 r;
    __half2* hr = (__half2*)&r;
    #pragma unroll
    for (int k = 0; k < 4; ++k) {
        float2 fa = __half22float2(ha[k]), fb = __half22float2(hb[k]), fc = __half22float2(hc[k]), fd = __half22float2(hd[k]);
        float2 o;
        o.x = (1.0f - ly) * ((1.0f - lx) * fa.x + lx * fb.x) + ly * ((1.0f - lx) * fc.x + lx * fd.x);
        o.y = (1.0f - ly) * ((1.0f - lx) * fa.y + lx * fb.y) + ly * ((1.0f - lx) * fc.y + lx * fd.y);
        hr[k] = __float22half2_rn(o);
    }
    return r;
}

__device__ __forceinline__ float4 blend(float4 a, float4 b, float4 c, float4 d, float lx, float ly) {
    float4 r;
    r.x = (1.0f - ly) * ((1.0f - lx) * a.x + lx * b.x) + ly * ((1.0f - lx) * c.x + lx * d.x);
    r.y = (1.0f - ly) * ((1.0f - lx) * a.y + lx * b.y) + ly * ((1.0f - lx) * c.y + lx * d.y);
    r.z = (1.0f - ly) * ((1.0f - lx) * a.z + lx * b.z) + ly * ((1.0f - lx) * c.z + lx * d.z);
    r.w = (1.0f - ly) * ((1.0f - lx) * a.w + lx * b.w) + ly * ((1.0f - lx) * c.w + lx * d.w);
    return r;
}

template <typename V>
__global__ void upcat_nhwc_vec(const V* __restrict__ x, const V* __restrict__ skip, V* __restrict__ y, int H, int W,
                               int c0, int c1, int Ho, int Wo, int fh, int fw, int bilinear, unsigned int total) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    unsigned int ct = c0 + c1, v = i % ct, p = i / ct;
    if (v >= (unsigned int)c0) {
        y[i] = skip[p * c1 + (v - c0)];
        return;
    }
    unsigned int ow = p % Wo, t = p / Wo, oh = t % Ho, n = t / Ho;
    int y0, y1, x0, x1;
    float ly, lx;
    source(oh, fh, H, bilinear, &y0, &y1, &ly);
    source(ow, fw, W, bilinear, &x0, &x1, &lx);
    const V* img = x + (size_t)n * H * W * c0 + v;
    V a = img[((size_t)y0 * W + x0) * c0];
    if (!bilinear) {
        y[i] = a;
        return;
    }
    y[i] = blend(a, img[((size_t)y0 * W + x1) * c0], img[((size_t)y1 * W + x0) * c0], img[((size_t)y1 * W + x1) * c0],
                 lx, ly);
}
