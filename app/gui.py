"""Entry point of the designer: ``layerlab`` and ``layerlab gui [MODEL]`` call :func:`run`."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from app.designer.main_window import SAMPLE, MainWindow
from engine.log import collect
from engine.plugins import load_plugins
from engine.registry import Registry


def designer_registry(plugins: list[str] | None = None) -> Registry:
    """The designer's plugins: the built-in and installed collections, those of ``LAYERLAB_PLUGIN_PATH`` and of the
    folders ``plugins`` (``--plugins``); failures are logged (the Manage Collections dialog lists them)."""
    return load_plugins(plugins or [])


def apply_theme(app: QtWidgets.QApplication) -> None:
    """A dark Fusion theme that matches the canvas."""
    app.setStyle("Fusion")
    pal = QtGui.QPalette()
    C, R = QtGui.QColor, QtGui.QPalette.ColorRole
    for role, color in {
        R.Window: C(45, 47, 52), R.WindowText: C(220, 220, 220), R.Base: C(33, 35, 39),
        R.AlternateBase: C(41, 43, 48), R.ToolTipBase: C(55, 57, 62), R.ToolTipText: C(230, 230, 230),
        R.Text: C(220, 220, 220), R.Button: C(55, 58, 64), R.ButtonText: C(225, 225, 225),
        R.BrightText: C(255, 90, 90), R.Highlight: C(61, 121, 196), R.HighlightedText: C(255, 255, 255),
        R.Link: C(110, 170, 240), R.PlaceholderText: C(130, 130, 130),
    }.items():
        pal.setColor(role, color)
    pal.setColor(QtGui.QPalette.ColorGroup.Disabled, R.Text, C(120, 120, 120))
    pal.setColor(QtGui.QPalette.ColorGroup.Disabled, R.ButtonText, C(120, 120, 120))
    pal.setColor(QtGui.QPalette.ColorGroup.Disabled, R.WindowText, C(120, 120, 120))
    app.setPalette(pal)
    app.setStyleSheet("QDockWidget::title { padding: 4px; background: #35383e; }"
                      "QGroupBox { font-weight: bold; border: 1px solid #4a4d54; border-radius: 4px;"
                      " margin-top: 10px; padding-top: 6px; }"
                      "QGroupBox::title { subcontrol-origin: margin; left: 8px; padding: 0 3px; }"
                      + check_box_style())


def check_box_style() -> str:
    """Check boxes with a visible frame when unchecked (Fusion draws them almost invisible on a dark palette),
    in dialogs and in check lists alike."""
    icons = (Path(__file__).resolve().parent.parent / "resources" / "icons").as_posix()
    kinds = ("QCheckBox", "QTreeView", "QListView", "QTableView", "QGroupBox")
    sel = lambda state: ", ".join(f"{k}::indicator{state}" for k in kinds)  # noqa: E731
    return (f"{sel('')} {{ width: 13px; height: 13px; border: 1px solid #9aa0a8; border-radius: 2px;"
            " background: #1d1f23; }"
            f"{sel(':hover')} {{ border-color: #c8ccd2; }}"
            f"{sel(':checked')} {{ background: #3d79c4; border-color: #5b93da; image: url({icons}/check.svg); }}"
            f"{sel(':indeterminate')} {{ background: #3d79c4; border-color: #5b93da; image: url({icons}/partial.svg); }}"
            f"{sel(':disabled')} {{ border-color: #5a5e66; background: #2a2c31; }}"
            f"{sel(':checked:disabled')} {{ background: #4a5566; }}")


#: what the designer opens when started without a file: the trained sample denoiser (its network settings name its
#: weights and a noisy photograph, so Launch Analysis shows a denoised picture at once)
TRAINED_SAMPLE = SAMPLE.with_name("denoiser_trained.lnet")


def default_model() -> str | None:
    """The model the designer opens without a file: the trained sample, else the untrained one, else none."""
    return next((str(p) for p in (TRAINED_SAMPLE, SAMPLE) if p.is_file()), None)


def run(path: str | None = None, argv: list[str] | None = None, plugins: list[str] | None = None) -> int:
    """Create the application, open the main window on ``path`` (the bundled sample by default), run the loop.
    ``plugins``: extra plugin folders (``layerlab gui --plugins DIR``), loaded besides the built-in and installed
    collections and those of ``LAYERLAB_PLUGIN_PATH``."""
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("LayerLab")
    app.setOrganizationName("LayerLab")
    apply_theme(app)  # type: ignore[arg-type]
    with collect(logging.INFO) as loading:  # shown in the Log dock once it exists
        registry = designer_registry(plugins)
    window = MainWindow(registry=registry)
    window.log_panel.add_records(loading)
    target = path or default_model()
    if target is None or (window.files.open_path(target) is None and not window.onnx_import.running):
        window.workspace.new_model()  # nothing opened (an .onnx file is being imported: its tab comes when it ends)
    window.show()
    QtCore.QTimer.singleShot(0, window.autosave.offer_recovery)
    QtCore.QTimer.singleShot(0, window.warmup.start)
    return app.exec()
