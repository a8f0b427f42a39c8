"""Format conversions fused into a neighbouring layer (engine.format_conversion.fused_conversions): a conversion to fp16 into
its producer's write, a conversion to fp32 into its readers' reads. Fused and unfused networks give identical
values on every backend; values that fit fp16 pass exactly; the overview, the notes and the report name each
conversion and where it went; layers that cannot fuse (or must keep their own output) keep the conversion."""
from __future__ import annotations

import numpy as np
import pytest

from engine.analysis import network_overview
from engine.model import Model
from engine.network import Network
from engine.profiling import profile
from engine.report import build_report, to_html
from engine.run import format_notes
from engine.tensor import FP32_NCHW, TensorFormat
from tests.harness import BACKENDS, backend_param

FP16_NCHW, FP16_NHWC = TensorFormat.parse("fp16 nchw"), TensorFormat.parse("fp16 nhwc")
X = np.random.default_rng(5).uniform(-2, 2, (1, 3, 8, 6)).astype(np.float32)


def mixed(pins: dict[str, str]) -> Model:
    """A network of the layers that take fused conversions (convolution with and without a fused epilogue, batch
    normalization, affine, element-wise with two inputs), and a pooling layer, which takes none."""
    m = Model("mixed")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x6"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "8"}, inputs=["inp"], activation="relu")
    m.add_layer("batch_normalization", "bn", inputs=["c1"], activation="sigmoid")
    m.add_layer("convolution", "c2", params={"num_output_channels": "8"}, inputs=["bn"], activation="gelu")
    m.add_layer("affine", "aff", params={"scale": "3.5", "shift": "-0.25"}, inputs=["c2"])
    m.add_layer("element_wise", "add", params={"operation": "sum"}, inputs=["aff", "c1"], activation="tanh")
    m.add_layer("pooling", "pool", params={"kernel_size": "2", "stride": "2"}, inputs=["add"])
    m.add_layer("convolution", "c3", params={"num_output_channels": "4"}, inputs=["pool"])
    m.add_layer("output", "out", inputs=["c3"])
    for name, text in pins.items():
        m.set_layer_format(name, text)
    return m


#: (network format, pins): fp32 pins in fp16 networks of both layouts, fp16 pins in an fp32 network
CASES = [pytest.param(FP16_NHWC, {"bn": "fp32", "c2": "fp32", "aff": "fp32", "add": "fp32"}, id="fp16nhwc-fp32pins"),
         pytest.param(FP16_NCHW, {"c1": "fp32", "aff": "fp32", "pool": "fp32"}, id="fp16nchw-fp32pins"),
         pytest.param(FP16_NHWC, {"c2": "fp32"}, id="fp16nhwc-conv-gelu"),  # the CPU convolution reads and writes fp16
         pytest.param(FP32_NCHW, {"bn": "fp16", "add": "fp16", "c3": "fp16"}, id="fp32nchw-fp16pins")]


def every_output(net: Network) -> dict[str, np.ndarray]:
    net.infer({"inp": X})
    return {n: net.output(n) for n in net.order}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("fmt", "pins"), CASES)
def test_fused_and_unfused_conversions_give_identical_values(registry, backend, fmt, pins):
    be = backend_param(backend)
    fused = Network(mixed(pins), registry, be, fmt)
    plain = Network(mixed(pins), registry, be, fmt, fuse_conversions=False)
    assert fused.conversions == plain.conversions and not plain.fused_conversions
    if backend == "numpy" or set(pins) != {"c2"}:  # on the GPU a convolution's conversions stay unfused
        assert fused.fused_conversions  # batch normalization, affine, element-wise fuse on every backend
    got, want = every_output(fused), every_output(plain)
    writes = {into[0]: conv for conv, (kind, into) in fused.fused_conversions.items() if kind == "write"}
    for name in fused.order:
        # a producer that writes its readers' precision keeps that: its output is the conversion's, rounded once
        np.testing.assert_array_equal(got[name], want[writes.get(name, name)], err_msg=name)
    assert fused.peak_memory_bytes <= plain.peak_memory_bytes  # one buffer fewer per fused conversion


def test_what_fuses_on_the_cpu(registry):
    net = Network(mixed({"bn": "fp32", "c2": "fp32", "aff": "fp32", "add": "fp32"}), registry, fmt=FP16_NHWC)
    assert net.fused_conversions == {
        "c1__to_fp32_nhwc": ("read", ("bn", "add")),  # both readers widen c1's fp16 output as they read it
        "add__to_fp16_nhwc": ("write", ("add",)),  # add rounds its result into pool's precision
    }
    assert [c[0] for c in net.conversions] == ["c1__to_fp32_nhwc", "add__to_fp16_nhwc"]
    assert net.storage_format("add") == FP16_NHWC and net.fmt_of("add").precision.value == "fp32"
    # pool pinned too: add's readers are all fp32 (no conversion); pool's own conversion cannot fuse (pooling)
    net = Network(mixed({"bn": "fp32", "c2": "fp32", "aff": "fp32", "add": "fp32", "pool": "fp32"}), registry,
                  fmt=FP16_NHWC)
    assert [c[0] for c in net.conversions] == ["c1__to_fp32_nhwc", "pool__to_fp16_nhwc"]
    assert list(net.fused_conversions) == ["c1__to_fp32_nhwc"]


def test_layers_that_cannot_fuse_keep_their_conversions(registry):
    # pooling declares no fused conversion; a layout change is never fused
    net = Network(mixed({"pool": "fp32"}), registry, fmt=FP16_NHWC)
    assert [c[0] for c in net.conversions] == ["add__to_fp32_nhwc", "pool__to_fp16_nhwc"]
    assert not net.fused_conversions
    net = Network(mixed({"bn": "fp32 nchw"}), registry, fmt=FP16_NHWC)
    assert len(net.conversions) == 2 and not net.fused_conversions


def test_a_producer_whose_own_output_must_stay_keeps_its_conversion(registry):
    pins = {"aff": "fp32"}
    assert Network(mixed(pins), registry, fmt=FP16_NHWC).fused_conversions["aff__to_fp16_nhwc"][0] == "write"
    for kwargs in ({"protected": {"aff"}}, {"reuse_buffers": False}):  # a breakpoint; every output kept
        net = Network(mixed(pins), registry, fmt=FP16_NHWC, **kwargs)
        assert "aff__to_fp16_nhwc" not in net.fused_conversions
        assert net.storage_format("aff") == net.fmt_of("aff")
    m = mixed(pins)
    m.layers["aff"].permanent = True
    assert "aff__to_fp16_nhwc" not in Network(m, registry, fmt=FP16_NHWC).fused_conversions


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_that_fit_fp16_pass_a_fused_read_and_write_exactly(registry, backend):
    m = Model("identity")
    m.add_layer("input", "inp", params={"dimensions": "2x5x4x3"})
    m.add_layer("affine", "a1", inputs=["inp"])
    m.add_layer("affine", "a2", inputs=["a1"])  # pinned to fp32: reads a1's fp16 output, writes a3's fp16 input
    m.add_layer("affine", "a3", inputs=["a2"])
    m.add_layer("output", "out", inputs=["a3"])
    m.set_layer_format("a2", "fp32")
    net = Network(m, registry, backend_param(backend), FP16_NHWC)
    assert {k: v[0] for k, v in net.fused_conversions.items()} == {"a1__to_fp32_nhwc": "read", "a2__to_fp16_nhwc": "write"}
    logical = (np.random.default_rng(3).integers(-1024, 1024, size=(2, 5, 4, 3)) / 16).astype(np.float32)
    np.testing.assert_array_equal(net.infer({"inp": logical})["out"], logical)
    assert net.device_output("a2").dtype == np.float32  # the layer's own precision, though stored in fp16


def test_the_overview_notes_and_report_name_each_conversion_and_where_it_went(registry):
    net = Network(mixed({"bn": "fp32", "c2": "fp32", "aff": "fp32", "add": "fp32"}), registry, fmt=FP16_NHWC)
    net.run()
    status = {it.name: it.status for it in network_overview(net)}
    assert status["c1__to_fp32_nhwc"] == "conversion fp16|nhwc -> fp32|nhwc, fused into bn, add (their reads)"
    assert status["add__to_fp16_nhwc"] == "conversion fp32|nhwc -> fp16|nhwc, fused into add (its write)"
    notes = format_notes(net)
    assert "format conversion add__to_fp16_nhwc: add fp32|nhwc -> fp16|nhwc, fused into add (its write)" in notes
    result = profile(net, iterations=2, warmup=1, measure_device=False)
    rows = {lp.name: lp for lp in result.layers}
    assert rows["c1__to_fp32_nhwc"].fused_into == "bn, add" and rows["c1__to_fp32_nhwc"].bypass
    assert len(rows["c1__to_fp32_nhwc"].times_ms) == 2  # timed like every layer (its work is in bn's and add's)
    report = build_report(result, model_name="mixed", model_version="1", model_path=None, backend="numpy",
                          device="cpu", fmt=str(net.fmt), iterations=2, warmup=1, notes=notes)
    layer = next(x for x in report["layers"] if x["name"] == "add__to_fp16_nhwc")
    assert layer["fused_into"] == "add" and layer["type"] == "format_conversion"
    assert "format_conversion (fused into add)" in to_html(report)


def test_the_planted_overflow_is_fixed_by_pinning_with_fused_conversions(registry):
    from tests.engine.export.test_pinned_exports import PINS, planted
    from tests.engine.export.test_pinned_exports import X as XP

    net = Network(planted(PINS), registry, fmt=FP16_NCHW, fusing="off")
    plain = Network(planted(PINS), registry, fmt=FP16_NCHW, fusing="off", fuse_conversions=False)
    assert {k: v[0] for k, v in net.fused_conversions.items()} == {"c2__to_fp32_nchw": "read",
                                                                    "shrink__to_fp16_nchw": "write"}
    got = net.infer({"inp": XP})["out"]
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got, plain.infer({"inp": XP})["out"])


@pytest.mark.gpu
def test_gpu_fuses_elementwise_layers_but_not_convolutions(registry):
    pins = {"c2": "fp32", "aff": "fp32"}
    net = Network(mixed(pins), registry, backend_param("cupy"), FP16_NHWC)
    cpu = Network(mixed(pins), registry, backend_param("numpy"), FP16_NHWC)
    assert cpu.fused_conversions == {"bn__to_fp32_nhwc": ("read", ("c2",)), "aff__to_fp16_nhwc": ("write", ("aff",))}
    assert net.fused_conversions == {"aff__to_fp16_nhwc": ("write", ("aff",))}  # cuDNN takes one precision: c2 reads fp32
    ref = Network(mixed({}), registry, backend_param("numpy"), FP32_NCHW).infer({"inp": X})["out"]
    np.testing.assert_allclose(net.infer({"inp": X})["out"], ref, rtol=3e-2, atol=3e-2)


@pytest.mark.gpu
def test_cuda_graph_captures_with_fused_conversions(registry):
    pins = {"bn": "fp32", "aff": "fp32", "add": "fp32"}
    net = Network(mixed(pins), registry, backend_param("cupy"), FP16_NHWC)
    plain = Network(mixed(pins), registry, backend_param("cupy"), FP16_NHWC, graph_capture=False,
                    fuse_conversions=False)
    assert net.fused_conversions
    rng = np.random.default_rng(9)
    for i in range(4):  # eager, capture, replay, replay
        x = rng.uniform(-2, 2, (1, 3, 8, 6)).astype(np.float32)
        np.testing.assert_array_equal(net.infer({"inp": x})["out"], plain.infer({"inp": x})["out"], err_msg=f"run {i}")
    assert net.graph_status == f"captured ({len(net.order)} layers)", net.graph_status
