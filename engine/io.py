"""Reading network inputs (PNG/JPG images, NPY tensors, video files) and writing outputs (NPY, PNG,
video). OpenCV (headless) reads and writes images and video; it is imported on first use.

Images: read as RGB (grayscale stays 1 channel, RGBA keeps 4), values mapped to 0..1 (8-bit / 255,
16-bit / 65535), then ``value * scale + shift``, then zero-padded up to ``min_channels`` channels and
on the bottom/right up to a multiple of ``tiling`` on H and W. The result is a 1xCxHxW float32 tensor.
NPY tensors are passed as they are (4-D, NCHW unless the layout says NHWC; 3-D CHW/HWC gets N=1).
Outputs written as images take batch item 0 (further items get ``_1``, ``_2``... suffixes), clip to
0..1 and scale to 8 bits; 1 channel gives gray, 3 RGB, 4 RGBA, any other count the first 3 channels."""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import InputError, LayerLabError

IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
VIDEO_EXTS = (".mp4", ".avi", ".mkv", ".mpeg", ".mpg", ".wmv", ".mov")


def _cv2() -> Any:
    try:
        import cv2  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - opencv is a base dependency
        raise LayerLabError("reading images and video needs opencv-python-headless") from exc
    return cv2


@dataclass(frozen=True)
class ImageOptions:
    """How images become tensors (the input layer's parameters)."""

    scale: float = 1.0
    shift: float = 0.0
    min_channels: int = 0
    tiling: int = 1
    #: ``value*scale + shift`` (False) or the vendor designer's ``(value + shift)*scale`` (True)
    shift_first: bool = False
    #: keep the 4th (alpha) channel of an RGBA image (False: zeroed, as the vendor designer does)
    use_alpha: bool = True


def kind_of(path: str | os.PathLike[str]) -> str:
    """'image', 'video' or 'npy' by file extension; raises InputError otherwise."""
    ext = Path(path).suffix.lower()
    if ext in IMAGE_EXTS:
        return "image"
    if ext in VIDEO_EXTS:
        return "video"
    if ext == ".npy":
        return "npy"
    raise InputError(f"{path}: unsupported input file type {ext or '(none)'!r}: "
                     f"expected an image ({', '.join(IMAGE_EXTS)}), a video ({', '.join(VIDEO_EXTS)}) or .npy")


def image_to_tensor(rgb: np.ndarray, opts: ImageOptions = ImageOptions()) -> np.ndarray:
    """HxW, HxWxC uint8/uint16/float image (RGB order) -> 1xCxHxW float32 tensor."""
    img = np.asarray(rgb)
    if img.ndim == 2:
        img = img[:, :, None]
    if img.dtype == np.uint8:
        x = img.astype(np.float32) / 255.0
    elif img.dtype == np.uint16:
        x = img.astype(np.float32) / 65535.0
    else:
        x = img.astype(np.float32)
    if opts.shift_first:
        x = (x + np.float32(opts.shift)) * np.float32(opts.scale)
    else:
        x = x * np.float32(opts.scale) + np.float32(opts.shift)
    if not opts.use_alpha and x.shape[2] == 4:
        x[:, :, 3] = 0.0
    t = np.ascontiguousarray(x.transpose(2, 0, 1)[None])
    c, h, w = t.shape[1:]
    tile = max(1, int(opts.tiling))
    pc = max(0, int(opts.min_channels) - c)
    ph, pw = (-h) % tile, (-w) % tile
    if pc or ph or pw:
        t = np.pad(t, ((0, 0), (0, pc), (0, ph), (0, pw)))
    return t


def read_image(path: str | os.PathLike[str], opts: ImageOptions = ImageOptions()) -> np.ndarray:
    cv2 = _cv2()
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such image file")
    img = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise InputError(f"{p}: cannot decode the image (corrupt or unsupported)")
    if img.ndim == 3 and img.shape[2] == 3:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    elif img.ndim == 3 and img.shape[2] == 4:
        img = cv2.cvtColor(img, cv2.COLOR_BGRA2RGBA)
    return image_to_tensor(img, opts)


def read_npy(path: str | os.PathLike[str], layout: str = "nchw") -> np.ndarray:
    """A tensor file as 1..N x C x H x W float32 (NHWC files are transposed when layout='nhwc')."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such tensor file")
    try:
        arr = np.load(p, allow_pickle=False)
    except Exception as exc:
        raise InputError(f"{p}: not a readable .npy tensor ({exc})") from None
    if arr.dtype.kind not in "fiub":
        raise InputError(f"{p}: tensor has dtype {arr.dtype}, expected numbers")
    if arr.ndim == 3:
        arr = arr[None]
    if arr.ndim != 4:
        raise InputError(f"{p}: tensor has shape {arr.shape}, expected 4-D N,C,H,W (or 3-D C,H,W)")
    if layout.lower() == "nhwc":
        arr = arr.transpose(0, 3, 1, 2)
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{p}: tensor contains NaN or infinite values")
    return arr


class VideoReader:
    """Frames of a video file as tensors, one at a time."""

    def __init__(self, path: str | os.PathLike[str], opts: ImageOptions = ImageOptions()) -> None:
        cv2 = _cv2()
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such video file")
        self._cap = cv2.VideoCapture(str(self.path))
        if not self._cap.isOpened():
            raise InputError(f"{self.path}: cannot open the video (corrupt or unsupported codec)")
        self.opts = opts
        self.fps = float(self._cap.get(cv2.CAP_PROP_FPS)) or 25.0
        self.frame_count = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT))

    def seek(self, frame: int) -> None:
        self._cap.set(_cv2().CAP_PROP_POS_FRAMES, int(frame))

    def read(self) -> np.ndarray | None:
        """The next frame as a 1xCxHxW tensor, or None at the end."""
        ok, img = self._cap.read()
        if not ok:
            return None
        return image_to_tensor(_cv2().cvtColor(img, _cv2().COLOR_BGR2RGB), self.opts)

    def skip(self, count: int) -> int:
        """Pass over the next ``count`` frames without converting them; returns how many there were."""
        done = 0
        while done < count and self._cap.grab():
            done += 1
        return done

    def __iter__(self) -> Iterator[np.ndarray]:
        while (frame := self.read()) is not None:
            yield frame

    def close(self) -> None:
        self._cap.release()


def read_input(path: str | os.PathLike[str], opts: ImageOptions = ImageOptions(), layout: str = "nchw") -> np.ndarray:
    """An image or NPY file as a tensor (videos: use VideoReader)."""
    kind = kind_of(path)
    if kind == "image":
        return read_image(path, opts)
    if kind == "npy":
        return read_npy(path, layout)
    raise InputError(f"{path}: a video is read frame by frame; use VideoReader")


def tensor_to_image(t: Any, item: int = 0, xp: Any = np) -> Any:
    """One batch item of an NCHW tensor as an 8-bit HxW or HxWxC image (RGB/RGBA order). ``xp``: the array
    module of ``t`` (NumPy, or CuPy to make the image on the GPU; contiguous either way)."""
    x = xp.asarray(t)[item]
    c = x.shape[0]
    if c not in (1, 3, 4):
        x = x[:3] if c > 3 else x[:1]
    x = x.astype(xp.float32)
    img = (xp.clip(xp.nan_to_num(x), 0.0, 1.0) * 255.0 + 0.5).astype(xp.uint8).transpose(1, 2, 0)
    return xp.ascontiguousarray(img[:, :, 0] if img.shape[2] == 1 else img)


def write_output(path: str | os.PathLike[str], tensor: np.ndarray) -> list[Path]:
    """Write an NCHW output as .npy (whole tensor) or as image(s). Returns the files written."""
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    ext = p.suffix.lower()
    if ext == ".npy":
        np.save(p, np.asarray(tensor))
        return [p]
    if ext in IMAGE_EXTS:
        cv2 = _cv2()
        written = []
        for i in range(tensor.shape[0]):
            target = p if i == 0 else p.with_name(f"{p.stem}_{i}{p.suffix}")
            img = tensor_to_image(tensor, i)
            if img.ndim == 3:
                img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR if img.shape[2] == 3 else cv2.COLOR_RGBA2BGRA)
            if not cv2.imwrite(str(target), img):
                raise LayerLabError(f"{target}: cannot write the image")
            written.append(target)
        return written
    raise LayerLabError(f"{p}: unsupported output file type {ext or '(none)'!r}: expected .npy or an image "
                        f"({', '.join(IMAGE_EXTS)}), or a video for video inputs")


class VideoWriter:
    """Writes output tensors as frames of a video file (MJPG in .avi, mp4v otherwise)."""

    def __init__(self, path: str | os.PathLike[str], fps: float) -> None:
        self.path = Path(path)
        self.fps = fps
        self._writer: Any = None

    def write(self, tensor: np.ndarray) -> None:
        self.write_image(tensor_to_image(tensor))

    def write_image(self, img: np.ndarray) -> None:
        """Write one 8-bit frame as made by ``tensor_to_image`` (HxW gray or HxWxC RGB/RGBA)."""
        cv2 = _cv2()
        if img.ndim == 2:
            img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
        else:
            img = cv2.cvtColor(img[:, :, :3], cv2.COLOR_RGB2BGR)
        if self._writer is None:
            four = cv2.VideoWriter_fourcc(*("MJPG" if self.path.suffix.lower() == ".avi" else "mp4v"))
            self._writer = cv2.VideoWriter(str(self.path), four, self.fps, (img.shape[1], img.shape[0]))
            if not self._writer.isOpened():
                raise LayerLabError(f"{self.path}: cannot open a video writer for this file type")
        self._writer.write(img)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.release()
