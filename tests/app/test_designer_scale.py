"""The designer at real-model scale, in the real window: a large model opens with its nodes made as they are
needed, and the Type Check list, the Parameters panel, undo and Fit to View reach layers whose nodes were not
made yet. The designer opens the trained sample when started without a file."""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore

from engine import modelfile
from tests.app.test_main_window import double_click
from tests.bench.bench_canvas import chain_model


def _open_large(window, tmp_path: Path, layers: int = 602):
    path = tmp_path / "large.lnet"
    modelfile.save(chain_model(layers), path)
    doc = window.files.open_path(path)
    QtCore.QCoreApplication.processEvents()  # the queued Fit to View
    doc.canvas.viewer().viewport().repaint()
    return doc


def _double_click_row(qtbot, tree, layer: str) -> None:
    item = next(tree.topLevelItem(i) for i in range(tree.topLevelItemCount()) if tree.topLevelItem(i).text(1) == layer)
    tree.scrollToItem(item)
    double_click(qtbot, tree, item)


def test_large_model_type_check_row_finds_edits_and_undoes_a_layer_not_made_yet(window, tmp_path, qtbot):
    doc = _open_large(window, tmp_path)
    canvas = doc.canvas
    assert canvas.lazy and canvas.overview.active and canvas.created_count() < len(doc.model.layers) // 4
    broken, reader = "conv150_b", "sum150"
    assert canvas.nodes.created(broken) is None and canvas.nodes.created(reader) is None
    doc.model.set_param(broken, "num_output_channels", "24")  # the sum reading it gets mismatched inputs
    doc.run_check()
    assert canvas.nodes.created(reader) is None  # an edit far from the view makes no node
    _double_click_row(qtbot, window.checks.tree, reader)
    assert canvas.selected_layers() == [reader]  # found, made and selected from the list
    viewer = canvas.viewer()  # and shown: in the view, zoomed in to where nodes are drawn in full
    assert viewer.transform().m11() >= 0.55 and not canvas.overview.active
    assert viewer.mapToScene(viewer.viewport().rect()).boundingRect().contains(canvas.node_rect(reader))
    node = canvas.nodes.created(reader)
    assert node is not None and canvas.badge_severity(reader) == "error"
    assert [canvas.layer_of(p.connected_ports()[0].node()) for p in node.input_ports()[:2]] == ["sum149", broken]
    size = node.view.boundingRect().size()

    canvas.select_layers([broken])  # edit through the Parameters panel
    window.params.rows["param.num_output_channels"].editor.box.setValue(16)
    doc.run_check()
    assert doc.model.layers[broken].params["num_output_channels"] == "16" and canvas.badge_severity(reader) == ""
    assert "num_output_channels: 16" in canvas.nodes[broken].info.get_value().replace("<b>", "").replace("</b>", "")
    window.act_undo.trigger()
    doc.run_check()
    assert doc.model.layers[broken].params["num_output_channels"] == "24" and canvas.badge_severity(reader) == "error"
    window.act_undo.trigger()
    doc.run_check()
    assert canvas.badge_severity(reader) == "" and node.view.boundingRect().size() == size

    window.editing.act_fit.trigger()
    viewer = canvas.viewer()
    area = viewer.mapToScene(viewer.viewport().rect()).boundingRect()
    assert all(area.contains(canvas.node_rect(n)) for n in canvas.nodes)


def test_the_designer_opens_the_trained_sample_with_its_weights(window):
    from app.gui import TRAINED_SAMPLE, default_model

    assert default_model() == str(TRAINED_SAMPLE) and TRAINED_SAMPLE.is_file()
    doc = window.files.open_path(default_model())
    weights = doc.model.settings["weights"]
    assert (TRAINED_SAMPLE.parent / weights).is_dir() and any((TRAINED_SAMPLE.parent / weights).glob("*.npy"))
    assert doc.title == "denoiser_trained.lnet" and not doc.canvas.lazy
