"""Images in batches: decoded 8-bit images made into tensors (``images_to_tensor``, ``Network.set_input_images``),
outputs made into 8-bit images (``tensors_to_images``, ``Network.output_images``) where the network runs, and the
one image encoder ``infer`` and ``batch`` share (``encode_image``). Every path gives the same values as the
per-image host path; on the GPU (CuPy) too."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.errors import InputError, LayerLabError
from engine.io import (
    PNG_LEVEL,
    ImageOptions,
    encode_image,
    image_tensor_shape,
    image_to_tensor,
    images_to_tensor,
    item_path,
    tensor_to_image,
    tensors_to_images,
    write_output,
)
from engine.model import Model
from engine.network import Network
from engine.tensor import FORMATS, TensorFormat
from tests.harness import backend_param, each_backend_and_format

OPTIONS = [ImageOptions(), ImageOptions(2.0, -1.0, 4, 8), ImageOptions(0.7, 0.3, 0, 1, shift_first=True, use_alpha=False),
           ImageOptions(1.0, 0.25, 1, 3, use_alpha=False)]


def images(kind: str, n: int = 3, h: int = 13, w: int = 17) -> np.ndarray:
    rng = np.random.default_rng(len(kind))
    if kind == "rgb8":
        return rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8)
    if kind == "gray8":
        return rng.integers(0, 256, (n, h, w), dtype=np.uint8)
    if kind == "rgba16":
        return rng.integers(0, 65536, (n, h, w, 4), dtype=np.uint16)
    return (rng.random((n, h, w, 3)) * 3 - 1).astype(np.float32)


@pytest.mark.parametrize("kind", ["rgb8", "gray8", "rgba16", "float"])
@pytest.mark.parametrize("opts", OPTIONS, ids=range(len(OPTIONS)))
def test_a_batch_of_images_gives_the_tensors_of_each_image(kind, opts):
    batch = images(kind)
    t = images_to_tensor(batch, opts)
    assert t.dtype == np.float32 and t.flags.c_contiguous
    assert t.shape == (3, *image_tensor_shape(batch.shape[1:], opts)[1:])
    for i, img in enumerate(batch):
        np.testing.assert_array_equal(t[i:i + 1], image_to_tensor(img, opts))
    # against the documented arithmetic: 0..1, then value*scale+shift (or (value+shift)*scale), padding with zeros
    x = batch.astype(np.float64)
    x = x / 255 if kind.endswith("8") else x / 65535 if kind.endswith("16") else x
    x = (x + opts.shift) * opts.scale if opts.shift_first else x * opts.scale + opts.shift
    x = x if x.ndim == 4 else x[..., None]
    if x.shape[3] == 4 and not opts.use_alpha:
        x[..., 3] = 0
    ref = x.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(t[:, :ref.shape[1], :ref.shape[2], :ref.shape[3]], ref, rtol=1e-6, atol=1e-6)
    assert not t[:, ref.shape[1]:].any() and not t[:, :, ref.shape[2]:].any() and not t[:, :, :, ref.shape[3]:].any()


def test_tensors_to_images_clip_round_and_pick_channels():
    rng = np.random.default_rng(3)
    for c, want in ((1, None), (2, None), (3, 3), (4, 4), (6, 3)):
        t = rng.normal(0.5, 0.6, (2, c, 5, 7)).astype(np.float32)
        t[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 0.999]
        imgs = tensors_to_images(t)
        assert imgs.dtype == np.uint8 and imgs.flags.c_contiguous
        assert imgs.shape == ((2, 5, 7) if want is None else (2, 5, 7, want))
        ref = np.clip(np.nan_to_num(t.astype(np.float64)), 0, 1) * 255 + 0.5
        ref = ref.astype(np.uint8).transpose(0, 2, 3, 1)[..., :want or 1]
        np.testing.assert_array_equal(imgs, ref[..., 0] if want is None else ref)
        assert list(imgs[0, 0, :4].reshape(4, -1)[:, 0]) == [0, 255, 0, 255]
        for i in range(2):
            np.testing.assert_array_equal(tensor_to_image(t, i), imgs[i])
    nhwc = rng.random((2, 4, 6, 3), dtype=np.float32)  # a channels-last buffer seen as N, C, H, W (a device output)
    np.testing.assert_array_equal(tensors_to_images(nhwc.transpose(0, 3, 1, 2)),
                                  tensors_to_images(np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2))))


def test_encode_image_is_what_opencv_writes_with_the_documented_settings(tmp_path):
    rgb = np.random.default_rng(4).integers(0, 256, (21, 30, 3), dtype=np.uint8)
    data = encode_image(rgb, ".png", "x.png")
    bgr = rgb[..., ::-1]
    # level PNG_LEVEL with the SUB filter and the RLE strategy are OpenCV's own PNG defaults: the same bytes
    assert PNG_LEVEL == 1 and data.tobytes() == cv2.imencode(".png", bgr)[1].tobytes()
    np.testing.assert_array_equal(cv2.imdecode(data, cv2.IMREAD_UNCHANGED)[..., ::-1], rgb)  # lossless, RGB order
    gray, rgba = rgb[..., 0], np.dstack([rgb, rgb[..., :1]])
    np.testing.assert_array_equal(cv2.imdecode(encode_image(gray, ".png"), cv2.IMREAD_UNCHANGED), gray)
    np.testing.assert_array_equal(cv2.imdecode(encode_image(rgba, ".PNG"), cv2.IMREAD_UNCHANGED), rgba[..., [2, 1, 0, 3]])
    assert encode_image(rgb, ".jpg").tobytes() == cv2.imencode(".jpg", bgr)[1].tobytes()
    with pytest.raises(LayerLabError, match="out.xyz: cannot write the image"):
        encode_image(rgb, ".xyz", tmp_path / "out.xyz")
    with pytest.raises(LayerLabError, match=r"cannot write an image of shape \(21, 30, 2\)"):
        encode_image(rgb[..., :2], ".png")
    # infer's writer writes these very bytes, one file per batch item
    t = np.random.default_rng(5).random((3, 3, 8, 9), dtype=np.float32)
    written = write_output(tmp_path / "o.png", t)
    assert written == [item_path(tmp_path / "o.png", i) for i in range(3)] == [
        tmp_path / "o.png", tmp_path / "o_1.png", tmp_path / "o_2.png"]
    for i, p in enumerate(written):
        assert p.read_bytes() == encode_image(tensor_to_image(t, i), ".png").tobytes()


def small_net(registry, backend: str, fmt: TensorFormat) -> Network:
    m = Model("small")
    m.add_layer("input", "input", params={"dimensions": "1x3x13x17"})
    m.add_layer("convolution", "conv", params={"num_output_channels": "3"}, inputs=["input"], activation="relu")
    m.add_layer("element_wise", "sub", params={"operation": "sub"}, inputs=["input", "conv"])
    m.add_layer("output", "output", inputs=["sub"])
    return Network(m, registry, backend_param(backend), fmt)


@each_backend_and_format
def test_network_takes_8_bit_images_and_gives_8_bit_images(registry, backend, fmt):
    net = small_net(registry, backend, fmt)
    batch = images("rgb8")
    opts = ImageOptions(2.0, -0.5)
    net.set_input("input", images_to_tensor(batch, opts))  # the host path: float32 tensors converted on the host
    net.run()
    ref, ref_images = net.output("output"), tensors_to_images(net.output("output"))
    for given in (list(batch), batch):  # a list of images, or one N x H x W x C array
        net.set_input_images("input", given, opts)
        net.run()
        np.testing.assert_array_equal(net.output("output"), ref)
        np.testing.assert_array_equal(net.output("output", pinned=True), ref)  # page-locked on a GPU: same values
        got = net.output_images("output")
        assert isinstance(got, np.ndarray) and got.dtype == np.uint8 and got.shape == (3, 13, 17, 3)
        np.testing.assert_array_equal(got, ref_images)


def test_set_input_images_refuses_what_is_not_one_batch_of_images(registry):
    net = small_net(registry, "numpy", FORMATS[0])
    rgb = images("rgb8")
    cases = [(("input", []), "got no images"),
             (("input", rgb[0, :, :, 0]), r"expected N x H x W or N x H x W x C images .* got uint8 array of shape \(13, 17\)"),
             (("input", [rgb[0], rgb[1, :5]]), "one size and type"),
             (("input", [rgb[0], rgb[1].astype(np.uint16)]), "one size and type"),
             (("input", [np.array(["a"])]), "expected H x W or H x W x C images"),
             (("nope", rgb), "no input layer 'nope'")]
    for args, msg in cases:
        with pytest.raises(InputError, match=msg):
            net.set_input_images(*args)
    bad = images("float")
    bad[1, 2, 3, 0] = np.nan
    with pytest.raises(InputError, match="NaN or infinite"):
        net.set_input_images("input", bad)


@pytest.mark.gpu
def test_cupy_conversions_match_numpy_and_pinned_downloads():
    import cupy

    from engine.backends import get_backend

    for kind in ("rgb8", "gray8", "rgba16"):
        batch = images(kind)
        for opts in OPTIONS:
            np.testing.assert_array_equal(cupy.asnumpy(images_to_tensor(cupy.asarray(batch), opts, cupy)),
                                          images_to_tensor(batch, opts))
    t = np.random.default_rng(6).normal(0.5, 0.6, (2, 4, 9, 11)).astype(np.float16)
    t[0, 0, 0, 0] = np.nan
    dev = cupy.asarray(t)
    np.testing.assert_array_equal(cupy.asnumpy(tensors_to_images(dev, cupy)), tensors_to_images(t))
    backend = get_backend("cupy", notice=None)
    backend.activate()
    host = backend.to_host(tensors_to_images(dev, cupy), pinned=True)
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, tensors_to_images(t))
