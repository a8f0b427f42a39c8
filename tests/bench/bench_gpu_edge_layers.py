"""Each candidate kernel of dncnn's few-channel layers at 1080p fp16 NHWC (the 3 -> 64 input layer, the 64 -> 3
output layer), timed alone with CUDA events, and the one the backend chooses:
python -m tests.bench.bench_gpu_edge_layers [--size 1080x1920]

Two more kernels were tried on these layers (round 2, session 7, H200) and dropped: a tiled direct convolution
(16 channels x 4 pixels a thread) 0.33-0.37 ms and a few-output 3x3 convolution with lanes sharing a pixel
0.68-0.86 ms, against cuDNN's 0.31 and 0.36 ms; Nsight Compute showed both issue-bound (237 M and 517 M
instructions at 2.5-3 IPC), so CUDA-core kernels do not beat cuDNN's tensor cores here even on padded channels.

H100 (round 2, session 9): the input layer: cuDNN 0.318 ms, patch64 (wgmma) 0.214. The output layer (64 -> 3):
cuDNN 0.385 ms, out64 (wgmma, pixels as M, outputs as N = 8) 0.139 at (64 pixels, 4 warpgroups, 16 rows),
0.146 at (64, 4, 8), 0.157 at (128, 2, 16), 0.164 at (64, 3, 16), 0.177 at (64, 2, 32). The layer reads
265 MB, 0.10 ms at the measured 2.6 TB/s."""
from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    import cupy

    from engine.backends import cupy_kernels, get_backend, gpu_kernels

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1080x1920")
    ap.add_argument("--repeat", type=int, default=50)
    a = ap.parse_args()
    h, w = (int(v) for v in a.size.split("x"))
    backend = get_backend("cupy", notice=None)
    backend.activate()
    rng = np.random.default_rng(0)

    def timed(fn) -> float:
        fn()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(a.repeat):
            fn()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / a.repeat

    def layer(c: int, k: int, act: str | None) -> None:
        x = cupy.asarray(rng.standard_normal((1, h, w, c)).astype(np.float16))
        wt = cupy.asarray((rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float16))
        b = cupy.asarray(rng.standard_normal(k).astype(np.float16))
        out = cupy.empty((1, h, w, k), cupy.float16)
        geo = ((3, 3), (1, 1), (1, 1), (1, 1))
        xl, ol, wl = x.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2), cupy.ascontiguousarray(
            wt.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        runs = {"cudnn": lambda: backend.cudnn.conv(xl, wl, b, ol, (1, 1), (1, 1), (1, 1), act, {})}
        ref = None
        if gpu_kernels.direct_applies(xl, wl, ol, 1, act):
            wd = gpu_kernels.direct_weights(wl)
            runs["direct (8 a thread)"] = lambda: gpu_kernels.conv_direct(x, wd, b, out, *geo, act, 0.0)
        if cupy_kernels.patch_applies(xl, wl, ol, (1, 1), 1):
            wp = cupy_kernels.patch_weights(wl)
            runs["patches + cuDNN 1x1"] = lambda: cupy_kernels.conv_patches(backend.cudnn, xl, wp, b, ol, (3, 3), (1, 1),
                                                                            (1, 1), act, {}, {})
        if gpu_kernels._sm_count_and_cc()[1] == 90 and gpu_kernels.patch64_applies(xl, wl, ol, (1, 1), (1, 1), (1, 1),
                                                                                    1, act):
            wq = gpu_kernels.patch64_weights(wl)
            runs["patch64 (wgmma)"] = lambda: gpu_kernels.conv3x3_patch64(x, wq, b, out, act, 0.0)
        if gpu_kernels._sm_count_and_cc()[1] == 90 and gpu_kernels.out64_applies(xl, wl, ol, (1, 1), (1, 1), (1, 1),
                                                                                  1, act):
            wo = gpu_kernels.out64_weights(wl)
            for shape in ((64, 4, 16), (64, 4, 8), (128, 2, 16), (64, 3, 16), (64, 2, 32)):
                runs[f"out64 {shape}"] = (lambda sh: lambda: gpu_kernels.conv3x3_out64(x, wo, b, out, act, 0.0, sh))(shape)
        print(f"{c} -> {k} 3x3 at {h}x{w}:")
        for name, fn in runs.items():
            ms = timed(fn)
            got = cupy.asnumpy(out).astype(np.float32)
            if ref is None:
                ref = got
            err = float(np.abs(got - ref).max())
            print(f"  {name:22s} {ms:7.4f} ms   max diff from cuDNN {err:.2e}")
        chosen = backend.kernel("conv2d")
        cache: dict = {}
        ms = timed(lambda: chosen(xl, wl, b, ol, (1, 1), (1, 1), (1, 1), 1, act, {}, cache))
        print(f"  backend's choice       {ms:7.4f} ms  (weights kept: {', '.join(sorted(cache)) or 'none, cuDNN'})")

    layer(3, 64, "relu")
    layer(64, 3, None)


if __name__ == "__main__":
    main()
