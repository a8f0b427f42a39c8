"""The analysis session's frame pipeline (engine.frames) in a real worker thread: video frames that fall due while
the network is busy are dropped, not queued; the channel inspector shows the grid prepared by the session as it
is, and a mapping changed since is remapped to the same image the session would prepare."""
from __future__ import annotations

import time

import numpy as np

from app.analysis.inspector import ChannelInspector
from engine.analysis import channel_grid
from engine.frames import View, prepare_view
from engine.io import VideoWriter
from engine.network import Network
from tests.app.analysis_helpers import compare_model, start, write_video

WAIT = 15_000


def test_frames_arriving_while_the_network_is_busy_are_dropped(qtbot, st, registry, tmp_path):
    video = write_video(tmp_path / "clip.avi", frames=8)  # 10 fps
    with qtbot.waitSignals([st.started, st.ran], timeout=WAIT):
        start(st, compare_model(), registry)
    with qtbot.waitSignal(st.ran, timeout=WAIT):
        st.send("open_input", ("inp", str(video)))
    frames = []
    st.input_frame.connect(frames.append)

    def slow(_net, name, _out):  # every run takes 0.25 s: two or three frames fall due meanwhile
        if name == "conv":
            time.sleep(0.25)

    st.session.net.hooks.before_layer.append(slow)
    st.send("play", "inp")
    qtbot.waitUntil(lambda: bool(frames) and not frames[-1].playing, timeout=WAIT)
    shown = [f.frame for f in frames if f.playing]
    assert shown == sorted(set(shown)) and shown[-1] == 7  # always forward, the last frame shown
    assert len(shown) < 6  # at most one frame in two was computed: the others were dropped, not queued
    assert max(b - a for a, b in zip([0, *shown], shown)) >= 2


def test_inspector_shows_the_prepared_grid_and_remaps_like_the_session(qtbot, registry):
    net = Network(compare_model("1x3x60x80"), registry)
    net.set_input("inp", np.random.default_rng(2).standard_normal((1, 3, 60, 80)).astype(np.float32))
    net.run()
    from app.analysis.live import LayerData

    ins = ChannelInspector()
    qtbot.addWidget(ins)
    shift, scale, fit = ins.mapping()
    p = prepare_view(net, View("conv", "grid", max_pixels=2000, shift=shift, scale=scale, fit=fit, values=True,
                               stats=True))
    assert p.stride > 1  # strided down on the way
    ins.show_layer(LayerData("conv", "convolution", "1x3x60x80", p.values, p.stride, {}, p.stats,
                             image=p.image, layout=p.layout, mapping=(shift, scale, fit)))
    assert ins.view.image is p.image  # shown as prepared, not remapped
    x, y = p.layout.cell_origin(0, 2)
    n, c, row, col, value = ins.value_at(x + 1, y + 1)
    assert (n, c, row, col) == (0, 2, p.stride, p.stride) and value == net.output("conv")[0, 2, p.stride, p.stride]
    sent = []
    ins.mapping_changed.connect(lambda *m: sent.append(m[:3]))
    ins.set_mapping(scale=3.0)  # remapped here until the session's next grid comes with the new mapping
    assert ins.wait_ready()
    again = prepare_view(net, View("conv", "grid", max_pixels=2000, scale=3.0, fit=fit))
    assert sent[-1] == (0.0, 3.0, fit) and np.array_equal(ins.view.image, again.image)
    ref, _ = channel_grid(net.output("conv"), 0.0, 3.0, 2000, fit=fit)
    assert np.array_equal(ins.view.image, ref)


def test_an_option_changed_during_playback_is_in_the_next_frame(qtbot, st, registry, tmp_path):
    video = tmp_path / "long.avi"
    writer = VideoWriter(video, 10.0)
    for i in range(40):
        writer.write(np.full((1, 3, 24, 32), 0.2 + 0.01 * i, np.float32))
    writer.close()
    with qtbot.waitSignals([st.started, st.ran], timeout=WAIT):
        start(st, compare_model(), registry)
    with qtbot.waitSignal(st.ran, timeout=WAIT):
        st.send("open_input", ("inp", str(video)))
    images: list[np.ndarray] = []
    runs: list[tuple[object, np.ndarray]] = []
    st.outputs.connect(lambda out: images.append(out["out"]))
    st.ran.connect(lambda info: runs.append((info, images[-1])))
    st.send("play", "inp")
    qtbot.waitUntil(lambda: len(runs) >= 2, timeout=WAIT)
    assert np.all(runs[-1][1][:, 16] == 255)  # the split's divider line at 0.5 of 32 columns
    n = len(runs)
    st.send("set_option", ("cmp", "divider", 0.1))
    qtbot.waitUntil(lambda: len(runs) >= n + 2, timeout=WAIT)
    st.send("pause_video", "inp")
    after = [(info, img) for info, img in runs[n:] if np.all(img[:, 3] == 255)]
    assert after, "the new divider never showed"
    first = runs.index(after[0]) - n
    assert first <= 1  # in the run of the frame being computed when the option came, or the next one
    assert "inp" in after[0][0].executed  # with a new frame: no extra run of the old one
