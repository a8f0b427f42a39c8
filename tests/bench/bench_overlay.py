"""Figures on the canvas at scale: the real main window (offscreen Qt) on a generated chain (``bench_canvas``), a
profile's share of time shown on every layer. Measures showing the figures, and a frame at fit zoom and zoomed in
to one layer, with the figures and without them.

    PYTHONPATH=$PWD python tests/bench/bench_overlay.py [--layers 300 2000]

Target: a frame with figures costs at most 50 ms more than one without, at either zoom."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6 import QtCore, QtWidgets  # noqa: E402

from engine import modelfile  # noqa: E402
from engine.figures import TIME  # noqa: E402
from tests.bench.bench_canvas import chain_model  # noqa: E402


def frame_ms(viewport: QtWidgets.QWidget, frames: int = 5) -> float:
    """Mean time of a full repaint of ``viewport``."""
    start = time.perf_counter()
    for _ in range(frames):
        viewport.repaint()
    return (time.perf_counter() - start) / frames * 1000


def measure(layers: int) -> dict[str, float]:
    """Times (ms) for one chain of ``layers`` layers."""
    from app.designer.main_window import MainWindow

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv)
    tmp = tempfile.mkdtemp()
    window = MainWindow(settings=QtCore.QSettings(tmp + "/s.ini", QtCore.QSettings.Format.IniFormat),
                        autosave_dir=tmp + "/autosave")
    window.resize(1500, 900)
    window.show()
    modelfile.save(chain_model(layers), tmp + "/chain.lnet")
    doc = window.files.open_path(tmp + "/chain.lnet")
    app.processEvents()
    canvas, names = doc.canvas, list(doc.model.layers)
    figures = {n: {"time_ms": 1.0 + i % 7, "share": (1.0 + i % 7) / (4 * layers)} for i, n in enumerate(names)}
    overlay = window.figures.overlay(doc)
    viewport = canvas.viewer().viewport()
    out = {}
    for zoom in ("fit", "zoomed"):
        if zoom == "fit":
            canvas.fit()
        else:
            canvas.focus_layer(names[len(names) // 2])
        app.processEvents()
        overlay.clear()
        out[f"{zoom} frame, no figures"] = frame_ms(viewport)
        start = time.perf_counter()
        overlay.show_figures(TIME, figures)
        out[f"{zoom} show figures"] = (time.perf_counter() - start) * 1000
        out[f"{zoom} frame, figures"] = frame_ms(viewport)
    window.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[300, 2000])
    for layers in parser.parse_args().layers:
        for key, ms in measure(layers).items():
            print(f"{layers:>6} layers  {key:<28} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
