"""Reading network inputs (PNG/JPG images, NPY tensors, video files) and writing outputs (NPY, PNG,
video). OpenCV (headless) reads and writes images and video; it is imported on first use.

Images: read as RGB (grayscale stays 1 channel, RGBA keeps 4), values mapped to 0..1 (8-bit / 255,
16-bit / 65535), then ``value * scale + shift``, then zero-padded up to ``min_channels`` channels and
on the bottom/right up to a multiple of ``tiling`` on H and W. The result is a 1xCxHxW float32 tensor.
NPY tensors are passed as they are (4-D, NCHW unless the layout says NHWC; 3-D CHW/HWC gets N=1).
Outputs written as images take batch item 0 (further items get ``_1``, ``_2``... suffixes), clip to
0..1 and scale to 8 bits; 1 channel gives gray, 3 RGB, 4 RGBA, any other count the first 3 channels."""
from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.atomic import PendingFile, atomic_write
from engine.errors import InputError, LayerLabError
from engine.limits import cut, max_image_pixels

IMAGE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
VIDEO_EXTS = (".mp4", ".avi", ".mkv", ".mpeg", ".mpg", ".wmv", ".mov")


def _cv2() -> Any:
    if "cv2" not in sys.modules and max_image_pixels():  # OpenCV's own decoder limit, for files Pillow cannot measure
        os.environ.setdefault("OPENCV_IO_MAX_IMAGE_PIXELS", str(max_image_pixels()))
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


def image_tensor_shape(image_shape: tuple[int, ...], opts: ImageOptions = ImageOptions()) -> tuple[int, int, int, int]:
    """The 1xCxHxW shape :func:`image_to_tensor` makes of an HxW or HxWxC image (channels and tiling padding)."""
    h, w = image_shape[:2]
    c = image_shape[2] if len(image_shape) == 3 else 1
    tile = max(1, int(opts.tiling))
    return 1, max(c, int(opts.min_channels)), h + (-h) % tile, w + (-w) % tile


def images_to_tensor(images: Any, opts: ImageOptions = ImageOptions(), xp: Any = np) -> Any:
    """N x H x W (gray) or N x H x W x C images (RGB order; uint8, uint16 or float) -> N x C x H x W float32
    tensor, as the module documentation describes. ``xp``: the array module of ``images`` (NumPy, or CuPy to
    make the tensor on the GPU from images uploaded as they are); every step is a separate elementwise
    operation in float32, so both give the same values."""
    img = xp.asarray(images)
    if img.ndim == 3:
        img = img[..., None]
    x = img.astype(xp.float32)  # a new array: the steps below work in place
    if img.dtype == np.uint8:
        x /= 255.0
    elif img.dtype == np.uint16:
        x /= 65535.0
    scale, shift = np.float32(opts.scale), np.float32(opts.shift)
    if opts.shift_first and shift != 0:  # adding 0 and multiplying by 1 change no value: skipped
        x += shift
    if scale != 1:
        x *= scale
    if not opts.shift_first and shift != 0:
        x += shift
    if not opts.use_alpha and x.shape[3] == 4:
        x[..., 3] = 0.0
    t = xp.ascontiguousarray(x.transpose(0, 3, 1, 2))
    _n, c, h, w = t.shape
    _one, cc, hh, ww = image_tensor_shape((h, w, c), opts)
    if (cc, hh, ww) != (c, h, w):
        t = xp.pad(t, ((0, 0), (0, cc - c), (0, hh - h), (0, ww - w)))
    return t


def image_to_tensor(rgb: Any, opts: ImageOptions = ImageOptions(), xp: Any = np) -> Any:
    """HxW, HxWxC uint8/uint16/float image (RGB order) -> 1xCxHxW float32 tensor (:func:`images_to_tensor` of
    one image). ``xp``: the array module of ``rgb`` (NumPy, or CuPy to convert a frame uploaded as 8-bit on the
    GPU: a quarter of the bytes cross the bus and the host does no arithmetic)."""
    return images_to_tensor(xp.asarray(rgb)[None], opts, xp)


def image_size(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(width, height) of an image file read from its header only (Pillow opens lazily); None when the
    header is not one Pillow knows (OpenCV then decides whether it can decode the file)."""
    try:
        from PIL import Image  # noqa: PLC0415
    except ImportError:  # pragma: no cover - Pillow is a base dependency
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            saved, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None  # we check the size ourselves
            try:
                with Image.open(path) as im:
                    return int(im.size[0]), int(im.size[1])
            finally:
                Image.MAX_IMAGE_PIXELS = saved
    except Exception:  # noqa: BLE001 - any header Pillow cannot read: leave the decision to OpenCV
        return None


def check_image_size(path: str | os.PathLike[str], limit: int | None = None) -> None:
    """Refuse an image whose decoded size is above the pixel limit (``LAYERLAB_MAX_IMAGE_PIXELS``), before
    decoding it: a small compressed file can describe gigabytes of pixels."""
    limit = max_image_pixels() if limit is None else limit
    size = image_size(path)
    if size is None or not limit:
        return
    w, h = size
    if w * h > limit:
        raise InputError(f"{path}: the image is {w}x{h} ({w * h} pixels), more than the limit of {limit} pixels "
                         "(set LAYERLAB_MAX_IMAGE_PIXELS to allow more)")


def decode_image(path: str | os.PathLike[str]) -> np.ndarray:
    """An image file decoded as it is stored: HxW (gray) or HxWxC in RGB / RGBA order, 8- or 16-bit (see
    :func:`images_to_tensor` for the tensor). Raises InputError for a missing, oversized or undecodable file."""
    cv2 = _cv2()
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such image file")
    check_image_size(p)
    img = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise InputError(f"{p}: cannot decode the image (corrupt or unsupported)")
    if img.ndim == 3 and img.shape[2] == 3:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    elif img.ndim == 3 and img.shape[2] == 4:
        img = cv2.cvtColor(img, cv2.COLOR_BGRA2RGBA)
    return img


def read_image(path: str | os.PathLike[str], opts: ImageOptions = ImageOptions()) -> np.ndarray:
    """An image file as a 1xCxHxW float32 tensor (:func:`decode_image`, then :func:`image_to_tensor`)."""
    return image_to_tensor(decode_image(path), opts)


def read_npy(path: str | os.PathLike[str], layout: str = "nchw", rank: int = 4) -> np.ndarray:
    """A tensor file as 1..N x C x H x W float32 (NHWC files are transposed when layout='nhwc'); for an input that
    takes a tensor of another ``rank`` (tokens 1 x 49 x 96), the file's array of that rank as it is (layouts order
    rank 4 only)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such tensor file")
    arr = load_npy(p, InputError, "tensor")
    if arr.dtype.kind not in "fiub":
        raise InputError(f"{p}: tensor has dtype {arr.dtype}, expected numbers")
    if rank != 4:
        if arr.ndim != rank:
            raise InputError(f"{p}: tensor has shape {arr.shape}, expected a tensor of rank {rank}")
    elif arr.ndim == 3:
        arr = arr[None]
    elif arr.ndim != 4:
        raise InputError(f"{p}: tensor has shape {arr.shape}, expected 4-D N,C,H,W (or 3-D C,H,W)")
    if layout.lower() == "nhwc" and rank == 4:
        arr = arr.transpose(0, 3, 1, 2)
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{p}: tensor contains NaN or infinite values")
    return arr


class VideoReader:
    """Frames of a video file as tensors, one at a time.

    ``prefetch``: decode the next frame in a background thread while the caller works on this one (live analysis:
    the decoding overlaps the network's run); ``seek``, ``skip`` and ``close`` wait for that frame first, so the
    position is always the one a reader without prefetching would have."""

    def __init__(self, path: str | os.PathLike[str], opts: ImageOptions = ImageOptions(), prefetch: bool = False) -> None:
        cv2 = _cv2()
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: no such video file")
        self._cap = cv2.VideoCapture(str(self.path))
        if not self._cap.isOpened():
            raise InputError(f"{self.path}: cannot open the video (corrupt or unsupported codec)")
        self.opts = opts
        w, h = int(self._cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(self._cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        limit = max_image_pixels()
        if limit and w * h > limit:
            self._cap.release()
            raise InputError(f"{self.path}: the video frames are {w}x{h} ({w * h} pixels), more than the limit of "
                             f"{limit} pixels (set LAYERLAB_MAX_IMAGE_PIXELS to allow more)")
        self.fps = float(self._cap.get(cv2.CAP_PROP_FPS)) or 25.0
        self.frame_count = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT))
        self._pool: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(1, thread_name_prefix="layerlab-video") if prefetch else None)
        self._next: Future[np.ndarray | None] | None = None

    def _decode(self) -> np.ndarray | None:
        ok, img = self._cap.read()
        return _cv2().cvtColor(img, _cv2().COLOR_BGR2RGB) if ok else None

    def _settle(self) -> tuple[bool, np.ndarray | None]:
        """Wait for the frame being prefetched: (whether there was one, the frame or None at the end)."""
        if self._next is None:
            return False, None
        fut, self._next = self._next, None
        return True, fut.result()

    def seek(self, frame: int) -> None:
        self._settle()
        self._cap.set(_cv2().CAP_PROP_POS_FRAMES, int(frame))

    def read(self) -> np.ndarray | None:
        """The next frame as a 1xCxHxW tensor, or None at the end."""
        img = self.read_image()
        return None if img is None else image_to_tensor(img, self.opts)

    def read_image(self) -> np.ndarray | None:
        """The next frame as decoded, H x W x 3 uint8 in RGB order (as :func:`decode_image` gives images), or None
        at the end; with ``prefetch``, decoded (and put in RGB order) in the background while the caller worked."""
        had, img = self._settle()
        if not had:
            img = self._decode()
        if img is not None and self._pool is not None:
            self._next = self._pool.submit(self._decode)
        return img

    def skip(self, count: int) -> int:
        """Pass over the next ``count`` frames without converting them; returns how many there were."""
        done = 0
        if count > 0:
            had, img = self._settle()
            if had:
                if img is None:
                    return 0
                done = 1
        while done < count and self._cap.grab():
            done += 1
        return done

    def __iter__(self) -> Iterator[np.ndarray]:
        while (frame := self.read()) is not None:
            yield frame

    def close(self) -> None:
        try:
            self._settle()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._cap.release()


def read_input(path: str | os.PathLike[str], opts: ImageOptions = ImageOptions(), layout: str = "nchw",
               rank: int = 4) -> np.ndarray:
    """An image or NPY file as a tensor (videos: use VideoReader); ``rank``: the rank the input layer takes (an
    image gives rank 4 only)."""
    kind = kind_of(path)
    if kind == "image":
        if rank != 4:
            raise InputError(f"{path}: an image gives an N x C x H x W tensor, but the input takes a tensor of rank "
                             f"{rank}: give a .npy file")
        return read_image(path, opts)
    if kind == "npy":
        return read_npy(path, layout, rank)
    raise InputError(f"{path}: a video is read frame by frame; use VideoReader")


def tensors_to_images(t: Any, xp: Any = np) -> Any:
    """Every batch item of an NCHW tensor as an 8-bit image: N x H x W (1 channel) or N x H x W x C (RGB/RGBA;
    other channel counts: the first 3 channels, or the first one of 2), values clipped to 0..1 (NaN as 0) and
    rounded to 0..255. ``xp``: the array module of ``t`` (NumPy, or CuPy to make the images on the GPU and
    download a quarter of the float32 bytes); contiguous either way, the same values either way."""
    x = xp.asarray(t)
    c = x.shape[1]
    if c not in (1, 3, 4):
        x = x[:, :3] if c > 3 else x[:, :1]
    y = x.astype(xp.float32, copy=True)  # a new array (in the tensor's memory order): the steps below work in place
    xp.nan_to_num(y, copy=False)
    xp.clip(y, 0.0, 1.0, out=y)
    y *= 255.0
    y += 0.5
    img = y.astype(xp.uint8).transpose(0, 2, 3, 1)
    return xp.ascontiguousarray(img[..., 0] if img.shape[3] == 1 else img)


def tensor_to_image(t: Any, item: int = 0, xp: Any = np) -> Any:
    """One batch item of an NCHW tensor as an 8-bit HxW or HxWxC image (RGB/RGBA order), as
    :func:`tensors_to_images` makes it. ``xp``: the array module of ``t``."""
    return tensors_to_images(xp.asarray(t)[item:item + 1], xp)[0]


def _image_params(cv2: Any, ext: str, png_level: int) -> list[int]:
    if ext == ".png" and png_level == 0:  # stored: no filter either (about 5 ms for a 1080p frame instead of 45)
        return [cv2.IMWRITE_PNG_COMPRESSION, 0] + ([cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_NONE]
                                                   if hasattr(cv2, "IMWRITE_PNG_FILTER") else [])
    if ext == ".png" and png_level > 1:  # zlib's default strategy: smaller files, several times slower
        return [cv2.IMWRITE_PNG_COMPRESSION, png_level, cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_DEFAULT]
    if ext == ".png" and hasattr(cv2, "IMWRITE_PNG_FILTER"):
        return [cv2.IMWRITE_PNG_COMPRESSION, png_level, cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE,
                cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_SUB]
    if ext == ".png":
        return [cv2.IMWRITE_PNG_COMPRESSION, png_level]
    return []  # OpenCV's defaults (for PNG in older versions: the same settings as above)


#: zlib level of the PNG files LayerLab writes. With the SUB filter and the RLE strategy this is OpenCV's own
#: default (the fastest of its PNG settings: a 1080p frame in about 45 ms, three times faster than level 1
#: with zlib's default strategy), written out so that ``infer``, ``batch`` and the exports write the same bytes.
PNG_LEVEL = 1


def check_png_level(level: Any) -> int:
    """``level`` as a PNG compression level (0: stored, fastest and largest, ... 9: smallest); InputError otherwise."""
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 0 <= int(level) <= 9:
        raise InputError(f"PNG compression {level!r}: expected a whole number from 0 (fastest, largest files) "
                         "to 9 (smallest, slowest)")
    return int(level)


def encode_image(img: np.ndarray, ext: str, name: str | os.PathLike[str] | None = None,
                 png_level: int = PNG_LEVEL) -> np.ndarray:
    """An 8-bit HxW or HxWxC image (RGB/RGBA order, as :func:`tensors_to_images` makes it) encoded as a file of
    type ``ext`` ('.png', '.jpg'...): the file's bytes (a 1-D uint8 array). PNG at zlib level ``png_level``: 1 (the
    default) with the SUB filter and the RLE strategy, 0 stored without a filter, 2-9 with zlib's default strategy
    (a 1080p photograph: 24 ms and 6.2 MB at 0, 68 ms and 1.9 MB at 1, 0.45 s and 1.6 MB at 6, 4 s and 1.5 MB at
    9, on one core); JPEG: OpenCV's default quality (95). Errors name ``name`` (or the type)."""
    png_level = check_png_level(png_level)
    cv2 = _cv2()
    ext = ext.lower()
    what = name if name is not None else f"a {ext} image"
    if img.ndim not in (2, 3) or (img.ndim == 3 and img.shape[2] not in (3, 4)):
        raise LayerLabError(f"{what}: cannot write an image of shape {img.shape} (expected H x W, H x W x 3 or 4)")
    try:
        if img.ndim == 3:
            img = cv2.cvtColor(img, cv2.COLOR_RGB2BGR if img.shape[2] == 3 else cv2.COLOR_RGBA2BGRA)
        ok, data = cv2.imencode(ext, img, _image_params(cv2, ext, png_level))
    except cv2.error as exc:
        raise LayerLabError(f"{what}: cannot write the image ({cut(str(exc), 120)})") from None
    if not ok:
        raise LayerLabError(f"{what}: cannot write the image")
    return data.reshape(-1)


def item_path(path: Path, item: int) -> Path:
    """Where batch item ``item`` of an output written as images goes: ``path`` itself for item 0, else the name
    with a ``_<item>`` suffix (``out.png``, ``out_1.png``...)."""
    return path if item == 0 else path.with_name(f"{path.stem}_{item}{path.suffix}")


def load_npy(path: Path, error: type[LayerLabError], what: str) -> np.ndarray:
    """``np.load`` of a .npy file that is never unpickled; errors (``error``) name the file. The header is read
    first: a file whose header declares more data than the file holds is refused before anything is allocated."""
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}[version]
            shape, _order, dtype = read_header(fh)
            declared = math.prod(shape) * dtype.itemsize
            if not dtype.hasobject and declared > os.fstat(fh.fileno()).st_size - fh.tell():
                raise error(f"{path}: the .npy header declares {declared} bytes of data ({'x'.join(map(str, shape))} "
                            f"{dtype}), more than the file holds")
    except LayerLabError:
        raise
    except Exception:  # noqa: BLE001 - not a .npy header: np.load below says what it is
        pass
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        try:
            with open(path, "rb") as fh:
                head = fh.read(1)
        except OSError:
            head = b""
        if "Object arrays" in str(exc) or head == b"\x80":  # an object array, or a pickle file
            raise error(f"{path}: the {what} file holds pickled Python objects; LayerLab never loads pickled files "
                        "(save plain numeric arrays)") from None
        raise error(f"{path}: not a readable .npy {what} ({cut(str(exc), 120)})") from None
    except Exception as exc:
        raise error(f"{path}: not a readable .npy {what} ({cut(str(exc), 120)})") from None


def check_output_kind(path: str | os.PathLike[str]) -> None:
    """Refuse an output path of a type no writer takes (checked before a run, and again by :func:`write_output`)."""
    p = Path(path)
    ext = p.suffix.lower()
    if ext != ".npy" and ext not in IMAGE_EXTS and ext not in VIDEO_EXTS:
        raise LayerLabError(f"{p}: unsupported output file type {ext or '(none)'!r}: expected .npy or an image "
                            f"({', '.join(IMAGE_EXTS)}), or a video for video inputs")


def write_output(path: str | os.PathLike[str], tensor: np.ndarray, png_level: int = PNG_LEVEL) -> list[Path]:
    """Write an NCHW output as .npy (whole tensor) or as image(s), each atomically (PNG at zlib level
    ``png_level``). Returns the files written."""
    p = Path(path)
    ext = p.suffix.lower()
    if ext == ".npy":
        atomic_write(p, lambda tmp: np.save(tmp, np.asarray(tensor)), "output")
        return [p]
    if ext in IMAGE_EXTS:
        if np.ndim(tensor) != 4:
            shape = "x".join(map(str, np.shape(tensor)))
            raise LayerLabError(f"{p}: the output is a tensor of rank {np.ndim(tensor)} ({shape}); images are written "
                                "from N x C x H x W tensors only: write a .npy file")
        written = []
        images = tensors_to_images(tensor)
        for i in range(images.shape[0]):
            target = item_path(p, i)
            data = encode_image(images[i], ext, target, png_level)
            atomic_write(target, lambda tmp, data=data: tmp.write_bytes(memoryview(data)), "output")
            written.append(target)
        return written
    check_output_kind(p)
    raise LayerLabError(f"{p}: a {ext} file takes a video input's frames (this input is not a video)")


class VideoWriter:
    """Writes output tensors as frames of a video file (MJPG in .avi, mp4v otherwise)."""

    def __init__(self, path: str | os.PathLike[str], fps: float) -> None:
        self.path = Path(path)
        self.fps = fps
        self._writer: Any = None
        self._pending: PendingFile | None = None

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
            self._pending = PendingFile(self.path, "video")  # moved over the target when the video is complete
            self._writer = cv2.VideoWriter(str(self._pending.temp), four, self.fps, (img.shape[1], img.shape[0]))
            if not self._writer.isOpened():
                self._pending.discard()
                raise LayerLabError(f"{self.path}: cannot open a video writer for this file type")
        self._writer.write(img)

    def close(self, keep: bool = True) -> None:
        """Finish the video: with ``keep`` it replaces the target, else (a failed run) it is thrown away."""
        if self._writer is not None:
            self._writer.release()
            self._writer = None
        if self._pending is not None:
            if keep:
                self._pending.commit()
            self._pending.discard()
            self._pending = None
