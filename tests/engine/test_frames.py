"""engine.frames without Qt: display images prepared from the device output equal the host-side preparation of
the host copy, frames that fall due while the network is busy are dropped (the newest is shown), and a runtime
option changed between frames is in the next frame."""
from __future__ import annotations

import numpy as np
import pytest

from engine.analysis import channel_grid, channel_stats, display_tensor, redgreen
from engine.frames import FramePipeline, View, ViewError, prepare_view, prepare_views
from engine.io import VideoWriter, tensor_to_image
from engine.model import Model
from engine.network import Network
from engine.run import RunSpec, open_input, open_network
from engine.tensor import TensorFormat


def wide_model(channels: int = 12, dims: str = "1x3x50x70") -> Model:
    m = Model("wide")
    m.add_layer("input", "inp", params={"dimensions": dims})
    m.add_layer("convolution", "feat", params={"num_output_channels": str(channels)}, inputs=["inp"])
    m.add_layer("convolution", "rgb", params={"num_output_channels": "3"}, inputs=["feat"], activation="relu")
    m.add_layer("output", "out", inputs=["rgb"])
    return m


def split_model() -> Model:
    """input -> conv -> mix(input, conv) split view (its divider is a runtime option) -> out."""
    m = Model("split")
    m.add_layer("input", "inp", params={"dimensions": "1x3x24x32"})
    m.add_layer("convolution", "conv", params={"num_output_channels": "3"}, inputs=["inp"], activation="relu")
    m.add_layer("mix", "cmp", params={"blend": "split"}, inputs=["inp", "conv"])
    m.add_layer("output", "out", inputs=["cmp"])
    return m


@pytest.fixture(params=["fp32 nchw", "fp16 nhwc"])
def net(request, registry):
    n = Network(wide_model(), registry, fmt=TensorFormat.parse(request.param))
    x = np.random.default_rng(3).standard_normal((1, 3, 50, 70)).astype(np.float32)
    x[0, 1, 5, 7] = 0.0
    n.set_input("inp", x)
    n.run()
    return n


def test_image_view_equals_the_host_preparation(net):
    for side in (1600, 32, 7):
        p = prepare_view(net, View("out", "image", max_side=side))
        host = net.output("out")
        assert np.array_equal(p.image, tensor_to_image(display_tensor(host, side)))
        assert p.image.dtype == np.uint8 and max(p.image.shape[:2]) <= side and p.shape == (1, 3, 50, 70)
        assert p.stride == max(1, -(-70 // side))
    gray = prepare_view(net, View("feat", "image", max_side=40))  # 12 channels: the first three as RGB
    assert np.array_equal(gray.image, tensor_to_image(display_tensor(net.output("feat"), 40)))


@pytest.mark.parametrize(("shift", "scale", "fit", "pixels"), [(0.0, 1.0, False, 4_000_000), (0.3, 2.5, True, 4_000_000),
                                                              (-0.1, 0.5, True, 3000)])
def test_grid_view_equals_the_host_preparation(net, shift, scale, fit, pixels):
    p = prepare_view(net, View("feat", "grid", max_pixels=pixels, shift=shift, scale=scale, fit=fit, values=True,
                               stats=True))
    host = net.output("feat")
    ref, layout = channel_grid(host, shift, scale, pixels, fit=fit)
    assert np.array_equal(p.image, ref) and p.stride == layout.factor
    assert p.image.shape[0] * p.image.shape[1] <= pixels
    assert np.array_equal(p.values, host[:, :, ::layout.factor, ::layout.factor])
    # the layout places the cells of ``values`` exactly where the full-resolution grid places the slices
    for x, y in ((0, 0), (p.image.shape[1] - 1, p.image.shape[0] - 1), (layout.cell_w + 1, 2)):
        a, b = p.layout.locate(x, y), layout.locate(x, y)
        assert (a is None and b is None) or (a[:2] == b[:2] and a[2] * p.stride == b[2] and a[3] * p.stride == b[3])
    ref_stats = channel_stats(host)
    for field in ("min", "max", "nan", "inf"):
        assert np.array_equal(getattr(p.stats, field), getattr(ref_stats, field))
    np.testing.assert_allclose(p.stats.mean, ref_stats.mean, rtol=1e-6)
    assert p.nbytes < host.nbytes or pixels == 4_000_000


def test_channel_view_and_bad_views(net):
    p = prepare_view(net, View("feat", "channel", channel=(0, 5), shift=0.2, scale=3.0, values=True))
    host = net.output("feat")
    assert np.array_equal(p.values, host[:, 5:6]) and np.array_equal(p.image, redgreen(host[0, 5], 0.2, 3.0))
    fit = prepare_view(net, View("feat", "channel", channel=(0, 5), fit=True))
    assert np.array_equal(fit.image, redgreen(host[0, 5] / np.abs(host[0, 5]).max()))
    with pytest.raises(ViewError, match="no slice n 0, c 12"):
        prepare_view(net, View("feat", "channel", channel=(0, 12)))
    with pytest.raises(ViewError, match="unknown kind 'heatmap'"):
        prepare_view(net, View("feat", "heatmap"))
    with pytest.raises(ViewError, match="finite"):
        prepare_view(net, View("feat", "grid", scale=float("nan")))
    with pytest.raises(Exception, match="no layer 'nope'"):
        prepare_view(net, View("nope"))


def test_nan_in_a_grid_is_blue_and_counted(registry):
    m = wide_model(channels=4, dims="1x3x8x8")
    n = Network(m, registry)
    n.run()
    out = n.device_output("feat")
    out[0, 2, 3, 4] = np.nan
    p = prepare_view(n, View("feat", "grid", stats=True, values=True))
    ref, _ = channel_grid(n.output("feat"))
    assert np.array_equal(p.image, ref) and int(p.stats.nan[0, 2]) == 1 and int(p.stats.nan.sum()) == 1


def video_pipeline(registry, tmp_path, clock=None):
    writer = VideoWriter(tmp_path / "clip.avi", 10.0)  # 10 fps, frame i a flat grey of level 30 * (i + 1)
    for i in range(8):
        writer.write(np.full((1, 3, 24, 32), 30 * (i + 1) / 255, np.float32))
    writer.close()
    net = open_network(split_model(), RunSpec(backend="numpy"), registry)
    first, vid = open_input(net, "inp", str(tmp_path / "clip.avi"))
    net.set_input("inp", first)
    net.run()
    return net, FramePipeline(net, {"inp": vid}, clock=clock or (lambda: 0.0))


def level(prepared) -> int:
    return int(round(float(prepared.image.mean())))


def test_frames_falling_due_while_busy_are_dropped_not_queued(registry, tmp_path):
    net, frames = video_pipeline(registry, tmp_path)
    views = [View("inp", "image")]
    frames.play("inp", now=0.0)
    assert frames.due_in(0.0) == pytest.approx(0.1)
    step = frames.step(views, now=0.05)  # nothing due yet: nothing read, nothing computed
    assert step.advance.frames == {} and step.executed == []
    step = frames.step(views, now=0.1)
    assert step.advance.frames == {"inp": 1} and step.advance.dropped == {} and abs(level(step.views[0]) - 60) <= 3
    # the network was busy for 0.36 s: frames 2 and 3 fell due meanwhile and are skipped, frame 4 is shown
    step = frames.step(views, now=0.46)
    assert step.advance.frames == {"inp": 4} and step.advance.dropped == {"inp": 2}
    assert abs(level(step.views[0]) - 150) <= 3 and "conv" in step.executed
    assert frames.due_in(0.46) == pytest.approx(0.04)
    step = frames.step(views, now=5.0)  # long past the end: the last frame is shown, then the video ends
    assert step.advance.frames == {"inp": 7} and step.advance.dropped == {"inp": 2} and frames.dropped == 4
    assert abs(level(step.views[0]) - 240) <= 3
    step = frames.step(views, now=5.1)
    assert step.advance.ended == ["inp"] and not frames.playing and frames.due_in() is None


def test_rebase_after_a_pause_drops_nothing(registry, tmp_path):
    net, frames = video_pipeline(registry, tmp_path)
    frames.play("inp", now=0.0)
    assert frames.advance(now=0.1).frames == {"inp": 1}
    frames.rebase(now=3.0)  # the debugger held the network from 0.1 s to 3 s
    assert frames.advance(now=3.05).frames == {}
    adv = frames.advance(now=3.1)
    assert adv.frames == {"inp": 2} and adv.dropped == {}
    frames.pause("inp")
    assert frames.advance(now=9.0).frames == {} and frames.playing == []


def test_a_runtime_option_change_is_in_the_next_frame(registry, tmp_path):
    net, frames = video_pipeline(registry, tmp_path)
    net.set_runtime_option("cmp", "divider", 0.5)
    views = [View("out", "image")]
    frames.play("inp", now=0.0)
    frames.step(views, now=0.1)
    net.set_runtime_option("cmp", "divider", 0.1)  # between two frames
    after = frames.step(views, now=0.2)
    assert after.advance.frames == {"inp": 2} and "cmp" in after.executed

    def reference(divider: float) -> np.ndarray:
        ref = open_network(split_model(), RunSpec(backend="numpy"), registry)  # the same weights (seed 0)
        ref.set_runtime_option("cmp", "divider", divider)
        ref.set_input("inp", net.output("inp"))  # frame 2
        ref.run()
        return prepare_views(ref, views)[0].image

    assert np.array_equal(after.views[0].image, reference(0.1))
    assert not np.array_equal(after.views[0].image, reference(0.5))  # the option changed what frame 2 shows


def close_images(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal but for a rare last-bit rounding difference of the GPU's arithmetic (at most 1 in 1000 pixels, by 1)."""
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return a.shape == b.shape and int(d.max(initial=0)) <= 1 and np.count_nonzero(d) <= max(1, d.size // 1000)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp16 nhwc", "fp32 nchw"])
def test_views_prepared_on_the_gpu_equal_the_host_preparation(registry, fmt):
    from tests.harness import backend_param

    net = Network(wide_model(64, "1x3x270x480"), registry, backend_param("cupy"), TensorFormat.parse(fmt))
    net.set_input("inp", np.random.default_rng(5).random((1, 3, 270, 480), dtype=np.float32))
    net.run()
    assert not isinstance(net.device_output("feat"), np.ndarray)  # prepared where the output lives
    host = net.output("feat")
    grid = prepare_view(net, View("feat", "grid", max_pixels=500_000, shift=0.1, scale=2.0, fit=True, values=True,
                                  stats=True))
    ref, layout = channel_grid(host, 0.1, 2.0, 500_000, fit=True)
    assert isinstance(grid.image, np.ndarray) and close_images(grid.image, ref) and grid.stride == layout.factor
    assert np.array_equal(grid.values, host[:, :, ::layout.factor, ::layout.factor])
    stats = channel_stats(host)
    assert np.array_equal(grid.stats.min, stats.min) and np.array_equal(grid.stats.max, stats.max)
    np.testing.assert_allclose(grid.stats.mean, stats.mean, rtol=1e-5, atol=1e-6)
    image = prepare_view(net, View("out", "image", max_side=200))
    assert close_images(image.image, tensor_to_image(display_tensor(net.output("out"), 200)))
    one = prepare_view(net, View("feat", "channel", channel=(0, 63), values=True))
    assert np.array_equal(one.values, host[:, 63:64]) and close_images(one.image, redgreen(host[0, 63]))


def pattern_video(path, frames: int = 9, h: int = 20, w: int = 28):
    """Frames that differ in every channel and pixel (lossless FFV1 would need a codec build: compare decoded frames
    with each other, not with what was written)."""
    writer = VideoWriter(path, 10.0)
    rng = np.random.default_rng(7)
    for _ in range(frames):
        writer.write(rng.random((1, 3, h, w), dtype=np.float32))
    writer.close()
    return path


def test_prefetching_reader_gives_the_frames_of_a_plain_reader(tmp_path):
    from engine.io import VideoReader

    path = pattern_video(tmp_path / "p.avi")
    plain, ahead = VideoReader(path), VideoReader(path, prefetch=True)
    try:
        def same() -> None:
            a, b = plain.read(), ahead.read()
            assert (a is None) == (b is None)
            if a is not None:
                assert np.array_equal(a, b)

        same(), same()
        assert plain.skip(2) == ahead.skip(2) == 2  # the frame decoded ahead counts as one of those skipped
        same()
        plain.seek(1), ahead.seek(1)
        same(), same()
        assert plain.skip(100) == ahead.skip(100)  # to the end
        same()  # both past the end
    finally:
        plain.close(), ahead.close()


def test_frames_reach_the_network_as_eight_bits_converted_like_a_host_frame(registry, tmp_path):
    """The pipeline uploads the decoded 8-bit frame and converts it on the device: the network's input equals the
    host conversion of the same frame (engine.io.image_to_tensor), input options (scale, shift) included."""
    from engine.io import ImageOptions, VideoReader, image_to_tensor

    path = pattern_video(tmp_path / "p.avi")
    net = open_network(split_model(), RunSpec(backend="numpy"), registry)
    first, vid = open_input(net, "inp", str(path))
    vid.reader.opts = ImageOptions(scale=2.0, shift=-0.5)
    frames = FramePipeline(net, {"inp": vid}, clock=lambda: 0.0)
    frames.play("inp", now=0.0)
    frames.step([], now=0.1)  # frame 1
    reference = VideoReader(path)
    reference.skip(1)
    expected = image_to_tensor(reference.read_image(), ImageOptions(scale=2.0, shift=-0.5))
    reference.close()
    assert np.array_equal(net.output("inp"), expected)
    assert float(expected.min()) < 0.0 and float(expected.max()) > 1.0  # the options were applied
    vid.close()


def test_set_input_takes_integer_images_and_converts_them(registry):
    net = Network(wide_model(), registry, fmt=TensorFormat.parse("fp32 nchw"))
    x = np.random.default_rng(2).integers(0, 256, (1, 3, 50, 70)).astype(np.uint8)
    net.set_input("inp", x)
    net.run()
    assert net.output("inp").dtype == np.float32 and np.array_equal(net.output("inp"), x.astype(np.float32))


@pytest.mark.gpu
def test_gpu_frames_converted_on_the_device_equal_the_host_conversion(registry, tmp_path):
    from engine.io import ImageOptions, image_to_tensor
    from engine.run import VideoInput
    from tests.harness import backend_param

    path = pattern_video(tmp_path / "p.avi", h=64, w=96)
    gpu = Network(wide_model(8, "1x3x64x96"), registry, backend_param("cupy"), TensorFormat.parse("fp32 nchw"))
    video = VideoInput(path, ImageOptions(scale=0.5))
    img = video.read_image()
    video.to_network(gpu, "inp", img)
    gpu.run()
    assert np.array_equal(gpu.output("inp"), image_to_tensor(img, ImageOptions(scale=0.5)))
    video.close()
    dev = gpu.backend.to_device(np.ones((1, 3, 64, 96), np.float32))
    dev[0, 0, 0, 0] = np.nan
    with pytest.raises(Exception, match="NaN"):
        gpu.set_input("inp", dev)  # a device array is scanned like a host one
