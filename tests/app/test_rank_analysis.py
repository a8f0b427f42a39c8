"""The analysis panels with tensors of any rank, through real widgets and a real session: the channel inspector and
the output panel show a rank-2 or rank-3 tensor as a heat map with its colour scale, rank 4 as today's channel grid,
rank 5 as the grid of its folded leading axes with the full index under the mouse. Rendered to PNG (LAYERLAB_SHOTS=dir
keeps them)."""
from __future__ import annotations

import numpy as np

from engine.analysis import HEAT_STOPS
from engine.model import Model
from engine.run import RunSpec
from tests.app.test_analysis_panels import WAIT, shot


def tokens_model() -> Model:
    """Tokens 1x49x96 -> layer norm -> softmax (a rank-3 output) and, through a transpose and a reshape to 1x96x7x7,
    a convolution and a reshape to five dimensions (a second output)."""
    m = Model("tokens")
    m.add_layer("input", "tokens", params={"dimensions": "1x49x96"})
    m.add_layer("layer_normalization", "norm", inputs=["tokens"])
    m.add_layer("softmax", "attn", inputs=["norm"])
    m.add_layer("output", "attn_out", inputs=["attn"])
    m.add_layer("transpose", "channels_first", params={"perm": "0,2,1"}, inputs=["norm"])
    m.add_layer("reshape", "image", params={"shape": "0,96,7,7"}, inputs=["channels_first"])
    m.add_layer("convolution", "conv", params={"num_output_channels": "8"}, inputs=["image"])
    m.add_layer("reshape", "groups", params={"shape": "0,2,4,7,7"}, inputs=["conv"])
    m.add_layer("output", "grouped", inputs=["groups"])
    return m


def inspect(qtbot, ctl, name: str):
    with qtbot.waitSignal(ctl.proxy.layer_data, timeout=WAIT, check_params_cb=lambda d: d.name == name) as blocker:
        ctl.overview.select(name)
    assert ctl.inspector.wait_ready()
    return blocker.args[0]


def test_heat_maps_of_rank_2_and_3_and_grids_of_other_ranks(qtbot, ctl, registry, tmp_path):
    with qtbot.waitSignal(ctl.proxy.ran, timeout=WAIT):
        ctl.launch(tokens_model(), registry, RunSpec(backend="numpy"))
    ins = ctl.inspector
    data = inspect(qtbot, ctl, "norm")
    assert data.dims == "1x49x96"
    assert ins.heat and ins.colour_scale.isVisibleTo(ins) and "heat map" in ins.layer_label.text()
    assert ins.view.image.shape == (49, 96, 3)  # tokens down, features across: not a 1-channel image
    lo, hi = float(data.tensor.min()), float(data.tensor.max())
    assert (ins.colour_scale.lo.text(), ins.colour_scale.hi.text()) == (f"{lo:.4g}", f"{hi:.4g}")
    r, c = np.unravel_index(np.argmax(data.tensor[0, 0]), (49, 96))
    assert tuple(ins.view.image[r, c]) == HEAT_STOPS[-1]
    assert not ins.act_fit.isEnabled() and not ins.scale_box.isEnabled()  # the red/green mapping does not apply
    assert ins.where_text(*ins.value_at(5, 3)) == f"item 0  row 3  column 5   value {data.tensor[0, 0, 3, 5]:.6g}"
    shot(ins, "inspector_heat_map", tmp_path, (900, 520))

    inspect(qtbot, ctl, "conv")  # rank 4: the channel grid as before, red and green
    assert not ins.heat and not ins.colour_scale.isVisibleTo(ins) and ins.act_fit.isEnabled()
    assert ins.layout_.c == 8

    data = inspect(qtbot, ctl, "groups")  # rank 5: its leading axes folded into the grid's rows
    assert data.dims == "1x2x4x7x7" and not ins.heat and (ins.layout_.n, ins.layout_.c) == (2, 4)
    x, y = ins.layout_.cell_origin(1, 2)
    value = float(data.tensor[1, 2, 0, 0])
    assert ins.where_text(*ins.value_at(x, y)) == f"index [0, 1, 2, 0, 0]   value {value:.6g}"

    out = ctl.output
    qtbot.waitUntil(lambda: out.views["attn_out"].image is not None, timeout=WAIT)
    assert out.scales["attn_out"].isVisibleTo(out) and not out.scales["grouped"].isVisibleTo(out)
    assert "heat map, 1 x 49x96" in out.labels["attn_out"].text()
    assert out.views["attn_out"].image.shape == (49, 96, 3)
    shot(out, "output_heat_map", tmp_path, (900, 420))
