// out = x * act(g): every value of channel c of image n scaled by the gate g[n, c] after the gate's epilogue (a
// squeeze-excitation block's last step), in one pass. A thread handles VEC consecutive values of the memory
// layout (NHWC: VEC channels of one pixel; NCHW: VEC pixels of one channel plane).
#include <cuda_fp16.h>
#include "epilogue.cuh"
#include "vec.cuh"

template <typename T, int VEC, int NHWC>
__global__ void channel_scale(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ y, int C, int HW,
                              int act, float ca, float cb, unsigned int total) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    size_t e = (size_t)i * VEC;
    float v[VEC];
    layerlab_load<T, VEC>(x + e, v);
    if (NHWC) {
        size_t c = e % C, n = e / ((size_t)HW * C);
        const T* gate = g + n * C + c;
        #pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] *= layerlab_act(act, (float)gate[k], ca, cb);
    } else {
        float s = layerlab_act(act, (float)g[e / HW], ca, cb);
        #pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] *= s;
    }
    layerlab_store<T, VEC>(y + e, v);
}
