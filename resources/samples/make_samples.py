"""Writes the analysis samples: a photo-like scene (scene.jpg), a short video panning over it
(scene.avi), the weights of analytically designed filters (filters_weights/) and two models that use
them (filters.lnet: noise, denoising blur and unsharp mask with a split-view mix comparing the noisy
input with the result; edges.lnet: a Sobel edge detector). Run it again to regenerate them:

    python resources/samples/make_samples.py

The filters are designed, not trained: a 5x5 Gaussian blur (sigma 1.1) removes noise, an unsharp mask
(identity + 1.5 * (identity - 3x3 blur)) sharpens, and Sobel kernels find edges. Each works per colour
channel (grouped convolutions) except the edge detector, which first converts RGB to luminance."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from engine.model import Model

HERE = Path(__file__).resolve().parent
W, H = 320, 240
STILL_X0 = 240  # the still image: the part of the wide scene with the house, the sun and the sign
VIDEO_W, VIDEO_H, VIDEO_FRAMES = 192, 144, 36


def _fbm(h: int, w: int, rng: np.random.Generator, octaves: int = 5) -> np.ndarray:
    """Smooth fractal noise in [0, 1] (sums of upsampled random grids)."""
    import cv2

    out = np.zeros((h, w), np.float32)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        g = rng.random((2 + 2 ** o, 2 + 2 ** o)).astype(np.float32)
        out += amp * cv2.resize(g, (w, h), interpolation=cv2.INTER_CUBIC)
        total += amp
        amp *= 0.55
    out /= total
    return (out - out.min()) / (out.max() - out.min())


def scene(w: int = 2 * W, h: int = H, seed: int = 7) -> np.ndarray:
    """An RGB uint8 landscape: sky, sun, two mountain ranges, a lake with reflections, a house with a
    sign and a textured meadow: smooth areas, edges, fine texture and text."""
    import cv2

    rng = np.random.default_rng(seed)
    y = np.linspace(0, 1, h, dtype=np.float32)[:, None]
    x = np.linspace(0, 1, w, dtype=np.float32)[None, :]
    img = np.zeros((h, w, 3), np.float32)
    sky = np.stack([0.35 + 0.45 * y, 0.55 + 0.35 * y, 0.95 - 0.1 * y], axis=-1) * np.ones_like(x)[..., None]
    clouds = _fbm(h, w, rng)[..., None]
    img[:] = sky + 1.2 * np.clip(clouds - 0.5, 0, 1) * (1 - y[..., None])
    sun = np.exp(-(((x - 0.78) * w) ** 2 + ((y - 0.18) * h) ** 2) / (2 * (0.035 * h) ** 2))[..., None]
    img += sun * np.array([1.0, 0.85, 0.5])
    ridge_far = 0.42 + 0.12 * (_fbm(1, w, rng, 6)[0] - 0.5) + 0.05 * np.sin(x[0] * 9)
    ridge_near = 0.55 + 0.15 * (_fbm(1, w, rng, 6)[0] - 0.5) - 0.04 * np.cos(x[0] * 5)
    rock = _fbm(h, w, rng, 6)[..., None]
    far = (y > ridge_far[None, :])[..., None]
    detail = _fbm(h, w, rng, 8)[..., None]
    img = np.where(far, np.array([0.42, 0.47, 0.6]) * (0.55 + 0.9 * detail), img)
    snow = far & (y[..., None] < ridge_far[None, :, None] + 0.05 + 0.04 * detail)
    img = np.where(snow, np.array([0.92, 0.94, 0.98]) * (0.85 + 0.2 * detail), img)
    near = (y > ridge_near[None, :])[..., None]
    img = np.where(near, np.array([0.25, 0.38, 0.22]) * (0.45 + 1.1 * detail), img)
    lake = (y > 0.66)[..., None] & (x < 0.55)[..., None] & (y < 0.8 + 0.05 * np.sin(x * 20))[..., None]
    mirrored = img[np.clip((2 * 0.66 * h - np.arange(h)).astype(int), 0, h - 1)]
    img = np.where(lake, 0.55 * mirrored + np.array([0.05, 0.12, 0.22]), img)
    grass = (y > 0.8 + 0.05 * np.sin(x * 20))[..., None] | ((y > 0.66) & (x >= 0.55))[..., None]
    blades = rng.random((h, w)).astype(np.float32)[..., None]
    img = np.where(grass, np.array([0.3, 0.5, 0.18]) * (0.6 + 0.6 * blades) + 0.15 * rock, img)
    img8 = (np.clip(img, 0, 1) * 255).astype(np.uint8)
    bgr = np.ascontiguousarray(img8[..., ::-1])
    hx, hy = int(0.66 * w), int(0.5 * h)
    cv2.rectangle(bgr, (hx, hy), (hx + 70, hy + 55), (200, 215, 230), -1)
    cv2.fillPoly(bgr, [np.array([(hx - 8, hy), (hx + 35, hy - 30), (hx + 78, hy)])], (40, 40, 150))
    for wx in (hx + 10, hx + 45):
        cv2.rectangle(bgr, (wx, hy + 12), (wx + 14, hy + 26), (90, 60, 30), -1)
        cv2.line(bgr, (wx + 7, hy + 12), (wx + 7, hy + 26), (230, 230, 230), 1)
    cv2.rectangle(bgr, (hx + 28, hy + 30), (hx + 42, hy + 55), (30, 50, 90), -1)
    sx, sy = int(0.42 * w), int(0.84 * h)
    cv2.rectangle(bgr, (sx, sy), (sx + 120, sy + 24), (235, 235, 235), -1)
    cv2.line(bgr, (sx + 60, sy + 24), (sx + 60, sy + 36), (40, 60, 80), 3)
    cv2.putText(bgr, "LayerLab", (sx + 6, sy + 18), cv2.FONT_HERSHEY_SIMPLEX, 0.62, (30, 30, 30), 2, cv2.LINE_AA)
    return np.ascontiguousarray(bgr[..., ::-1])


def gaussian_kernel(size: int, sigma: float) -> np.ndarray:
    r = np.arange(size, dtype=np.float64) - (size - 1) / 2
    g = np.exp(-(r ** 2) / (2 * sigma ** 2))
    k = np.outer(g, g)
    return k / k.sum()


def filter_weights() -> dict[str, dict[str, np.ndarray]]:
    """{layer: {weight: array}} of the sample filters (float32, logical shapes)."""
    blur5 = gaussian_kernel(5, 1.1)
    blur3 = gaussian_kernel(3, 0.8)
    ident3 = np.zeros((3, 3))
    ident3[1, 1] = 1.0
    sharpen = ident3 + 1.5 * (ident3 - blur3)
    sobel_x = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], np.float64)
    luma = np.array([0.299, 0.587, 0.114])
    per_channel = lambda k: np.repeat(k[None, None], 3, axis=0)  # noqa: E731 - (3, 1, kh, kw) grouped
    edges = np.stack([sobel_x, -sobel_x, sobel_x.T, -sobel_x.T])[:, None]  # |gx| and |gy| through relu
    return {
        "denoise": {"weights": per_channel(blur5), "bias": np.zeros(3)},
        "sharpen": {"weights": per_channel(sharpen), "bias": np.zeros(3)},
        "luma": {"weights": luma.reshape(1, 3, 1, 1), "bias": np.zeros(1)},
        "sobel": {"weights": edges, "bias": np.zeros(4)},
        "magnitude": {"weights": np.full((1, 4, 1, 1), 0.5), "bias": np.zeros(1)},
    }


def _photo_model(name: str, y: float) -> Model:
    """A model with the settings both samples share and the input layer ``photo`` at height ``y``."""
    from engine.model import Model

    model = Model(name)
    for key, value in (("backend", "auto"), ("format", "fp32 nchw"), ("input.photo", "scene.jpg"),
                       ("weights", "filters_weights")):
        model.set_setting(key, value)
    model.add_layer("input", "photo", {"dimensions": f"1x3x{H}x{W}"}, position=(0, y))
    return model


def filters_model() -> Model:
    """filters.lnet: noise, a denoising blur and an unsharp mask, then a split-view mix of noisy and filtered."""
    model = _photo_model("filters", 120)
    model.add_layer("noise", "noisy", {"kind": "gaussian", "amplitude": "0.08", "seed": "1", "clip": "true"},
                    ["photo"], position=(220, 120))
    for name, size, source, x in (("denoise", 5, "noisy", 440), ("sharpen", 3, "denoise", 660)):
        per_channel = {"num_output_channels": "3", "kernel_size": str(size), "padding": str(size // 2), "groups": "3"}
        model.add_layer("convolution", name, per_channel, [source], position=(x, 40))
    model.add_layer("mix", "compare", {"blend": "split", "divider": "0.5"}, ["noisy", "sharpen"],
                    position=(880, 120))
    model.add_layer("output", "result", inputs=["compare"], position=(1100, 120))
    return model


def edges_model() -> Model:
    """edges.lnet: a turnable luminance Sobel edge detector, its output alone and screened over the photo."""
    model = _photo_model("edges", 100)
    model.add_layer("affine_transform", "turn", {"rotation": "0"}, ["photo"], position=(220, 100))
    pointwise = {"num_output_channels": "1", "kernel_size": "1", "padding": "0"}
    model.add_layer("convolution", "luma", pointwise, ["turn"], position=(440, 100))
    model.add_layer("convolution", "sobel", {"num_output_channels": "4"}, ["luma"], activation="relu",
                    position=(660, 100))
    model.add_layer("convolution", "magnitude", pointwise, ["sobel"], position=(880, 100))
    model.add_layer("mix", "overlay", {"blend": "screen", "factor": "1"}, ["turn", "magnitude"],
                    position=(1100, 100))
    model.add_layer("output", "edges", inputs=["magnitude"], position=(1320, 40))
    model.add_layer("output", "overlaid", inputs=["overlay"], position=(1320, 160))
    return model


def main(out: Path = HERE) -> None:
    import cv2

    sys.path.insert(0, str(HERE.parent.parent))
    from engine import modelfile
    from engine.weights import save_weights

    wide = scene()
    still = wide[:, STILL_X0:STILL_X0 + W]
    cv2.imwrite(str(out / "scene.jpg"), np.ascontiguousarray(still[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 88])
    writer = cv2.VideoWriter(str(out / "scene.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 12.0, (VIDEO_W, VIDEO_H))
    small = cv2.resize(wide, (int(wide.shape[1] * VIDEO_H / H), VIDEO_H), interpolation=cv2.INTER_AREA)
    span = small.shape[1] - VIDEO_W
    for i in range(VIDEO_FRAMES):
        x0 = int(round(span * i / (VIDEO_FRAMES - 1)))
        writer.write(np.ascontiguousarray(small[:, x0:x0 + VIDEO_W, ::-1]))
    writer.release()
    save_weights(out / "filters_weights", filter_weights())
    modelfile.save(filters_model(), out / "filters.lnet")
    modelfile.save(edges_model(), out / "edges.lnet")


if __name__ == "__main__":
    main()
