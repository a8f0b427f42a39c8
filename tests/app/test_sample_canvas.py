"""The sample as a new user first sees it: its skip connection runs clear of the chain of nodes, and the shapes under
the names are never cut short at any zoom."""
from __future__ import annotations

from PySide6 import QtGui


class _RecordingPainter(QtGui.QPainter):
    """A painter that keeps every text drawn through it."""

    def __init__(self, device: QtGui.QPaintDevice) -> None:
        super().__init__(device)
        self.texts: list[str] = []

    def drawText(self, *args: object) -> None:  # noqa: N802 - Qt's name
        if isinstance(args[-1], str):
            self.texts.append(args[-1])
        super().drawText(*args)


def test_the_skip_connection_runs_clear_of_the_other_nodes(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    canvas = doc.canvas
    canvas.zoom_to("conv2", 1.0)
    qtbot.wait(20)
    pipes = canvas.nodes["denoised"].input_ports()[0].view.connected_pipes
    assert len(pipes) == 1
    path = pipes[0].path()
    others = [node.view.sceneBoundingRect() for name, node in canvas.nodes.items() if name not in ("input", "denoised")]
    points = [path.pointAtPercent(k / 200) for k in range(201)]
    assert not [p for p in points for rect in others if rect.contains(p)]


def test_shapes_under_the_names_are_whole_at_every_zoom(window, sample_path, qtbot):
    doc = window.files.open_path(sample_path)
    doc.model.set_param("input", "dimensions", "1x3x240x320")
    canvas = doc.canvas
    view = canvas.viewer()
    shapes = 0
    for k in range(40):
        canvas.zoom_to("conv3", 0.9 * 0.95**k)  # from near 1:1 to the far overview, in small steps
        qtbot.wait(30)
        image = QtGui.QImage(view.viewport().size(), QtGui.QImage.Format.Format_ARGB32)
        painter = _RecordingPainter(image)
        view.render(painter)
        painter.end()
        drawn = [t for t in painter.texts if "×" in t]
        shapes += len(drawn)
        assert not [t for t in drawn if "…" in t]
    assert shapes  # the overview drew shapes at some of these zooms
