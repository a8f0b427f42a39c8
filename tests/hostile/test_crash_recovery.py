"""The designer never loses more than a few seconds of work: a real designer process imports an ONNX network, is
edited through the model's commands, and is killed with SIGKILL once its autosave holds the edits; the next start
offers the autosaved copy and restores the edited network exactly, layer by layer, with its imported weights."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6 import QtCore, QtWidgets  # noqa: E402

from tests.hostile.harness import REPO  # noqa: E402
from tests.hostile.onnx_models import save, small_net  # noqa: E402

AUTOSAVE_LIMIT_S = 10.0  # the most work (in seconds) a crash may lose


def _wait_for(what: str, found, proc: subprocess.Popen, log: Path, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(f"the designer ended (status {proc.returncode}) before {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"no {what} within {timeout:g} s:\n{log.read_text()[-3000:]}")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_designer_killed_mid_edit_is_recovered_exactly(qtbot, tmp_path, monkeypatch):
    from app.designer.main_window import MainWindow
    from app.designer.recovery import AUTOSAVE_INTERVAL_MS
    from engine import modelfile
    from engine.importers.onnx import import_onnx
    from engine.plugins import load_plugins

    assert AUTOSAVE_INTERVAL_MS <= AUTOSAVE_LIMIT_S * 1000
    onnx_file = save(small_net(), tmp_path / "net.onnx")
    autosave, out, log = tmp_path / "autosave", tmp_path / "out", tmp_path / "designer.log"
    out.mkdir()
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", LAYERLAB_AUTOSAVE_DIR=str(autosave),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    with log.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "tests.hostile.designer_edits", str(onnx_file), str(out)],
                                cwd=str(REPO), env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
    try:
        edited_file = out / "edited.lnet"
        _wait_for("edited network", edited_file.is_file, proc, log)
        edited_text = edited_file.read_text(encoding="utf-8")

        def autosaved() -> Path | None:  # a copy holding the edits (and the imported weights beside it)
            for f in autosave.glob("*.lnet"):
                if f.read_text(encoding="utf-8") == edited_text and f.with_suffix(".safetensors").is_file():
                    return f
            return None

        copy = _wait_for("autosave copy of the edits", autosaved, proc, log, timeout=60.0)
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.time()
        assert proc.wait(30) == -signal.SIGKILL
        assert killed - copy.stat().st_mtime <= AUTOSAVE_LIMIT_S
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)

    # the next start: the copy is offered and taken
    registry = load_plugins()
    offered: list[str] = []

    def answer(_parent, _title, text, *args, **kwargs):
        offered.append(text)
        return QtWidgets.QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QtWidgets.QMessageBox, "question", staticmethod(answer))
    settings = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(registry=registry, settings=settings, autosave_dir=str(autosave))
    qtbot.addWidget(window)
    window.show()
    recovered = window.autosave.offer_recovery()
    assert len(offered) == 1 and "did not close cleanly" in offered[0]
    assert len(recovered) == 1 and recovered[0].modified
    model = recovered[0].model
    expected = modelfile.load(edited_file, registry)
    assert list(model.layers) == list(expected.layers)
    for name, spec in expected.layers.items():
        assert model.layers[name] == spec, name
    assert (model.name, model.version, model.settings) == (expected.name, expected.version, expected.settings)
    assert model.layers["extra_drop"].position == (123.0, 456.0) and model.version == "2.0"
    assert model.layers["head_fc"].inputs == ["extra_drop"] and model.layers["block_conv"].activation == "relu"

    imported = import_onnx(onnx_file, registry=registry).weights_source().arrays
    weights = model.weights_source.arrays
    assert {k: set(v) for k, v in weights.items()} == {k: set(v) for k, v in imported.items()}
    for layer, ws in imported.items():
        for w, arr in ws.items():
            assert np.array_equal(weights[layer][w], arr), f"{layer}.{w}"
    for doc in window.workspace.docs:  # closing must not ask
        doc.model.mark_clean()
        doc.recovered = False
