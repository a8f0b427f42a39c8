// The fused epilogue every kernel applies to a float32 value: layerlab_act(code, v, a, b), where code numbers the
// activation (engine/backends/cuda/act.py keeps the same numbers) and a, b are its coefficients.
// 0 none, 1 relu, 2 leaky_relu (a: slope), 3 sigmoid, 4 tanh, 5 clamp (a: min, b: max), 6 hardswish,
// 7 hard_sigmoid (a: alpha, b: beta), 8 silu. NaN passes through as in the unfused activations.
#ifndef LAYERLAB_EPILOGUE_CUH
#define LAYERLAB_EPILOGUE_CUH
__device__ __forceinline__ float layerlab_act(int code, float v, float a, float b) {
    switch (code) {
        case 1: return v < 0.0f ? 0.0f : v;
        case 2: return v < 0.0f ? v * a : v;
        case 3: return 1.0f / (1.0f + expf(-v));
        case 4: return tanhf(v);
        case 5: return v < a ? a : (v > b ? b : v);
        case 6: { float t = v * (1.0f / 6.0f) + 0.5f; t = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t); return v * t; }
        case 7: { float t = v * a + b; return t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t); }
        case 8: return v / (1.0f + expf(-v));
        default: return v;
    }
}
#endif
