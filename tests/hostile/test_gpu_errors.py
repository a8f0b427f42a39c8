"""GPU memory and faults: errors shaped like CuPy's become one-line user errors naming the layer and sizes (CPU
tests with fake errors), and on a GPU a network that does not fit fails with exit status 2."""
from __future__ import annotations

import os

import pytest

from engine.device_errors import GpuFault, GpuOutOfMemory, device_errors, translate
from engine.errors import LayerLabError


class OutOfMemoryError(MemoryError):
    """Shaped like cupy.cuda.memory.OutOfMemoryError."""


class CUDARuntimeError(RuntimeError):
    """Shaped like cupy_backends.cuda.api.runtime.CUDARuntimeError."""


def test_out_of_memory_names_the_layer_and_sizes():
    err = translate(OutOfMemoryError("Out of memory allocating 68,719,476,736 bytes (allocated so far: 0 bytes)."),
                    "layer conv1", "1x64x16384x16384")
    assert isinstance(err, GpuOutOfMemory) and isinstance(err, LayerLabError)
    assert str(err).startswith("layer conv1 (1x64x16384x16384): out of GPU memory: Out of memory allocating")
    assert isinstance(translate(CUDARuntimeError("cudaErrorMemoryAllocation: out of memory"), "x"), GpuOutOfMemory)


def test_an_illegal_address_says_gpu_runs_need_a_restart():
    with pytest.raises(GpuFault, match="layer bad_kernel .*restart of the application") as info:
        with device_errors("layer bad_kernel", "1x3x8x8"):
            raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
    assert info.value.context_lost and "\n" not in str(info.value)


def test_other_errors_pass_through():
    assert translate(ValueError("cudaError? no"), "x") is None
    with pytest.raises(KeyError):
        with device_errors("layer a"):
            raise KeyError("k")


def test_a_layer_faulting_in_a_network_run_names_the_layer():
    """The network's run translates the error of a layer's forward (a fake kernel raising CuPy's fault)."""
    from engine.model import Model
    from engine.network import Network
    from engine.plugins import default_registry

    m = Model("m")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "conv", inputs=["inp"], params={"num_output_channels": "4"})
    m.add_layer("output", "out", inputs=["conv"])
    net = Network(m, default_registry())

    def fault(ins, out):
        raise CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")

    net.nodes["conv"].layer.forward = fault
    with pytest.raises(GpuFault, match="layer conv \\(1x4x8x8\\).*restart"):
        net.infer()


def test_out_of_gpu_memory_outside_any_layer_is_exit_status_2(monkeypatch, capsys):
    """A GPU allocation that fails outside the layers (an input's upload, a copy) is the run's condition: exit 2
    with one line, not an internal error."""
    from app.cli import main
    from app.cli.commands import BY_NAME

    def run(args, out):
        raise OutOfMemoryError("Out of memory allocating 68,719,476,736 bytes (allocated so far: 0 bytes).")

    import dataclasses

    monkeypatch.setitem(BY_NAME, "infer", dataclasses.replace(BY_NAME["infer"], run=run))
    assert main(["infer", "model.lnet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("layerlab: error: layerlab infer: out of GPU memory"), err


def _out_of_memory(*args, **kwargs):
    raise OutOfMemoryError("Out of memory allocating 68,719,476,736 bytes (allocated so far: 0 bytes).")


def _input_to_output():
    """A network of one 1x3x8x8 input wired to its output, on the default backend."""
    import engine.network as network
    from engine.model import Model
    from engine.plugins import default_registry

    m = Model("m")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("output", "out", inputs=["inp"])
    return network.Network(m, default_registry())


def test_an_input_too_large_for_the_gpu_names_the_input(monkeypatch):
    """The upload of an input is inside the network's device-error guard: the error names the input."""
    import numpy as np

    import engine.network as network

    net = _input_to_output()
    monkeypatch.setattr(network, "input_tensor", _out_of_memory)
    with pytest.raises(GpuOutOfMemory, match=r"input inp \(1x3x8x8\): out of GPU memory"):
        net.set_input("inp", np.zeros((1, 3, 8, 8), np.float32))


def test_an_output_too_large_to_convert_on_the_gpu_names_the_output(monkeypatch):
    """The conversion of an output to the caller's format (a copy on the device) is inside the device-error guard."""
    import numpy as np

    import engine.network as network

    net = _input_to_output()
    net.set_input("inp", np.zeros((1, 3, 8, 8), np.float32))
    net.run()
    monkeypatch.setattr(network, "convert", _out_of_memory)
    with pytest.raises(GpuOutOfMemory, match=r"output of out \(1x3x8x8\): out of GPU memory"):
        net.output("out")


def test_buffers_that_do_not_fit_name_the_largest_tensor(monkeypatch):
    """A network whose tensor buffers exceed the backend's free memory is refused before allocating, naming the
    largest tensor (the one to shrink) and its dimensions."""
    from engine.backends.base import Backend
    from engine.limits import LimitError
    from engine.model import Model
    from engine.network import Network
    from engine.plugins import default_registry

    m = Model("m")
    m.add_layer("input", "inp", params={"dimensions": "1x3x64x64"})
    m.add_layer("convolution", "wide", params={"num_output_channels": "64"}, inputs=["inp"])
    m.add_layer("convolution", "wider", params={"num_output_channels": "96"}, inputs=["wide"])
    m.add_layer("output", "out", inputs=["wider"])
    monkeypatch.setattr(Backend, "available_memory", lambda self: 2_000_000)  # each layer fits, not all buffers
    with pytest.raises(LimitError, match=r"network m: its tensor buffers \(the largest: wider's output, 1x96x64x64\)"):
        Network(m, default_registry()).infer({"inp": __import__("numpy").zeros((1, 3, 64, 64), "float32")})


@pytest.mark.gpu
def test_a_network_larger_than_the_gpu_fails_with_exit_status_2(tmp_path):
    """A 1x64x16384x16384 input and a convolution output eight times its size on the CuPy backend (288 GiB in fp16,
    the default format): one line naming the layer and the sizes, before anything is allocated on the GPU (its
    tensor buffers are more than any GPU holds). The run is a process of its own all the same. With an output of
    the input's size, the buffers fitted an H200: the run allocated them and failed only in the convolution,
    meanwhile leaving too little memory to the parallel test processes sharing the GPU (one's cuBLAS handle failed
    to allocate)."""
    import subprocess
    import sys

    from tests.hostile.harness import REPO
    from tests.hostile.inprocess import layerlab

    model = tmp_path / "big.lnet"
    model.write_text('<?xml version="1.0" encoding="utf-8"?>\n<network format-version="1" name="big" version="1.0">\n'
                     '<layers>\n<layer name="inp" type="input"><param name="dimensions" value="1x64x16384x16384" />'
                     '</layer>\n<layer name="conv" type="convolution"><param name="num_output_channels" value="512" />'
                     '<input index="0" source="inp" /></layer>\n<layer name="out" type="output">'
                     '<input index="0" source="conv" /></layer>\n</layers>\n</network>\n', encoding="utf-8")
    assert layerlab(["check", model]).rc == 0  # a valid model: only its size is the problem
    res = subprocess.run([sys.executable, "-m", "app", "infer", str(model), "--backend", "cupy", "-n", "1"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                             filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})
    errors = [line for line in res.stderr.splitlines() if line.startswith("layerlab: error:")]
    assert res.returncode == 2 and len(errors) == 1 and ("GPU" in errors[0] or "memory" in errors[0]), res.stderr
    assert "16384" in errors[0]
