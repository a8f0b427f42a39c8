"""GPU memory and faults in the designer, on the CPU: a layer whose kernel raises errors shaped like CuPy's (out of
memory, an illegal memory access) runs through the real window's run path (Tools > Launch Inference, the worker
thread). The run fails with a message naming the layer and the sizes, the designer stays usable for the next run,
a fault tells the user what still works (a message box: CPU runs; GPU runs need a restart; save your work), GPU runs
are refused until a restart while CPU runs go on, and the open model is untouched."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("PySide6")

from tests.hostile.test_gpu_errors import CUDARuntimeError, OutOfMemoryError  # noqa: E402

SIZES = r"layer conv \((1x4x8x8|1x8x8x4)\)"  # the output's sizes (NCHW or NHWC, as the run chose)
MODEL = '''<?xml version="1.0" encoding="utf-8"?>
<network format-version="1" name="small" version="1.0">
<layers>
<layer name="inp" type="input"><param name="dimensions" value="1x3x8x8" /></layer>
<layer name="conv" type="convolution"><param name="num_output_channels" value="4" /><input index="0" source="inp" /></layer>
<layer name="out" type="output"><input index="0" source="conv" /></layer>
</layers>
</network>
'''


def test_gpu_errors_in_a_designer_run(qtbot, tmp_path, monkeypatch, designer, shown_warnings):
    from engine import modelfile

    boxes = shown_warnings
    path = tmp_path / "small.lnet"
    path.write_text(MODEL, encoding="utf-8")
    window = designer()
    doc = window.files.open_path(str(path))
    doc.model.set_setting("iterations", "1")
    before = modelfile.dumps(doc.model)
    worker = window.runs.runner.worker
    conv = window.registry.layer_class("convolution")

    def run(signal):
        with qtbot.waitSignal(signal, timeout=120_000) as blocker:
            assert window.runs.launch_inference(doc) is not None
        qtbot.waitUntil(lambda: not window.runs.runner.busy, timeout=10_000)
        return blocker.args

    failing: list[BaseException] = []  # the error the fake kernel raises (none: the real one runs)
    real_forward = conv.forward

    def forward(self, inputs, out):
        if failing:
            raise failing[0]
        return real_forward(self, inputs, out)

    monkeypatch.setattr(conv, "forward", forward)

    def kernel_raising(exc):
        failing[:] = [exc] if exc is not None else []

    # out of GPU memory: a message naming the layer and the sizes; nothing else to say; the next run works
    kernel_raising(OutOfMemoryError("Out of memory allocating 68,719,476,736 bytes (allocated so far: 0 bytes)."))
    _run_id, reason = run(worker.run_failed)
    assert re.match(SIZES + ": out of GPU memory: Out of memory allocating 68,719,476,736 bytes", reason), reason
    assert re.search("failed: " + SIZES, window.statusBar().currentMessage())
    assert not boxes and not window.runs.gpu_lost
    kernel_raising(None)
    run(worker.run_finished)

    # a kernel fault: the message names the layer; a box says what still works; the model is untouched
    kernel_raising(CUDARuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered"))
    _run_id, reason = run(worker.run_failed)
    assert re.match(SIZES + ": the GPU kernel faulted", reason) and "restart" in reason, reason
    qtbot.waitUntil(lambda: bool(boxes), timeout=10_000)
    assert len(boxes) == 1
    assert all(k in boxes[0] for k in ("layer conv", "runs on the CPU", "need a restart", "Save your work"))
    assert window.isVisible() and doc in window.workspace.docs and modelfile.dumps(doc.model) == before
    kernel_raising(None)

    # afterwards: a run on auto goes to the CPU with a note; a GPU run is refused naming what to do
    (_run_id, result) = run(worker.run_finished)
    assert result.backend == "numpy"
    assert any("GPU runs need a restart" in n for n in result.report["run"]["notes"]), result.report["run"]
    doc.model.set_setting("backend", "cupy")
    assert window.runs.launch_inference(doc) is None
    assert "GPU runs need a restart of LayerLab" in window.statusBar().currentMessage()
