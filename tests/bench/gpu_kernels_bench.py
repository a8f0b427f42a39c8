"""Times LayerLab's own CUDA kernels against what they replace, on unet 512 and resnet18 shapes:

    python -m tests.bench.gpu_kernels_bench

- upsample + concatenation as one fused pass (16-byte vectors) / the scalar kernel / upsample then a copy
  into the channel slices (what the unfused layers do);
- the direct few-channel convolution / cuDNN on channel-padded copies."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _time_us(fn: Callable[[], Any], repeat: int = 200) -> float:
    import cupy

    for _ in range(5):
        fn()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(repeat):
        fn()
    stop.record()
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) * 1e3 / repeat


def _upcat_row(rng: Any, c0: int, c1: int, h: int) -> str:
    import cupy

    from engine.backends.cuda import upsample

    x = cupy.asarray(rng.standard_normal((1, h, h, c0)), dtype=cupy.float16)
    skip = cupy.asarray(rng.standard_normal((1, 2 * h, 2 * h, c1)), dtype=cupy.float16)
    out = cupy.empty((1, 2 * h, 2 * h, c0 + c1), cupy.float16)
    up = cupy.empty((1, 2 * h, 2 * h, c0), cupy.float16)
    fused = _time_us(lambda: upsample.upscale_concat(x, skip, out, (2, 2), True, True))
    scalar = _time_us(lambda: upsample.scalar_kernel()(x, skip, 1, c0, c1, h, h, 2 * h, 2 * h, 2, 2, 1, out))

    def unfused() -> None:
        upsample.upscale_concat(x, None, up, (2, 2), True, True)
        out[..., :c0] = up
        out[..., c0:] = skip

    separate = _time_us(unfused)
    floor = (x.nbytes + skip.nbytes + out.nbytes) / 3.0e12 * 1e6
    return (f"  {c0}+{c1} ch -> {2 * h}x{2 * h}: fused {fused:.1f} us, scalar kernel {scalar:.1f} us, "
            f"upsample + copies {separate:.1f} us (3 TB/s floor {floor:.1f} us)")


def _conv_row(backend: Any, rng: Any, c: int, k: int, size: int, kernel: int, stride: int, pad: int) -> str:
    import cupy

    x = cupy.asarray(rng.standard_normal((1, c, size, size)), dtype=cupy.float16)
    xn = cupy.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    w = cupy.asarray(rng.standard_normal((k, kernel, kernel, c)) * 0.1, dtype=cupy.float16).transpose(0, 3, 1, 2)
    b = cupy.asarray(rng.standard_normal(k), dtype=cupy.float16)
    ho = (size + 2 * pad - kernel) // stride + 1
    out = cupy.empty((1, ho, ho, k), cupy.float16).transpose(0, 3, 1, 2)
    geometry = ((stride, stride), (pad, pad), (1, 1))
    cache: dict[str, Any] = {}
    direct = _time_us(lambda: backend.kernel("conv2d")(xn, w, b, out, *geometry, 1, "relu", {}, cache))
    cudnn = backend.cudnn
    padded = _time_us(lambda: cudnn.conv(xn, w, b, out, *geometry, "relu", {})) if cudnn else float("nan")
    return (f"  {c}->{k} {kernel}x{kernel}/{stride} at {size}x{size}: direct {direct:.1f} us, "
            f"cuDNN (padded to 8 channels) {padded:.1f} us")


def main() -> None:
    from engine.backends import get_backend

    backend = get_backend("cupy", notice=None)
    backend.activate()
    rng = np.random.default_rng(0)
    print("upsample 2x bilinear + concatenation, fp16 NHWC (unet 512 decoder steps)")
    for c0, c1, h in ((64, 32, 256), (128, 64, 128), (256, 128, 64)):
        print(_upcat_row(rng, c0, c1, h))
    print("convolution of an RGB input, fp16 NHWC")
    for shape in ((3, 32, 512, 3, 1, 1), (3, 64, 224, 7, 2, 3)):
        print(_conv_row(backend, rng, *shape))


if __name__ == "__main__":
    main()
