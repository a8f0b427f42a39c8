"""Making a network's input tensors from what a caller gives: checked, uploaded as they are, converted on the device.

Uploading first and converting on the device matters on a GPU: an 8-bit image crosses the bus at a quarter of its
float32 tensor's bytes, and the host-side NaN scan and layout conversion cost ten times the upload.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.backends.base import Backend
from engine.errors import InputError
from engine.io import ImageOptions, images_to_tensor
from engine.tensor import FP32_NCHW, MAX_RANK, MIN_RANK, Layout, Precision, TensorFormat, convert


def input_tensor(name: str, array: Any, src: TensorFormat, dst: TensorFormat, backend: Backend) -> Any:
    """Input ``name``'s tensor in format ``dst`` on ``backend``'s device, from ``array`` (a host array or one on
    that device) in format ``src``: of rank 1 to 6, numbers, no empty dimension, no NaN or infinite value (an
    InputError naming the input otherwise)."""
    xp = backend.xp
    on_device = xp is not np and isinstance(array, xp.ndarray)
    arr = array if on_device else np.asarray(array)
    if not MIN_RANK <= arr.ndim <= MAX_RANK:
        raise InputError(f"input {name}: expected a tensor of rank {MIN_RANK} to {MAX_RANK} (4-D: N, C, H, W), "
                         f"got shape {arr.shape}")
    if arr.dtype.kind not in "fiu":
        raise InputError(f"input {name}: expected numbers, got dtype {arr.dtype}")
    if min(arr.shape) < 1:
        raise InputError(f"input {name}: every dimension must be at least 1, got shape {arr.shape}")
    dev = arr if on_device else backend.to_device(np.ascontiguousarray(arr))  # integers too, as they are
    if dev.dtype not in (np.float16, np.float32):
        dev = dev.astype(xp.float32)
    if arr.dtype.kind == "f" and not bool(xp.isfinite(dev).all()):
        raise InputError(f"input {name}: the tensor contains NaN or infinite values")
    dev = xp.ascontiguousarray(dev)
    if (src == FP32_NCHW and dst.precision is Precision.FP32 and dst.layout is Layout.NHWC and dev.ndim == 4
            and dev.dtype == np.float32):
        kernel = backend.kernel("to_channels_last")  # the CPU's one pass (1080p RGB: 0.56 instead of 5.2 ms)
        if kernel is not None:
            out = xp.empty((dev.shape[0], *dev.shape[2:], dev.shape[1]), np.float32)
            if kernel(dev, out.transpose(0, 3, 1, 2)):
                return out
    return convert(dev, src, dst, xp)


def image_tensor(name: str, images: np.ndarray | Sequence[Any], opts: ImageOptions, dst: TensorFormat,
                 backend: Backend) -> Any:
    """Input ``name``'s tensor in format ``dst`` on ``backend``'s device, from a batch of decoded images (a sequence
    of N arrays of one shape and type, H x W gray or H x W x C in RGB/RGBA order, 8- or 16-bit or float, or one
    N x H x W (x C) array), made by :func:`engine.io.images_to_tensor` with ``opts`` where the tensor lives."""
    stacked = isinstance(images, np.ndarray)
    batch = [images] if stacked else [np.asarray(a) for a in images]
    dims = (3, 4) if stacked else (2, 3)  # an image is H x W or H x W x C
    if not batch or batch[0].ndim not in dims or batch[0].dtype.kind not in "uif" or min(batch[0].shape) < 1:
        got = f"{batch[0].dtype} array of shape {batch[0].shape}" if batch else "no images"
        raise InputError(f"input {name}: expected {'N x ' if stacked else ''}H x W or {'N x ' if stacked else ''}"
                         f"H x W x C images of 8 or 16 bits (or floats), got {got}")
    kinds = {(a.shape, a.dtype.str) for a in batch}
    if len(kinds) > 1:
        raise InputError(f"input {name}: the images of one batch must have one size and type, got "
                         f"{', '.join(f'{s} {d}' for s, d in sorted(kinds))}")
    xp = backend.xp
    dev = [backend.to_device(np.ascontiguousarray(a)) for a in batch]
    x = images_to_tensor(dev[0] if stacked else xp.stack(dev), opts, xp)
    if batch[0].dtype.kind == "f" and not bool(xp.isfinite(x).all()):
        raise InputError(f"input {name}: the images contain NaN or infinite values")
    return convert(x, FP32_NCHW, dst, xp)


def stage_input(layer: Any, data: Any, view: Any | None) -> bool:
    """Give input layer ``layer`` the tensor ``data`` (from :func:`input_tensor` or :func:`image_tensor`): copied
    into the array the layer holds where shape and type are the same (one device buffer per input layer, so that a
    captured graph keeps reading the right memory), else held as it is. ``view``: the layer's output in the
    network's buffers (None before the network is planned), which then becomes that array
    (:func:`hold_input_in_place`). Returns whether the layer holds a new array (the network's replay drops)."""
    old = getattr(layer, "data", None)
    fresh = old is None or old.shape != data.shape or old.dtype != data.dtype
    if fresh:
        layer.data = data
    elif old is not data:
        old[...] = data
    hold_input_in_place(layer, view)
    return fresh


def hold_input_in_place(layer: Any, view: Any | None) -> None:
    """Make input layer ``layer``'s tensor its output ``view`` in the network's buffers (an input's buffer is never
    reused by other layers), its values copied there once: the layer's forward then copies nothing, and the next
    tensors given are copied straight there. Not for a layer that applies an activation to its tensor, nor where
    shape or type differ. A 224x224 RGB image's copy each run cost 8-30 us (1-1.5% of mobilenet_v2 on two Zen 5
    cores), a 1080p frame's 25 MB more than a millisecond."""
    data = getattr(layer, "data", None)
    if (view is not None and data is not None and data is not view and layer.activation is None
            and view.shape == data.shape and view.dtype == data.dtype):
        view[...] = data
        layer.data = view
