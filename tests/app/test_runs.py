"""Inference runs from the designer, through the real widgets: Launch Inference, the worker
thread, cancel, the run logger and its command line, Network Settings, report tabs, baselines, the
canvas <-> layer table selection and the comparison dialog. Runs are tiny (32x32 input, 2 iterations)."""
from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import time
from pathlib import Path

import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from app import run_config
from app.cli import main as cli_main
from app.designer.charts import BAR_COLOUR, SELECTED_COLOUR
from app.designer.network_settings import NetworkSettingsDialog
from engine import modelfile
from engine import report as rep
from engine.backends import cupy_usable
from engine.run import tensor_format
from engine.tensor import Dims

SMALL = {"iterations": "2", "warmup": "0"}


@pytest.fixture
def model_copy(tmp_path, sample_path):
    dst = tmp_path / "models" / "denoiser.lnet"
    dst.parent.mkdir()
    shutil.copy(sample_path, dst)
    return dst


def open_small(window, path, save=True, **settings):
    """Open the sample copy with a 32x32 input and tiny run settings (saved, so runs name the file)."""
    doc = window.files.open_path(path)
    with doc.model.macro("small"):
        doc.model.set_param("input", "dimensions", "1x3x32x32")
        for k, v in {**SMALL, **settings}.items():
            doc.model.set_setting(k, v)
    if save:
        assert window.files.save(doc)
    return doc


def run_and_wait(window, qtbot, doc=None, status="done", timeout=30_000, via_action=True):
    n = len(window.logger.entries)
    if via_action:
        window.act_run.trigger()
    else:
        window.runs.launch_inference(doc)
    assert len(window.logger.entries) == n + 1
    entry = window.logger.entries[max(window.logger.entries)]
    qtbot.waitUntil(lambda: entry.status != "running" and not window.runner.busy, timeout=timeout)
    assert entry.status == status, entry.reason
    return entry


def table_column(view, title):
    from app.designer.report_view import COLUMNS

    col = COLUMNS.index(title)
    return [view.proxy.index(r, col).data() for r in range(view.proxy.rowCount())]


def click_row(qtbot, view, name, double=False):
    from app.designer.report_view import NAME_ROLE

    for r in range(view.proxy.rowCount()):
        idx = view.proxy.index(r, 0)
        if idx.data(NAME_ROLE) == name:
            view.table.scrollTo(idx)
            pos = view.table.visualRect(idx).center()
            qtbot.mouseClick(view.table.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
            if double:
                qtbot.mouseDClick(view.table.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
            return
    raise AssertionError(f"no row {name}")


# ---- launching, the logger and the report files ------------------------------------------------------
def test_launch_from_action_logs_run_writes_report_and_command_reproduces_it(window, model_copy, qtbot, registry):
    doc = open_small(window, model_copy)
    assert window.act_run.isEnabled() and not window.act_cancel.isEnabled()
    assert window.act_run in window.tools_menu.actions()
    entry = run_and_wait(window, qtbot)
    assert "done" in window.statusBar().currentMessage()
    # the logger row: backend and device, format, average time, command line
    row = window.logger.table
    texts = [row.item(0, c).text() for c in range(row.columnCount())]
    assert texts[1] == "denoiser" and texts[2] == "done"
    assert texts[3].startswith("numpy" if not cupy_usable() else "cupy") and "(" in texts[3]
    auto_format = str(tensor_format("auto", "cupy" if cupy_usable() else "numpy"))  # the unified default
    assert texts[4] == auto_format
    assert texts[5] == f"{entry.avg_ms:.4f}" and entry.avg_ms > 0
    assert texts[7] == entry.command
    # the report files next to the model, <stem>_reports/<timestamp>.json/.html
    json_path = Path(entry.report_path)
    assert json_path.parent == model_copy.parent / "denoiser_reports"
    assert re.fullmatch(r"\d{8}-\d{6}(_\d+)?\.json", json_path.name)
    assert json_path.with_suffix(".html").read_text(encoding="utf-8").count("<tr>") >= 7
    doc_json = rep.load(json_path)
    assert [x["name"] for x in doc_json["layers"]] == list(doc.model.layers)
    assert doc_json["run"]["iterations"] == 2 and doc_json["run"]["format"] == auto_format
    # one click copies the command; the command line is the CLI's and reproduces the run
    window.logger.table.cellWidget(0, 6).click()
    assert QtGui.QGuiApplication.clipboard().text() == entry.command
    argv = shlex.split(entry.command)
    assert argv[:3] == ["layerlab", "profile", str(model_copy.resolve())]
    out = io.StringIO()
    assert cli_main(argv[1:], out=out) == 0
    cli_doc = rep.load(Path(argv[argv.index("--report") + 1] + ".json"))
    assert [(x["name"], x["type"], x["output_dims"]) for x in cli_doc["layers"]] == \
           [(x["name"], x["type"], x["output_dims"]) for x in doc_json["layers"]]
    assert cli_doc["run"]["format"] == doc_json["run"]["format"] and cli_doc["run"]["iterations"] == 2
    # the model was not touched by the run
    assert not doc.modified


def test_gui_stays_responsive_during_a_long_run_and_cancel_stops_it(window, model_copy, qtbot):
    doc = open_small(window, model_copy, iterations="100000", warmup="0")
    ticks = []
    timer = QtCore.QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    window.act_run.trigger()
    assert window.runner.busy and window.act_cancel.isEnabled() and not window.act_run.isEnabled()
    qtbot.waitUntil(lambda: "iteration" in window.runs.label.text(), timeout=20_000)
    assert re.search(r"iteration \d+ of 100000", window.runs.label.text())
    n0 = len(ticks)
    qtbot.wait(400)
    assert window.runner.busy
    assert len(ticks) - n0 >= 10  # the event loop kept processing while the worker ran
    # menus, canvas and panels keep working during the run; edits do not reach the running copy
    doc.canvas.select_layers(["conv1"])
    assert window.params.rows and window.editing.act_copy.isEnabled()
    doc.model.set_param("conv1", "num_output_channels", "8")
    progressed = window.runs.label.text()
    qtbot.waitUntil(lambda: window.runs.label.text() != progressed, timeout=5000)
    # a second launch is refused while one is running
    assert window.runs.launch_inference() is None and len(window.logger.entries) == 1
    t0 = time.perf_counter()
    window.act_cancel.trigger()
    entry = window.logger.entries[1]
    qtbot.waitUntil(lambda: entry.status == "cancelled", timeout=5000)
    assert time.perf_counter() - t0 < 2.0
    assert not window.runner.busy and window.act_run.isEnabled() and not window.runs.progress.isVisible()
    assert "cancelled" in window.statusBar().currentMessage()
    timer.stop()
    # the worker is ready for the next run
    doc.model.set_setting("iterations", "2")
    run_and_wait(window, qtbot)


def test_network_kept_between_runs_while_the_model_is_unchanged(window, model_copy, qtbot):
    doc = open_small(window, model_copy, format="fp32 nchw")
    run_and_wait(window, qtbot)
    run_and_wait(window, qtbot)
    worker = window.runner.worker
    assert worker.builds == 1
    doc.model.move_layer("conv1", (5.0, 7.0))  # canvas positions do not change the network
    doc.model.set_setting("iterations", "3")  # neither do run-only settings
    run_and_wait(window, qtbot)
    assert worker.builds == 1
    doc.model.set_param("conv2", "num_output_channels", "8")
    run_and_wait(window, qtbot)
    assert worker.builds == 2
    report = window.reports.current_report.report
    assert [x["output_dims"] for x in report["layers"] if x["name"] == "conv2"] == [str(Dims(1, 8, 32, 32))]


def test_closing_the_window_during_a_run_stops_the_worker(make_window, model_copy, qtbot):
    w = make_window()
    open_small(w, model_copy, iterations="100000")
    w.act_run.trigger()
    qtbot.waitUntil(lambda: "iteration" in w.runs.label.text(), timeout=20_000)
    t0 = time.perf_counter()
    assert w.close()
    assert not w.runner.worker_thread.isRunning() and time.perf_counter() - t0 < 5


def test_unsaved_model_reports_in_the_reports_folder_with_a_model_snapshot(make_window, sample_path, tmp_path, qtbot,
                                                                            registry):
    w = make_window(reports_dir=str(tmp_path / "appdata"))
    model = modelfile.load(sample_path, registry)
    model.path = None
    doc = w.workspace.add_document(model)
    with doc.model.macro("small"):
        doc.model.set_param("input", "dimensions", "1x3x16x16")
        doc.model.set_setting("iterations", "2")
    entry = run_and_wait(w, qtbot)
    folder = tmp_path / "appdata" / "denoiser_reports"
    assert Path(entry.report_path).parent == folder
    snapshot = Path(entry.report_path).with_suffix(".lnet")
    assert shlex.split(entry.command)[2] == str(snapshot)
    assert modelfile.load(snapshot, registry).layers == doc.model.layers


# ---- errors ------------------------------------------------------------------------------------------
def test_bad_settings_missing_input_and_failed_run_are_logged_not_raised(window, model_copy, qtbot):
    doc = open_small(window, model_copy)
    doc.model.set_setting("iterations", "many")
    assert window.runs.launch_inference() is None
    e = window.logger.entries[1]
    assert e.status == "failed" and "iterations" in e.reason and "'many'" in e.reason
    assert "iterations" in window.statusBar().currentMessage()
    assert window.logger.table.item(0, 2).text().startswith("failed: network setting iterations")
    doc.model.set_setting("iterations", "2")
    doc.model.set_setting("input.input", "nowhere/missing.png")
    assert window.runs.launch_inference() is None
    assert "does not exist" in window.logger.entries[2].reason and "input layer input" in window.logger.entries[2].reason
    doc.model.set_setting("input.input", None)
    # a failure inside the worker: an input file that is not an image
    bad = model_copy.parent / "broken.png"
    bad.write_bytes(b"not a png")
    doc.model.set_setting("input.input", "broken.png")  # relative to the model's folder
    entry = run_and_wait(window, qtbot, status="failed")
    assert "input layer input" in entry.reason
    assert "failed" in window.statusBar().currentMessage()
    # a type-check error stops the run before the worker
    doc.model.set_setting("input.input", None)
    doc.model.disconnect("conv2", 0)
    assert window.runs.launch_inference() is None
    assert "type-check error" in window.logger.entries[4].reason
    doc.model.undo()
    if not cupy_usable():  # asking for CuPy without a GPU fails in the worker with the backend's reason
        doc.model.set_setting("backend", "cupy")
        entry = run_and_wait(window, qtbot, status="failed")
        assert "cupy" in entry.reason
    # nothing was lost: the model is intact and still runs
    assert list(doc.model.layers) == ["input", "conv1", "conv2", "conv3", "residual", "denoised", "output"]
    doc.model.set_setting("backend", "numpy")
    run_and_wait(window, qtbot)


# ---- network settings ----------------------------------------------------------------------------------
def test_settings_dialog_round_trips_into_model_settings_and_file(window, model_copy, sample_path, qtbot, monkeypatch,
                                                                  registry):
    doc = window.files.open_path(model_copy)
    before = dict(doc.model.settings)
    window.act_net_settings.trigger()
    dlg = window.findChildren(NetworkSettingsDialog)[-1]
    assert dlg.isVisible() and dlg.backend.currentData() == "auto" and dlg.format.currentData() == "auto"
    assert dlg.iterations.value() == 10 and dlg.warmup.value() == 1 and dlg.profiling.isChecked() and dlg.fusing.isChecked()
    assert list(dlg.inputs) == ["input"] and dlg.inputs["input"].text() == ""
    image = sample_path.parent / "sample.png"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(image), "")))
    weights = model_copy.parent / "weights"
    weights.mkdir()
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(weights)))
    dlg.inputs["input"].browse.click()
    dlg.weights.browse.click()
    dlg.backend.setCurrentIndex(dlg.backend.findData("numpy"))
    dlg.format.setCurrentIndex(dlg.format.findData("fp32 nchw"))
    dlg.iterations.setValue(3)
    dlg.warmup.setValue(0)
    dlg.seed.setValue(7)
    dlg.profiling.setChecked(False)
    dlg.fusing.setChecked(False)
    qtbot.mouseClick(dlg.buttons.button(QtWidgets.QDialogButtonBox.StandardButton.Ok), QtCore.Qt.MouseButton.LeftButton)
    expected = {"backend": "numpy", "format": "fp32 nchw", "iterations": "3", "warmup": "0", "seed": "7",
                "weights": str(weights), "input.input": str(image), "profiling": "off", "fusing": "off"}
    assert doc.model.settings == expected
    cfg = run_config.from_model(doc.model, doc.path)
    assert cfg.inputs == (("input", str(image.resolve())),) and not cfg.profiling and cfg.format == "fp32 nchw"
    # one undo step, then redo
    assert doc.model.undo_text() == "Network settings"
    doc.model.undo()
    assert doc.model.settings == before
    doc.model.redo()
    assert window.files.save(doc)
    assert modelfile.load(model_copy, registry).settings == expected
    # the dialog shows the stored values again; Cancel changes nothing
    dlg2 = window.runs.network_settings()
    assert dlg2.backend.currentData() == "numpy" and dlg2.iterations.value() == 3 and not dlg2.profiling.isChecked()
    assert dlg2.inputs["input"].text() == str(image)
    dlg2.iterations.setValue(99)
    dlg2.reject()
    assert doc.model.settings["iterations"] == "3"
    # unchanged defaults are not written into a model that does not set them
    fresh = window.workspace.new_model()
    dlg3 = window.runs.network_settings(fresh)
    dlg3.accept()
    assert fresh.model.settings == {} and not fresh.model.modified


def test_profiling_off_times_whole_iterations_and_uses_infer_command(window, model_copy, qtbot):
    open_small(window, model_copy, profiling="off", format="fp32 nchw")
    entry = run_and_wait(window, qtbot)
    assert entry.command.startswith("layerlab infer ") and "--report" not in entry.command
    report = rep.load(entry.report_path)
    assert report["network"]["avg_ms"] > 0 and report["device_peaks"] is None
    assert all(x["time_ms"]["mean"] == 0 for x in report["layers"])
    assert any("profiling was off" in n for n in report["run"]["notes"])


# ---- the report tab ----------------------------------------------------------------------------------
def test_report_tab_table_sorting_and_selection_both_ways(window, model_copy, qtbot):
    doc = open_small(window, model_copy)
    run_and_wait(window, qtbot)
    view = window.reports.current_report
    assert view is not None and window.tabs.currentWidget() is view and window.current is None
    names = list(doc.model.layers)
    assert table_column(view, "Layer") == names
    assert table_column(view, "Type") == [doc.model.layers[n].type for n in names]
    assert table_column(view, "Output") == [str(doc.shapes[n]) for n in names]
    times = [float(t) for t in table_column(view, "Avg ms")]
    assert all(t > 0 for t in times[:-1])
    conv = next(x for x in view.report["layers"] if x["name"] == "conv2")
    out_elems = 16 * 32 * 32
    assert conv["flops"] == 2 * out_elems * 16 * 9 + out_elems * 2  # 2 MACs (Cin*k*k per output) + bias + relu
    # sortable: by average time, descending
    view.table.sortByColumn(4, QtCore.Qt.SortOrder.DescendingOrder)
    by_time = [float(t) for t in table_column(view, "Avg ms")]
    assert by_time == sorted(by_time, reverse=True)
    # row -> canvas
    click_row(qtbot, view, "conv2")
    assert view.selected_layer() == "conv2" and doc.canvas.selected_layers() == ["conv2"]
    assert "conv2 (selected)" in view.metrics.toPlainText()
    # canvas -> row
    doc.canvas.select_layers(["residual"])
    assert view.selected_layer() == "residual"
    assert doc.canvas.selected_layers() == ["residual"]
    # chart click -> row
    view.time_chart.bar_clicked.emit(names.index("conv1"))
    assert view.selected_layer() == "conv1" and doc.canvas.selected_layers() == ["conv1"]
    # double-click a row: back to the model's canvas, the layer focused
    click_row(qtbot, view, "conv3", double=True)
    assert window.current is doc and doc.canvas.selected_layers() == ["conv3"]
    # the tab closes without touching the model tab; the logger reopens it
    window.tabs.setCurrentWidget(view)
    window.act_close.trigger()
    assert view not in window.reports.reports and window.current is doc
    window.logger.table.selectRow(0)
    window.logger.open_button.click()
    reopened = window.reports.current_report
    assert reopened is not None and reopened.path == window.logger.entries[1].report_path
    assert window.reports.doc_for_report(reopened) is doc  # linked by the model file


def test_baselines_add_and_clear(window, model_copy, qtbot):
    open_small(window, model_copy)
    run_and_wait(window, qtbot)
    view = window.reports.current_report
    names = view.layer_names()

    def bar_colours():
        brushes = view.time_chart.items[0].opts["brushes"]
        return [b.color().name() for b in brushes]

    assert not view.add_baseline_button.isEnabled() and not view.clear_baselines_button.isEnabled()
    click_row(qtbot, view, "conv1")
    qtbot.mouseClick(view.add_baseline_button, QtCore.Qt.MouseButton.LeftButton)
    click_row(qtbot, view, "conv3")
    qtbot.mouseClick(view.add_baseline_button, QtCore.Qt.MouseButton.LeftButton)
    click_row(qtbot, view, "residual")
    assert view.baselines == ["conv1", "conv3"]
    c1, c3 = view.baseline_colour("conv1"), view.baseline_colour("conv3")
    assert len({c1, c3, BAR_COLOUR, SELECTED_COLOUR}) == 4
    colours = bar_colours()
    assert colours[names.index("conv1")] == c1 and colours[names.index("conv3")] == c3
    assert colours[names.index("residual")] == SELECTED_COLOUR and colours[names.index("conv2")] == BAR_COLOUR
    legend = [label.text for _, label in view.roofline.legend.items]
    assert "baseline conv1" in legend and "baseline conv3" in legend
    metrics = view.metrics.toPlainText()
    assert "residual (selected)" in metrics and "conv1" in metrics and "conv3" in metrics
    assert not view.table_model.item(names.index("conv1"), 0).icon().isNull()
    qtbot.mouseClick(view.clear_baselines_button, QtCore.Qt.MouseButton.LeftButton)
    assert view.baselines == []
    colours = bar_colours()
    assert colours[names.index("conv1")] == BAR_COLOUR and colours[names.index("residual")] == SELECTED_COLOUR
    assert not any("baseline" in label.text for _, label in view.roofline.legend.items)


# ---- comparison --------------------------------------------------------------------------------------
def two_reports(window, model_copy, qtbot):
    doc = open_small(window, model_copy, format="fp32 nchw")
    first = run_and_wait(window, qtbot)
    doc.model.set_setting("format", "fp16 nhwc")
    second = run_and_wait(window, qtbot)
    return doc, first.report_path, second.report_path


def test_compare_dialog_with_two_reports(window, model_copy, qtbot, monkeypatch, tmp_path):
    _, a, b = two_reports(window, model_copy, qtbot)
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileNames", staticmethod(lambda *a_, **k: ([a, b], "")))
    window.act_compare.trigger()
    dlg = window.reports.compare_dialogs[-1]
    assert dlg.isVisible() and len(dlg.reports) == 2
    assert [dlg.summary.item(r, 3).text() for r in range(2)] == ["fp32|nchw", "fp16|nhwc"]
    ra, rb = rep.load(a), rep.load(b)
    assert dlg.summary.item(1, 6).text() == f"{rb['network']['avg_ms']:.4f}"
    assert dlg.summary.item(1, 7).text().startswith(f"{rb['network']['avg_ms'] - ra['network']['avg_ms']:+.4f} ms")
    assert dlg.layer_model.rowCount() == 7
    ta = {x["name"]: x["time_ms"]["mean"] for x in ra["layers"]}
    tb = {x["name"]: x["time_ms"]["mean"] for x in rb["layers"]}
    row = dlg.layer_row("conv2")
    assert row["[0] ms"] == f"{ta['conv2']:.4f}" and row["[1] ms"] == f"{tb['conv2']:.4f}"
    assert row["[1] − [0]"].startswith(f"{tb['conv2'] - ta['conv2']:+.4f}")
    # the base combo box changes the differences
    dlg.base.setCurrentIndex(1)
    row = dlg.layer_row("conv2")
    assert row["[0] − [1]"].startswith(f"{ta['conv2'] - tb['conv2']:+.4f}") and row["base"] == "—"
    assert "(base)" in dlg.summary.item(1, 1).text()
    # charts: one series per report in its colour, and the network chart
    assert len(dlg.layer_chart.items) == 2 and dlg.network_chart.values == [[ra["network"]["avg_ms"], rb["network"]["avg_ms"]]]
    assert dlg.layer_chart.items[0].opts["brushes"][0].color().name() == dlg.colour(0)
    # a layer missing from one report is shown as missing, not dropped
    doc = json.loads(Path(b).read_text())
    doc["layers"] = [x for x in doc["layers"] if x["name"] != "conv3"]
    c = tmp_path / "without_conv3.json"
    c.write_text(json.dumps(doc))
    assert dlg.add_reports([str(c), str(tmp_path / "nope.json")]) == 1
    assert dlg.errors and "no such report file" in dlg.errors[0] and dlg.message.isVisible()
    row = dlg.layer_row("conv3")
    assert row["[2] ms"] == "missing" and row["[2] − [1]"] == "–"
    assert dlg.layer_model.rowCount() == 7
    out = dlg.save_html(str(tmp_path / "cmp.html"))
    assert "Report comparison" in Path(out).read_text(encoding="utf-8")


def test_compare_button_in_a_report_tab(window, model_copy, qtbot, monkeypatch):
    _, a, b = two_reports(window, model_copy, qtbot)
    view = window.reports.current_report
    assert view.path == str(Path(b))
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileNames", staticmethod(lambda *a_, **k: ([a], "")))
    qtbot.mouseClick(view.compare_button, QtCore.Qt.MouseButton.LeftButton)
    dlg = window.reports.compare_dialogs[-1]
    assert [Path(p) for p in dlg.paths] == [Path(b).resolve(), Path(a).resolve()]


def test_open_report_errors_are_shown(window, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical", staticmethod(lambda *a: shown.append(a[2])))
    bad = tmp_path / "bad.json"
    bad.write_text("{\"schema\": \"other\"}")
    assert window.reports.open_report(bad) is None
    assert shown and "not a LayerLab report" in shown[0]


# ---- screenshots -------------------------------------------------------------------------------------
def test_render_run_report_and_compare(make_window, model_copy, qtbot, tmp_path, monkeypatch):
    """Renders the main window after a run, the report tab and the comparison (offscreen). Set
    LAYERLAB_REPORT_SCREENSHOT=path to keep the report tab's PNG (the documentation's screenshot)."""
    import os

    from app.gui import apply_theme

    apply_theme(QtWidgets.QApplication.instance())
    w = make_window()
    w.resize(1500, 900)
    doc = open_small(w, model_copy, format="fp32 nchw")
    doc.model.set_param("input", "dimensions", "1x3x96x128")
    w.files.save(doc)
    run_and_wait(w, qtbot)
    doc.model.set_setting("format", "fp16 nhwc")
    run_and_wait(w, qtbot)
    view = w.reports.current_report
    click_row(qtbot, view, "conv2")
    view.add_baseline("conv1")
    view.add_baseline("residual")
    qtbot.wait(50)
    shot = os.environ.get("LAYERLAB_REPORT_SCREENSHOT") or str(tmp_path / "report.png")
    assert w.grab().save(shot)
    img = QtGui.QImage(shot)
    assert img.width() >= 1400
    # the charts are drawn (many distinct colours inside the time chart and the roofline)
    for chart in (view.time_chart, view.roofline):
        pix = chart.grab().toImage()
        colours = {pix.pixelColor(x, y).name() for x in range(0, pix.width(), 5) for y in range(0, pix.height(), 5)}
        assert len(colours) > 8
    # every layer's name is on the bar chart's axis
    assert view.time_chart.axis.labels == view.layer_names()
    w.tabs.setCurrentWidget(doc.canvas.widget)
    qtbot.wait(20)
    assert w.grab().save(str(tmp_path / "main_after_run.png"))
    settings = w.runs.network_settings(doc)
    qtbot.wait(20)
    assert settings.grab().save(str(tmp_path / "settings.png"))
    settings.reject()
    paths = [e.report_path for e in w.logger.entries.values()]
    dlg = w.reports.compare_reports(paths)
    qtbot.wait(50)
    assert dlg.grab().save(os.environ.get("LAYERLAB_COMPARE_SCREENSHOT") or str(tmp_path / "compare.png"))
    if os.environ.get("LAYERLAB_SETTINGS_SCREENSHOT"):
        shutil.copy(tmp_path / "settings.png", os.environ["LAYERLAB_SETTINGS_SCREENSHOT"])


# ---- the worker and the run settings without the window ------------------------------------------------
def test_worker_unknown_command_and_cancel_before_the_run_starts(qtbot, registry, sample_path, tmp_path):
    from app.designer.worker import RunController, RunRequest

    ctl = RunController()
    # the worker's signals come from its thread: recorded as they come and waited for by polling (qtbot.waitSignal's
    # slot, called in the emitting thread, can stop its timer and quit its loop before the loop runs: no timeout)
    failed, cancelled = [], []
    ctl.worker.command_failed.connect(lambda *args: failed.append(args))
    ctl.worker.run_cancelled.connect(lambda *args: cancelled.append(args))
    try:
        ctl.submit("step_backwards")
        qtbot.waitUntil(lambda: bool(failed), timeout=5000)
        assert failed[0][0] == "step_backwards" and "no command" in failed[0][1]
        model = modelfile.load(sample_path, registry)
        model.set_setting("iterations", "100000")
        cfg = run_config.from_model(model, str(sample_path))
        req = RunRequest(1, None, model.copy(), registry, cfg, tmp_path / "r", str(sample_path))
        assert ctl.start(req) and not ctl.start(req)  # one run at a time
        assert ctl.cancel()  # before the worker has even picked the run up
        qtbot.waitUntil(lambda: bool(cancelled), timeout=5000)
        qtbot.waitUntil(lambda: not ctl.busy, timeout=2000)
        assert not (tmp_path / "r.json").exists() and not ctl.cancel()
    finally:
        assert ctl.shutdown()


def test_run_config_validation_and_command_lines(registry, sample_path, tmp_path):
    model = modelfile.load(sample_path, registry)
    cfg = run_config.from_model(model, str(sample_path))
    assert (cfg.backend, cfg.format, cfg.iterations, cfg.warmup, cfg.profiling, cfg.fusing) == \
           ("auto", "auto", 10, 1, True, "on")
    for key, value, words in (("backend", "gpu", "backend"), ("format", "fp8", "fp8"), ("warmup", "-1", "too small"),
                              ("profiling", "yes", "on or off"), ("input_layout", "hwc", "nchw or nhwc"),
                              ("weights", "no_such_folder", "does not exist"), ("input.input", "clip.mp4", "not an image")):
        bad = modelfile.load(sample_path, registry)
        bad.set_setting(key, value)
        with pytest.raises(run_config.SettingsError, match=words):
            run_config.from_model(bad, str(sample_path))
    model.set_setting("input.gone", str(sample_path.parent / "sample.png"))
    assert "no input layer 'gone'" in run_config.from_model(model, str(sample_path)).warnings[0]
    npy = tmp_path / "x.npy"
    npy.write_bytes(b"")
    model.set_setting("input.input", str(npy))
    model.set_setting("input_layout", "nhwc")
    model.set_setting("profiling", "off")
    line = run_config.command_line(run_config.from_model(model, str(sample_path)), "m.lnet", "out/r")
    assert shlex.split(line) == ["layerlab", "infer", "m.lnet", "--input", f"input={npy}",
                                 "--iterations", "10", "--warmup", "1", "--backend", "auto", "--seed", "0",
                                 "--fusing-rules", "on", "--input-layout", "nhwc"]


def test_warm_up_shows_its_progress_layer_by_layer_and_the_status_bar_cancels_it(window, model_copy, qtbot):
    open_small(window, model_copy, iterations="2", warmup="100000")  # a warm-up long enough to watch
    runs = window.runs
    window.act_run.trigger()
    assert runs.cancel_button.isVisible()
    qtbot.waitUntil(lambda: "warm-up" in runs.label.text() and " of " in runs.label.text(), timeout=20_000)
    found = re.search(r"warm-up (\d+) of (\d+) layers, layer (\w+)", runs.label.text())
    assert found, runs.label.text()
    done, total = int(found[1]), int(found[2])
    assert 0 < done < total and found[3] in window.current.model.layers
    assert runs.progress.maximum() == total and runs.progress.value() == done
    qtbot.waitUntil(lambda: runs.progress.value() > done, timeout=5000)  # it moves on
    entry = window.logger.entries[1]
    qtbot.mouseClick(runs.cancel_button, QtCore.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: entry.status == "cancelled", timeout=5000)
    assert not runs.cancel_button.isVisible() and not window.runner.busy
