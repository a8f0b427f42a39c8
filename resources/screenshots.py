"""Regenerate the documentation's screenshots (offscreen Qt): the main window with the sample, a 300-layer model at fit
zoom and zoomed in, an inference report and the channel inspector.

    PYTHONPATH=. python -m resources.screenshots [--out docs/images]

Writes designer.png, large-network-fit.png, large-network-zoomed.png, report.png and
channel-inspector.png; prints each path."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent


def _wait(app, done, timeout_s: float = 180.0) -> None:  # noqa: ANN001
    end = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > end:
            raise TimeoutError("the screenshot's content did not appear in time")
        app.processEvents()
        time.sleep(0.01)


def _settle(app, ms: int = 100) -> None:  # noqa: ANN001
    end = time.monotonic() + ms / 1000
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.005)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the documentation's screenshots")
    ap.add_argument("--out", default=str(ROOT.parent / "docs" / "images"), help="folder for the PNGs (default: docs/images/)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from PySide6 import QtCore, QtWidgets

    from app.designer.main_window import SAMPLE, MainWindow
    from app.gui import apply_theme
    from engine import modelfile
    from tests.bench.bench_canvas import chain_model

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    apply_theme(app)
    tmp = Path(tempfile.mkdtemp(prefix="layerlab_shots_"))
    settings = QtCore.QSettings(str(tmp / "settings.ini"), QtCore.QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, autosave_dir=str(tmp / "autosave"), reports_dir=str(tmp / "reports"))
    win.resize(1500, 900)
    win.show()
    written = []

    def grab(widget, name: str) -> None:  # noqa: ANN001
        _settle(app)
        path = out / name
        if not widget.grab().save(str(path)):
            raise OSError(f"cannot write {path}")
        written.append(path)

    # the sample, fitted, one layer selected
    model = tmp / "denoiser.lnet"
    model.write_bytes(SAMPLE.read_bytes())
    doc = win.files.open_path(model)
    _settle(app)
    doc.canvas.fit()
    doc.canvas.select_layers(["conv1"])
    grab(win, "designer.png")

    # a 300-layer network (convolution + ReLU + skip connections), fitted, then at 1:1
    big = tmp / "chain300.lnet"
    modelfile.save(chain_model(300), big)
    large = win.files.open_path(big)
    _settle(app)
    large.canvas.fit()
    grab(win, "large-network-fit.png")
    large.canvas.select_layers(["conv20_a"])
    large.canvas.zoom_to("conv20_a", 1.0)
    grab(win, "large-network-zoomed.png")
    win.files.close_document(large)

    # an inference report of the sample (small input, so the run is quick)
    win.tabs.setCurrentWidget(doc.canvas.widget)
    with doc.model.macro("small"):
        doc.model.set_param("input", "dimensions", "1x3x96x128")
        doc.model.set_setting("iterations", "2")
    win.files.save(doc)
    win.runs.launch_inference(doc)
    _wait(app, lambda: win.reports.current_report is not None)
    view = win.reports.current_report
    view.select_layer("conv2")
    grab(win, "report.png")

    # the channel inspector on the filters sample
    from app.analysis.controller import AnalysisController
    from engine.run import RunSpec
    from resources import SAMPLES

    ctl = AnalysisController()
    filters = modelfile.load(SAMPLES / "filters.lnet", win.registry)
    ran = []
    ctl.proxy.ran.connect(ran.append)
    ctl.launch(filters, win.registry, RunSpec(backend="numpy", weights=str(SAMPLES / "filters_weights"),
                                            inputs=(("photo", str(SAMPLES / "scene.jpg")),)))
    _wait(app, lambda: bool(ran))
    ctl.inspect("denoise")
    _wait(app, lambda: ctl.inspector.data is not None)
    ctl.inspector.wait_ready()
    ctl.inspector.resize(1000, 560)
    ctl.inspector.show()
    grab(ctl.inspector, "channel-inspector.png")
    ctl.stop()
    ctl.proxy.shutdown()

    doc.model.mark_clean()
    win.close()
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
