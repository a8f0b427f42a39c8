"""Vendor model files: the vendor designer's parameter names load as legacy names with the same meaning, and its
input-image conventions (shift before scale, alpha zeroed) are parameters a file can ask for."""
from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np

from engine.modelfile import loads
from engine.network import Network
from engine.run import RunSpec, load_inputs, open_network
from engine.typecheck import check

README = Path(__file__).resolve().parents[2] / "docs" / "model-files.md"


def model(layers: str) -> str:
    return f'<network format-version="1" name="vendor"><layers>{layers}</layers></network>'


def test_apply_bias_is_bias_on_every_weighted_layer(registry):
    m = loads(model(
        '<layer name="inp" type="input"><param name="dimensions" value="1x3x8x8"/></layer>'
        '<layer name="c" type="convolution"><param name="apply_bias" value="false"/>'
        '<input index="0" source="inp"/></layer>'
        '<layer name="out" type="output"><input index="0" source="c"/></layer>'), registry=registry)
    assert m.load_warnings == [] and not check(m, registry)
    net = Network(m, registry)
    assert net.layer("c").p["bias"] is False and "bias" not in net.layer("c").weight_shapes([net.dims("inp")])
    for ltype in ("deconvolution", "fully_connected", "conv_bn", "conv_pool"):
        desc = registry.find_layer(ltype)
        assert desc.canonical_param_name("apply_bias") == "bias", ltype


def test_dominant_channel_and_pixel_mean_crd_and_dcr(registry):
    x = np.random.default_rng(0).random((1, 2, 4, 4), dtype=np.float32)
    outs = {}
    for value in ("pixel", "channel", "DCR", "CRD"):
        for ltype, dims in (("space_to_depth", "1x2x4x4"), ("depth_to_space", "1x8x2x2")):
            key = "dominant" if value.islower() else "mode"
            m = loads(model(
                f'<layer name="inp" type="input"><param name="dimensions" value="{dims}"/></layer>'
                f'<layer name="s" type="{ltype}"><param name="{key}" value="{value}"/><input index="0" source="inp"/>'
                '</layer>'), registry=registry)
            assert m.load_warnings == []
            data = x if ltype == "space_to_depth" else x.reshape(1, 8, 2, 2)
            outs[ltype, value] = Network(m, registry).infer({"inp": data})["s"]
    for ltype in ("space_to_depth", "depth_to_space"):
        np.testing.assert_array_equal(outs[ltype, "pixel"], outs[ltype, "DCR"])
        np.testing.assert_array_equal(outs[ltype, "channel"], outs[ltype, "CRD"])
        assert not np.array_equal(outs[ltype, "DCR"], outs[ltype, "CRD"])


def test_input_order_and_alpha_follow_the_file(registry, tmp_path):
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 255, 128  # red, half alpha (OpenCV writes BGRA)
    cv2.imwrite(str(tmp_path / "a.png"), rgba[..., [2, 1, 0, 3]])
    results = {}
    for params in ('', '<param name="order" value="shift_scale"/><param name="use_alpha" value="false"/>'):
        m = loads(model(
            f'<layer name="inp" type="input"><param name="dimensions" value="1x4x4x4"/>'
            f'<param name="scale" value="2"/><param name="shift" value="-0.5"/>{params}</layer>'), registry=registry)
        net = open_network(m, RunSpec(backend="numpy", inputs=((None, str(tmp_path / "a.png")),)), registry)
        results[bool(params)] = load_inputs(net, RunSpec(inputs=((None, str(tmp_path / "a.png")),))).arrays["inp"]
    lab, vendor = results[False], results[True]
    assert np.allclose(lab[0, 0], 2 * 1.0 - 0.5) and np.allclose(lab[0, 3], 2 * 128 / 255 - 0.5)
    assert np.allclose(vendor[0, 0], (1.0 - 0.5) * 2) and np.allclose(vendor[0, 3], 0.0)


def test_readme_lists_every_vendor_mapping(registry):
    """Each row of the docs vendor table names a layer, the vendor name and ours; each is a real legacy name."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Vendor model files", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_, ]+)` \| `([a-z_]+)` \| `([a-z_]+)` \|", section, re.M)
    assert len(rows) >= 3
    for layers, vendor, ours in rows:
        for ltype in (n.strip() for n in layers.split(",")):
            desc = registry.find_layer(ltype)
            assert desc is not None and desc.canonical_param_name(vendor) == ours, (ltype, vendor, ours)
    legacy = {(d.name, n) for d in registry.layer_descs() for p in d.params for n in p.legacy_names}
    listed = {(ltype.strip(), vendor) for layers, vendor, _ in rows for ltype in layers.split(",")}
    vendor_names = {"apply_bias", "dominant", "images_use_alpha"}
    assert {(t, n) for t, n in legacy if n in vendor_names} <= listed
