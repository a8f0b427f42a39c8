"""Property tests for the standard layers from affine to pooling (type checker against the computation).

For random parameters and input sizes (mostly valid, sometimes not): when the type checker (shapes
only, no tensors) finds no error, running the layer succeeds and produces exactly the inferred
dimensions; when it finds an error, running fails with a ParameterError or ShapeError, never with an
exception from inside NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from engine.errors import ParameterError, ShapeError
from engine.plugins import default_registry
from engine.tensor import FORMATS
from engine.typecheck import check, errors, output_shapes
from tests.harness import layer_model, run_layer

BOOL = st.booleans().map(lambda b: "true" if b else "false")


def mostly(valid, invalid, one_in: int = 12):
    """Draws from ``valid``, or (about one time in ``one_in``) from ``invalid``. (The switch is a middle
    value: hypothesis favours the ends of a range.)"""
    return st.sampled_from(range(one_in)).flatmap(lambda r: invalid if r == one_in // 2 else valid)


def hw(lo: int, hi: int, bad_lo: int = 0, bad_hi: int = 0):
    """A 'HxW' parameter text, each side in [lo, hi], rarely in [bad_lo, bad_hi]."""
    side = mostly(st.integers(lo, hi), st.integers(bad_lo, bad_hi))
    return st.tuples(side, side).map(lambda t: f"{t[0]}x{t[1]}")


def size(lo: int = 1, hi: int = 9):
    return st.integers(lo, hi)


@st.composite
def conv(draw) -> tuple[dict, list]:
    """Convolution parameters (groups dividing the channels, mostly) and a fitting input."""
    g = draw(st.integers(1, 3))
    o = draw(mostly(st.integers(1, 3).map(lambda k: g * k), st.integers(0, 5)))
    c = draw(mostly(st.integers(1, 2).map(lambda k: g * k), st.integers(1, 5)))
    params = {"num_output_channels": o, "groups": g, "kernel_size": draw(hw(1, 3)), "stride": draw(hw(1, 2)),
              "padding": draw(hw(0, 2, 3, 6)), "dilation": draw(hw(1, 2)), "bias": draw(BOOL)}
    return params, [(draw(size(1, 2)), c, draw(size(3, 9)), draw(size(3, 9)))]


@st.composite
def pool(draw, prefix: str = "") -> dict:
    """Pooling parameters: padding mostly smaller than the kernel, kernel rarely larger than the input."""
    def name(n: str) -> str:
        return n if n == "pool_type" else prefix + n
    kernel = [draw(mostly(size(1, 3), st.integers(0, 9))) for _ in range(2)]
    padding = [draw(mostly(st.integers(0, max(k - 1, 0)), st.integers(0, 4))) for k in kernel]
    return {name("pool_type"): draw(st.sampled_from(["max", "average"])), name("kernel_size"): "x".join(map(str, kernel)),
            name("stride"): draw(hw(1, 3)), name("padding"): "x".join(map(str, padding)),
            name("global"): draw(mostly(st.just("false"), BOOL, 4)), name("count_include_pad"): draw(BOOL)}


def with_padding_end(params, ceil_mode: bool = False):
    """``params`` plus a ``padding_end`` (absent, -1 = same as padding on an axis, or 0..3) and, for pooling,
    ``ceil_mode``."""
    ends = st.one_of(st.just({}), st.tuples(st.integers(-1, 3), st.integers(-1, 3)).map(
        lambda t: {"padding_end": f"{t[0]}x{t[1]}"}))
    extras = st.tuples(ends, BOOL if ceil_mode else st.just(None)).map(
        lambda t: t[0] | ({"ceil_mode": t[1]} if t[1] is not None else {}))
    return st.tuples(params, extras)


def one_input(params, channels=None, hw_sizes=None):
    """(params, [one input shape]); C in 1..6 and H, W in 1..9 unless given."""
    c = size(1, 6) if channels is None else channels
    s = size(1, 9) if hw_sizes is None else hw_sizes
    return st.tuples(params, st.tuples(size(1, 2), c, s, s).map(lambda t: [t]))


@st.composite
def deconv(draw) -> tuple[dict, list]:
    """Convolution-style parameters plus output_padding, mostly below max(stride, dilation) per axis."""
    params, shapes = draw(conv())
    stride = [draw(mostly(size(1, 3), st.just(0))) for _ in range(2)]
    dilation = [int(d) for d in params["dilation"].split("x")]
    out_pad = [draw(mostly(st.integers(0, max(s, d, 1) - 1), st.integers(0, 3))) for s, d in zip(stride, dilation)]
    params |= {"stride": "x".join(map(str, stride)), "output_padding": "x".join(map(str, out_pad)),
               "padding": draw(hw(0, 1, 2, 6))}
    return params, shapes


@st.composite
def concat(draw) -> tuple[dict, list]:
    n, h, w = draw(size(1, 2)), draw(size(1, 6)), draw(size(1, 6))
    count = draw(st.integers(1, 4))
    odd = st.sampled_from([(1, 0, 0), (0, 1, 0), (0, 0, 1)])
    shapes = []
    for _ in range(count):
        dn, dh, dw = draw(mostly(st.just((0, 0, 0)), odd, 8))
        shapes.append((n + dn, draw(size(1, 4)), h + dh, w + dw))
    return {}, shapes


CASES = {
    "affine": one_input(st.fixed_dictionaries({"mode": st.sampled_from(["per_tensor", "per_channel"]),
                                               "scale": st.floats(-4, 4), "shift": st.floats(-4, 4)})),
    "batch_normalization": one_input(st.fixed_dictionaries({"epsilon": mostly(st.floats(0, 0.1), st.floats(-1, -1e-6))})),
    "color_conversion": one_input(
        st.fixed_dictionaries({"conversion": st.sampled_from(["rgb_to_bgr", "bgr_to_rgb", "rgb_to_ycbcr", "ycbcr_to_rgb",
                                                              "rgb_to_yuv", "yuv_to_rgb", "rgb_to_gray", "bgr_to_gray"]),
                               "chroma_offset": st.floats(-1, 200)}),
        channels=mostly(st.just(3), size(1, 5), 6)),
    "concatenation": concat(),
    "deconvolution": with_padding_end(deconv()).map(lambda t: (t[0][0] | t[1], t[0][1])),
    "conv_bn": st.tuples(with_padding_end(conv()), mostly(st.floats(0, 0.1), st.floats(-1, -1e-6))).map(
        lambda t: (t[0][0][0] | t[0][1] | {"epsilon": t[1]}, t[0][0][1])),
    "conv_pool": st.tuples(conv(), pool("pool_")).map(lambda t: (t[0][0] | t[1], t[0][1])),
    "depth_to_space": one_input(st.fixed_dictionaries({"block_size": mostly(size(1, 3), st.just(0)),
                                                       "mode": st.sampled_from(["DCR", "CRD"])}),
                                channels=mostly(st.sampled_from([1, 4, 8, 9, 18]), size(1, 9), 6)),
    "space_to_depth": one_input(st.fixed_dictionaries({"block_size": mostly(size(1, 3), st.just(0)),
                                                       "mode": st.sampled_from(["DCR", "CRD"])}),
                                hw_sizes=mostly(st.sampled_from([2, 3, 4, 6, 8, 9]), size(1, 9), 4)),
    "dropout": one_input(st.fixed_dictionaries({"ratio": mostly(st.floats(0, 0.99), st.floats(-0.5, 1.5), 4)})),
    "fully_connected": one_input(st.fixed_dictionaries({"num_outputs": mostly(size(1, 5), st.just(0)), "bias": BOOL})),
    "pooling": one_input(with_padding_end(pool(), ceil_mode=True).map(lambda t: t[0] | t[1]), hw_sizes=size(2, 9)),
}


@pytest.mark.parametrize("layer_type", list(CASES))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_inferred_dims_match_the_output_and_bad_configurations_are_clear_errors(layer_type, data):
    params, shapes = data.draw(CASES[layer_type])
    fmt = data.draw(st.sampled_from(FORMATS))
    params = {k: str(v) for k, v in params.items()}
    model = layer_model(layer_type, params, list(shapes))
    diagnosed = errors(check(model, default_registry()))
    event("rejected" if diagnosed else "valid")
    inputs = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in shapes]
    if diagnosed:
        with pytest.raises((ParameterError, ShapeError)):
            run_layer(layer_type, params, inputs, fmt)
        return
    out, _, net = run_layer(layer_type, params, inputs, fmt)
    assert out.shape == tuple(net.dims("L")) == tuple(output_shapes(model, default_registry())["L"])
    assert np.all(np.isfinite(out))
