"""The analysis samples do something visible: the designed filters denoise the sample photo, the edge
detector finds the house, and the shipped models and weights are exactly what make_samples.py designs."""
from __future__ import annotations

import numpy as np

from engine import modelfile
from engine.io import VideoReader, read_image
from engine.network import Network
from engine.weights import WeightsFolder
from resources import SAMPLES


def net_for(name: str, registry) -> Network:
    model = modelfile.load(SAMPLES / name, registry)
    assert model.settings["weights"] == "filters_weights" and model.settings["input.photo"] == "scene.jpg"
    net = Network(model, registry, weights=WeightsFolder(SAMPLES / "filters_weights"), reuse_buffers=False)
    net.set_input("photo", read_image(SAMPLES / "scene.jpg"))
    return net


def test_filters_sample_denoises_and_compares_with_mix(registry):
    net = net_for("filters.lnet", registry)
    net.run()
    clean, noisy, sharp = net.output("photo"), net.output("noisy"), net.output("sharpen")
    denoised = net.output("denoise")
    def mse(a, region=(slice(None), slice(None))):
        return float(np.mean((a - clean)[..., region[0], region[1]] ** 2))

    sky = (slice(5, 60), slice(20, 300))
    assert mse(denoised, sky) < 0.2 * mse(noisy, sky)  # on smooth areas the blur removes most of the noise
    assert mse(denoised) < 0.7 * mse(noisy) and mse(sharp) < 0.6 * mse(noisy)  # texture included
    out = net.output("result")  # split view: noisy on the left, filtered on the right, a line between
    w = out.shape[3]
    np.testing.assert_array_equal(out[..., : w // 2], noisy[..., : w // 2])
    np.testing.assert_array_equal(out[..., w // 2 + 1:], sharp[..., w // 2 + 1:])
    assert np.all(out[..., w // 2] == 1.0)
    assert [o["name"] for o in net.runtime_options()["compare"]][:2] == ["blend", "factor"]


def test_edges_sample_finds_the_house(registry):
    net = net_for("edges.lnet", registry)
    net.run()
    edges = net.output("edges")[0, 0]
    assert edges.shape == (240, 320)
    sky = edges[5:40, 20:120]  # smooth gradient
    wall = edges[130:170, 185:195]  # the house's left wall: a vertical edge at x ~ 182
    assert sky.mean() < 0.05
    assert edges[135:165, 178:186].max(axis=1).min() > 0.5  # every row of the wall's outline
    assert sky.max() < 0.5 and wall.mean() < 0.2  # inside the wall: flat
    net.set_runtime_option("turn", "rotation", 90)
    net.run()
    turned = net.output("edges")[0, 0]
    assert not np.allclose(turned, edges)


def test_shipped_weights_and_video_match_the_design():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for layer, ws in mod.filter_weights().items():
        for w, arr in ws.items():
            np.testing.assert_allclose(np.load(SAMPLES / "filters_weights" / f"{layer}_{w}.npy"), arr, rtol=1e-6)
    for name, model in (("filters.lnet", mod.filters_model()), ("edges.lnet", mod.edges_model())):
        assert modelfile.dumps(model) == (SAMPLES / name).read_text(encoding="utf-8")
    blur = mod.filter_weights()["denoise"]["weights"]
    assert blur.shape == (3, 1, 5, 5) and np.allclose(blur.sum(axis=(2, 3)), 1.0)
    reader = VideoReader(SAMPLES / "scene.avi")
    try:
        assert reader.frame_count == mod.VIDEO_FRAMES
        assert reader.read().shape == (1, 3, mod.VIDEO_H, mod.VIDEO_W)
    finally:
        reader.close()
    total = sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file() and p.name != "sample.png")
    assert total < 1_000_000


def test_filters_sample_denoises_a_real_photograph(registry):
    """coffee.jpg is a photograph (CC0, from scikit-image's data); the designed filters still help."""
    net = net_for("filters.lnet", registry)
    net.set_input("photo", read_image(SAMPLES / "coffee.jpg"))
    net.run()
    clean, noisy, denoised = net.output("photo"), net.output("noisy"), net.output("denoise")
    assert clean.shape == (1, 3, 240, 360)
    assert float(np.mean((denoised - clean) ** 2)) < 0.7 * float(np.mean((noisy - clean) ** 2))
