// The fused epilogues (activations) every kernel applies: layerlab_act(code, v, a, b), NaN passing
// through as in the unfused activations. Generated from engine/epilogues.py (python -m engine.epilogues
// --write): edit the table there, not this file.
#ifndef LAYERLAB_EPILOGUE_CUH
#define LAYERLAB_EPILOGUE_CUH
__device__ __forceinline__ float layerlab_unit(float g) { return g < 0.f ? 0.f : (g > 1.f ? 1.f : g); }
__device__ __forceinline__ float layerlab_clip10(float v) { return v < -10.f ? -10.f : (v > 10.f ? 10.f : v); }
__device__ __forceinline__ float layerlab_softplus(float v) { return fmaxf(v, 0.f) + log1pf(expf(-fabsf(v))); }
#define LAYERLAB_ACT_RELU 1
#define LAYERLAB_ACT_LEAKY_RELU 2
#define LAYERLAB_ACT_SIGMOID 3
#define LAYERLAB_ACT_TANH 4
#define LAYERLAB_ACT_CLAMP 5
#define LAYERLAB_ACT_HARDSWISH 6
#define LAYERLAB_ACT_HARD_SIGMOID 7
#define LAYERLAB_ACT_SILU 8
#define LAYERLAB_ACT_GELU 9
#define LAYERLAB_ACT_GELU_TANH 10
#define LAYERLAB_ACT_ELU 11
#define LAYERLAB_ACT_SOFTPLUS 12
#define LAYERLAB_ACT_MISH 13
__device__ __forceinline__ float layerlab_act(int code, float v, float a, float b) {
    switch (code) {
        case 1: return v < 0.f ? 0.f : v;  // relu
        case 2: return v < 0.f ? v * a : v;  // leaky_relu
        case 3: return 1.f / (1.f + expf(-v));  // sigmoid
        case 4: return tanhf(v);  // tanh
        case 5: return v < a ? a : (v > b ? b : v);  // clamp
        case 6: return v * layerlab_unit(v * (1.f / 6.f) + 0.5f);  // hardswish
        case 7: return layerlab_unit(v * a + b);  // hard_sigmoid
        case 8: return v / (1.f + expf(-v));  // silu
        case 9: return 0.5f * v * erfcf(-0.70710678118654752f * v);  // gelu
        case 10: return 0.5f * v * (1.f + tanhf(0.79788456080286536f * (layerlab_clip10(v) + 0.044715f * layerlab_clip10(v) * layerlab_clip10(v) * layerlab_clip10(v))));  // gelu_tanh
        case 11: return v > 0.f ? v : a * expm1f(v);  // elu
        case 12: return layerlab_softplus(v);  // softplus
        case 13: return v * tanhf(layerlab_softplus(v));  // mish
        default: return v;
    }
}
#endif
