// Shared by the upsampling kernels: the source rows/columns of output index o for an integer factor f (nearest, or
// bilinear with half-pixel centres: the two neighbours and the weight of the second).
#ifndef LAYERLAB_UPSAMPLE_CUH
#define LAYERLAB_UPSAMPLE_CUH
#include <cuda_fp16.h>
__device__ __forceinline__ void source(int o, int f, int n_in, int bilinear, int* i0, int* i1, float* frac) {
    if (!bilinear) {
        int i = o / f;
        *i0 = *i1 = i < n_in ? i : n_in - 1;
        *frac = 0.0f;
        return;
    }
    float s = fmaxf((o + 0.5f) / f - 0.5f, 0.0f);
    int a = (int)s;
    a = a < n_in ? a : n_in - 1;
    *i0 = a;
    *i1 = a + 1 < n_in ? a + 1 : n_in - 1;
    *frac = fminf(s - a, 1.0f);
}
#endif
