"""Compile the NumPy backend's CPU kernels ahead of their first use.

``python -m engine.backends.cpu.warmup`` runs a small network that takes every kernel path (Winograd in blocks
and shared out, F(2x2) for a small image, its products by OpenBLAS and over weight panels, im2col by pixels
and by output channels, 1x1, an atrous convolution by taps, pooling, element-wise, upsampling alone and with a
concatenation, resampling, few output channels, products over packed weight panels, batch normalization, an
activation alone, layer normalization, attention) in fp32 NHWC and NCHW,
so that Numba's on-disk cache holds them; a later inference starts at once. The designer runs it in a separate
process at its first start after installing (compiling holds the Python interpreter for minutes: in-process,
the window would stutter)."""
from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from engine.backends.cpu import compile_cache
from engine.model import Model

if TYPE_CHECKING:
    from engine.network import Network


def _conv(m: Model, name: str, src: str, ch: int, kernel: int = 3, stride: int = 1, act: str = "relu",
          **params: str) -> str:
    """A convolution ``name`` of ``src`` ("same" padding unless ``params`` say otherwise); returns its name."""
    m.add_layer("convolution", name, params={"num_output_channels": str(ch), "kernel_size": str(kernel),
                                             "stride": str(stride), "padding": str(kernel // 2), **params},
                inputs=[src], activation=act)
    return name


def _input(m: Model, name: str, dims: str) -> str:
    m.add_layer("input", name, params={"dimensions": dims})
    return name


def _winograd(m: Model) -> None:
    """Winograd convolutions: steps shared out, F(2x2) for a small image, blocks, the residual in the epilogue. More
    than 32 inputs and outputs each: AVX-512's panels take the 3x3 layers of fewer before Winograd."""
    # Winograd of 25 tiles: one block, its steps shared out
    m.add_layer("output", "steps", inputs=[_conv(m, "wino_steps", _input(m, "wino_in", "1x40x20x20"), 64)])
    # 16x16 (16 tiles of F(4x4)): NHWC runs F(2x2, 3x3); 40 outputs fill no panel, so on every CPU it is Winograd
    # with OpenBLAS's products (the layers of 64 outputs here take the panels' where the CPU has them)
    m.add_layer("output", "small_image", inputs=[_conv(m, "wino_small", _input(m, "small_in", "1x48x16x16"), 40)])
    wide = _conv(m, "wino_blocks", _input(m, "blocks_in", "1x96x40x40"), 48)  # 40x40: 100 tiles, in blocks
    # a ResNet block's end: convolution + sum (conv_sum, the residual in the kernel's epilogue)
    res = _conv(m, "res", wide, 48, act="none")
    m.add_layer("element_wise", "res_add", params={"operation": "sum"}, inputs=[res, wide], activation="relu")
    m.add_layer("output", "residual", inputs=["res_add"])


def _products(m: Model) -> None:
    """im2col and the products over packed weight panels."""
    # RGB stem: the direct panel product (AVX-512, AVX2) or im2col
    m.add_layer("output", "stem_out", inputs=[_conv(m, "stem", _input(m, "input", "1x3x40x40"), 32, kernel=7, stride=2)])
    # im2col cut by pixels: dilated (undilated, AVX-512's panels take a large image)
    m.add_layer("output", "by_pixels", inputs=[_conv(m, "pixels", _input(m, "pixels_in", "1x32x20x20"), 24, kernel=5,
                                                     padding="4", dilation="2")])
    # 40 outputs, no multiple of a panel (16 or 32): these two stay off the panel product on every CPU
    small = _conv(m, "cols", _input(m, "cols_in", "1x32x10x10"), 40, stride=2)  # 5x5: im2col cut by output channels
    # 1x1 of stride 1 with an activation the panel micro-kernel does not apply (SiLU): OpenBLAS, cut by output channels
    m.add_layer("output", "by_channels", inputs=[_conv(m, "one", small, 40, kernel=1, act="silu")])
    # a small image, 64 outputs: the product over packed panels, windows in place
    panels = _conv(m, "panels", _input(m, "panels_in", "1x40x5x5"), 64)
    dilated = _conv(m, "panels_dilated", panels, 64, padding="2", dilation="2")  # im2col, then the same product
    panels_1x1 = _conv(m, "panels_1x1", dilated, 64, kernel=1)  # a 1x1 one
    # grouped convolutions (RegNet's groups of 8 channels) on the micro-kernel: by blocks of channels (stride 1),
    # then from the channels in place (strided)
    grouped = _conv(m, "grouped", _input(m, "grouped_in", "1x48x12x12"), 48, groups="6")
    m.add_layer("output", "grouped_out", inputs=[_conv(m, "grouped_strided", grouped, 48, stride=2, groups="6")])
    # an atrous convolution whose taps mostly read padding (a segmentation head's): by taps
    m.add_layer("output", "atrous_out", inputs=[_conv(m, "atrous", _input(m, "atrous_in", "1x32x20x20"), 32,
                                                      padding="10", dilation="10")])
    m.add_layer("pooling", "avg", params={"pool_type": "average", "kernel_size": "3", "stride": "1", "padding": "1"},
                inputs=[panels_1x1])
    m.add_layer("output", "averaged", inputs=["avg"])
    # a linear layer over many tokens (a transformer's MLP): its rows shared out, one BLAS product per core
    m.add_layer("matmul", "linear", params={"num_outputs": "128", "bias": "true"},
                inputs=[_input(m, "tokens", "1x256x64")], activation="gelu")
    m.add_layer("output", "projected", inputs=["linear"])


def _depthwise(m: Model) -> None:
    """A mobile network's depthwise convolutions: one large enough to be shared out over the cores by rows, one
    (stride 2) on this thread, one reading an expansion (the two in one kernel)."""
    src = _input(m, "dw_in", "1x16x40x40")
    for name, kernel, stride in (("dw_rows", 3, 1), ("dw_pixels", 5, 2)):
        src = _conv(m, name, src, 16, kernel=kernel, stride=stride, groups="16")
    m.add_layer("output", "depthwise", inputs=[src])
    # an expansion and its depthwise layer: one kernel in fp32 NHWC (the conv_depthwise fusing rule)
    expanded = _conv(m, "dw_expand", src, 48, kernel=1, act="clamp")
    m.add_layer("output", "expanded", inputs=[_conv(m, "dw_expanded", expanded, 48, stride=2, groups="48")])


def _passes(m: Model) -> None:
    """Element-wise, pooling, upsampling and resampling passes, few output channels, the dense kernel,
    squeeze-excitation."""
    m.add_layer("element_wise", "add1", params={"operation": "sum"},
                inputs=[_input(m, "add_a", "1x32x20x20"), _input(m, "add_b", "1x32x20x20")], activation="relu")
    m.add_layer("pooling", "pool", params={"pool_type": "max", "kernel_size": "2", "stride": "2", "padding": "0"},
                inputs=["add1"])
    m.add_layer("pooling", "crop", params={"pool_type": "max", "kernel_size": "5", "stride": "1", "padding": "0"},
                inputs=["add1"])
    m.add_layer("output", "cropped", inputs=["crop"])
    # an RGB image large enough that its conversion into channels-last memory (feed) is shared over the cores
    m.add_layer("output", "rgb_out", inputs=[_input(m, "rgb_in", "1x3x160x160")])
    m.add_layer("upsample", "up", params={"factor": "2", "method": "bilinear"}, inputs=[_input(m, "up_in", "1x64x5x5")])
    m.add_layer("concatenation", "cat", inputs=["up", "pool"])  # fused into upscale_concat
    m.add_layer("upsample", "up2", params={"factor": "4", "method": "nearest"}, inputs=["cat"])
    # 40x40x96 values: an element-wise pass large enough to be cut over the cores (add1 runs on one)
    m.add_layer("upsample", "up3", params={"factor": "4", "method": "bilinear"}, inputs=["cat"])
    m.add_layer("element_wise", "big", params={"operation": "max"}, inputs=["up2", "up3"], activation="relu")
    # 20x20x96 values out: a pooling large enough to be cut over the cores (the ones above run on this thread)
    m.add_layer("pooling", "big_pool", params={"pool_type": "max", "kernel_size": "2", "stride": "2", "padding": "0"},
                inputs=["big"])
    m.add_layer("output", "pooled", inputs=["big_pool"])
    # resampling by taps (a segmentation head's resize to the input size): bilinear, and nearest by a fraction
    m.add_layer("resize", "resized", params={"scale_h": "4", "scale_w": "4"}, inputs=["cat"])
    m.add_layer("resize", "nearest", params={"mode": "nearest", "scale_h": "1.5", "scale_w": "1.5"}, inputs=["cat"])
    m.add_layer("output", "resampled", inputs=["resized"])
    m.add_layer("output", "nearest_out", inputs=["nearest"])
    _excitation(m, "big_gate", "big", 96)  # large enough to be cut over the cores
    wide = _input(m, "wide", "1x16x40x40")
    # few outputs: along kernel rows (5x5: in NCHW, where that kernel does not apply, a 3x3 layer would take Winograd
    # and this family would compile the Winograd family's kernels again, at the same time in another process)
    m.add_layer("output", "output", inputs=[_conv(m, "few", wide, 3, kernel=5, act="none")])
    # global average pooling (one job: on the calling thread), fully connected layers (the dense kernel, shared out
    # and not), a 1x1 convolution of the 1x1 pooled image (the dense kernel)
    m.add_layer("pooling", "gap", params={"pool_type": "average", "global": "true"}, inputs=[wide])
    m.add_layer("fully_connected", "fc_big", params={"num_outputs": "16384"}, inputs=["gap"], activation="relu")
    m.add_layer("fully_connected", "fc_small", params={"num_outputs": "3"}, inputs=["fc_big"])
    m.add_layer("output", "classes", inputs=["fc_small"])
    m.add_layer("output", "squeezed", inputs=[_conv(m, "squeeze", "gap", 8, kernel=1)])
    _excitation(m, "wide_gate", wide, 16)  # on the calling thread


def _pointwise(m: Model) -> None:
    """Batch normalization that no convolution before it took in (the per-channel scale-and-shift kernel), an
    activation no layer fused (the output's: the activation kernel), layer normalization, attention, a softmax and a
    product of two inputs."""
    m.add_layer("batch_normalization", "bn", inputs=[_input(m, "bn_in", "1x16x40x40")], activation="relu")
    m.add_layer("output", "normalized", inputs=["bn"], activation="sigmoid")
    # layer normalization by rows: over the tokens' trailing axis, and over the channels of each pixel (ConvNeXt)
    m.add_layer("layer_normalization", "ln_tokens", inputs=[_input(m, "ln_in", "1x256x64")])
    m.add_layer("output", "tokens_normalized", inputs=["ln_tokens"])
    m.add_layer("layer_normalization", "ln_channels", params={"over": "channels"},
                inputs=[_input(m, "ln_px", "1x32x16x16")], activation="gelu")
    m.add_layer("output", "channels_normalized", inputs=["ln_channels"])
    # attention over windows (the softmax's rows, a bias repeated over the windows): Swin's
    m.add_layer("attention", "attention", params={"scale": "0.25"},
                inputs=[_input(m, "q", "1x8x49x16"), _input(m, "k", "1x8x49x16"), _input(m, "v", "1x8x49x16"),
                        _input(m, "position_bias", "1x1x49x49")])
    m.add_layer("output", "attended", inputs=["attention"])
    # a softmax over the last axis of rows (its one-pass kernel) and a product of two inputs (stacks of matrices)
    m.add_layer("softmax", "scores_softmax", params={"axis": "-1"}, inputs=[_input(m, "scores", "16x49x49")])
    m.add_layer("output", "probabilities", inputs=["scores_softmax"])
    m.add_layer("matmul", "pair_product", inputs=[_input(m, "left", "8x49x16"), _input(m, "right", "8x16x49")])
    m.add_layer("output", "products", inputs=["pair_product"])


def _excitation(m: Model, name: str, src: str, ch: int) -> None:
    """A squeeze-excitation gate on ``src`` (``ch`` channels): global average pooling, a 1x1 convolution with a
    sigmoid, the product of ``src`` and the gate per channel (the channel-scale kernel)."""
    m.add_layer("pooling", f"{name}_pool", params={"pool_type": "average", "global": "true"}, inputs=[src])
    gate = _conv(m, name, f"{name}_pool", ch, kernel=1, act="sigmoid")
    m.add_layer("element_wise", f"{name}_scaled", params={"operation": "product"}, inputs=[src, gate])
    m.add_layer("output", f"{name}_out", inputs=[f"{name}_scaled"])


#: the kernel families, each a network of its own on inputs of the sizes that take its paths, largest compile first:
#: parallel processes compile different families at once (:func:`warm`), each taking the next family no other has
#: taken. No family runs another's main kernels (two processes would compile them at once). CPU seconds of each from
#: an empty cache, one after the other in one process (``python -m tests.bench.bench_compile``, idle 2-core Zen 3):
#: products 67, Winograd 48, passes 30, pointwise 34, depthwise 20; a family alone compiles the small helpers the
#: others share too (passes alone 46)
FAMILIES: dict[str, Callable[[Model], None]] = {
    "products": _products, "winograd": _winograd, "passes": _passes, "pointwise": _pointwise, "depthwise": _depthwise}


def warmup_model(families: Iterable[str] = tuple(FAMILIES)) -> Model:
    """A small network through every CPU kernel path of ``families`` (default: all of them, side by side)."""
    m = Model("warmup")
    for family in families:
        FAMILIES[family](m)
    return m


def feed(net: Network, seed: int = 0) -> None:
    """Random values on every input of a :func:`warmup_model` network."""
    rng = np.random.default_rng(seed)
    for name in net.input_names:
        net.set_input(name, rng.random(net.input_dims(name), dtype=np.float32))


def warm(families: Iterable[str] = tuple(FAMILIES)) -> float:
    """Run :func:`warmup_model` of ``families`` in fp32 NHWC and NCHW on the NumPy backend (compiling what Numba's
    cache lacks), its layers cut over every core however busy the machine is (``runtime.every_core``: the parallel
    kernels compiled too); returns the seconds it took."""
    from engine.backends.cpu import runtime  # noqa: PLC0415
    from engine.backends.cpu.backend import NumpyBackend  # noqa: PLC0415
    from engine.network import Network  # noqa: PLC0415
    from engine.plugins import default_registry  # noqa: PLC0415
    from engine.tensor import TensorFormat  # noqa: PLC0415

    t0 = time.perf_counter()
    registry = default_registry()
    with runtime.every_core():
        for fmt in ("fp32 nhwc", "fp32 nchw"):
            net = Network(warmup_model(families), registry, NumpyBackend(), TensorFormat.parse(fmt))
            feed(net)
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
