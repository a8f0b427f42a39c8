"""The ONNX import in the designer (app.designer.onnx_import): File > Open and File > Import ONNX Model…, drops on the
window and the canvas, the progress/result dialog, errors shown in one message with nothing opened, Save As
writing the model and its weights, the ONNX node name in tooltips and the parameter window, and the imported
weights used by a designer run and by analysis mode (same outputs as onnxruntime)."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tests.engine.importers.helpers import reference, rel_l2, save_graph, tensor  # noqa: E402

WAIT = 30_000


def tiny_model(path: Path, batch: int | str = 1, size: int | str = 8) -> Path:
    """Conv 3->4 (3x3, pad 1) + Relu, MaxPool 2x2, Conv 1x1 4->2 + Sigmoid, built with onnx.helper."""
    from onnx import helper

    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2"),
             helper.make_node("Sigmoid", ["c2"], ["y"], name="sig")]
    consts = {"w1": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
              "b1": rng.standard_normal(4).astype(np.float32),
              "w2": rng.standard_normal((2, 4, 1, 1)).astype(np.float32),
              "b2": rng.standard_normal(2).astype(np.float32)}
    return save_graph(path, nodes, [tensor("x", [batch, 3, size, size])], [tensor("y", None)], consts)


def unsupported_model(path: Path) -> Path:
    from onnx import helper

    nodes = [helper.make_node("Shrink", ["x"], ["e"], name="shrink1"), helper.make_node("Relu", ["e"], ["y"], name="r")]
    return save_graph(path, nodes, [tensor("x", [1, 3, 4, 4])], [tensor("y", [1, 3, 4, 4])])


def finish(w, qtbot, n: int = 1):
    """Wait until the window has shown ``n`` finished imports; the latest import dialog."""
    qtbot.waitUntil(lambda: not w.onnx_import.running and len(w.onnx_import.dialogs) >= n
                    and all(d.ok is not None for d in w.onnx_import.dialogs), timeout=WAIT)
    return w.onnx_import.dialogs[-1]


def file_menu(w) -> list[str]:
    menu = next(a.menu() for a in w.menuBar().actions() if a.text().replace("&", "") == "File")
    return [a.text().replace("&", "") for a in menu.actions() if a.text()]


def test_file_open_imports_an_onnx_file_into_a_new_unsaved_tab(window, qtbot, tmp_path, monkeypatch):
    path = tiny_model(tmp_path / "tiny.onnx")
    texts = file_menu(window)
    assert texts[texts.index("Open…") + 1] == "Import ONNX Model…"
    seen = {}

    def pick(_parent, _title, _start, filt):
        seen["filter"] = filt
        return str(path), filt

    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", staticmethod(pick))
    window.act_open.trigger()
    assert "*.onnx" in seen["filter"].split(";;")[0]
    dlg = finish(window, qtbot)
    assert dlg.ok and dlg.isVisible() and not dlg.isModal()
    doc = window.current
    assert doc is not None and doc.path is None and doc.modified and doc.model.name == "tiny"
    assert window.tabs.tabText(window.tabs.currentIndex()).endswith("*")
    assert doc.model.weights_source is not None
    assert window.recent.files()[0] == str(path.resolve())
    assert sorted(doc.model.weights_source.arrays) == ["conv1", "conv2"]
    # the result dialog: sections with the nodes, and the command line
    mapped = dlg.section("Mapped")
    assert mapped is not None and mapped.childCount() == 3  # Relu and Sigmoid are the convolutions' activations
    assert {mapped.child(i).text(0) for i in range(3)} == {"Conv conv1", "MaxPool pool1", "Conv conv2"}
    assert dlg.section("Refused").childCount() == 0 and dlg.section("Folded") is not None
    assert dlg.command.text() == f"layerlab import {path} -o {path.with_suffix('.lnet')}"
    assert "5 ONNX nodes -> " in dlg.message.text()
    # the ONNX node in the node's tooltip and in the parameter window
    assert "ONNX Conv node conv1" in doc.canvas.nodes["conv1"].view.toolTip()
    doc.canvas.select_layers(["conv1"])
    qtbot.waitUntil(lambda: window.params.findChild(QtWidgets.QLabel, "LayerNote") is not None, timeout=WAIT)
    assert window.params.findChild(QtWidgets.QLabel, "LayerNote").text() == "ONNX Conv node conv1"
    # the canvas was fitted to the imported network: every node is in view
    view = doc.canvas.viewer()
    visible = view.mapToScene(view.viewport().rect()).boundingRect()
    assert all(visible.contains(n.view.sceneBoundingRect()) for n in doc.canvas.nodes.values())


def test_import_dialog_asks_the_sizes_of_symbolic_inputs(window, qtbot, tmp_path):
    path = tiny_model(tmp_path / "sym.onnx", batch="N", size="S")
    texts = file_menu(window)
    assert "Import ONNX Model…" in texts
    window.onnx_import.act_import.trigger()
    opts = window.onnx_import.options_dialog
    assert opts is not None and opts.isVisible()  # opened with open(): the window keeps running
    opts.path_edit.setText(str(path))
    opts.path_edit.editingFinished.emit()
    qtbot.waitUntil(lambda: opts.shapes_edit.toPlainText() == "x=1x3x224x224", timeout=WAIT)  # read in the background
    assert "N x 3 x S x S" in opts.inputs_label.text()
    opts.shapes_edit.setPlainText("x=1x3")  # malformed: said in the dialog, nothing starts
    opts.import_button.click()
    assert opts.error.isVisible() and "NAME=NxCxHxW" in opts.error.text() and not window.onnx_import.dialogs
    opts.shapes_edit.setPlainText("x=2x3x16x16")
    opts.placeholders.setChecked(True)
    assert opts.command.text() == f"layerlab import {path} --input-shape x=2x3x16x16 --placeholders"
    opts.import_button.click()
    dlg = finish(window, qtbot)
    assert dlg.ok and "--input-shape x=2x3x16x16 --placeholders" in dlg.command.text()
    doc = window.current
    assert doc.model.layers["x"].params["dimensions"] == "2x3x16x16"


def _drop(target: QtWidgets.QWidget, files: list[Path]) -> tuple[bool, bool]:
    mime = QtCore.QMimeData()
    mime.setUrls([QtCore.QUrl.fromLocalFile(str(f)) for f in files])
    pos = QtCore.QPointF(target.width() / 2, target.height() / 2)
    enter = QtGui.QDragEnterEvent(pos.toPoint(), QtCore.Qt.DropAction.CopyAction, mime,
                                  QtCore.Qt.MouseButton.LeftButton, QtCore.Qt.KeyboardModifier.NoModifier)
    QtWidgets.QApplication.sendEvent(target, enter)
    drop = QtGui.QDropEvent(pos, QtCore.Qt.DropAction.CopyAction, mime, QtCore.Qt.MouseButton.LeftButton,
                            QtCore.Qt.KeyboardModifier.NoModifier)
    QtWidgets.QApplication.sendEvent(target, drop)
    return enter.isAccepted(), drop.isAccepted()


def test_dropping_onnx_and_lnet_files_on_the_window_and_the_canvas(window, qtbot, tmp_path, sample_path):
    path = tiny_model(tmp_path / "dropped.onnx")
    assert window.acceptDrops()
    assert _drop(window, [tmp_path / "notes.txt"]) == (False, False)  # not a model: refused
    assert _drop(window, [path]) == (True, True)
    assert finish(window, qtbot).ok and window.current.model.name == "dropped"
    assert _drop(window, [sample_path]) == (True, True)  # a .lnet drop opens the file
    assert window.current.path == str(sample_path.resolve())
    # dropped on a canvas (NodeGraphQt's viewer takes the drop there): opened as well
    n = len(window.docs)
    window.current.canvas.files_dropped.emit([str(path)])
    finish(window, qtbot, 2)
    assert len(window.docs) == n + 1 and window.current.model.name == "dropped"


def test_unsupported_and_corrupt_models_give_one_message_and_open_nothing(window, qtbot, tmp_path):
    bad = unsupported_model(tmp_path / "shrink.onnx")
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07this is not a protobuf" * 10)
    window.files.open_path(bad)
    dlg = finish(window, qtbot)
    assert dlg.ok is False and window.docs == [] and dlg.isVisible()
    assert "1 node(s) of 1 operator(s)" in dlg.message.text() and "placeholder layers" in dlg.message.text()
    assert dlg.heading.text().startswith("<b>Cannot import shrink.onnx</b>") and dlg.tree.isVisible()
    refused_op = dlg.tree.topLevelItem(0)  # grouped by operator
    assert refused_op.text(0) == "Shrink (1)" and refused_op.child(0).text(0) == "shrink1"
    dlg.tree.clear()
    dlg.tree.hide()
    window.files.open_path(corrupt)
    dlg = finish(window, qtbot, 2)
    assert dlg.ok is False and window.docs == [] and "not a readable ONNX model" in dlg.message.text()
    assert "Cannot import" in window.statusBar().currentMessage()
    # with placeholders the unsupported node is kept, and listed as refused with its reason
    window.onnx_import.import_file(bad, placeholders=True)
    dlg = finish(window, qtbot, 3)
    assert dlg.ok and len(window.docs) == 1
    refused = dlg.section("Refused")
    assert refused.childCount() == 1 and refused.child(0).text(0) == "Shrink shrink1"
    assert "placeholder" in refused.child(0).text(1)
    assert "placeholder" in {s.type for s in window.current.model.layers.values()}


def test_save_as_writes_the_model_and_its_weights(window, qtbot, tmp_path, registry):
    from engine import modelfile
    from engine.backends import get_backend
    from engine.network import Network
    from engine.tensor import TensorFormat
    from engine.weights import open_weights

    path = tiny_model(tmp_path / "tiny.onnx")
    window.files.open_path(path)
    finish(window, qtbot)
    doc = window.current
    out = tmp_path / "saved" / "mine.lnet"
    out.parent.mkdir()
    assert window.files.save_as(doc, str(out))
    wfile = out.with_suffix(".safetensors")
    assert out.is_file() and wfile.is_file() and not doc.modified and doc.path == str(out.resolve())
    assert doc.model.settings["weights"] == "mine.safetensors"
    loaded = modelfile.load(out, registry)
    assert loaded.settings["weights"] == "mine.safetensors"
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    net = Network(loaded, registry, get_backend("numpy"), TensorFormat.parse("fp32 nchw"), weights=open_weights(wfile))
    got = net.infer({"x": x})["y"]
    ref = reference(path, {"x": x})[0]
    assert rel_l2(got.reshape(ref.shape), ref) < 1e-4
    # saved again elsewhere: the weights follow the model
    other = tmp_path / "other.lnet"
    assert window.files.save_as(doc, str(other))
    assert other.with_suffix(".safetensors").is_file() and doc.model.settings["weights"] == "other.safetensors"


def _open_imported(window, qtbot, tmp_path: Path, seed: int) -> tuple[Path, np.ndarray]:
    """Import a tiny ONNX model in the window, set to run once in fp32 on the CPU on a random input (returned with
    the ONNX file's path)."""
    path = tiny_model(tmp_path / "tiny.onnx")
    x = np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    window.files.open_path(path)
    finish(window, qtbot)
    window.current.model.settings.update({"backend": "numpy", "format": "fp32 nchw", "iterations": "1",
                                          "warmup": "0", "input.x": str(tmp_path / "x.npy")})
    return path, x


def test_a_designer_run_of_the_imported_model_matches_onnxruntime(window, qtbot, tmp_path):
    from engine.tensor import TensorFormat

    path, x = _open_imported(window, qtbot, tmp_path, 1)
    doc = window.current
    finished = []  # the worker's signal comes from its thread: recorded as it comes, waited for by polling
    window.runner.worker.run_finished.connect(lambda *args: finished.append(args))
    assert window.runs.launch_inference(doc) is not None
    qtbot.waitUntil(lambda: bool(finished), timeout=60_000)
    got = window.runner.worker.net.output("y", TensorFormat.parse("fp32 nchw"))
    ref = reference(path, {"x": x})[0]
    assert rel_l2(got.reshape(ref.shape), ref) < 1e-4


def test_an_imported_model_opens_in_analysis_mode(window, qtbot, tmp_path):
    from engine.tensor import TensorFormat

    path, x = _open_imported(window, qtbot, tmp_path, 2)
    mode = window.analysis
    with qtbot.waitSignal(mode.proxy.ran, timeout=60_000):
        mode.act_launch.trigger()
    assert mode.active
    net = window.runner.worker.analysis.net
    got = net.output("y", TensorFormat.parse("fp32 nchw"))
    ref = reference(path, {"x": x})[0]
    assert rel_l2(got.reshape(ref.shape), ref) < 1e-4  # the imported weights, not random ones
    mode.act_stop.trigger()
    qtbot.waitUntil(lambda: not mode.active, timeout=WAIT)


def deep_resnet_onnx(path: Path) -> Path:
    """A ResNet-like network of 28 basic blocks (about 200 ONNX nodes) exported with torch."""
    import warnings

    import torch
    from torch import nn

    from tests.engine.importers.architectures import BasicBlock

    torch.manual_seed(0)
    widths = [8] * 7 + [16] * 7 + [24] * 7 + [32] * 7
    blocks, cin = [], 8
    for i, c in enumerate(widths):
        blocks.append(BasicBlock(cin, c, 2 if c != cin and i % 14 == 7 else 1))
        cin = c
    net = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), *blocks, nn.Conv2d(cin, 3, 1)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.rand(1, 3, 32, 32),), str(path), input_names=["input"], output_names=["output"],
                          opset_version=17, dynamo=False)
    return path


def test_a_200_node_network_opens_fitted_and_readable(make_window, qtbot, tmp_path):
    """Rendered offscreen to PNG (LAYERLAB_ONNX_SCREENSHOT=path keeps it): every node in view, none on another."""
    import os

    import onnx

    from tests.app.test_screenshot import assert_nodes_visible_and_apart

    path = deep_resnet_onnx(tmp_path / "deep_resnet.onnx")
    assert len(onnx.load(str(path)).graph.node) >= 190
    from app.gui import apply_theme

    apply_theme(QtWidgets.QApplication.instance())
    w = make_window()
    w.resize(1500, 900)
    w.files.open_path(path)
    dlg = finish(w, qtbot)
    assert dlg.ok
    doc = w.current
    assert len(doc.model.layers) >= 85  # ReLUs become the activations of convolutions and sums
    dlg.move(w.geometry().right() + 50, 0)  # the result dialog is a window of its own
    qtbot.wait(100)
    out = os.environ.get("LAYERLAB_ONNX_SCREENSHOT") or str(tmp_path / "imported.png")
    assert w.grab().save(out)
    assert_nodes_visible_and_apart(doc.canvas)
    img = QtGui.QImage(out)
    from collections import Counter

    canvas = doc.canvas.widget
    box = QtCore.QRect(canvas.mapTo(w, QtCore.QPoint(0, 0)), canvas.size())
    pixels = Counter(img.pixelColor(x, y).name() for x in range(box.left(), box.right(), 5)
                     for y in range(box.top(), box.bottom(), 5))
    background = pixels.most_common(1)[0][1] + pixels.most_common(2)[1][1]  # the canvas and its grid lines
    assert 1 - background / sum(pixels.values()) > 0.1  # a tenth of the canvas or more shows nodes: not a thin line
    if os.environ.get("LAYERLAB_ONNX_SCREENSHOT"):
        dlg.grab().save(str(Path(out).with_name("import_result.png")))


def test_links_of_an_imported_network_run_around_the_layers(window, qtbot, tmp_path):
    """The skip connections of an imported ResNet (folded into bands at Fit to View) are drawn along the
    layout's routes: no link's drawn path passes through a layer's box other than its two ends, in detail and
    in the zoomed-out overview."""
    path = deep_resnet_onnx(tmp_path / "deep_resnet.onnx")
    window.files.open_path(path)
    assert finish(window, qtbot).ok
    canvas = window.current.canvas
    model = window.current.model
    links = [(src, name) for name, spec in model.layers.items() for src in spec.inputs if src]
    skips = [(s, t) for s, t in links if len(canvas.link_route(s, t) or []) > 2]  # routed through lanes
    assert len(skips) >= 20
    rects = {n: node.view.sceneBoundingRect().adjusted(1, 1, -1, -1) for n, node in canvas.nodes.items()}
    pipes = [p for p in canvas.viewer().all_pipes() if p.input_port and p.output_port]
    assert len(pipes) == len(links)
    for pipe in pipes:
        src, dst = canvas.layer_of(pipe.output_port.node), canvas.layer_of(pipe.input_port.node)
        assert canvas.link_route(src, dst) is not None
        path_ = pipe.mapToScene(pipe.path())
        points = [path_.pointAtPercent(i / 400) for i in range(401)]
        hit = [n for n, r in rects.items() if n not in (src, dst) and any(r.contains(p) for p in points)]
        assert not hit, (src, dst, hit)
    # the overview (zoomed out) draws the same routes
    canvas.overview.set_active(True)
    lines = canvas.overview._line_of
    assert len(lines) == len(links)
    for (src, dst, _), segments in lines.items():
        for seg in segments:
            points = [seg.pointAt(i / 50) for i in range(51)]
            assert not [n for n, r in rects.items() if n not in (src, dst) and any(r.contains(p) for p in points)]
    # a moved layer's links forget their layout routes and are routed again from where the boxes stand, before
    # the next paint
    src, dst = skips[0]
    old = canvas.link_route(src, dst)
    model.move_layer(dst, (model.layers[dst].position[0], model.layers[dst].position[1] + 500))
    canvas.widget.grab()
    assert canvas.link_route(src, dst) not in (None, old)
    from tests.canvas.conftest import links_behind_boxes  # noqa: PLC0415

    moved = canvas.node_rect(dst)
    covered = {n for n in model.layers if n == dst or canvas.node_rect(n).intersects(moved)}
    # (a link to a layer the moved one now lies on cannot avoid it)
    assert [(s, t) for s, t in links_behind_boxes(canvas) if not {s, t} & covered] == []


def test_file_export_of_an_unsaved_import_uses_the_imported_weights(window, qtbot, tmp_path):
    path = tiny_model(tmp_path / "tiny.onnx")
    window.files.open_path(path)
    finish(window, qtbot)
    window.export_actions["onnx"].trigger()
    dlg = window.export_dialog
    assert dlg.weights.text() == "" and "imported" in dlg.weights.placeholderText()
    out = tmp_path / "exported.onnx"
    dlg.output.setText(str(out))
    dlg.export()
    qtbot.waitUntil(lambda: dlg.result_dialog is not None, timeout=WAIT)
    x = np.random.default_rng(4).standard_normal((1, 3, 8, 8)).astype(np.float32)
    got, ref = reference(out, {"x": x})[0], reference(path, {"x": x})[0]
    assert rel_l2(got.reshape(ref.shape), ref) < 1e-4


def test_closing_the_window_while_an_import_runs(qtbot, tmp_path, registry):
    from app.designer.main_window import MainWindow

    path = deep_resnet_onnx(tmp_path / "deep.onnx")
    settings = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.Format.IniFormat)
    w = MainWindow(registry=registry, settings=settings, autosave_dir=str(tmp_path / "autosave"))
    w.show()
    w.files.open_path(path)
    importer = w.onnx_import
    jobs = list(importer._jobs.values())
    assert importer.running and len(jobs) == 1
    assert w.close()
    w.deleteLater()
    qtbot.waitUntil(lambda: jobs[0].thread is None, timeout=WAIT)  # it ended and reached the deleted window
    qtbot.wait(100)
    assert not importer._jobs  # nothing raised on the way (pytest-qt fails a test on exceptions in slots)


def test_fold_to_aspect_cuts_a_long_drawing_into_bands():
    from engine.layout import BAND_GAP, fold_to_aspect

    chain = {f"l{i}": (i * 200.0, 0.0) for i in range(60)}
    sizes = dict.fromkeys(chain, (150.0, 100.0))
    folded = fold_to_aspect(chain, sizes, 1.5)
    xs, ys = [p[0] for p in folded.values()], [p[1] for p in folded.values()]
    width, height = max(xs) + 150, max(ys) + 100
    assert 0.75 < width / height < 3.0  # about the view's shape instead of 80:1
    rows = sorted(set(ys))
    assert len(rows) > 1 and all(b - a == 100 + BAND_GAP for a, b in zip(rows, rows[1:]))
    order = sorted(folded, key=lambda n: (folded[n][1], folded[n][0]))
    assert order == list(chain)  # read like text, the layers keep their order
    assert len(set(folded.values())) == len(chain)
    short = {f"l{i}": (i * 200.0, 0.0) for i in range(4)}
    assert fold_to_aspect(short, dict.fromkeys(short, (150.0, 100.0)), 1.5) == short


def test_a_network_imported_on_the_command_line_opens_in_the_designer_with_no_node_on_another(window, tmp_path):
    """`layerlab import` has no canvas to measure its nodes: its drawing uses estimated node sizes
    (engine.layout.estimated_sizes) that are at least the designer's, so the saved model opens with no overlap.
    (With one fixed size for every node, the long-named downsampling convolutions sat on their neighbours.)"""
    from app.cli import main as cli_main
    from engine.layout import overlaps

    path = deep_resnet_onnx(tmp_path / "deep_resnet.onnx")
    assert cli_main(["import", str(path), "-o", str(tmp_path / "deep.lnet")], out=io.StringIO()) == 0
    doc = window.files.open_path(tmp_path / "deep.lnet")
    canvas = doc.canvas
    sizes = canvas.node_sizes(canvas.nodes)
    assert len(sizes) == len(doc.model.layers) >= 85
    assert overlaps({n: tuple(s.position) for n, s in doc.model.layers.items()}, sizes) == []


def test_import_preview_follows_the_file_cancel_and_log(window, qtbot, tmp_path, monkeypatch):
    """The command-line preview names the chosen file; a running import can be cancelled (nothing opens); imports
    and their results are in the Log panel; refused nodes of several operators are grouped."""
    path = tiny_model(tmp_path / "chosen.onnx")
    window.onnx_import.act_import.trigger()
    opts = window.onnx_import.options_dialog
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(path), "")))
    opts.browse()
    assert opts.command.text() == f"layerlab import {path}"
    opts.reject()
    import threading

    import engine.importers.onnx as onnx_importer

    real, clicked = onnx_importer.import_onnx, threading.Event()
    monkeypatch.setattr(onnx_importer, "import_onnx", lambda *a, **k: clicked.wait(WAIT / 1e3) and real(*a, **k))
    dlg = window.onnx_import.import_file(path)  # held until Cancel is clicked
    assert dlg.cancel_button.isVisible()
    dlg.cancel_button.click()
    clicked.set()
    dlg = finish(window, qtbot)
    assert dlg.ok is False and window.docs == [] and "cancelled" in dlg.message.text()
    assert not dlg.cancel_button.isVisible()
    window.onnx_import.import_file(path)
    finish(window, qtbot, 2)
    qtbot.waitUntil(lambda: any("Imported" in m and "chosen.onnx" in m for m in window.log_panel.messages()),
                    timeout=WAIT)
    assert any("Importing" in m and "chosen.onnx" in m for m in window.log_panel.messages())
    assert any("cancelled" in m for m in window.log_panel.messages())
