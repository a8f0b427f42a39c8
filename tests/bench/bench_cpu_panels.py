"""resnet18's convolution shapes on the CPU through the panel micro-kernel and through the path a CPU without it
takes (im2col or Winograd + BLAS), measured in turns in one process (best of three rounds of 20-run medians).
Not collected by the test run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m tests.bench.bench_cpu_panels
"""
from __future__ import annotations

import functools
import statistics
import time
from typing import Any

import numpy as np

import engine.backends.cpu_kernels as ck
from engine.backends import get_backend

#: (input channels, outputs, image size, kernel, stride): resnet18's layers from the 28x28 stage on, and its stem
SHAPES = [(512, 512, 7, 3, 1), (256, 256, 14, 3, 1), (256, 512, 14, 3, 2), (128, 256, 28, 3, 2),
          (256, 512, 14, 1, 2), (128, 128, 28, 3, 1), (3, 64, 224, 7, 2)]


def _median_ms(f: Any, n: int = 20) -> float:
    for _ in range(3):
        f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def main() -> int:
    be = get_backend("numpy", notice=None)
    conv = be.kernel("conv2d")
    rng = np.random.default_rng(0)
    real = ck.panels_available
    print(f"micro-kernel: {ck.PANEL_ROWS} rows x {ck.PANEL} channels" if real() else "no micro-kernel on this CPU")
    try:
        for c, k, hw, ks, st in SHAPES:
            x = rng.standard_normal((1, hw, hw, c)).astype(np.float32).transpose(0, 3, 1, 2)
            w = rng.standard_normal((k, c, ks, ks)).astype(np.float32)
            ho = (hw + 2 * (ks // 2) - ks) // st + 1
            out = np.empty((1, ho, ho, k), np.float32).transpose(0, 3, 1, 2)
            res: dict[bool, list[float]] = {True: [], False: []}
            with ck.single_threaded_blas():
                for _ in range(3):
                    for on in (True, False):
                        ck.panels_available = (lambda: True) if on else (lambda: False)  # type: ignore[assignment]
                        args = (x, w, None, out, (st, st), (ks // 2, ks // 2), (1, 1), 1, "relu", {}, {})
                        res[on].append(_median_ms(functools.partial(conv, *args)))
            print(f"{c:4d} -> {k:4d}  {hw:3d}x{hw:<3d} {ks}x{ks} stride {st}: panels {min(res[True]):7.3f} ms   "
                  f"without {min(res[False]):7.3f} ms")
    finally:
        ck.panels_available = real  # type: ignore[assignment]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
