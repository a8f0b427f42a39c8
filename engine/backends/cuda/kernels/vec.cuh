// Loads and stores of VEC consecutive values (fp16 or fp32) as float32, in one memory access where VEC allows
// (fp16: 4 values = 8 bytes, 2 = 4 bytes; fp32: 4 values = 16 bytes, 2 = 8 bytes). The address must be aligned to
// the access (VEC * sizeof(T) bytes).
#ifndef LAYERLAB_VEC_CUH
#define LAYERLAB_VEC_CUH
#include <cuda_fp16.h>

template <typename T, int VEC>
__device__ __forceinline__ void layerlab_load(const T* __restrict__ p, float* v) {
    if constexpr (sizeof(T) == 2 && VEC == 4) {
        uint2 u = *(const uint2*)p;
        float2 a = __half22float2(*(const __half2*)&u.x), b = __half22float2(*(const __half2*)&u.y);
        v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
    } else if constexpr (sizeof(T) == 2 && VEC == 2) {
        float2 a = __half22float2(*(const __half2*)p);
        v[0] = a.x; v[1] = a.y;
    } else if constexpr (sizeof(T) == 4 && VEC == 4) {
        float4 a = *(const float4*)p;
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    } else if constexpr (sizeof(T) == 4 && VEC == 2) {
        float2 a = *(const float2*)p;
        v[0] = a.x; v[1] = a.y;
    } else {
        #pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = (float)p[k];
    }
}

template <typename T, int VEC>
__device__ __forceinline__ void layerlab_store(T* __restrict__ p, const float* v) {
    if constexpr (sizeof(T) == 2 && VEC == 4) {
        __half2 a = __floats2half2_rn(v[0], v[1]), b = __floats2half2_rn(v[2], v[3]);
        uint2 u;
        u.x = *(const unsigned int*)&a; u.y = *(const unsigned int*)&b;
        *(uint2*)p = u;
    } else if constexpr (sizeof(T) == 2 && VEC == 2) {
        *(__half2*)p = __floats2half2_rn(v[0], v[1]);
    } else if constexpr (sizeof(T) == 4 && VEC == 4) {
        *(float4*)p = make_float4(v[0], v[1], v[2], v[3]);
    } else if constexpr (sizeof(T) == 4 && VEC == 2) {
        *(float2*)p = make_float2(v[0], v[1]);
    } else {
        #pragma unroll
        for (int k = 0; k < VEC; ++k) p[k] = (T)v[k];
    }
}
#endif
