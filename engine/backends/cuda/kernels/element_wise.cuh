// The element-wise kernel's arithmetic: act(a op b) in float32, NaN passing through as in the unfused activations.
// OP: 0 sum, 1 product, 2 sub, 3 max, 4 min; ACT: 0 none, 1 relu, 2 leaky_relu (alpha), 3 sigmoid, 4 tanh.
#ifndef LAYERLAB_ELEMENT_WISE_CUH
#define LAYERLAB_ELEMENT_WISE_CUH
template <int OP, int ACT>
__device__ __forceinline__ float layerlab_element_wise(float fa, float fb, float alpha) {
    float v;
    switch (OP) {
        case 0: v = fa + fb; break;
        case 1: v = fa * fb; break;
        case 2: v = fa - fb; break;
        case 3: v = (fa > fb || fa != fa) ? fa : fb; break;
        default: v = (fa < fb || fa != fa) ? fa : fb; break;
    }
    switch (ACT) {
        case 1: if (v < 0.0f) v = 0.0f; break;
        case 2: if (v < 0.0f) v *= alpha; break;
        case 3: v = 1.0f / (1.0f + expf(-v)); break;
        case 4: v = tanhf(v); break;
        default: break;
    }
    return v;
}
#endif
