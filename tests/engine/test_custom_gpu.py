"""Custom layer CUDA kernels on the GPU (CuPy backend): the seed space-to-depth kernel against the built-in
layer (plain, with a fixed '!' block dimension, with stepping), an activation-like kernel in every format,
the Python code as the fallback on the GPU, compile errors with the user's line, CUDA-graph capture, and
consent. Run on the GPU machine; skipped elsewhere."""
from __future__ import annotations

import numpy as np
import pytest

from engine.custom import CONSENT, ConsentError, CudaVariant, CustomLayerDef
from engine.custom.layer import CustomCodeError
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS, FP32_NCHW, TensorFormat
from tests.engine.custom_cases import (  # noqa: F401 - no_consent: an autouse fixture
    S2D_CUDA,
    S2D_CUDA_FIXED,
    S2D_CUDA_STEP,
    S2D_LAUNCH,
    S2D_LAUNCH_FIXED,
    S2D_LAUNCH_STEP,
    net_with,
    no_consent,
    rand,
    run_custom,
    s2d,
    softsign,
)
from tests.harness import FORMAT_IDS, assert_close, backend_param, round_like, run_layer

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("code", "launch"), [(S2D_CUDA, S2D_LAUNCH), (S2D_CUDA_FIXED, S2D_LAUNCH_FIXED),
                                              (S2D_CUDA_STEP, S2D_LAUNCH_STEP)], ids=["plain", "fixed_z", "stepping"])
@pytest.mark.parametrize("dims", [(1, 3, 8, 12), (2, 5, 34, 70)], ids=["small", "odd_blocks"])
def test_seed_kernel_matches_the_builtin_space_to_depth(code: str, launch: str, dims: tuple[int, ...]) -> None:
    x = rand(*dims)
    defn = s2d(python=False, cuda=(CudaVariant(FP32_NCHW, code, launch),))
    got, net = run_custom(defn, x, FP32_NCHW, "cupy")
    expected, _, _ = run_layer("space_to_depth", {"block_size": 2, "mode": "DCR"}, [x], FP32_NCHW)
    np.testing.assert_array_equal(got, expected)
    assert net.backend.name == "cupy"


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_activation_like_kernel_in_every_format(fmt: TensorFormat) -> None:
    x = rand(2, 5, 13, 19, seed=3)
    got, _ = run_custom(softsign(python=False, cuda=True), x, fmt, "cupy", {"alpha": "0.75"})
    xr = round_like(x, fmt).astype(np.float64)
    assert_close(got, 0.75 * xr / (1 + np.abs(xr)), fmt, f"softsign kernel {fmt}")


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_python_code_runs_on_the_gpu_where_no_kernel_exists(fmt: TensorFormat, monkeypatch) -> None:
    # layers compute in the network's own layout (an fp16 NCHW network computes channels-last inside otherwise, where
    # this definition's kernel, an fp32 NCHW one labelled fp16 NHWC to show that it is not run, would be chosen)
    monkeypatch.setenv("LAYERLAB_GPU_LAYOUT", "strict")
    x = rand(1, 3, 8, 12, seed=4)
    defn = s2d(python=True, cuda=(CudaVariant(TensorFormat.parse("fp16 nhwc"), S2D_CUDA, S2D_LAUNCH),)
               if fmt != TensorFormat.parse("fp16 nhwc") else ())
    got, _ = run_custom(defn, x, fmt, "cupy")
    expected, _, _ = run_layer("space_to_depth", {"block_size": 2}, [x], fmt)
    assert_close(got, expected, fmt)


def test_kernels_are_captured_in_the_cuda_graph() -> None:
    fmt = TensorFormat.parse("fp16 nhwc")
    defn = softsign(python=False, cuda=True)
    model = net_with(defn, "1x4x16x16", {"alpha": "2"})
    CONSENT.grant([defn])
    net = Network(model, default_registry(), backend_param("cupy"), fmt)
    for i in range(4):
        x = rand(1, 4, 16, 16, seed=i)
        y = net.infer({"input": x})["output"]
        xr = round_like(x, fmt).astype(np.float64)
        assert_close(y, 2 * xr / (1 + np.abs(xr)), fmt, f"run {i}")
    assert net.graph_status.startswith("captured"), net.graph_status


def test_compile_errors_show_the_line_of_the_users_code() -> None:
    code = 'extern "C" __global__ void k_bad(float* out)\n{\n    out[0] = undefined_name;\n}\n'
    defn = CustomLayerDef("broken", cuda=(CudaVariant(FP32_NCHW, code, "k_bad<64>(out)"),))
    with pytest.raises(CustomCodeError) as info:
        run_custom(defn, rand(1, 1, 4, 4), FP32_NCHW, "cupy")
    msg = str(info.value)
    assert msg.startswith("custom layer broken: the CUDA kernel for fp32|nchw does not compile:")
    assert "line 3:" in msg and "undefined_name" in msg and "3 | out[0] = undefined_name;" in msg


def test_a_kernel_without_c_linkage_is_explained() -> None:
    code = "__global__ void k_cpp(float* out) { out[0] = 1.0f; }\n"
    defn = CustomLayerDef("mangled", cuda=(CudaVariant(FP32_NCHW, code, "k_cpp<64>(out)"),))
    with pytest.raises(CustomCodeError, match="declare it extern \"C\" __global__"):
        run_custom(defn, rand(1, 1, 4, 4), FP32_NCHW, "cupy")


def test_a_block_over_the_thread_limit_is_refused() -> None:
    code = S2D_CUDA
    defn = s2d(python=False, cuda=(CudaVariant(FP32_NCHW, code, "k_s2d<16,16,8!>(out, in, out.n, out.c, out.h, out.w)"),))
    with pytest.raises(Exception, match="2048 threads, more than the CUDA limit of 1024"):
        run_custom(defn, rand(1, 1, 4, 4), FP32_NCHW, "cupy")


def test_kernels_need_consent_on_the_gpu_too() -> None:
    defn = s2d(python=False, cuda=(CudaVariant(FP32_NCHW, S2D_CUDA, S2D_LAUNCH),))
    with pytest.raises(ConsentError, match="s2d"):
        run_custom(defn, rand(1, 1, 4, 4), FP32_NCHW, "cupy", consent=False)
