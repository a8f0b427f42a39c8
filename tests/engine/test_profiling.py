"""Profiling: layer times that add up to the iteration, kernels matched to layers, cached device peaks, roof flags,
and the report's text and HTML."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from app.cli import main
from engine import profiling as prof
from engine import report as rep
from engine.backends.cuda.kernel_trace import DeviceRecord
from engine.modelfile import load
from engine.network import Network
from engine.replay import Replayer
from engine.tensor import Dims
from resources import SAMPLES
from tests.bench import networks

MODEL = str(SAMPLES / "denoiser.lnet")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(prof, "_peaks_cache", {})
    monkeypatch.setattr(prof, "_remeasured", set())
    return tmp_path / "cache" / "layerlab"


def small_resnet(registry):
    return Network(networks.resnet18(Dims(1, 3, 32, 32), classes=10), registry)


def test_cpu_layer_times_come_from_the_plain_runs_replay_path_and_add_up(registry, monkeypatch):
    net = small_resnet(registry)
    replays = []
    original = Replayer._run_replay
    monkeypatch.setattr(Replayer, "_run_replay", lambda self, key, *steps: (replays.append(key), original(self, key, *steps))[1])
    sequences = []
    segments = Replayer._run_segments
    monkeypatch.setattr(Replayer, "_run_segments", lambda self, *steps: (sequences.append(1), segments(self, *steps))[1])
    result = prof.profile(net, iterations=3, warmup=1, measure_device=False)
    assert len(replays) == 1 + 1 + 3  # the planning run, the warm-up, the timed runs: all on the replay path
    assert len(sequences) == 3  # the timed runs as the plain run replays: by call sequences
    assert result.timing == prof.TIMING_HOST
    computed = [lp for lp in result.layers if lp.times_ms]
    assert [lp.name for lp in computed] == net.order  # every layer timed, in every iteration
    assert all(len(lp.times_ms) == 3 for lp in computed)
    for i, whole in enumerate(result.network_times_ms):
        layers = sum(lp.times_ms[i] for lp in computed)
        assert 0 < layers <= whole  # the layers' clock runs inside the iteration's
    assert sum(sum(lp.times_ms) for lp in computed) >= 0.5 * sum(result.network_times_ms)
    assert all(len(lp.kernels) == 1 and lp.kernels[0].kind == "host" for lp in computed)
    assert not (net.hooks.layer_done or net.hooks.layer_ended or net.hooks.before_inference or net.hooks.before_layer
                or net.hooks.after_layer)


def test_cancel_is_polled_before_every_iteration(registry):
    net = Network(load(MODEL, registry), registry)
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > len(net.order) + 3  # past the layer-by-layer run, inside the timed ones

    with pytest.raises(prof.Cancelled):
        prof.profile(net, iterations=50, warmup=0, should_cancel=cancel, measure_device=False)
    assert not (net.hooks.layer_done or net.hooks.layer_ended or net.hooks.before_inference or net.hooks.before_layer
                or net.hooks.after_layer)


def test_attribute_matches_records_to_layers_by_launch_order():
    ref = [("a", "k1"), ("a", "k2"), ("b", "k3"), ("c", "k1")]
    assert prof.attribute(ref, ["k1", "k2", "k3", "k1"]) == ["a", "a", "b", "c"]
    # an extra record (a memory set the layer-by-layer run did not launch) goes to the layer before it
    assert prof.attribute(ref, ["k1", "k2", "memset", "k3", "k1"]) == ["a", "a", "a", "b", "c"]
    assert prof.attribute(ref, ["k1", "k3", "k1"]) == ["a", "b", "c"]  # one missing
    assert prof.attribute(ref, ["x", "k1"]) == [None, "a"]


def test_account_adds_up_to_the_span():
    spans = [(100, 200), (250, 300), (280, 400), (1000, 1100)]  # the third overlaps the second
    acc = prof.account(spans)
    assert sum(b + g for b, g in acc) == pytest.approx((1100 - 100) / 1e6)
    assert acc[0] == (pytest.approx(100e-6), 0.0) and acc[1][1] == pytest.approx(50e-6)
    assert acc[2] == (pytest.approx(100e-6), 0.0)  # only what it ran alone
    bounded = prof.account(spans, begin_ns=40, end_ns=1150)
    assert sum(b + g for b, g in bounded) == pytest.approx((1150 - 40) / 1e6)
    assert bounded[0][1] == pytest.approx(60e-6) and bounded[-1][1] == pytest.approx((600 + 50) / 1e6)


class FakeTracer:
    """Device records made up as the network computes its layers: one kernel per layer, then a gap of 5 us."""

    def __init__(self, net: Network) -> None:
        self.clock, self.pending, self.on = 0, [], False
        net.hooks.layer_done.append(self.ran)

    def ran(self, name: str) -> None:
        if self.on:
            start = self.clock + 5000
            self.clock = start + 20000
            self.pending.append(DeviceRecord("kernel", f"k_{name}", start, self.clock, (4, 1, 1), (128, 1, 1)))

    def start(self) -> None:
        self.on = True

    def stop(self) -> None:
        self.on = False

    def take(self) -> list[DeviceRecord]:
        got, self.pending = self.pending, []
        return got


def test_traced_profile_gives_each_layer_its_kernels_and_gaps(registry):
    net = small_resnet(registry)
    tracer = FakeTracer(net)
    net.hooks.layer_done.remove(tracer.ran)
    # the replay path reports layers too: the fake device sees every run's layers
    net.hooks.layer_done.append(tracer.ran)
    result = prof._profile_traced(net, tracer, 2, 1, None, lambda *_: None)
    computed = [lp for lp in result.layers if lp.times_ms]
    assert [lp.name for lp in computed] == net.order
    for lp in computed:
        assert [k.name for k in lp.kernels] == [f"k_{lp.name}"]
        assert lp.kernels[0].grid == (4, 1, 1) and lp.kernels[0].ms == pytest.approx(0.02)
        assert lp.device_ms == pytest.approx([0.02, 0.02])
    assert all(lp.gap_ms == pytest.approx([0.005] * 2) for lp in computed[1:])
    span = 0.025 * len(net.order) - 0.005  # from the first kernel's start to the last one's end
    launch = float(np.median(result.network_times_ms)) - span  # the plain run's wait before its first kernel
    assert computed[0].gap_ms == pytest.approx([launch] * 2) and "first layer" in result.notes[0]
    assert sum(lp.stats()["mean"] for lp in computed) == pytest.approx(float(np.median(result.network_times_ms)))
    doc = rep.build_report(result, model_name="r", model_version="", model_path=None, backend="cupy", device="gpu",
                           fmt="fp32", iterations=2, warmup=1)
    n = doc["network"]
    assert n["device_ms"] == pytest.approx(0.02 * len(net.order))
    assert n["sum_layers_ms"] == pytest.approx(n["device_ms"] + n["gap_ms"])
    assert doc["run"]["timing"] == prof.TIMING_CUPTI_EAGER
    assert rep.layer_figures(doc)[net.order[1]]["kernels"][0]["name"] == f"k_{net.order[1]}"


class SlowLaunchTracer(FakeTracer):
    """As FakeTracer, with 20 ms between kernels: tracing that slows every launch far beyond the plain run's pace."""

    def ran(self, name: str) -> None:
        if self.on:
            start = self.clock + 20_000_000
            self.clock = start + 20000
            self.pending.append(DeviceRecord("kernel", f"k_{name}", start, self.clock, (4, 1, 1), (128, 1, 1)))


def test_gaps_widened_by_tracing_are_scaled_to_the_plain_runs_time(registry):
    """A network run layer by layer (no graph) is decided by the host's gaps between kernels, which tracing widens:
    the layers still add up to the plain run, their kernels' time as measured."""
    net = small_resnet(registry)
    tracer = SlowLaunchTracer(net)
    result = prof._profile_traced(net, tracer, 3, 1, None, lambda *_: None)
    computed = [lp for lp in result.layers if lp.times_ms]
    plain = float(np.median(result.network_times_ms))
    assert plain < 20.0 * len(computed)  # the traced runs were far slower
    assert sum(lp.stats()["mean"] for lp in computed) == pytest.approx(plain, rel=0.05)
    assert all(lp.device_ms == pytest.approx([0.02] * 3) for lp in computed)
    assert any("gaps between kernels are scaled" in n for n in result.notes)
    gaps = [lp.gap_ms[0] for lp in computed[1:]]
    assert max(gaps) == pytest.approx(min(gaps))  # one factor for every layer


class HeldOnceTracer(FakeTracer):
    """As FakeTracer, the host held for 50 ms before one layer of the second traced run."""

    def __init__(self, net: Network) -> None:
        super().__init__(net)
        self.runs = 0

    def ran(self, name: str) -> None:
        if self.on and name == self.held_layer and self.pending:
            self.runs += 1
            if self.runs == 4:  # two capture runs, the layer-by-layer run, then the first timed run
                self.clock += 50_000_000
        super().ran(name)


def test_a_traced_run_the_host_held_is_left_out_of_the_layer_times(registry):
    net = small_resnet(registry)
    tracer = HeldOnceTracer(net)
    tracer.held_layer = net.order[2]
    result = prof._profile_traced(net, tracer, 5, 1, None, lambda *_: None)
    computed = [lp for lp in result.layers if lp.times_ms]
    assert all(len(lp.times_ms) == 4 for lp in computed)  # 5 timed runs, the held one left out
    assert all(max(lp.gap_ms) < 1.0 for lp in computed[1:])
    assert any("1 of 5 traced runs left out" in n for n in result.notes)
    assert sum(lp.stats()["mean"] for lp in computed) == pytest.approx(float(np.median(result.network_times_ms)))
    assert prof.steady_runs([1.0, 1.1, 0.9, 5.0, 1.2]) == [0, 1, 2, 4]
    assert prof.steady_runs([]) == []


def test_device_peaks_are_cached_per_machine_with_the_date_and_remeasurable(cache, monkeypatch):
    from engine.backends import NumpyBackend

    measured = []

    def fake(backend, dtype, trials=5, budget_s=1.0):
        measured.append(dtype)
        return prof.DevicePeaks(1e9 * len(measured), 1e9, "2026-01-02T03:04:05+00:00", trials)

    monkeypatch.setattr(prof, "measure_peaks", fake)
    b = NumpyBackend()
    first = prof.device_peaks(b, np.float32)
    assert prof.device_peaks(b, np.float32) is first and len(measured) == 1
    stored = json.loads((cache / prof.PEAKS_FILE).read_text())
    entry = next(iter(stored["peaks"].values()))
    assert entry["measured"] == "2026-01-02T03:04:05+00:00" and entry["trials"] == 5
    monkeypatch.setattr(prof, "_peaks_cache", {})
    assert prof.device_peaks(b, np.float32).flops_per_s == first.flops_per_s and len(measured) == 1  # from the file
    assert prof.device_peaks(b, np.float32, remeasure=True).flops_per_s == 2e9 and len(measured) == 2
    assert json.loads((cache / prof.PEAKS_FILE).read_text())["peaks"][next(iter(stored["peaks"]))]["flops_per_s"] == 2e9


def test_peaks_cached_far_below_what_the_layers_reach_are_measured_again_once(registry, cache, monkeypatch):
    """A roof measured on a busy moment would put every later report's layers above it: the profile measures
    again (once per process), and peaks the layers stay under are kept."""
    from engine.backends import NumpyBackend

    measured = []

    def fake(backend, dtype, trials=5, budget_s=1.0):
        measured.append(dtype)
        return prof.DevicePeaks(1e15, 1e15, "2026-01-02T03:04:05+00:00", trials)

    monkeypatch.setattr(prof, "measure_peaks", fake)
    key = prof._peaks_key(NumpyBackend(), np.float32)
    stale = {"flops_per_s": 1.0, "bytes_per_s": 1.0, "measured": "2026-01-01T00:00:00+00:00", "trials": 5}
    cache.mkdir(parents=True, exist_ok=True)
    (cache / prof.PEAKS_FILE).write_text(json.dumps({"format": prof.PEAKS_FORMAT, "peaks": {key: stale}}))
    result = prof.profile(small_resnet(registry), iterations=2, warmup=1)
    assert len(measured) == 1 and result.peaks.flops_per_s == 1e15  # measured again, the report drawn under it
    assert json.loads((cache / prof.PEAKS_FILE).read_text())["peaks"][key]["flops_per_s"] == 1e15
    assert not any(layer["above_roof"] for layer in rep.build_report(
        result, model_name="m", model_version="1", model_path=None, backend="numpy", device="cpu", fmt="fp32|nhwc",
        iterations=2, warmup=1)["layers"])
    prof.profile(small_resnet(registry), iterations=2, warmup=1)
    assert len(measured) == 1  # the new peaks hold: nothing measured again
    monkeypatch.setattr(prof, "_peaks_cache", {})
    (cache / prof.PEAKS_FILE).write_text(json.dumps({"format": prof.PEAKS_FORMAT, "peaks": {key: stale}}))
    assert prof.profile(small_resnet(registry), iterations=2, warmup=1).peaks.flops_per_s == 1.0
    assert len(measured) == 1  # at most once per process: a machine whose roof stays low is reported, not re-timed


def test_measure_peaks_keeps_the_best_of_its_trials():
    from engine.backends import NumpyBackend

    p = prof.measure_peaks(NumpyBackend(), np.float32, trials=2, budget_s=0.05)
    assert p.trials == 2 and p.flops_per_s > 0 and p.bytes_per_s > 0 and p.measured


def synthetic(peaks: prof.DevicePeaks | None, notes=()) -> dict:
    fast = prof.LayerProfile("fast <x>", "convolution", "1x8x8x8", 2048, 10**9, 1000, 1000, times_ms=[0.01, 0.01])
    slow = prof.LayerProfile("slow", "convolution", "1x8x8x8", 2048, 1000, 1000, 1000, times_ms=[1.0, 1.0])
    fast.kernels = [prof.KernelStat("conv_kernel", "kernel", 0.01, (8, 1, 1), (256, 1, 1), "cudnn plan 3")]
    result = prof.ProfileResult([fast, slow], [1.2, 1.2], 4096, peaks, prof.TIMING_HOST)
    return rep.build_report(result, model_name="m", model_version="1", model_path=None, backend="numpy",
                            device="cpu", fmt="fp32|nchw", iterations=2, warmup=1, notes=list(notes))


def test_a_layer_above_its_roof_is_flagged_not_drawn_silently():
    doc = synthetic(prof.DevicePeaks(1e9, 1e9, "2026-01-02", 5))  # fast: 1e11 FLOP/s against a roof of 1e9
    by = {x["name"]: x for x in doc["layers"]}
    assert by["fast <x>"]["above_roof"] and not by["slow"]["above_roof"]
    assert any("1 layer(s) above the roofline" in n and "--measure-peaks" in n for n in doc["run"]["notes"])
    page = rep.to_html(doc)
    assert "<polygon" in page and "above the measured roof" in page and "(above the roof)" in page
    assert "best of 5" in rep.summary(doc)
    clean = synthetic(prof.DevicePeaks(1e15, 1e15, "2026-01-02", 5))
    assert not any(x["above_roof"] for x in clean["layers"]) and "<polygon" not in rep.to_html(clean)


def test_html_escapes_once_and_shows_kernels():
    doc = synthetic(None, notes=["fusing rule conv_bn: c1 + b1 -> c1_bn"])
    page = rep.to_html(doc)
    assert "c1 + b1 -&gt; c1_bn" in page and "&amp;gt;" not in page and "&amp;" not in page
    assert "fast &lt;x&gt;" in page and "fast <x>" not in page
    assert "<details><summary>conv_kernel</summary>" in page and "8 / 256x1x1" not in page
    assert "<td>8x1x1 / 256x1x1</td><td>cudnn plan 3</td>" in page
    assert "http://" not in page and "https://" not in page
    assert "table.sortable>thead th" in page  # a kernel table's headers do not sort the layer table


def test_old_reports_still_load_compare_and_render(tmp_path):
    doc = synthetic(None)
    old = json.loads(json.dumps(doc))
    old["version"] = 1
    for key in ("timing",):
        old["run"].pop(key)
    for key in ("device_ms", "gap_ms", "launch_bound"):
        old["network"].pop(key)
    for layer in old["layers"]:
        for key in ("kernels", "candidates", "above_roof", "device_ms", "gap_ms"):
            layer.pop(key)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    loaded = rep.load(path)
    assert "<table id='layers'" in rep.to_html(loaded) and rep.summary(loaded)
    c = rep.compare([loaded, doc])
    assert "conv_kernel" in rep.comparison_text(c) and "conv_kernel" not in rep.comparison_text(c, kernels=False)
    assert "<summary>conv_kernel</summary>" in rep.comparison_html(c)
    figures = rep.layer_figures(doc, base=loaded)
    assert figures["slow"]["diff_ms"] == 0 and figures["fast <x>"]["kernels"][0]["candidate"] == "cudnn plan 3"
    bad = json.loads(json.dumps(doc))
    bad["layers"][0]["kernels"] = [{"name": 3}]
    path.write_text(json.dumps(bad))
    with pytest.raises(Exception, match=r"layers\[0\]\.kernels\[0\]\.name has the wrong type"):
        rep.load(path)


def test_profile_cli_measures_peaks_again_and_lists_kernels(tmp_path, cache, monkeypatch):
    measured = []
    monkeypatch.setattr(prof, "measure_peaks",
                        lambda b, d, trials=5, budget_s=1.0: measured.append(d) or prof.DevicePeaks(1e15, 1e15, "now", 5))
    out = io.StringIO()
    args = ["profile", MODEL, "-n", "1", "-b", "numpy", "--report", str(tmp_path / "a")]
    assert main(args, out=out) == 0 and len(measured) == 1
    assert "layer times: host clock per layer" in out.getvalue() and "kernels of the 10 slowest layers" in out.getvalue()
    assert main([*args, "--measure-peaks", "--kernels", "0"], out=(out := io.StringIO())) == 0
    assert len(measured) == 2 and "slowest layers" not in out.getvalue()
    assert main([*args, "--kernels", "-1"], out=io.StringIO()) == 2


def test_a_cpu_profile_names_the_candidate_of_every_convolution(registry):
    """Every run of a CPU convolution after the first replays its prepared call; the profile still names the
    candidate that computes it (not the replayed function's name)."""
    from engine.backends import get_backend
    from engine.model import Model
    from engine.network import Network
    from engine.profiling import profile
    from engine.tensor import TensorFormat

    m = Model("convs")
    m.add_layer("input", "inp", params={"dimensions": "1x16x12x12"})
    m.add_layer("convolution", "pw", params={"num_output_channels": "32", "kernel_size": "1", "padding": "0"},
                inputs=["inp"], activation="gelu")
    m.add_layer("convolution", "c3", params={"num_output_channels": "8"}, inputs=["pw"], activation="relu")
    m.add_layer("output", "out", inputs=["c3"])
    net = Network(m, registry, get_backend("numpy", notice=None), TensorFormat.parse("fp32 nhwc"))
    net.run()
    result = profile(net, iterations=2)
    by_name = {lp.name: lp for lp in result.layers}
    for name in ("pw", "c3"):
        assert by_name[name].candidates, name
        assert by_name[name].kernels[0].name == ", ".join(by_name[name].candidates)
