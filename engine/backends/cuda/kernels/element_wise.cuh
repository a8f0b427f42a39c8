// The element-wise kernel's arithmetic: act(a op b) in float32, NaN passing through as in the unfused activations.
// OP: 0 sum, 1 product, 2 sub, 3 max, 4 min; ACT: the epilogue's code (epilogue.cuh), coefficients alpha and beta.
#ifndef LAYERLAB_ELEMENT_WISE_CUH
#define LAYERLAB_ELEMENT_WISE_CUH
#include "epilogue.cuh"
template <int OP, int ACT>
__device__ __forceinline__ float layerlab_element_wise(float fa, float fb, float alpha, float beta) {
    float v;
    switch (OP) {
        case 0: v = fa + fb; break;
        case 1: v = fa * fb; break;
        case 2: v = fa - fb; break;
        case 3: v = (fa > fb || fa != fa) ? fa : fb; break;
        default: v = (fa < fb || fa != fa) ? fa : fb; break;
    }
    return layerlab_act(ACT, v, alpha, beta);
}
#endif
