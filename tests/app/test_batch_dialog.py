"""Tools > Run on Dataset…: the batch dialog driven with pytest-qt (nothing blocks)."""
from __future__ import annotations

import json

import pytest
from PySide6 import QtCore

from app.designer.batch_dialog import BatchDialog
from engine.modelfile import load
from resources import SAMPLES
from tests.engine.batch.dataset import make_dataset
from tests.engine.batch.test_batch import outputs_of

MODEL = SAMPLES / "denoiser.lnet"


@pytest.fixture
def dialog(qtbot, registry):
    def make(model=None):
        model = model or load(MODEL, registry)
        model.settings["backend"] = "numpy"
        dlg = BatchDialog(model, registry, str(MODEL))
        qtbot.addWidget(dlg)
        dlg.show()
        return dlg
    return make


def click(qtbot, button) -> None:
    qtbot.mouseClick(button, QtCore.Qt.MouseButton.LeftButton)


def wait_done(qtbot, dlg) -> None:
    qtbot.waitUntil(lambda: not dlg.running and dlg.run_button.isEnabled(), timeout=120_000)


def rows(dlg) -> list[tuple[str, str, str]]:
    return [tuple(dlg.table.item(r, c).text() for c in range(3)) for r in range(dlg.table.rowCount())]


def start_long_run(qtbot, dlg, tmp_path, rows_done: int):
    """Start ``dlg`` on 60 images one per batch into tmp_path/out; return it once ``rows_done`` rows are listed."""
    dlg.inputs.setText(str(make_dataset(tmp_path, images=60, video_frames=0, corrupt=0, npy=0)))
    dlg.output.setText(str(tmp_path / "out"))
    dlg.batch_size.setValue(1)
    click(qtbot, dlg.run_button)
    qtbot.waitUntil(lambda: dlg.table.rowCount() >= rows_done, timeout=120_000)
    return dlg


def test_runs_the_model_with_its_settings_and_lists_results_and_failures(qtbot, dialog, tmp_path):
    data = make_dataset(tmp_path, images=8, video_frames=3, corrupt=1, npy=1)
    dlg = dialog()
    assert "backend numpy, format auto (fp32|nhwc)" in dlg.settings_label.text()
    dlg.inputs.setText(str(data))
    dlg.output.setText(str(tmp_path / "out"))
    dlg.batch_size.setValue(3)
    with qtbot.waitSignal(dlg.finished_run, timeout=120_000) as sig:
        click(qtbot, dlg.run_button)
        assert dlg.running and dlg.cancel_button.isEnabled()
    wait_done(qtbot, dlg)
    summary = sig.args[0]
    assert summary["items"]["finished"] == 10 and summary["items"]["failed"] == 1
    assert summary == json.loads((tmp_path / "out" / "layerlab-summary.json").read_text())
    table = rows(dlg)
    assert sorted(r[0] for r in table if r[1] == "done") == sorted(outputs_of(tmp_path / "out"))
    failed = [r for r in table if r[1] == "failed"]
    assert len(failed) == 1 and failed[0][0] == "broken_0.png" and "cannot decode" in failed[0][2]
    assert "Finished: 10 of 11 inputs done" in dlg.status.text() and "1 failed" in dlg.status.text()


def test_cancel_stops_the_run_and_it_resumes_later(qtbot, dialog, tmp_path):
    dlg = start_long_run(qtbot, dialog(), tmp_path, rows_done=3)
    click(qtbot, dlg.cancel_button)
    wait_done(qtbot, dlg)
    assert dlg.summary["cancelled"] and dlg.summary["items"]["finished"] < 60
    assert dlg.status.text().startswith("Cancelled:")
    first = dlg.summary["items"]["finished"]
    assert len(outputs_of(tmp_path / "out")) == first
    assert (dlg.progress.value(), dlg.progress.maximum()) == (first, 60)  # not 100% after Cancel
    click(qtbot, dlg.run_button)  # run again: the finished outputs are skipped
    wait_done(qtbot, dlg)
    assert dlg.summary["items"]["finished"] == 60 and dlg.summary["items"]["skipped"] == first


def test_bad_input_is_a_message_not_a_crash(qtbot, dialog, tmp_path):
    dlg = dialog()
    click(qtbot, dlg.run_button)
    assert "Choose the inputs" in dlg.status.text() and not dlg.running
    dlg.inputs.setText(str(tmp_path / "missing"))
    dlg.output.setText(str(tmp_path / "out"))
    click(qtbot, dlg.run_button)
    wait_done(qtbot, dlg)
    assert dlg.summary is None and dlg.status.text().startswith("error:") and "no such folder" in dlg.status.text()


def test_tools_menu_opens_the_dialog_on_the_current_model(make_window, qtbot):
    w = make_window()
    assert w.act_batch in w.tools_menu.actions()
    w.act_batch.trigger()  # no model open: a status message, no dialog
    assert getattr(w, "batch_dialog", None) is None
    w.files.open_path(str(MODEL))
    w.act_batch.trigger()
    dlg = w.batch_dialog
    assert isinstance(dlg, BatchDialog) and dlg.isVisible() and dlg.model is w.current.model
    dlg.reject()


def test_closing_while_running_cancels_then_closes(qtbot, dialog, tmp_path):
    dlg = start_long_run(qtbot, dialog(), tmp_path, rows_done=2)
    dlg.reject()
    assert dlg.isVisible()  # still winding down: the chunks in flight are finished and recorded
    qtbot.waitUntil(lambda: not dlg.isVisible(), timeout=120_000)
    assert dlg.summary["cancelled"] and len(outputs_of(tmp_path / "out")) == dlg.summary["items"]["finished"] < 60


def test_png_compression_is_passed_to_the_run(qtbot, dialog, tmp_path):
    """The dialog's PNG compression reaches the run: level 0 writes stored PNG files (run.json records it)."""
    data = make_dataset(tmp_path, images=3, video_frames=0, corrupt=0, npy=0)
    dlg = dialog()
    assert dlg.png_compression.value() == 1 and dlg.options().png_compression == 1
    dlg.inputs.setText(str(data / "a"))
    dlg.output.setText(str(tmp_path / "out"))
    dlg.save_as.setCurrentText("png")
    dlg.png_compression.setValue(0)
    assert dlg.options().png_compression == 0
    with qtbot.waitSignal(dlg.finished_run, timeout=120_000):
        click(qtbot, dlg.run_button)
    wait_done(qtbot, dlg)
    assert json.loads((tmp_path / "out" / ".layerlab-batch" / "run.json").read_text())["png_compression"] == 0
    assert outputs_of(tmp_path / "out")


def test_outputs_are_readable_by_others_and_the_command_line_is_shown(qtbot, dialog, tmp_path):
    """Outputs get the usual mode of new files (not the temporary files' 0600); the dialog shows the equivalent
    ``layerlab batch`` command, which follows the fields."""
    import os
    import shlex

    data = make_dataset(tmp_path, images=2, video_frames=0, corrupt=0, npy=0)
    dlg = dialog()
    dlg.inputs.setText(str(data))
    dlg.output.setText(str(tmp_path / "out"))
    dlg.batch_size.setValue(3)
    argv = shlex.split(dlg.command.text())
    assert argv[:3] == ["layerlab", "batch", str(MODEL)] and argv[argv.index("--inputs") + 1] == str(data)
    assert argv[argv.index("--output-dir") + 1] == str(tmp_path / "out") and "--batch-size" in argv
    assert argv[argv.index("--batch-size") + 1] == "3" and argv[argv.index("--backend") + 1] == "numpy"
    click(qtbot, dlg.run_button)
    wait_done(qtbot, dlg)
    umask = os.umask(0)
    os.umask(umask)
    written = [tmp_path / "out" / name for name in outputs_of(tmp_path / "out")]
    assert written and all(p.stat().st_mode & 0o777 == 0o666 & ~umask for p in written)
