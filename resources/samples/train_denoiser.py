"""Trains the sample denoiser (denoiser.lnet: a small DnCNN-style residual network, 3 x (3x3 convolution,
16 channels, ReLU), a 3x3 convolution predicting the noise, subtracted from the input) and writes its weights
to denoiser_weights/ (one .npy per weight, the layout LayerLab reads), the noisy held-out photograph
photo_noisy.png that the sample opens with, and its clean original photo_clean.png.

    python resources/samples/train_denoiser.py [--steps 2500]

Data: scikit-image's sample photographs (``skimage.data``): astronaut, coffee, rocket, immunohistochemistry and
hubble_deep_field for training (random 48x48 crops, flipped), chelsea held out for evaluation. Noise: additive
white Gaussian noise of sigma 25/255 on images in [0, 1] (PyTorch on the CPU, Adam, MSE on the predicted noise).
PSNR reached on the held-out photograph (the full 300x451 image, seed 0): noisy 20.2 dB, denoised 31.1 dB
(the run of this script that wrote the shipped weights; tests/engine/test_sample_denoiser.py checks them)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

HERE = Path(__file__).resolve().parent
SIGMA = 25.0 / 255.0
TRAIN = ("astronaut", "coffee", "rocket", "immunohistochemistry", "hubble_deep_field")
HELD_OUT = "chelsea"
CHANNELS = 16
PHOTO_SIZE = (320, 240)  # width, height of photo_noisy.png


def photograph(name: str) -> np.ndarray:
    """A scikit-image sample photograph as float32 H x W x 3 in [0, 1]."""
    import skimage.data  # noqa: PLC0415 - a training-time dependency only

    return getattr(skimage.data, name)().astype(np.float32) / 255.0


def noisy(image: np.ndarray, seed: int = 0) -> np.ndarray:
    """``image`` with Gaussian noise of sigma 25/255 (not clipped)."""
    return image + np.random.default_rng(seed).normal(0.0, SIGMA, image.shape).astype(np.float32)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB of ``a`` against the reference ``b`` (both in [0, 1])."""
    mse = float(np.mean((np.clip(a, 0, 1) - b) ** 2))
    return 10.0 * np.log10(1.0 / mse)


def build_torch() -> torch.nn.Module:
    import torch  # noqa: PLC0415

    class Denoiser(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, CHANNELS, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1)
            self.conv3 = torch.nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1)
            self.residual = torch.nn.Conv2d(CHANNELS, 3, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.conv1(x))
            h = torch.relu(self.conv2(h))
            h = torch.relu(self.conv3(h))
            return x - self.residual(h)

    return Denoiser()


def train(steps: int, seed: int = 0) -> torch.nn.Module:
    import torch  # noqa: PLC0415

    torch.manual_seed(seed)
    torch.set_num_threads(2)
    rng = np.random.default_rng(seed)
    images = [photograph(n) for n in TRAIN]
    net = build_torch()
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    patch, batch = 48, 32
    for step in range(steps):
        crops = []
        for _ in range(batch):
            im = images[rng.integers(len(images))]
            y, x = rng.integers(im.shape[0] - patch), rng.integers(im.shape[1] - patch)
            c = im[y:y + patch, x:x + patch]
            if rng.random() < 0.5:
                c = c[:, ::-1]
            crops.append(np.ascontiguousarray(c.transpose(2, 0, 1)))
        clean = torch.from_numpy(np.stack(crops))
        dirty = clean + SIGMA * torch.randn_like(clean)
        loss = torch.nn.functional.mse_loss(net(dirty), clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 250 == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.6f}", flush=True)
    return net


def save(net: torch.nn.Module, folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    for name in ("conv1", "conv2", "conv3", "residual"):
        conv = getattr(net, name)
        np.save(folder / f"{name}_weights.npy", conv.weight.detach().numpy().astype(np.float32))
        np.save(folder / f"{name}_bias.npy", conv.bias.detach().numpy().astype(np.float32))


def write_photos(folder: Path) -> None:
    """The held-out photograph resized to PHOTO_SIZE as photo_clean.png, and with the training noise (seed 0) as
    photo_noisy.png (8-bit PNGs: the sample's input and the tests' reference)."""
    import cv2  # noqa: PLC0415

    clean = cv2.resize(photograph(HELD_OUT), PHOTO_SIZE, interpolation=cv2.INTER_AREA)
    for name, image in (("photo_clean.png", clean), ("photo_noisy.png", np.clip(noisy(clean), 0.0, 1.0))):
        cv2.imwrite(str(folder / name), cv2.cvtColor((image * 255.0 + 0.5).astype(np.uint8), cv2.COLOR_RGB2BGR))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2500)
    args = ap.parse_args()
    import torch  # noqa: PLC0415

    net = train(args.steps)
    save(net, HERE / "denoiser_weights")
    write_photos(HERE)
    clean = photograph(HELD_OUT)
    dirty = noisy(clean)
    with torch.no_grad():
        out = net(torch.from_numpy(dirty.transpose(2, 0, 1)[None].copy()))[0].numpy().transpose(1, 2, 0)
    print(f"held-out {HELD_OUT}: noisy {psnr(dirty, clean):.2f} dB, denoised {psnr(out, clean):.2f} dB")


if __name__ == "__main__":
    main()
