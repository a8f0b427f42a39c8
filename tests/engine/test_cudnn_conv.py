"""cuDNN convolutions of the CuPy backend (engine/backends/cuda/cudnn.py), on the GPU."""
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
    direct = c <= 4 and k % 8 == 0  # the direct kernel (engine/backends/cuda/conv_direct) takes these, not cuDNN
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
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 64, 40, 56)).astype(np.float32)
    w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    put = (lambda a: _nhwc(cupy, a)) if layout == "nhwc" else cupy.asarray
    out = put(np.full((2, 64, 40, 56), np.nan, np.float32))
    done = backend.kernel("conv2d")(put(x), put(w), cupy.asarray(b), out, (1, 1), (1, 1), (1, 1), 1, "relu", {},
                                    tf32=tf32)
    assert done is not None and done.candidate == "cudnn"
    backend.synchronize()
    ref = np.maximum(conv2d(np, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                            (1, 1), (1, 1), (1, 1), 1), 0)
    err = np.linalg.norm(cupy.asnumpy(out).astype(np.float64) - ref) / np.linalg.norm(ref)
    assert err < (5e-3 if tf32 else 1e-5), err


def test_graphs_share_one_workspace_and_keep_one_a_cuda_graph_captured():
    """Every cuDNN graph of a stream runs in one shared workspace, grown when a configuration needs more; an
    outgrown workspace is freed, unless a CUDA graph captured its address (it then stays allocated)."""
    import cupy

    backend = _cudnn()
    backend.activate()
    cd = backend.cudnn
    cd._workspace, cd._workspace_captured, cd._retired = None, False, []
    small = cd.workspace(256)
    assert cd.workspace(100) is small and cd._retired == []
    grown = cd.workspace(4096)
    assert grown is not small and grown.nbytes >= 4096 and cd._retired == []  # not captured: freed
    stream = backend.stream
    with stream:
        stream.begin_capture()
        try:
            assert cd.workspace(10) is grown  # used inside a capture: its address is in the CUDA graph now
            cupy.zeros(1)  # something to capture
        finally:
            stream.end_capture()
    larger = cd.workspace(1 << 16)
    assert larger is not grown and cd._retired == [grown]


def test_a_captured_network_stays_right_when_the_workspace_grows_after_it():
    """A network captured as a CUDA graph, then the shared workspace outgrown (by a later network on the same
    backend whose convolutions need more): the captured network still gives its results, because the workspace
    whose address it captured was kept, and a later uncaptured run of the same network agrees too."""
    from engine.network import Network
    from engine.plugins import default_registry
    from engine.tensor import Dims, TensorFormat
    from tests.bench.networks import NETWORKS

    backend = _cudnn()
    cd = backend.cudnn
    cd._workspace, cd._workspace_captured, cd._retired = None, False, []
    x = np.random.default_rng(0).random((2, 3, 64, 64), dtype=np.float32)
    net = Network(NETWORKS["resnet18"](Dims(2, 3, 64, 64)), default_registry(), backend,
                  TensorFormat.parse("fp32 nhwc"), fusing="on")
    net.set_input("input", x)
    net.run()
    expected = net.output("output").copy()
    net.set_input("input", x)
    net.run()  # captured
    assert "captured" in net.graph_status and cd._workspace_captured
    captured = cd._workspace
    cd.workspace(captured.nbytes + (64 << 20))  # what a larger network's convolutions do
    assert cd._retired == [captured]
    cd.workspace(1 << 30)  # a further growth: the intermediate workspace was never captured, so it is freed
    assert cd._retired == [captured]
    net.set_input("input", x)
    net.run()  # replays the captured graph
    np.testing.assert_array_equal(net.output("output"), expected)


@pytest.mark.parametrize("act,coefs", [("clamp", {"min": 0.0, "max": 6.0}), ("relu", {}), ("silu", {})])
def test_an_epilogue_runs_fused_or_after_the_convolution_whichever_is_faster_with_the_same_result(act, coefs):
    """cuDNN with an epilogue node can be restricted to slow engines; the first call times the fused graph against
    the plain convolution followed by the epilogue kernel, keeps the faster, and both give the same values."""
    import cupy

    reference = {"clamp": lambda v: np.clip(v, 0.0, 6.0), "relu": lambda v: np.maximum(v, 0.0),
                 "silu": lambda v: v / (1.0 + np.exp(-v))}[act]
    backend = _cudnn()
    backend.activate()
    rng = np.random.default_rng(1)
    x = (3 * rng.standard_normal((4, 64, 28, 28))).astype(np.float16)
    w = (rng.standard_normal((192, 64, 1, 1)) / 8).astype(np.float16)
    b = rng.standard_normal(192).astype(np.float16)
    ref = reference(conv2d(np, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                                       (1, 1), (0, 0), (1, 1), 1))
    from engine.backends.cuda import cudnn

    conv = backend.cudnn
    got = {}
    before = dict(cudnn._SPLIT)  # the choices are the process's: other tests' configurations are left as they were
    for split in (None, False, True):  # None: the timed choice
        out = _nhwc(cupy, np.zeros((4, 192, 28, 28), np.float16))
        if split is not None:
            for key in set(cudnn._SPLIT) - set(before):
                cudnn._SPLIT[key] = split
        assert conv.conv(_nhwc(cupy, x), _nhwc(cupy, w), cupy.asarray(b), out, (1, 1), (0, 0), (1, 1), act, coefs)
        backend.synchronize()
        got[split] = cupy.asnumpy(out).astype(np.float64)
        assert np.linalg.norm(got[split] - ref) / np.linalg.norm(ref) < 5e-3, (act, split)
    assert any(key[-2] == act for key in set(cudnn._SPLIT) - set(before))  # the choice was made and kept
    cudnn._SPLIT.clear()
    cudnn._SPLIT.update(before)


def test_timing_the_epilogue_choice_leaves_the_backends_stream_current():
    """The first call of a configuration with an epilogue times fused against split on the backend's stream; the
    kernels the network queues next (on the current stream) must stay ordered after cuDNN's: a timing that left
    the null stream current made them race with the convolution (outputs without their activation)."""
    import cupy

    backend = _cudnn()
    backend.activate()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 16, 14, 14)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
    for act in ("relu", "tanh"):
        out = cupy.zeros((1, 16, 14, 14), cupy.float32)
        assert backend.cudnn.conv(cupy.asarray(x), cupy.asarray(w), None, out, (1, 1), (1, 1), (1, 1), act, {})
        assert cupy.cuda.get_current_stream().ptr == backend.stream.ptr, act
        doubled = out * 2  # queued on the current stream: must see the finished, activated convolution
        ref = conv2d(np, x.astype(np.float64), w.astype(np.float64), None, (1, 1), (1, 1), (1, 1), 1)
        ref = np.maximum(ref, 0) if act == "relu" else np.tanh(ref)
        np.testing.assert_allclose(cupy.asnumpy(doubled), 2 * ref, rtol=1e-4, atol=1e-4)
