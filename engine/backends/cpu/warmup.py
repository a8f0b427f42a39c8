"""Compile the NumPy backend's CPU kernels ahead of their first use.

``python -m engine.backends.cpu.warmup`` runs a small network that takes every kernel path (Winograd in blocks
and shared out, F(2x2) for a small image, its products by OpenBLAS and over weight panels, im2col by pixels
and by output channels, 1x1, pooling, element-wise, upsampling alone and with a concatenation, few output
channels, products over packed weight panels) in fp32 NHWC and NCHW, so that Numba's on-disk cache holds
them; a later inference starts at once. The designer runs it in a separate process at its first start after
installing (compiling holds the Python interpreter for minutes: in-process, the window would
stutter)."""
from __future__ import annotations

import fcntl
import subprocess
import sys
import time

import numpy as np

from engine.backends.cpu import compile_cache
from engine.model import Model


def warmup_model() -> Model:
    """A small network through every CPU kernel path."""
    m = Model("warmup")
    m.add_layer("input", "input", params={"dimensions": "1x3x40x40"})

    def conv(name: str, src: str, ch: int, kernel: int = 3, stride: int = 1, act: str = "relu") -> str:
        m.add_layer("convolution", name, params={"num_output_channels": str(ch), "kernel_size": str(kernel),
                                                 "stride": str(stride), "padding": str(kernel // 2)},
                    inputs=[src], activation=act)
        return name

    stem = conv("stem", "input", 32, kernel=7, stride=2)  # RGB stem: the direct panel product (AVX-512, AVX2) or im2col
    pixels = conv("pixels", stem, 24, kernel=5)  # im2col, by pixels (20x20)
    steps = conv("wino_steps", pixels, 32)  # Winograd of 25 tiles: one block, its steps shared out
    m.add_layer("element_wise", "add1", params={"operation": "sum"}, inputs=[steps, stem], activation="relu")
    m.add_layer("pooling", "pool", params={"pool_type": "max", "kernel_size": "2", "stride": "2", "padding": "0"},
                inputs=["add1"])
    # 16x16 (16 tiles of F(4x4)): NHWC runs F(2x2, 3x3); 40 outputs fill no panel, so on every CPU it is Winograd
    # with OpenBLAS's products (the layers of 32 outputs here take the panels' where the CPU has them)
    m.add_layer("pooling", "crop", params={"pool_type": "max", "kernel_size": "5", "stride": "1", "padding": "0"},
                inputs=["add1"])
    m.add_layer("output", "small_image", inputs=[conv("wino_small", "crop", 40)])
    # 40 outputs, no multiple of a panel (16 or 32): these two stay off the panel product on every CPU
    small = conv("cols", "pool", 40, stride=2)  # 5x5: im2col cut by output channels
    # 1x1 of stride 1 with an activation the panel micro-kernel does not apply (SiLU): OpenBLAS, cut by output channels
    one = conv("one", small, 40, kernel=1, act="silu")
    m.add_layer("element_wise", "add2", params={"operation": "sum"}, inputs=[small, one], activation="relu")
    panels = conv("panels", "add2", 64)  # a small image, 64 outputs: the product over packed panels, windows in place
    m.add_layer("convolution", "panels_dilated", params={"num_output_channels": "64", "kernel_size": "3",
                                                         "padding": "2", "dilation": "2"},
                inputs=[panels], activation="relu")  # dilated: im2col, then the same product
    panels_1x1 = conv("panels_1x1", "panels_dilated", 64, kernel=1)  # a 1x1 one
    m.add_layer("pooling", "avg", params={"pool_type": "average", "kernel_size": "3", "stride": "1", "padding": "1"},
                inputs=[panels_1x1])
    m.add_layer("upsample", "up", params={"factor": "2", "method": "bilinear"}, inputs=["avg"])
    m.add_layer("concatenation", "cat", inputs=["up", "pool"])  # fused into upscale_concat
    m.add_layer("upsample", "up2", params={"factor": "4", "method": "nearest"}, inputs=["cat"])
    # 40x40x96 values: an element-wise pass large enough to be cut over the cores (the adds above run on one)
    m.add_layer("upsample", "up3", params={"factor": "4", "method": "bilinear"}, inputs=["cat"])
    m.add_layer("element_wise", "big", params={"operation": "max"}, inputs=["up2", "up3"], activation="relu")
    wide = conv("wino_blocks", "big", 16)  # 40x40: 100 tiles, in blocks
    few = conv("few", wide, 3, act="none")  # few output channels: dot products along the kernel rows
    m.add_layer("output", "output", inputs=[few])
    # a ResNet block's end: convolution + sum (conv_sum, the residual in the kernel's epilogue), global average
    # pooling (one job: on the calling thread), fully connected layers (the dense kernel, shared out and not)
    res = conv("res", wide, 16, act="none")
    m.add_layer("element_wise", "res_add", params={"operation": "sum"}, inputs=[res, wide], activation="relu")
    m.add_layer("pooling", "gap", params={"pool_type": "average", "global": "true"}, inputs=["res_add"])
    m.add_layer("fully_connected", "fc_big", params={"num_outputs": "16384"}, inputs=["gap"], activation="relu")
    m.add_layer("fully_connected", "fc_small", params={"num_outputs": "3"}, inputs=["fc_big"])
    m.add_layer("output", "classes", inputs=["fc_small"])
    # 20x20x96 values out: a pooling large enough to be cut over the cores (the ones above run on this thread)
    m.add_layer("pooling", "big_pool", params={"pool_type": "max", "kernel_size": "2", "stride": "2", "padding": "0"},
                inputs=["big"])
    m.add_layer("output", "pooled", inputs=["big_pool"])
    # a mobile network's block: depthwise convolutions (stride 1 by whole rows over the cores, stride 2 pixel by
    # pixel on this thread), a 1x1 convolution of the 1x1 pooled image (the dense kernel)
    for name, src, kernel, stride in (("dw_rows", wide, 3, 1), ("dw_pixels", "dw_rows", 5, 2)):
        m.add_layer("convolution", name, params={"num_output_channels": "16", "kernel_size": str(kernel),
                                                 "stride": str(stride), "padding": str(kernel // 2), "groups": "16"},
                    inputs=[src], activation="relu")
    m.add_layer("output", "depthwise", inputs=["dw_pixels"])
    m.add_layer("output", "squeezed", inputs=[conv("squeeze", "gap", 8, kernel=1)])
    return m


def warm() -> float:
    """Run :func:`warmup_model` in fp32 NHWC and NCHW on the NumPy backend; returns the seconds it took."""
    from engine.backends.cpu.backend import NumpyBackend  # noqa: PLC0415
    from engine.network import Network  # noqa: PLC0415
    from engine.plugins import default_registry  # noqa: PLC0415
    from engine.tensor import TensorFormat  # noqa: PLC0415

    t0 = time.perf_counter()
    registry = default_registry()
    for fmt in ("fp32 nhwc", "fp32 nchw"):
        net = Network(warmup_model(), registry, NumpyBackend(), TensorFormat.parse(fmt))
        net.set_input("input", np.random.default_rng(0).random((1, 3, 40, 40), dtype=np.float32))
        net.run()
    return time.perf_counter() - t0


def needed() -> bool:
    """True when the kernels are in use here and have not been compiled on this machine yet."""
    from engine.backends.cpu.backend import cpu_kernels  # noqa: PLC0415

    return cpu_kernels() is not None and not compile_cache.compiled_before()


def start_in_background(detached: bool = False) -> subprocess.Popen[bytes] | None:
    """Start ``python -m engine.backends.cpu.warmup`` in another process when :func:`needed`; None otherwise.
    ``detached``: in its own session, so it finishes after the command that started it has exited. Two of
    them never compile at once (the second sees the first's lock and exits)."""
    if not needed():
        return None
    return subprocess.Popen([sys.executable, "-m", "engine.backends.cpu.warmup"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=detached)


def main() -> int:
    if not needed():
        print("layerlab: the CPU kernels are compiled already")
        return 0
    with open(compile_cache.warmup_lock_path(), "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print("layerlab: the CPU kernels are being compiled by another process")
            return 0
        if not needed():  # finished while we waited for the lock
            return 0
        print("layerlab: compiling the CPU kernels for this machine ...", flush=True)
        print(f"layerlab: done in {warm():.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
