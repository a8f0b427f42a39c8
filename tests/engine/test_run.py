"""engine.run, the one run path: the rule for ``auto``, the weights choice, the network, the inputs (stills, NPY,
video frames, seeded random tensors) with the input layer's image options, timed runs with progress and
cancellation, and the report."""
from __future__ import annotations

import io

import numpy as np
import pytest

from engine.errors import InputError, LayerLabError, WeightsError
from engine.formats import LayerFormat
from engine.io import VideoWriter, image_to_tensor, read_image
from engine.model import Model
from engine.network import Network, random_input
from engine.profiling import Cancelled
from engine.run import (
    DEFAULT_FORMATS,
    RunSpec,
    RunSpecError,
    load_inputs,
    make_report,
    normalize_format,
    open_network,
    open_weights,
    parse_named,
    read_inputs,
    resolve_names,
    run_timed,
    tensor_format,
    with_model_weights,
)
from engine.tensor import TensorFormat
from engine.weights import RandomWeights, SafetensorsWeights, WeightsFolder, save_safetensors, save_weights
from resources import SAMPLES

IMAGE = SAMPLES / "sample.png"


def small_model(**input_params: str) -> Model:
    m = Model("small")
    m.add_layer("input", "inp", params={"dimensions": "1x3x24x32", **input_params})
    m.add_layer("convolution", "conv", params={"num_output_channels": "4"}, inputs=["inp"])
    m.add_layer("batch_normalization", "bn", inputs=["conv"], activation="relu")
    m.add_layer("output", "out", inputs=["bn"])
    return m


def two_inputs() -> Model:
    m = Model("two")
    m.add_layer("input", "a", params={"dimensions": "1x3x8x8"})
    m.add_layer("input", "b", params={"dimensions": "1x3x8x8"})
    m.add_layer("element_wise", "sum", params={"operation": "sum"}, inputs=["a", "b"])
    m.add_layer("output", "out", inputs=["sum"])
    return m


# ---- settings -----------------------------------------------------------------------------------------------
def test_auto_format_is_one_rule_per_backend():
    assert DEFAULT_FORMATS == {"cupy": "fp16 nhwc", "numpy": "fp32 nhwc"}
    assert tensor_format("auto", "numpy") == TensorFormat.parse("fp32 nhwc")
    assert tensor_format("", "cupy") == TensorFormat.parse("fp16 nhwc")
    assert tensor_format("fp16|nchw", "numpy") == TensorFormat.parse("fp16 nchw")  # an explicit format stays
    assert normalize_format(" AUTO ") == "auto" and normalize_format("nhwc,fp16") == "fp16 nhwc"
    with pytest.raises(LayerLabError, match="fp8"):
        normalize_format("fp8")


def test_a_run_reads_its_format_settings_once(registry, monkeypatch):
    """open_network reads the run's format and layer settings once and passes the result on."""
    spec = RunSpec(backend="numpy", format="FP16,nchw", layer_formats=(("conv", "fp32"),))
    settings = spec.checked_formats()
    assert settings.network == TensorFormat.parse("fp16 nchw") and settings.overrides() == {"conv": LayerFormat.parse("fp32")}
    assert RunSpec(format="auto").checked_formats().for_backend("cupy") == TensorFormat.parse("fp16 nhwc")
    read: list[str] = []
    parse = TensorFormat.parse.__func__
    monkeypatch.setattr(TensorFormat, "parse", classmethod(lambda cls, text: read.append(text) or parse(cls, text)))
    net = open_network(small_model(), spec, registry)
    assert read.count("FP16,nchw") == 1
    assert net.fmt == TensorFormat.parse("fp16 nchw")


@pytest.mark.parametrize("change,words", [
    ({"backend": "tpu"}, "unknown backend 'tpu'"),
    ({"format": "fp64"}, "fp64"),
    ({"iterations": 0}, "iterations must be at least 1, got 0"),
    ({"warmup": -1}, "warm-up iterations must be 0 or more"),
    ({"input_layout": "hwc"}, "input layout 'hwc'"),
    ({"fusing": ""}, "fusing rules"),
    ({"device": -1}, "device -1: expected a GPU ordinal"),
    ({"backend": "numpy", "device": 0}, "device 0: the numpy backend runs on the CPU"),
])
def test_bad_settings_are_named(change, words):
    with pytest.raises(LayerLabError, match=words):
        RunSpec(**change).check()
    assert RunSpec().check() == RunSpec()


def test_weights_are_chosen_in_one_place(tmp_path):
    assert isinstance(open_weights(RunSpec(seed=3)), RandomWeights) and open_weights(RunSpec(seed=3)).seed == 3
    assert isinstance(open_weights(RunSpec(weights=str(tmp_path))), WeightsFolder)
    with pytest.raises(WeightsError, match="does not exist"):
        open_weights(RunSpec(weights=str(tmp_path / "nope")))
    save_safetensors(tmp_path / "w.safetensors", {"c": {"weights": np.ones((2, 2))}})
    assert isinstance(open_weights(RunSpec(weights=str(tmp_path / "w.safetensors"))), SafetensorsWeights)
    (tmp_path / "bad.safetensors").write_bytes(b"")
    with pytest.raises(WeightsError, match="not a readable safetensors file"):
        open_weights(RunSpec(weights=str(tmp_path / "bad.safetensors")))


def test_the_model_s_own_weights_come_from_its_setting_or_its_import(tmp_path):
    model = small_model()
    assert with_model_weights(RunSpec(seed=2), model) == RunSpec(seed=2)  # no setting: random weights
    save_safetensors(tmp_path / "m.safetensors", {"c": {"weights": np.ones((2, 2))}})
    model.settings["weights"] = "m.safetensors"
    model.path = str(tmp_path / "m.lnet")  # the setting is relative to the model file
    spec = with_model_weights(RunSpec(), model)
    assert spec.weights == str(tmp_path / "m.safetensors") and isinstance(open_weights(spec), SafetensorsWeights)
    assert with_model_weights(RunSpec(weights=str(tmp_path)), model).weights == str(tmp_path)  # the spec's path wins
    assert isinstance(open_weights(RunSpec(), model), RandomWeights)  # a spec without weights: random ones
    imported = RandomWeights(9)
    model.weights_source = imported  # an import's in-memory weights are the model's own
    assert open_weights(RunSpec(), model) is imported
    assert isinstance(open_weights(RunSpec(weights=str(tmp_path)), model), WeightsFolder)


def test_open_network_uses_the_spec(registry, tmp_path):
    net = open_network(small_model(), RunSpec(backend="numpy", seed=4), registry)
    assert net.fmt == TensorFormat.parse("fp32 nhwc") and net.backend.name == "numpy" and net.seed == 4
    assert net.fused is not None and net.fused.applied  # fusing on by default: conv + bn
    plain = open_network(small_model(), RunSpec(backend="numpy", format="fp16 nchw", fusing="off"), registry)
    assert plain.fmt == TensorFormat.parse("fp16 nchw") and plain.fused is None
    # the weights of the spec: a folder written from seed 4's random weights gives the same outputs
    ref = Network(small_model(), registry, weights=RandomWeights(4), seed=4, fusing="off")
    ref.run()
    save_weights(tmp_path, {n: {w: np.asarray(a) for w, a in ref.layer(n).weights.items()} for n in ref.order})
    from_folder = open_network(small_model(), RunSpec(backend="numpy", format="fp32 nchw", weights=str(tmp_path),
                                                      seed=9, fusing="off"), registry)
    x = random_input(ref.layer("inp").default_dims(), 1)
    np.testing.assert_array_equal(from_folder.infer({"inp": x})["out"], ref.infer({"inp": x})["out"])


def test_auto_backend_notice(registry, monkeypatch, tmp_path):
    import engine.backends as b

    monkeypatch.setattr(b, "_cupy_probe", (False, "no usable CUDA GPU (test)"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # a machine that has not seen the notice yet
    notice = io.StringIO()
    net = open_network(small_model(), RunSpec(), registry, notice=notice)
    assert net.backend.name == "numpy" and net.fmt == TensorFormat.parse(DEFAULT_FORMATS["numpy"])
    assert "layerlab: using the numpy backend: no usable CUDA GPU (test)" in notice.getvalue()
    again = io.StringIO()  # once per machine
    open_network(small_model(), RunSpec(), registry, notice=again)
    assert "using the numpy backend" not in again.getvalue()
    open_network(small_model(), RunSpec(), registry, notice=again, always_notice=True)  # layerlab -v
    assert "using the numpy backend: no usable CUDA GPU (test)" in again.getvalue()
    with pytest.raises(LayerLabError, match="the cupy backend cannot be used here"):
        open_network(small_model(), RunSpec(backend="cupy"), registry)


# ---- inputs -------------------------------------------------------------------------------------------------
def test_names_of_inputs_and_outputs():
    assert parse_named(["a=x.png", "y.npy", "C:=z", "9a=q.png"]) == [("a", "x.png"), (None, "y.npy"), (None, "C:=z"),
                                                                    (None, "9a=q.png")]
    assert resolve_names([(None, "x")], ["inp"], "input") == [("inp", "x")]
    with pytest.raises(InputError, match=r"the network has 2 input layers \(a, b\): use --input NAME=PATH"):
        resolve_names([(None, "x")], ["a", "b"], "input")
    with pytest.raises(InputError, match=r"no output layer named 'c' \(the network has: a, b\)"):
        resolve_names([("c", "x")], ["a", "b"], "output")


def test_images_take_the_input_layers_options(registry):
    net = open_network(small_model(scale="2", shift="-0.5", min_channels="4", tiling="16"),
                       RunSpec(backend="numpy", inputs=((None, str(IMAGE)),)), registry)
    inputs = load_inputs(net, RunSpec(inputs=((None, str(IMAGE)),)))
    raw = read_image(IMAGE)  # 1x3x96x128
    want = np.pad(raw * 2 - 0.5, ((0, 0), (0, 1), (0, 0), (0, 0)))  # 96 and 128 are multiples of 16 already
    np.testing.assert_allclose(inputs.arrays["inp"], want, rtol=1e-6)
    assert inputs.sources == {"inp": ("image", str(IMAGE))} and not inputs.videos
    np.testing.assert_allclose(net.output("inp"), want, rtol=1e-6)  # given to the network


def test_npy_layout_and_seeded_random_inputs(registry, tmp_path):
    x = np.random.default_rng(0).random((1, 3, 8, 8), dtype=np.float32)
    np.save(tmp_path / "a.npy", x.transpose(0, 2, 3, 1))
    net = open_network(two_inputs(), RunSpec(backend="numpy"), registry)
    spec = RunSpec(inputs=(("a", str(tmp_path / "a.npy")),), input_layout="nhwc", seed=5)
    inputs = load_inputs(net, spec)
    np.testing.assert_array_equal(inputs.arrays["a"], x)
    np.testing.assert_array_equal(inputs.arrays["b"], random_input(net.layer("b").default_dims(), 5))
    assert inputs.sources["b"] == ("random", "")
    np.testing.assert_allclose(net.output("out"), x + random_input(net.layer("b").default_dims(), 5), rtol=1e-6)
    with pytest.raises(InputError, match="use --input NAME=PATH"):
        read_inputs(net, RunSpec(inputs=((None, str(tmp_path / "a.npy")),)))
    with pytest.raises(InputError, match=r"input layer a: .*missing.png: no such image file"):
        read_inputs(net, RunSpec(inputs=(("a", str(tmp_path / "missing.png")),)))


def test_video_gives_its_first_frame_and_stays_open(registry, tmp_path):
    w = VideoWriter(tmp_path / "in.avi", 5)
    for i in range(3):
        w.write(np.full((1, 3, 24, 32), 0.25 * (i + 1), np.float32))
    w.close()
    net = open_network(small_model(), RunSpec(backend="numpy"), registry)
    inputs = load_inputs(net, RunSpec(inputs=(("inp", str(tmp_path / "in.avi")),)))
    video = inputs.videos["inp"]
    assert inputs.sources["inp"] == ("video", str(tmp_path / "in.avi")) and video.frame == 0
    assert abs(float(inputs.arrays["inp"].mean()) - 0.25) < 0.02
    assert abs(float(video.read().mean()) - 0.5) < 0.02 and video.frame == 1
    assert video.read(0) is not None and video.frame == 0  # seek back
    inputs.close()
    assert not inputs.videos
    VideoWriter(tmp_path / "empty.avi", 5).close()
    (tmp_path / "empty.avi").write_bytes(b"")
    with pytest.raises(InputError, match="input layer inp"):
        read_inputs(net, RunSpec(inputs=(("inp", str(tmp_path / "empty.avi")),)))


# ---- timed runs and reports ---------------------------------------------------------------------------------
def test_timed_runs_whole_iterations_or_per_layer(registry):
    net = open_network(small_model(), RunSpec(backend="numpy"), registry)
    seen = []
    whole = run_timed(net, RunSpec(iterations=3, warmup=1, profiling=False),
                      progress=lambda i, n: seen.append((i, n, len(net.hooks.before_layer))))
    # without a cancellation check no layer hook runs (a hook would keep the GPU from replaying its CUDA graph)
    assert len(whole.network_times_ms) == 3 and whole.peaks is None and seen == [(1, 3, 0), (2, 3, 0), (3, 3, 0)]
    assert not any(lp.times_ms for lp in whole.layers)  # layer times are not measured
    per_layer = run_timed(net, RunSpec(iterations=2, warmup=0, profiling=True))
    assert len(per_layer.network_times_ms) == 2 and all(len(lp.times_ms) == 2 for lp in per_layer.layers)
    assert not net.hooks.before_layer and not net.hooks.after_layer  # hooks removed


@pytest.mark.parametrize("profiling", [False, True])
def test_cancelled_run_stops(registry, profiling):
    net = open_network(small_model(), RunSpec(backend="numpy"), registry)
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 5

    with pytest.raises(Cancelled):
        run_timed(net, RunSpec(iterations=1000, profiling=profiling), cancelled=cancelled)
    assert len(calls) == 6 and not net.hooks.before_layer


def test_report_says_how_the_run_was_done(registry):
    model = small_model()
    spec = RunSpec(backend="numpy", format="fp16 nhwc", iterations=2, warmup=0, profiling=False, seed=3)
    net = open_network(model, spec, registry)
    doc = make_report(net, run_timed(net, spec), spec, model=model, model_path="m.lnet", notes=["first"])
    assert doc["run"]["format"] == "fp16|nhwc" and doc["run"]["iterations"] == 2 and doc["run"]["seed"] == 3
    assert doc["run"]["profiling"] is False and doc["model"]["name"] == "small"
    notes = doc["run"]["notes"]
    assert notes[0] == "first" and any(n.startswith("fusing rule") and "conv + bn" in n for n in notes)
    assert "per-layer profiling was off: whole iterations timed, layer times not measured" in notes
    assert any("fp16 on the NumPy backend" in n for n in notes)


@pytest.mark.gpu
def test_auto_on_a_gpu_is_cupy_fp16_nhwc_replayed_as_a_graph(registry):
    model = small_model()
    net = open_network(model, RunSpec(), registry)
    assert net.backend.name == "cupy" and net.fmt == TensorFormat.parse("fp16 nhwc")
    spec = RunSpec(iterations=3, profiling=False)
    doc = make_report(net, run_timed(net, spec, cancelled=lambda: False), spec, model=model, model_path=None)
    assert doc["run"]["graph_capture"] and any(n.startswith("CUDA graph: captured") for n in doc["run"]["notes"])
    cpu = open_network(model, RunSpec(backend="numpy", format="fp16 nhwc"), registry)
    x = random_input(cpu.layer("inp").default_dims(), 2)
    np.testing.assert_allclose(net.infer({"inp": x})["out"], cpu.infer({"inp": x})["out"], rtol=2e-2, atol=2e-2)


def test_image_options_match_io(registry):
    net = open_network(small_model(scale="0.5"), RunSpec(backend="numpy"), registry)
    rgb = (np.arange(24 * 32 * 3) % 255).astype(np.uint8).reshape(24, 32, 3)
    from engine.run import image_options

    np.testing.assert_array_equal(image_to_tensor(rgb, image_options(net, "inp")), image_to_tensor(rgb) * 0.5)
    with pytest.raises(LayerLabError, match="no layer 'nope'"):
        image_options(net, "nope")
    with pytest.raises(RunSpecError):
        open_network(small_model(), RunSpec(iterations=0), registry)


def test_fusing_notes_list_the_first_fusions_and_count_the_rest_by_rule(registry):
    """A network of hundreds of residual blocks gets a dozen note lines, not hundreds."""
    from engine.model import Model
    from engine.run import FUSING_NOTES_LISTED, fusing_notes

    m = Model("deep")
    m.add_layer("input", "input", params={"dimensions": "1x4x6x6"})
    prev = "input"
    for i in range(25):
        m.add_layer("convolution", f"c{i}", params={"num_output_channels": "4", "bias": "false"}, inputs=[prev])
        m.add_layer("batch_normalization", f"bn{i}", inputs=[f"c{i}"])
        m.add_layer("element_wise", f"add{i}", inputs=[f"bn{i}", prev], activation="relu")
        prev = f"add{i}"
    m.add_layer("output", "output", inputs=[prev])
    notes = fusing_notes(open_network(m, RunSpec(backend="numpy"), registry))
    assert len(notes) == FUSING_NOTES_LISTED + 1
    assert notes[0] == "fusing rule *|*|conv_bn: c0 + bn0 -> bn0"
    assert notes[-1] == ("and 40 more fusion(s): 15 by *|*|conv_bn, 25 by *|*|conv_bn_sum (layerlab export "
                         "preprocessed writes the fused model)")
