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

import numpy as np

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


FILTERS_LNET = """<?xml version="1.0" encoding="utf-8"?>
<network format-version="1" name="filters" version="1.0">
  <settings>
    <setting name="backend" value="auto" />
    <setting name="format" value="fp32 nchw" />
    <setting name="input.photo" value="scene.jpg" />
    <setting name="weights" value="filters_weights" />
  </settings>
  <layers>
    <layer name="photo" type="input" x="0" y="120">
      <param name="dimensions" value="1x3x240x320" />
    </layer>
    <layer name="noisy" type="noise" x="220" y="120">
      <param name="kind" value="gaussian" />
      <param name="amplitude" value="0.08" />
      <param name="seed" value="1" />
      <param name="clip" value="true" />
      <input index="0" source="photo" />
    </layer>
    <layer name="denoise" type="convolution" x="440" y="40">
      <param name="num_output_channels" value="3" />
      <param name="kernel_size" value="5" />
      <param name="padding" value="2" />
      <param name="groups" value="3" />
      <input index="0" source="noisy" />
    </layer>
    <layer name="sharpen" type="convolution" x="660" y="40">
      <param name="num_output_channels" value="3" />
      <param name="kernel_size" value="3" />
      <param name="padding" value="1" />
      <param name="groups" value="3" />
      <input index="0" source="denoise" />
    </layer>
    <layer name="compare" type="mix" x="880" y="120">
      <param name="blend" value="split" />
      <param name="divider" value="0.5" />
      <input index="0" source="noisy" />
      <input index="1" source="sharpen" />
    </layer>
    <layer name="result" type="output" x="1100" y="120">
      <input index="0" source="compare" />
    </layer>
  </layers>
</network>
"""

EDGES_LNET = """<?xml version="1.0" encoding="utf-8"?>
<network format-version="1" name="edges" version="1.0">
  <settings>
    <setting name="backend" value="auto" />
    <setting name="format" value="fp32 nchw" />
    <setting name="input.photo" value="scene.jpg" />
    <setting name="weights" value="filters_weights" />
  </settings>
  <layers>
    <layer name="photo" type="input" x="0" y="100">
      <param name="dimensions" value="1x3x240x320" />
    </layer>
    <layer name="turn" type="affine_transform" x="220" y="100">
      <param name="rotation" value="0" />
      <input index="0" source="photo" />
    </layer>
    <layer name="luma" type="convolution" x="440" y="100">
      <param name="num_output_channels" value="1" />
      <param name="kernel_size" value="1" />
      <param name="padding" value="0" />
      <input index="0" source="turn" />
    </layer>
    <layer name="sobel" type="convolution" x="660" y="100">
      <param name="num_output_channels" value="4" />
      <activation type="relu" />
      <input index="0" source="luma" />
    </layer>
    <layer name="magnitude" type="convolution" x="880" y="100">
      <param name="num_output_channels" value="1" />
      <param name="kernel_size" value="1" />
      <param name="padding" value="0" />
      <input index="0" source="sobel" />
    </layer>
    <layer name="overlay" type="mix" x="1100" y="100">
      <param name="blend" value="screen" />
      <param name="factor" value="1" />
      <input index="0" source="turn" />
      <input index="1" source="magnitude" />
    </layer>
    <layer name="edges" type="output" x="1320" y="40">
      <input index="0" source="magnitude" />
    </layer>
    <layer name="overlaid" type="output" x="1320" y="160">
      <input index="0" source="overlay" />
    </layer>
  </layers>
</network>
"""


def main(out: Path = HERE) -> None:
    import cv2

    sys.path.insert(0, str(HERE.parent.parent))
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
    (out / "filters.lnet").write_text(FILTERS_LNET, encoding="utf-8")
    (out / "edges.lnet").write_text(EDGES_LNET, encoding="utf-8")


if __name__ == "__main__":
    main()
