"""The trained sample denoiser (denoiser_trained.lnet) ships weights (resources/samples/train_denoiser.py): on the
held-out photograph (chelsea, never seen in training) it raises the PSNR well above the noisy input's."""
from __future__ import annotations

import numpy as np

from engine import modelfile
from engine.io import read_image
from engine.network import Network
from engine.weights import WeightsFolder
from resources import SAMPLES


def _psnr(a: np.ndarray, ref: np.ndarray) -> float:
    return float(10 * np.log10(1.0 / np.mean((np.clip(a, 0, 1) - ref) ** 2)))


def test_shipped_weights_denoise_the_held_out_photograph(registry):
    model = modelfile.load(SAMPLES / "denoiser_trained.lnet", registry)
    assert model.settings["weights"] == "denoiser_weights" and model.settings["input.input"] == "photo_noisy.png"
    clean = read_image(SAMPLES / "photo_clean.png")
    noisy = read_image(SAMPLES / "photo_noisy.png")
    assert clean.shape == noisy.shape == (1, 3, 240, 320)
    net = Network(model, registry, weights=WeightsFolder(SAMPLES / "denoiser_weights"))
    net.set_input("input", noisy)
    net.run()
    out = net.output("output")
    before, after = _psnr(noisy, clean), _psnr(out, clean)
    assert before < 21.5 and after > before + 5.0, (before, after)


def test_random_weights_do_not(registry):
    """The improvement comes from the training: the same network with seeded random weights makes it worse."""
    model = modelfile.load(SAMPLES / "denoiser_trained.lnet", registry)
    clean = read_image(SAMPLES / "photo_clean.png")
    noisy = read_image(SAMPLES / "photo_noisy.png")
    net = Network(model, registry)
    net.set_input("input", noisy)
    net.run()
    assert _psnr(net.output("output"), clean) < _psnr(noisy, clean) + 1.0
