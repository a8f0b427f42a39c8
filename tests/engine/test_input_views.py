"""Layers whose output is a view of their input's buffer (``Layer.input_view``, ``engine.network.view_of``): a
gather of one index along the leading axis (``qkv[0]``) computes nothing and copies nothing; the results are those
of the computed gather; a view that would not be C-contiguous, an activation or a channels-last tensor keep the
computed layer."""
from __future__ import annotations

import numpy as np
import pytest

from engine.model import Model
from engine.network import Network
from engine.tensor import FP32_NCHW, Layout, TensorFormat
from tests.harness import BACKENDS, backend_param

X = np.random.default_rng(2).standard_normal((1, 6, 4, 4)).astype(np.float32)


def qkv_model(axis: int = 0, act: str = "none", rank5: bool = True) -> Model:
    """input 1x6x4x4 -> reshape to 3x2x4x4 (or 1x3x2x4x4) -> three gathers of one index -> sum of them, product."""
    m = Model("qkv")
    m.add_layer("input", "x", params={"dimensions": "1x6x4x4"})
    shape = "1,3,2,4,4" if rank5 else "3,2,4,4"
    m.add_layer("reshape", "r", params={"shape": shape}, inputs=["x"])
    axis_of_three = 1 if rank5 else 0
    for i, name in enumerate("qkv"):
        m.add_layer("gather", name, params={"axis": str(axis if axis else axis_of_three), "indices": str(i),
                                            "drop_axis": "true"}, inputs=["r"], activation=act if name == "k" else "none")
    m.add_layer("element_wise", "qk", params={"operation": "sum"}, inputs=["q", "k"])
    m.add_layer("element_wise", "y", params={"operation": "product"}, inputs=["qk", "v"])
    m.add_layer("output", "out", inputs=["y"])
    return m


def _registry():
    from engine.plugins import default_registry
    return default_registry()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", ["fp32 nchw", "fp16 nchw", "fp32 nhwc"])
def test_a_gather_of_one_leading_index_is_a_view(backend, fmt):
    model = qkv_model(rank5=False)
    net = Network(model, _registry(), backend_param(backend), TensorFormat.parse(fmt))
    out = net.infer({"x": X}, FP32_NCHW)["out"]
    r = X.reshape(3, 2, 4, 4)
    want = (r[0] + r[1]) * r[2]
    tol = 1e-6 if "fp32" in fmt else 2e-2
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    if net.fmt_of("q").layout is Layout.NCHW:  # rank 4 in logical order: views, no buffer of their own
        # (the GPU computes fp16 channels-last whatever the network's layout says: then the other branch)
        assert set(net._view_fns) == {"q", "k", "v"}
        assert all(net._roots[n] == "r" for n in "qkv")
    else:  # channels-last rank-4 storage is not the logical order of the view
        assert not net._view_fns


def test_views_of_a_rank5_tensor_and_reruns():
    net = Network(qkv_model(), _registry(), backend_param("numpy"), FP32_NCHW)
    r = X.reshape(3, 2, 4, 4)
    np.testing.assert_allclose(net.infer({"x": X})["out"], ((r[0] + r[1]) * r[2])[None], rtol=1e-6)
    assert set(net._view_fns) == {"q", "k", "v"}
    x2 = X[:, ::-1].copy()
    r2 = x2.reshape(3, 2, 4, 4)
    np.testing.assert_allclose(net.infer({"x": x2})["out"], ((r2[0] + r2[1]) * r2[2])[None], rtol=1e-6)
    np.testing.assert_allclose(net.output("k"), r2[1][None], rtol=1e-6)  # a view's own output reads right


def test_an_activation_or_a_non_contiguous_pick_keeps_the_computed_gather():
    with_act = Network(qkv_model(act="relu"), _registry(), backend_param("numpy"), FP32_NCHW)
    with_act.infer({"x": X})
    assert set(with_act._view_fns) == {"q", "v"}
    r = X.reshape(3, 2, 4, 4)
    np.testing.assert_allclose(with_act.output("out"), ((r[0] + np.maximum(r[1], 0)) * r[2])[None], rtol=1e-6)
    inner = Network(qkv_model(axis=3), _registry(), backend_param("numpy"), FP32_NCHW)  # picks along axis 3
    out = inner.infer({"x": X})["out"]
    r5 = X.reshape(1, 3, 2, 4, 4)
    np.testing.assert_allclose(out, (r5[:, :, :, 0] + r5[:, :, :, 1]) * r5[:, :, :, 2], rtol=1e-6)
    assert not inner._view_fns
