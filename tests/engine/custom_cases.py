"""Custom layer definitions the custom layer tests share (engine, GPU and designer tests)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.custom import CONSENT, CudaVariant, CustomInput, CustomLayerDef, CustomParam
from engine.model import Model
from engine.tensor import FORMATS, Layout, Precision, TensorFormat


@pytest.fixture(autouse=True)
def no_consent():
    """No consent to run custom layer code before or after a test (a module importing this uses it)."""
    CONSENT.clear()
    yield
    CONSENT.clear()


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


S2D_SHAPE = "in.n, in.c * 4, in.h / 2, in.w / 2"

S2D_PYTHON = '''def forward(xp, inputs, params):
    x = inputs[0]
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // 2, 2, w // 2, 2)
    return t.transpose(0, 3, 5, 1, 2, 4).reshape(n, c * 4, h // 2, w // 2)
'''

# DCR space-to-depth, NCHW fp32; one thread per output element (x: w, y: h, z: n * C + c)
S2D_CUDA = '''extern "C" __global__ void k_s2d(float* out, const float* in, int N, int C, int H, int W)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= W || y >= H || z >= N * C) return;
    int n = z / C, oc = z % C, ci = C / 4;
    int c = oc % ci, b = oc / ci, by = b / 2, bx = b % 2;
    out[((n * C + oc) * H + y) * W + x] = in[((n * ci + c) * (2 * H) + 2 * y + by) * (2 * W) + 2 * x + bx];
}
'''
S2D_LAUNCH = "k_s2d<16,16,1>[1,1,1,1](out, in[0], out.n, out.c, out.h, out.w){}"

# the same with a fixed Z block: the grid's Z is 1 and each thread loops over n * C itself
S2D_CUDA_FIXED = '''extern "C" __global__ void k_s2d(float* out, const float* in, int N, int C, int H, int W)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    int ci = C / 4;
    for (int z = threadIdx.z; z < N * C; z += blockDim.z) {
        int n = z / C, oc = z % C;
        int c = oc % ci, b = oc / ci, by = b / 2, bx = b % 2;
        out[((n * C + oc) * H + y) * W + x] = in[((n * ci + c) * (2 * H) + 2 * y + by) * (2 * W) + 2 * x + bx];
    }
}
'''
S2D_LAUNCH_FIXED = "k_s2d<16,8,4!>(out, in, out.n, out.c, out.h, out.w)"

# the same with stepping [1,1,1,2]: each thread computes 2 neighbouring outputs along W
S2D_CUDA_STEP = '''extern "C" __global__ void k_s2d(float* out, const float* in, int N, int C, int H, int W)
{
    int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * 2;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (y >= H || z >= N * C) return;
    int n = z / C, oc = z % C, ci = C / 4;
    int c = oc % ci, b = oc / ci, by = b / 2, bx = b % 2;
    for (int x = x0; x < x0 + 2 && x < W; ++x)
        out[((n * C + oc) * H + y) * W + x] = in[((n * ci + c) * (2 * H) + 2 * y + by) * (2 * W) + 2 * x + bx];
}
'''
S2D_LAUNCH_STEP = "k_s2d<16,16,1>[1,1,1,2](out, in, out.n, out.c, out.h, out.w)"


def s2d(python: bool = True, cuda: tuple[CudaVariant, ...] = (), name: str = "s2d") -> CustomLayerDef:
    return CustomLayerDef(name, "Space to depth (custom)", documentation="Moves 2x2 pixel blocks into channels.",
                          inputs=(CustomInput("input"),), shape=S2D_SHAPE, python=S2D_PYTHON if python else "",
                          cuda=cuda)


SOFTSIGN_PYTHON = '''def forward(xp, inputs, params):
    x = inputs[0]
    return params["alpha"] * x / (1 + xp.abs(x))
'''


def softsign_cuda(fmt: TensorFormat) -> CudaVariant:
    """An activation-like kernel for one format: y = alpha * x / (1 + |x|), one thread per element."""
    half = fmt.precision is Precision.FP16
    t = "__half" if half else "float"
    load = "__half2float(in[i])" if half else "in[i]"
    store = "__float2half(v)" if half else "v"
    index = ("((z * H) + y) * W + x" if fmt.layout is Layout.NCHW
             else "(((z / C) * H + y) * W + x) * C + z % C")
    code = f'''extern "C" __global__ void k_softsign({t}* out, const {t}* in, int NC, int C, int H, int W, float alpha)
{{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= W || y >= H || z >= NC) return;
    int i = {index};
    float u = {load};
    float v = alpha * u / (1.0f + fabsf(u));
    out[i] = {store};
}}
'''
    return CudaVariant(fmt, code, "k_softsign<32,8,1>(out, in[0], out.n * out.c, out.c, out.h, out.w, alpha)")


def softsign(python: bool = True, cuda: bool = False) -> CustomLayerDef:
    return CustomLayerDef("softsign", "Scaled softsign", category="Activations (custom)",
                          documentation="alpha * x / (1 + |x|), elementwise.",
                          inputs=(CustomInput("input"),), params=(CustomParam("alpha", "float", "1.5", "0", "10"),),
                          shape="in.n, in.c, in.h, in.w", python=SOFTSIGN_PYTHON if python else "",
                          cuda=tuple(softsign_cuda(f) for f in FORMATS) if cuda else ())


def net_with(defn: CustomLayerDef, dims: str = "1x3x8x12", params: dict[str, str] | None = None) -> Model:
    """input -> the custom layer -> output."""
    m = Model("custom_net")
    m.set_custom_layer(defn.name, defn.to_xml())
    m.add_layer("input", "input", {"dimensions": dims})
    m.add_layer(defn.type, "custom", params or {}, inputs=["input"])
    m.add_layer("output", "output", inputs=["custom"])
    m.clear_undo()
    return m


def run_custom(defn: CustomLayerDef, x, fmt: TensorFormat, backend: str = "numpy",
               params: dict[str, str] | None = None, consent: bool = True):
    """Run input -> custom layer -> output on a host NCHW fp32 tensor; returns (output NCHW fp32, network)."""
    from engine.network import Network
    from engine.plugins import default_registry
    from tests.harness import backend_param

    model = net_with(defn, "x".join(map(str, x.shape)), params)
    if consent:
        CONSENT.grant([defn])
    net = Network(model, default_registry(), backend_param(backend), fmt)
    net.set_input("input", x.astype(np.float32))
    net.run()
    return net.output("output"), net
