"""cuDNN convolutions of the CuPy backend (engine/backends/cudnn_conv.py), on the GPU."""
from __future__ import annotations

import numpy as np
import pytest

from plugins.standard._common_conv import conv2d
from tests.harness import backend_param

pytestmark = pytest.mark.gpu


def _cudnn():
    backend = backend_param("cupy")
    if backend.cudnn is None:
        pytest.skip(f"cuDNN frontend: {backend.cudnn_status}")
    return backend


def _nhwc(cupy, a):
    """A logical NCHW cupy view of NHWC memory holding ``a``."""
    return cupy.ascontiguousarray(cupy.asarray(a).transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("c,k", [(3, 32), (32, 3), (1, 5), (8, 16)])
@pytest.mark.parametrize("act", [None, "relu"])
def test_unaligned_channels_run_padded_and_match(c, k, act):
    import cupy

    backend = _cudnn()
    backend.activate()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, c, 37, 50)).astype(np.float16)
    w = (rng.standard_normal((k, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float16)
    b = rng.standard_normal(k).astype(np.float16)
    out = _nhwc(cupy, np.zeros((1, k, 37, 50), np.float16))
    assert backend.kernel("conv2d")(_nhwc(cupy, x), _nhwc(cupy, w), cupy.asarray(b), out, (1, 1), (1, 1), (1, 1), 1, act, {})
    backend.synchronize()
    ref = conv2d(np, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), (1, 1), (1, 1), (1, 1), 1)
    if act == "relu":
        ref = np.maximum(ref, 0)
    got = cupy.asnumpy(out).astype(np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 5e-3
    padded = any(key[0] == (1, c, 37, 50) and key[2] == (k, c, 3, 3) for key in backend.cudnn._pads)
    direct = c <= 4 and k % 8 == 0  # the direct kernel of gpu_kernels takes these, not cuDNN
    assert padded == bool((c % 8 or k % 8) and not direct)


def test_grouped_unaligned_convolution_is_not_padded():
    import cupy

    backend = _cudnn()
    backend.activate()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 13, 11)).astype(np.float16)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float16)
    out = _nhwc(cupy, np.zeros((1, 6, 13, 11), np.float16))
    done = backend.kernel("conv2d")(_nhwc(cupy, x), _nhwc(cupy, w), None, out, (1, 1), (1, 1), (1, 1), 3, None, {})
    assert not any(key[2] == (6, 2, 3, 3) for key in backend.cudnn._pads)
    if done:  # cuDNN ran it unpadded: it must be right
        backend.synchronize()
        ref = conv2d(np, x.astype(np.float64), w.astype(np.float64), None, (1, 1), (1, 1), (1, 1), 3)
        assert np.linalg.norm(cupy.asnumpy(out) - ref) / np.linalg.norm(ref) < 5e-3


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("tf32", [False, True])
def test_fp32_convolutions_run_on_cudnn_strict_unless_tf32(layout, tf32):
    """fp32 convolutions go to cuDNN; strict float32 by default (float64-level agreement), TF32 when allowed
    (tensor cores round the operands to 10-bit mantissas: about 1e-3 relative)."""
    import cupy

    backend = _cudnn()
    backend.activate()
    backend.allow_tf32 = tf32
    try:
        rng = np.random.default_rng(2)
        x = rng.standard_normal((2, 64, 40, 56)).astype(np.float32)
        w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
        b = rng.standard_normal(64).astype(np.float32)
        put = (lambda a: _nhwc(cupy, a)) if layout == "nhwc" else cupy.asarray
        out = put(np.full((2, 64, 40, 56), np.nan, np.float32))
        assert backend.kernel("conv2d")(put(x), put(w), cupy.asarray(b), out, (1, 1), (1, 1), (1, 1), 1, "relu", {})
        backend.synchronize()
    finally:
        backend.allow_tf32 = False
    ref = np.maximum(conv2d(np, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                            (1, 1), (1, 1), (1, 1), 1), 0)
    err = np.linalg.norm(cupy.asnumpy(out).astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err < (5e-3 if tf32 else 1e-5), err
