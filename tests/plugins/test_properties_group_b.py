"""Property tests for the standard layers from gram_matrix to zero_embed (inferred against computed shapes).

For random valid parameters and input sizes, shape inference (``output_dims``) must equal the shape the
layer's computation actually produces (checked at ``store``, before any broadcasting could hide a
mismatch). For random invalid parameters or input sizes, the layer must refuse with ParameterError or
ShapeError, never with an exception from inside NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import ParameterError, ShapeError
from engine.layer import Layer
from engine.tensor import FORMATS
from tests.harness import run_layer

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])

small = st.integers(1, 7)
batch = st.integers(1, 2)


def dims(draw, c=None):
    return (draw(batch), draw(small) if c is None else c, draw(small), draw(small))


# ---- valid cases: draw -> (params, [input shapes]) ------------------------------------------------------
def v_gram_matrix(draw):
    return dict(normalization=draw(st.sampled_from(["hw", "chw", "none"]))), [dims(draw)]


def v_instance_normalization(draw):
    return dict(epsilon=draw(st.floats(1e-8, 1.0))), [dims(draw)]


def v_lrn(draw):
    return dict(size=draw(st.sampled_from([1, 3, 5, 7, 9])), alpha=draw(st.floats(0, 2)), beta=draw(st.floats(0.1, 2)),
                bias=draw(st.floats(0.1, 3))), [dims(draw)]


def v_mono_four_stack(draw):
    return {}, [dims(draw, c=1)]


def v_mono_to_rgb(draw):
    return {}, [dims(draw, c=1)]


def v_padding(draw):
    mode = draw(st.sampled_from(["zero", "reflect", "replicate"]))
    shape = dims(draw)
    params = dict(mode=mode)
    for size, sides in ((shape[2], ("top", "bottom")), (shape[3], ("left", "right"))):
        crop = [draw(st.integers(0, size - 1)) for _ in sides]
        while sum(crop) > size - 1:  # at least one row/column remains
            crop[crop.index(max(crop))] -= 1
        kept = size - sum(crop)
        limit = kept - 1 if mode == "reflect" else 5
        for side, cr in zip(sides, crop):
            params[side] = -cr if cr else draw(st.integers(0, limit))
    return params, [shape]


def v_resize(draw):
    shape = dims(draw)
    params = dict(mode=draw(st.sampled_from(["nearest", "bilinear", "bicubic"])),
                  coordinate_mode=draw(st.sampled_from(["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])),
                  nearest_mode=draw(st.sampled_from(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])),
                  cubic_coeff_a=draw(st.sampled_from([-0.75, -0.5])))
    if draw(st.booleans()):
        params["size"] = f"{draw(small)}x{draw(small)}"
    else:  # factors that keep at least one pixel
        params["scale_h"] = draw(st.floats(1.0 / shape[2], 4.0))
        params["scale_w"] = draw(st.floats(1.0 / shape[3], 4.0))
    return params, [shape]


def slice_text(draw, size):
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    while True:
        start, end = draw(bound), draw(bound)
        step = draw(st.one_of(st.none(), st.integers(-3, 3).filter(bool)))
        if len(range(*slice(start, end, step).indices(size))) >= 1:
            return ":".join("" if v is None else str(v) for v in (start, end, step))


def v_slice(draw):
    shape = dims(draw)
    return {name: slice_text(draw, shape[i]) for i, name in ((1, "channels"), (2, "height"), (3, "width"))}, [shape]


def v_upsample(draw):
    fh, fw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return dict(factor=f"{fh}x{fw}", method=draw(st.sampled_from(["nearest", "bilinear"]))), [dims(draw)]


def upscale_inputs(draw, same_channels=False):
    fh, fw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    x0 = dims(draw)
    h1 = max(1, x0[2] * fh + draw(st.integers(-(fh - 1), fh - 1)))
    w1 = max(1, x0[3] * fw + draw(st.integers(-(fw - 1), fw - 1)))
    skip = (x0[0], x0[1] if same_channels else draw(small), h1, w1)
    return dict(factor=f"{fh}x{fw}", method=draw(st.sampled_from(["nearest", "bilinear"]))), [x0, skip]


def v_upscale_concat(draw):
    return upscale_inputs(draw)


def v_upscale_concat_two(draw):
    params, (x0, skip) = upscale_inputs(draw)
    return params, [x0, skip, (skip[0], draw(small), skip[2], skip[3])]


def v_upscale_sum(draw):
    return upscale_inputs(draw, same_channels=True)


def v_zero_embed(draw):
    shape = dims(draw)
    params = {}
    for have, size_p, off_p in ((shape[1], "channels", "channel_offset"), (shape[2], "height", "top"),
                                (shape[3], "width", "left")):
        size = draw(st.sampled_from([0, have, have + draw(st.integers(1, 4))]))
        params[size_p] = size
        params[off_p] = draw(st.integers(0, (size or have) - have))
    return params, [shape]


VALID = {name[2:]: fn for name, fn in dict(globals()).items() if name.startswith("v_")}


@pytest.mark.parametrize("layer", sorted(VALID))
@SETTINGS
@given(data=st.data())
def test_output_dims_equal_the_computed_shape(layer, data):
    params, shapes = VALID[layer](data.draw)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    stored = []
    original = Layer.store

    def checking_store(self, out, y):
        if self.name == "L":
            stored.append(tuple(y.shape))
        original(self, out, y)

    original_physical = Layer.store_physical

    def checking_store_physical(self, out, y):
        if self.name == "L":
            stored.append(tuple(self.fmt.dims_of(y)))
        original_physical(self, out, y)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Layer, "store", checking_store)
        mp.setattr(Layer, "store_physical", checking_store_physical)
        mp.setenv("LAYERLAB_CPU_KERNELS", "off")  # the generic NumPy computation, whose shape is checked here
        fmt = data.draw(st.sampled_from(FORMATS))
        out, _, net = run_layer(layer, params, xs, fmt, activation=data.draw(st.sampled_from(["none", "relu"])))
    assert stored == [out.shape], f"{layer} {params} {shapes}: computed {stored}, inferred {out.shape}"
    assert tuple(net.layer("L").out_dims) == out.shape
    assert np.all(np.isfinite(out))


# ---- invalid cases: draw -> (params, [input shapes]) that must be refused ---------------------------------
def i_gram_matrix(draw):
    return dict(normalization=draw(st.text(min_size=1, max_size=6).filter(lambda t: t.strip() not in ("hw", "chw", "none")))), \
        [dims(draw)]


def i_instance_normalization(draw):
    return dict(epsilon=draw(st.one_of(st.floats(-10, 0), st.floats(1.001, 100), st.just("abc"), st.just("nan")))), \
        [dims(draw)]


def i_lrn(draw):
    bad = draw(st.sampled_from([("size", draw(st.sampled_from([0, 2, 4, 256, -1]))), ("beta", draw(st.floats(-5, 0))),
                                ("bias", draw(st.floats(-5, 0))), ("alpha", draw(st.floats(-5, -1e-6)))]))
    return dict([bad]), [dims(draw)]


def i_mono_four_stack(draw):
    return {}, [dims(draw, c=draw(st.integers(2, 5)))]


def i_mono_to_rgb(draw):
    return {}, [dims(draw, c=draw(st.integers(2, 5)))]


def i_padding(draw):
    shape = dims(draw)
    kind = draw(st.sampled_from(["crop_all", "reflect_too_far", "mode", "not_int"]))
    if kind == "crop_all":
        t = -draw(st.integers(0, shape[2]))
        return dict(top=t, bottom=-(shape[2] - (-t)) - draw(st.integers(0, 3))), [shape]
    if kind == "reflect_too_far":
        return dict(mode="reflect", right=shape[3] + draw(st.integers(0, 3))), [shape]
    if kind == "mode":
        return dict(mode=draw(st.sampled_from(["constant", "edge", "wrap", ""]))), [shape]
    return dict(left=draw(st.sampled_from(["1.5", "x", "70000"]))), [shape]


def i_resize(draw):
    shape = dims(draw)
    kind = draw(st.sampled_from(["half_size", "too_small", "scale_range", "mode"]))
    if kind == "half_size":
        return dict(size=draw(st.sampled_from(["0x5", "4x0"]))), [shape]
    if kind == "too_small":  # floor(H * scale) = 0
        return dict(scale_h=draw(st.floats(0.01, 0.999 / shape[2]))), [shape]
    if kind == "scale_range":
        return dict(scale_w=draw(st.sampled_from(["0", "-1", "2000", "inf"]))), [shape]
    if draw(st.booleans()):
        return dict(nearest_mode=draw(st.sampled_from(["round", "FLOOR", ""]))), [shape]
    return dict(coordinate_mode=draw(st.sampled_from(["tf_crop_and_resize", "HALF_PIXEL"]))), [shape]


def i_slice(draw):
    shape = dims(draw)
    axis = draw(st.sampled_from(["channels", "height", "width"]))
    size = shape[{"channels": 1, "height": 2, "width": 3}[axis]]
    text = draw(st.one_of(
        st.sampled_from(["1:2:0", "a", "1:2:3:4", "1.0:", "::0", "--1"]),
        st.just(f"{size}:"), st.just(f"{size + draw(st.integers(0, 5))}"), st.just(f"-{size + 1 + draw(st.integers(0, 5))}"),
        st.just("2:1"), st.just("0:0"), st.just(f"{size - 1}:0:1"),
    ))
    return {axis: text}, [shape]


def i_upsample(draw):
    return dict(factor=draw(st.sampled_from(["0", "0x2", "2x0", "1025", "-1", "1.5", "2x2x2"]))), [dims(draw)]


def upscale_bad(draw, with_third=False, same_channels=False):
    f = draw(st.integers(1, 3))
    x0 = dims(draw)
    kind = draw(st.sampled_from(["too_small", "too_large", "batch", "factor"]))
    h1 = x0[2] * f
    params = dict(factor=str(f))
    if kind == "too_small":
        h1 = x0[2] * f - f - draw(st.integers(0, 3))  # input 0 would need to be smaller
    elif kind == "too_large":
        h1 = x0[2] * f + f + draw(st.integers(0, 3))
    elif kind == "factor":
        params["factor"] = draw(st.sampled_from(["0", "1x0", "2000"]))
    n1 = x0[0] + 1 if kind == "batch" else x0[0]
    if h1 < 1:
        h1, n1 = x0[2] * f, x0[0] + 1
    skip = (n1, x0[1] if same_channels else 2, h1, x0[3] * f)
    shapes = [x0, skip] + ([(n1, 1, h1, x0[3] * f)] if with_third else [])
    return params, shapes


def i_upscale_concat(draw):
    return upscale_bad(draw)


def i_upscale_concat_two(draw):
    if draw(st.booleans()):
        params, shapes = upscale_bad(draw, with_third=True)
        return params, shapes
    x0 = dims(draw)
    skip = (x0[0], 1, x0[2] * 2, x0[3] * 2)
    return {}, [x0, skip, (skip[0], 1, skip[2] + draw(st.integers(1, 3)), skip[3])]


def i_upscale_sum(draw):
    if draw(st.booleans()):
        return upscale_bad(draw, same_channels=True)
    x0 = dims(draw)
    return {}, [x0, (x0[0], x0[1] + draw(st.integers(1, 3)), x0[2] * 2, x0[3] * 2)]


def i_zero_embed(draw):
    shape = dims(draw)
    axis = draw(st.sampled_from([("channels", "channel_offset", 1), ("height", "top", 2), ("width", "left", 3)]))
    have = shape[axis[2]]
    if draw(st.booleans()):  # target smaller than the input
        return {axis[0]: draw(st.integers(1, have)), axis[1]: draw(st.integers(1, 3))}, [shape]
    if draw(st.booleans()):
        return {axis[1]: draw(st.integers(1, 4))}, [shape]  # size 0 = as the input: any offset overflows
    return {axis[0]: draw(st.sampled_from(["-1", "x", "1e3"]))}, [shape]


INVALID = {name[2:]: fn for name, fn in dict(globals()).items() if name.startswith("i_")}


def test_every_group_b_layer_has_both_properties():
    expected = {"gram_matrix", "instance_normalization", "lrn", "mono_four_stack", "mono_to_rgb", "padding", "resize",
                "slice", "upsample", "upscale_concat", "upscale_concat_two", "upscale_sum", "zero_embed"}
    assert set(VALID) == expected and set(INVALID) == expected


@pytest.mark.parametrize("layer", sorted(INVALID))
@SETTINGS
@given(data=st.data())
def test_invalid_parameters_are_refused_cleanly(layer, data):
    params, shapes = INVALID[layer](data.draw)
    xs = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises((ParameterError, ShapeError)) as info:
        run_layer(layer, params, xs, FORMATS[0])
    assert f"{layer} L:" in str(info.value), str(info.value)
