from __future__ import annotations

import cv2
import numpy as np
import pytest

from engine.errors import InputError
from engine.io import ImageOptions, VideoReader, VideoWriter, read_image, read_input, read_npy, write_output
from resources import SAMPLES


def test_image_is_rgb_in_0_1_then_scaled_shifted_and_padded(tmp_path):
    img = np.zeros((5, 7, 3), np.uint8)
    img[1, 2] = (255, 0, 51)  # RGB
    path = tmp_path / "x.png"
    cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    t = read_image(path)
    assert t.shape == (1, 3, 5, 7) and t.dtype == np.float32
    np.testing.assert_allclose(t[0, :, 1, 2], [1.0, 0.0, 0.2], atol=1e-6)
    t2 = read_image(path, ImageOptions(scale=2.0, shift=-1.0, min_channels=4, tiling=4))
    assert t2.shape == (1, 4, 8, 8)
    np.testing.assert_allclose(t2[0, :3, 1, 2], [1.0, -1.0, -0.6], atol=1e-6)
    assert np.all(t2[0, 3] == 0) and np.all(t2[:, :, 5:, :] == 0) and np.all(t2[:, :, :, 7:] == 0)


def test_sample_image_loads():
    assert read_input(SAMPLES / "sample.png").shape == (1, 3, 96, 128)


def test_npy_layouts_and_errors(tmp_path):
    x = np.random.default_rng(0).random((2, 5, 6, 3), dtype=np.float32)
    np.save(tmp_path / "t.npy", x)
    np.testing.assert_array_equal(read_npy(tmp_path / "t.npy"), x)
    np.testing.assert_array_equal(read_npy(tmp_path / "t.npy", "nhwc"), x.transpose(0, 3, 1, 2))
    np.save(tmp_path / "bad.npy", np.zeros((3, 3)))
    with pytest.raises(InputError, match=r"bad.npy: tensor has shape \(3, 3\), expected 4-D"):
        read_npy(tmp_path / "bad.npy")
    (tmp_path / "junk.npy").write_bytes(b"junk")
    with pytest.raises(InputError, match="not a readable .npy tensor"):
        read_npy(tmp_path / "junk.npy")
    with pytest.raises(InputError, match="unsupported input file type '.txt'"):
        read_input(tmp_path / "a.txt")
    (tmp_path / "broken.png").write_bytes(b"\x89PNG nope")
    with pytest.raises(InputError, match="cannot decode the image"):
        read_input(tmp_path / "broken.png")


def test_video_round_trip(tmp_path):
    path = tmp_path / "v.avi"
    w = VideoWriter(path, 10.0)
    for i in range(4):
        w.write(np.full((1, 3, 16, 24), i / 4, np.float32))
    w.close()
    r = VideoReader(path)
    frames = list(r)
    r.close()
    assert len(frames) == 4 and frames[0].shape == (1, 3, 16, 24)
    np.testing.assert_allclose([float(f.mean()) for f in frames], [0.0, 0.25, 0.5, 0.75], atol=0.03)  # MJPG is lossy


def test_write_outputs(tmp_path):
    t = np.random.default_rng(1).random((2, 3, 4, 5), dtype=np.float32)
    files = write_output(tmp_path / "o.png", t)
    assert [f.name for f in files] == ["o.png", "o_1.png"]
    back = read_image(files[1])
    np.testing.assert_allclose(back[0], t[1], atol=1 / 255)
    write_output(tmp_path / "o.npy", t)
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), t)


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_png_compression_levels_keep_the_pixels(tmp_path, level):
    """Every PNG level writes the same pixels; level 0 (stored) writes larger files than the default 1."""
    from engine.io import PNG_LEVEL, decode_image, encode_image

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:60, 0:90]
    img = np.clip(np.stack([xx * 2, yy * 3, xx + yy], -1) + rng.integers(-3, 4, (60, 90, 3)), 0, 255).astype(np.uint8)
    data = encode_image(img, ".png", png_level=level)
    (tmp_path / "x.png").write_bytes(data.tobytes())
    np.testing.assert_array_equal(decode_image(tmp_path / "x.png"), img)
    if level == 0:
        assert data.size > encode_image(img, ".png", png_level=PNG_LEVEL).size
    t = np.random.default_rng(1).random((1, 3, 8, 8), dtype=np.float32)
    written = write_output(tmp_path / f"o{level}.png", t, png_level=level)
    np.testing.assert_array_equal(decode_image(written[0]), decode_image(write_output(tmp_path / "d.png", t)[0]))


@pytest.mark.parametrize("bad", [-1, 10, 1.5, True, "3", None])
def test_png_compression_level_must_be_0_to_9(bad):
    from engine.io import check_png_level, encode_image

    with pytest.raises(InputError, match="PNG compression"):
        check_png_level(bad)
    with pytest.raises(InputError, match="PNG compression"):
        encode_image(np.zeros((4, 4, 3), np.uint8), ".png", png_level=bad)
