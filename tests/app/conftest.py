from __future__ import annotations

import pytest


@pytest.fixture
def make_window(qtbot, registry, tmp_path, monkeypatch):
    """MainWindow factory with its own settings file and autosave folder; dialogs never block."""
    from PySide6 import QtCore, QtWidgets  # imported here: the CLI tests in this folder run without Qt

    # pytest-qt closes the windows before fixtures are torn down: unsaved changes are discarded then
    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        staticmethod(lambda *a, **k: QtWidgets.QMessageBox.StandardButton.Discard))
    monkeypatch.setattr(QtWidgets.QMessageBox, "critical", staticmethod(lambda *a, **k: None))
    monkeypatch.setattr(QtWidgets.QMessageBox, "about", staticmethod(lambda *a, **k: None))

    def make(**kw):
        from app.designer.main_window import MainWindow

        settings = QtCore.QSettings(str(tmp_path / "settings.ini"), QtCore.QSettings.Format.IniFormat)
        w = MainWindow(registry=registry, settings=settings, autosave_dir=str(tmp_path / "autosave"), **kw)
        qtbot.addWidget(w)
        w.resize(1400, 850)
        w.show()
        return w

    return make


@pytest.fixture
def window(make_window):
    return make_window()


@pytest.fixture
def sample_path():
    from app.designer.main_window import SAMPLE

    return SAMPLE


@pytest.fixture
def ctl(qtbot, registry):
    """An analysis controller with its session thread; stopped and its panels deleted afterwards."""
    from app.analysis.controller import AnalysisController

    c = AnalysisController()
    yield c
    c.stop()
    assert c.proxy.shutdown()
    for w in (c.inputs, c.output, c.params, c.overview_panel, c.inspector, c.debug, c.precision):
        w.deleteLater()


@pytest.fixture
def st(qtbot):
    """An analysis session's proxy (its worker thread started on first use), shut down afterwards."""
    from app.analysis.proxy import SessionProxy

    s = SessionProxy()
    yield s
    assert s.shutdown()
