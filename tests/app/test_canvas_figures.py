"""Figures on the canvas, in the real window: View > Figures on Canvas colours the nodes by a profile's share of
time, a precision comparison's drift or a report comparison's change, writes the value on each node, draws a legend
and shows the layer's figures and kernels on hover; collapsed groups show their sums (and always their parameters
and FLOPs); None and the toggle take it all away; a new run refreshes the figures."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from engine import modelfile
from engine import report as rep
from engine.analysis import DriftResult, LayerDrift
from engine.figures import DIFF, DRIFT, TIME
from tests.app.test_runs import model_copy, open_small, run_and_wait  # noqa: F401 (fixture)
from tests.canvas.test_groups_canvas import grouped_model

pytestmark = pytest.mark.qt


def fake_report(doc, times: dict[str, float], name: str = "r") -> dict:
    """A valid report of ``doc``'s model whose layers took ``times`` (ms), each with one kernel named after it."""
    model = doc.model
    total = sum(times.values())
    layers = []
    for layer, t in times.items():
        layers.append({
            "name": layer, "type": model.layers[layer].type, "output_dims": "1x8x8x8", "output_bytes": 0, "flops": 10,
            "bytes_read": 0, "bytes_written": 0, "time_ms": {"median": t, "mean": t, "min": t, "max": t},
            "share": t / total, "achieved_flops_per_s": 0.0, "achieved_bytes_per_s": 0.0, "intensity": 0.0,
            "bound": "none", "above_roof": False, "fused_activation": False, "bypass": False, "fused_into": "",
            "device_ms": t * 0.9, "gap_ms": t * 0.1, "candidates": [f"cand_{layer}"],
            "kernels": [{"name": f"kernel_of_{layer}", "kind": "kernel", "ms": t * 0.9, "grid": [4, 2, 1],
                         "block": [128, 1, 1], "candidate": f"cand_{layer}"}]})
    return {"schema": rep.SCHEMA, "version": rep.VERSION, "date": "2026-11-28T10:00:00+00:00",
            "model": {"name": model.name, "version": model.version, "path": doc.path},
            "run": {"backend": "cupy", "device": "gpu", "format": "fp32", "iterations": 2, "warmup": 0, "seed": 0,
                    "fusing": False, "graph_capture": False, "timing": "test", "notes": []},
            "network": {"avg_ms": total, "median_ms": total, "min_ms": total, "max_ms": total,
                        "sum_layers_ms": total, "device_ms": None, "gap_ms": None, "launch_bound": False,
                        "peak_memory_bytes": 0},
            "device_peaks": None, "layers": layers, "_name": name}


def write(tmp_path, report: dict) -> str:
    path = tmp_path / f"{report.pop('_name')}.json"
    path.write_text(json.dumps(report))
    return str(path)


def view_action(window, text: str) -> QtGui.QAction:
    """The action ``text`` of View > Figures on Canvas, found through the menu bar."""
    view = next(a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "View")
    figures = next(a.menu() for a in view.actions() if a.menu() is not None and "Figures" in a.text().replace("&", ""))
    return next(a for a in figures.actions() if a.text().replace("&", "") == text)


def grab(canvas) -> QtGui.QImage:
    canvas.viewer().viewport().repaint()
    return canvas.viewer().viewport().grab().toImage()


def colour_near(image: QtGui.QImage, point: QtCore.QPoint, rgb: tuple[int, int, int], radius: int = 14) -> bool:
    """Whether a pixel within ``radius`` of ``point`` has about colour ``rgb``."""
    for dx in range(-radius, radius + 1):
        for dy in range(-radius, radius + 1):
            x, y = point.x() + dx, point.y() + dy
            if 0 <= x < image.width() and 0 <= y < image.height():
                c = image.pixelColor(x, y)
                if abs(c.red() - rgb[0]) + abs(c.green() - rgb[1]) + abs(c.blue() - rgb[2]) < 30:
                    return True
    return False


def hover_text(canvas, scene_point: QtCore.QPointF) -> str:
    """The tooltip the canvas shows when the mouse rests at ``scene_point``."""
    QtWidgets.QToolTip.hideText()
    vp = canvas.viewer().viewport()
    pos = canvas.viewer().mapFromScene(scene_point)
    event = QtGui.QHelpEvent(QtCore.QEvent.Type.ToolTip, pos, vp.mapToGlobal(pos))
    QtWidgets.QApplication.sendEvent(vp, event)
    return QtWidgets.QToolTip.text()


TIMES = {"conv1": 1.0, "conv2": 6.0, "conv3": 2.0, "residual": 0.5}


def test_profile_colours_nodes_writes_values_legend_and_hover_kernels_and_none_restores(window, sample_path, tmp_path,
                                                                                        qtbot):
    doc = window.files.open_path(sample_path)
    canvas = doc.canvas
    window.editing.act_fit.trigger()
    before = grab(canvas)
    window.reports.open_report(write(tmp_path, fake_report(doc, TIMES)))
    window.tabs.setCurrentWidget(canvas.widget)
    view_action(window, "Profile: Share of Time").trigger()
    overlay = window.figures.overlay(doc)
    assert overlay.kind == TIME and window.figures.act_show.isChecked()
    entries = {e.name: e for e in overlay.entries()}
    assert set(entries) == set(TIMES)
    legend = overlay.legend.texts()
    assert legend["title"] == "Profile: Share of Time" and legend["min"] == "0.0%"
    assert legend["max"] == f"{100 * 6 / 9.5:.1f}%" and "time" in legend["unit"]
    assert overlay.legend.isVisible()
    # the slowest layer is framed in the top colour of the scale, the fastest in a cool one
    image = grab(canvas)
    scale = overlay.scale_of(list(entries.values()))
    top = canvas.viewer().mapFromScene(entries["conv2"].rect.center().x(), entries["conv2"].rect.bottom())
    assert colour_near(image, top, scale.colour(6 / 9.5)) and not colour_near(before, top, scale.colour(6 / 9.5))
    assert image != before
    # hover: the layer's figures and its kernels
    text = hover_text(canvas, entries["conv2"].rect.center())
    assert "conv2" in text and "6.0000 ms" in text and "kernel_of_conv2" in text and "grid 4x2x1" in text
    assert "cand_conv2" in text
    # None takes everything away: the canvas looks as before
    view_action(window, "None").trigger()
    assert not overlay.entries() and not overlay.legend.isVisible() and not window.figures.act_show.isChecked()
    assert grab(canvas) == before
    key = QtGui.QKeySequence("Ctrl+Shift+F")  # the toggle, from the keyboard, brings the last figure back
    assert [a for a in window.findChildren(QtGui.QAction) if key in a.shortcuts()] == [window.figures.act_show]
    canvas.widget.setFocus()
    qtbot.keyClick(canvas.viewer(), QtCore.Qt.Key.Key_F,
                   QtCore.Qt.KeyboardModifier.ControlModifier | QtCore.Qt.KeyboardModifier.ShiftModifier)
    assert overlay.kind == TIME and overlay.legend.isVisible()
    # Arrange moves the nodes: the frames go with them
    window.editing.act_arrange.trigger()
    QtCore.QCoreApplication.processEvents()
    moved = {e.name: e.rect for e in overlay.drawn().entries}
    assert moved != {n: e.rect for n, e in entries.items()}
    assert all(rect == canvas.node_rect(n) and overlay.item.boundingRect().contains(rect) for n, rect in moved.items())


def test_collapsed_group_shows_params_and_flops_always_and_summed_time_with_a_profile(window, tmp_path, qtbot):
    modelfile.save(grouped_model(), tmp_path / "grouped.lnet")
    doc = window.files.open_path(tmp_path / "grouped.lnet")
    canvas = doc.canvas
    canvas.collapse_group("features/stage1")
    box = canvas.group_box("features/stage1")
    costs = canvas.layer_costs()
    params = sum(costs[f"block_conv{i}"]["params"] for i in range(3))
    assert params > 0 and any("params" in t for t in box.lines) and any("FLOP" in t for t in box.lines)
    assert "3 layers" in box.toolTip() and not any(" ms" in t for t in box.lines)  # no profile yet

    times = {f"block_conv{i}": 1.0 + i for i in range(6)}
    window.reports.open_report(write(tmp_path, fake_report(doc, times)))
    window.tabs.setCurrentWidget(canvas.widget)
    window.figures.choose(TIME)
    box = canvas.group_box("features/stage1")
    assert any(t.startswith("6.000 ms") for t in box.lines) and any("params" in t for t in box.lines)
    overlay = window.figures.overlay(doc)
    entries = {e.name: e for e in overlay.entries()}
    assert "features/stage1" in entries and "block_conv0" not in entries and "block_conv4" in entries
    assert entries["features/stage1"].fig["time_ms"] == pytest.approx(6.0)
    text = hover_text(canvas, box.sceneBoundingRect().center())
    assert "group features/stage1" in text and "3 layers" in text and "kernel_of_block_conv2" in text
    canvas.expand_all()  # expanding: the layers are drawn again, each with its own figures
    assert {e.name for e in overlay.entries()} == set(times)
    window.figures.choose("")
    canvas.collapse_group("features/stage1")
    assert any("params" in t for t in canvas.group_box("features/stage1").lines)  # still, without figures


def test_drift_and_report_comparison_on_the_canvas(window, sample_path, tmp_path, qtbot):
    doc = window.files.open_path(sample_path)
    window.figures.choose(DRIFT)  # nothing compared yet: says how to get it
    assert "Compare Precision" in window.statusBar().currentMessage()
    assert not window.figures.overlay(doc).entries()
    window.analysis.doc = doc  # the model analysis compared
    window.analysis.proxy.drift.emit(DriftResult("fp32", "fp16", 1e-2, [
        LayerDrift("conv1", "convolution", 1e-4, 1e-3, 1.0), LayerDrift("conv2", "convolution", 5e-2, 0.1, 1.0)]))
    overlay = window.figures.overlay(doc)
    entries = {e.name: e for e in overlay.entries()}
    assert set(entries) == {"conv1", "conv2"} and overlay.legend.texts()["max"] == "5.0e-02"
    assert "threshold 0.01" in overlay.legend.texts()["unit"]
    assert "over the threshold" in hover_text(doc.canvas, entries["conv2"].rect.center())
    # Pin Diverging Layers: the drift of the network with its pins
    pinned = DriftResult("fp32", "fp16", 1e-2, [LayerDrift("conv1", "convolution", 1e-4, 1e-3, 1.0),
                                                LayerDrift("conv2", "convolution", 0.0, 0.0, 1.0)])
    window.analysis.proxy.precision_fixed.emit(SimpleNamespace(after=pinned))
    assert {e.name: e.fig["drift"] for e in overlay.entries()} == {"conv1": 1e-4, "conv2": 0.0}

    base = write(tmp_path, fake_report(doc, TIMES, "base"))
    slower = write(tmp_path, fake_report(doc, {**TIMES, "conv2": 9.0}, "slower"))
    dlg = window.reports.compare_reports([base, slower])
    window.figures.choose(DIFF)
    entries = {e.name: e for e in overlay.entries()}
    assert entries["conv2"].fig["diff_ms"] == pytest.approx(3.0) and entries["conv1"].fig["diff_ms"] == 0
    assert overlay.legend.texts()["max"] == "+3.000 ms" and overlay.legend.texts()["min"] == "-3.000 ms"
    assert "+3.0000 ms against the base's 6.0000 ms" in hover_text(doc.canvas, entries["conv2"].rect.center())
    dlg.base.setCurrentIndex(1)  # the other report as the base: the change turns around
    assert {e.name: e for e in overlay.entries()}["conv2"].fig["diff_ms"] == pytest.approx(-3.0)


def test_lazily_made_nodes_are_coloured_too(window, sample_path, tmp_path, qtbot, monkeypatch):
    monkeypatch.setattr("canvas.graph.EAGER_LAYERS", 0)  # nodes made only when seen
    doc = window.files.open_path(sample_path)
    canvas = doc.canvas
    canvas.viewer().resetTransform()
    canvas.viewer().scale(0.05, 0.05)
    window.reports.open_report(write(tmp_path, fake_report(doc, TIMES)))
    window.tabs.setCurrentWidget(canvas.widget)
    window.figures.choose(TIME)
    overlay = window.figures.overlay(doc)
    assert canvas.lazy and {e.name for e in overlay.entries()} == set(TIMES)
    for e in overlay.entries():
        assert e.rect == canvas.node_rect(e.name)
    grab(canvas)  # paints without nodes


def test_a_new_run_refreshes_the_figures(window, model_copy, qtbot):  # noqa: F811 (fixture)
    doc = open_small(window, model_copy)
    window.figures.choose(TIME)
    overlay = window.figures.overlay(doc)
    assert not overlay.entries()
    run_and_wait(window, qtbot)
    window.tabs.setCurrentWidget(doc.canvas.widget)
    first = {e.name: e.fig["time_ms"] for e in overlay.entries()}
    assert set(first) >= {"conv1", "conv2", "conv3"}
    run_and_wait(window, qtbot)
    second = {e.name: e.fig["time_ms"] for e in overlay.entries()}
    assert set(second) == set(first) and second != first


@pytest.mark.gpu
def test_gpu_run_shows_each_layers_kernels_with_launch_shapes_on_hover(window, model_copy, qtbot):  # noqa: F811
    doc = open_small(window, model_copy, backend="cupy")
    window.figures.choose(TIME)
    run_and_wait(window, qtbot, timeout=120_000)
    window.tabs.setCurrentWidget(doc.canvas.widget)
    overlay = window.figures.overlay(doc)
    entries = {e.name: e for e in overlay.entries()}
    conv = entries["conv2"]
    assert conv.fig["kernels"] and conv.fig["device_ms"] is not None
    text = hover_text(doc.canvas, conv.rect.center())
    assert conv.fig["kernels"][0]["name"][:40] in text and "grid" in text and "block" in text
    assert "kernels" in text and "gaps before them" in text
