"""resnet18's convolution shapes on the CPU through each kernel path that can take them (the panel micro-kernel,
im2col + BLAS, Winograd for 3x3 stride 1), measured in turns in one process (best of three rounds of 20-run
medians), and the path the backend picks. Not collected by the test run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m tests.bench.bench_cpu_panels
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m tests.bench.bench_cpu_panels --residual

``--residual`` times a ResNet block's second convolution with its residual sum + ReLU: fused into the kernel
(conv_bn_sum's path) against the convolution followed by the element-wise pass (the unfused chain's).

``--pointwise`` times the model zoo's 1x1 convolutions with their activations (convnext_tiny's with GELU,
efficientnet_b0's with SiLU, mobilenet_v3_large's with hard-swish, mobilenet_v2's with ReLU6, projections with
none) through im2col + BLAS and through the panels, and the path the backend picks.

    python -m tests.bench.bench_cpu_panels --pointwise
"""
from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from engine.backends.cpu import elementwise, im2col, microkernel, ops, panels, runtime, winograd

#: (input channels, outputs, image size, kernel, stride): resnet18's layers and its stem
SHAPES = [(64, 64, 56, 3, 1), (64, 128, 56, 3, 2), (64, 128, 56, 1, 2), (128, 128, 28, 3, 1), (128, 256, 28, 3, 2),
          (128, 256, 28, 1, 2), (256, 256, 14, 3, 1), (256, 512, 14, 3, 2), (256, 512, 14, 1, 2), (512, 512, 7, 3, 1),
          (3, 64, 224, 7, 2)]


def _median_ms(f: Callable[[], object], n: int = 20) -> float:
    for _ in range(3):
        f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def _operands(rng: np.random.Generator, c: int, k: int, hw: int, ks: int, st: int) -> tuple[np.ndarray, ...]:
    x = rng.standard_normal((1, hw, hw, c)).astype(np.float32).transpose(0, 3, 1, 2)
    w = rng.standard_normal((k, c, ks, ks)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    ho = (hw + 2 * (ks // 2) - ks) // st + 1
    out = np.empty((1, ho, ho, k), np.float32).transpose(0, 3, 1, 2)
    return x, w, b, out


def _paths(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray, st: int,
           residual: np.ndarray | None = None) -> dict[str, Callable[[], None]]:
    ks = w.shape[2]
    geometry = ((st, st), (ks // 2, ks // 2), (1, 1), 1, 0.0)
    paths = {"im2col": im2col.conv_nhwc_plan(x, im2col.gemm_weights(w), (ks, ks), b, out, *geometry, residual)}
    if microkernel.panels_available() and w.shape[0] % microkernel.PANEL == 0:
        paths["panels"] = panels.conv_panels_plan(x, panels.panel_weights(w), (ks, ks), b, out, *geometry, residual)
    if ks == 3 and st == 1:
        paths["winograd"] = winograd.winograd_plan(x, winograd.transform_weights(w, True), b, out, (1, 1), 1, 0.0, residual)
    return paths


def _chosen(x: np.ndarray, w: np.ndarray, b: np.ndarray, out: np.ndarray, st: int) -> str:
    ks = w.shape[2]
    problem = ops.ConvProblem.of(x, w, b, out, (st, st), (ks // 2, ks // 2), (1, 1), 1, 0.0, None, None)
    return next((c.name for c in ops.CONV2D_CANDIDATES if c.applies(problem)), "none")


def paths() -> None:
    rng = np.random.default_rng(0)
    print(f"micro-kernel: {microkernel.PANEL_ROWS} rows x {microkernel.PANEL} channels" if microkernel.panels_available()
          else "no micro-kernel on this CPU")
    for c, k, hw, ks, st in SHAPES:
        x, w, b, out = _operands(rng, c, k, hw, ks, st)
        with runtime.single_threaded_blas():
            runs = _paths(x, w, b, out, st)
            res: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(3):
                for name, f in runs.items():
                    res[name].append(_median_ms(f))
        times = "   ".join(f"{name} {min(v):7.3f}" for name, v in res.items())
        print(f"{c:4d} -> {k:4d}  {hw:3d}x{hw:<3d} {ks}x{ks} stride {st}: {times} ms   (backend: {_chosen(x, w, b, out, st)})")


def residual() -> None:
    rng = np.random.default_rng(0)
    for c, hw in ((64, 56), (128, 28), (256, 14), (512, 7)):
        x, w, b, out = _operands(rng, c, c, hw, 3, 1)
        r = rng.standard_normal(out.shape).astype(np.float32)
        r = np.ascontiguousarray(r.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        summed = np.empty_like(r)
        with runtime.single_threaded_blas():
            chosen = _chosen(x, w, b, out, 1)
            conv = _paths(x, w, b, out, 1)[chosen]
            fused = _paths(x, w, b, out, 1, r)[chosen]
            nhwc = (out.transpose(0, 2, 3, 1), r.transpose(0, 2, 3, 1), summed.transpose(0, 2, 3, 1))

            def separate(conv: Callable[[], None] = conv, nhwc: tuple[np.ndarray, ...] = nhwc) -> None:
                conv()
                elementwise.element_wise(*nhwc, 0, 1)

            res: dict[str, list[float]] = {"fused": [], "conv + add": [], "conv alone": []}
            for _ in range(4):
                res["fused"].append(_median_ms(fused))
                res["conv + add"].append(_median_ms(separate))
                res["conv alone"].append(_median_ms(conv))
        times = "   ".join(f"{name} {min(v):7.3f}" for name, v in res.items())
        print(f"{c:4d} -> {c:4d}  {hw:3d}x{hw:<3d} 3x3 + residual + ReLU ({chosen}): {times} ms")


#: (input channels, outputs, image size, activation): the zoo's 1x1 convolutions of stride 1
POINTWISE_SHAPES = [(96, 384, 56, "gelu"), (384, 96, 56, None), (192, 768, 28, "gelu"), (768, 192, 28, None),
                    (384, 1536, 14, "gelu"), (1536, 384, 14, None), (768, 3072, 7, "gelu"), (3072, 768, 7, None),
                    (16, 96, 112, "silu"), (96, 24, 56, None), (24, 144, 56, "silu"), (40, 240, 28, "silu"),
                    (80, 480, 14, "silu"), (192, 1152, 7, "silu"), (40, 240, 28, "hardswish"),
                    (80, 200, 14, "hardswish"), (160, 960, 7, "hardswish"), (16, 96, 112, "relu6"),
                    (24, 144, 56, "relu6")]


def pointwise() -> None:
    from engine.backends.cpu.epilogue import FUSED_EPILOGUES, epilogue_alpha  # noqa: PLC0415

    rng = np.random.default_rng(0)
    for c, k, hw, act in POINTWISE_SHAPES:
        x, w, b, out = _operands(rng, c, k, hw, 1, 1)
        epilogue = "clamp" if act == "relu6" else act
        code = FUSED_EPILOGUES[epilogue]
        alpha = epilogue_alpha(epilogue, {"min": 0.0, "max": 6.0} if act == "relu6" else {})
        geometry = ((1, 1), (0, 0), (1, 1), code, alpha)
        runs = {"im2col": im2col.conv_nhwc_plan(x, im2col.gemm_weights(w), (1, 1), b, out, *geometry)}
        if microkernel.panels_available():
            runs["panels"] = panels.conv_panels_plan(x, panels.panel_weights(w), (1, 1), b, out, *geometry)
        problem = ops.ConvProblem.of(x, w, b, out, *geometry, None, None)
        chosen = next((row.name for row in ops.CONV2D_CANDIDATES if row.applies(problem)), "none")
        with runtime.single_threaded_blas():
            res: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(3):
                for name, f in runs.items():
                    res[name].append(_median_ms(f))
        flops = 2e-6 * c * k * hw * hw
        times = "   ".join(f"{name} {min(v):7.3f} ms ({flops / min(v):5.1f} GFLOP/s)" for name, v in res.items())
        print(f"{c:4d} -> {k:4d}  {hw:3d}x{hw:<3d} {act or 'none':9s}: {times}   (backend: {chosen})")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    residual() if "--residual" in args else pointwise() if "--pointwise" in args else paths()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
