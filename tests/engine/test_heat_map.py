"""Heat maps of tensors of rank 2 and 3 (engine.analysis.heat_map), and the analysis views that make them
(engine.frames.prepare_view): a matrix or tokens x features is shown on a colour scale, not as an image."""
from __future__ import annotations

import numpy as np

from engine.analysis import HEAT_NAN_RGB, HEAT_STOPS, heat_colours, heat_map, value_range
from engine.frames import View, prepare_view
from engine.model import Model
from engine.network import Network
from engine.plugins import default_registry


def test_heat_colours_span_the_scale():
    rgb = heat_colours(np.array([-1.0, 0.0, 0.5, 1.0, 3.0, np.nan], np.float32), 0.0, 1.0)
    assert [tuple(c) for c in rgb] == [HEAT_STOPS[0], HEAT_STOPS[0], HEAT_STOPS[2], HEAT_STOPS[-1], HEAT_STOPS[-1],
                                       HEAT_NAN_RGB]
    between = heat_colours(np.array([0.125], np.float32), 0.0, 1.0)[0]  # half way between the first two stops
    assert tuple(between) == tuple(round((a + b) / 2) for a, b in zip(HEAT_STOPS[0], HEAT_STOPS[1], strict=True))
    assert tuple(heat_colours(np.ones(3, np.float32), 2.0, 2.0)[1]) == HEAT_STOPS[2]  # one value: the middle


def test_rank_3_tensor_is_one_matrix_per_batch_item():
    x = np.arange(2 * 5 * 7, dtype=np.float32).reshape(2, 5, 7)
    x[1, 2, 3] = np.inf  # not counted in the range
    hm = heat_map(x)
    assert (hm.lo, hm.hi) == (0.0, 69.0) and value_range(x) == (0.0, 69.0)
    assert (hm.layout.n, hm.layout.c, hm.layout.rows, hm.layout.cols) == (1, 2, 2, 1)
    assert hm.image.shape == (2 * 5 + 1, 7, 3)  # the two items one above the other, a grey row between
    assert tuple(hm.image[0, 0]) == HEAT_STOPS[0] and tuple(hm.image[5, 0]) == (60, 60, 60)
    assert tuple(hm.image[6 + 4, 6]) == HEAT_STOPS[-1]  # item 1, row 4, column 6: the largest finite value
    assert hm.layout.locate(3, 6 + 2) == (0, 1, 2, 3)  # hover: item 1, row 2, column 3
    mat = heat_map(np.eye(4, dtype=np.float32) * 2 - 1)  # rank 2: one matrix
    assert mat.image.shape == (4, 4, 3) and (mat.lo, mat.hi) == (-1.0, 1.0)
    big = heat_map(np.zeros((1, 3000, 2000), np.float32), max_pixels=1_000_000)
    assert big.layout.factor > 1 and big.image.shape[0] * big.image.shape[1] <= 1_000_000


def test_image_views_of_rank_2_and_3_are_heat_maps():
    reg = default_registry()
    m = Model("tokens")
    m.add_layer("input", "tokens", params={"dimensions": "1x6x8"})
    m.add_layer("softmax", "attn", inputs=["tokens"])
    m.add_layer("reshape", "image", params={"shape": "1,3,4,4"}, inputs=["attn"])
    m.add_layer("output", "out", inputs=["image"])
    net = Network(m, reg)
    x = np.random.default_rng(0).standard_normal((1, 6, 8)).astype(np.float32)
    net.infer({"tokens": x})
    p = prepare_view(net, View("attn", "image"))
    attn = net.output("attn")
    assert p.heat == (float(attn.min()), float(attn.max())) and p.image.shape == (6, 8, 3)
    q = prepare_view(net, View("image", "image"))  # rank 4 stays an image
    assert q.heat is None and q.image.shape == (4, 4, 3)
