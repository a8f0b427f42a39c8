"""The ``case`` fixture: a folder of its own for each hostile case, and the checks every case must pass
(see harness.py): nothing may be written outside the case's folder, in the temporary folder holding it or
in the repository."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.harness import REPO, Result, check_hostile, run_layerlab, snapshot

SAMPLE = REPO / "resources" / "samples" / "denoiser.lnet"


class Case:
    """One hostile case: its folder, helpers to write files into it, and the run of ``layerlab``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "case"
        self.dir.mkdir()

    def write(self, name: str, content: str | bytes) -> Path:
        p = self.dir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
        return p

    def model(self, name: str, layers: str, network: str = 'name="m" version="1.0"', extra: str = "") -> Path:
        """A model file: ``layers`` is the XML inside <layers>; ``extra`` goes after </layers>."""
        return self.write(name, f'<?xml version="1.0" encoding="utf-8"?>\n<network format-version="1" {network}>\n'
                                f"<layers>\n{layers}\n</layers>\n{extra}\n</network>\n")

    def run(self, *args: str, env: dict[str, str] | None = None, **kw) -> Result:
        return run_layerlab([str(a) for a in args], self.dir, env=env, **kw)

    def expect(self, rc: int, culprit: str | list[str] | None, *args: str, env: dict[str, str] | None = None,
               **kw) -> Result:
        """Run ``layerlab ARGS`` and check the exit status, the message and that there is no traceback."""
        res = self.run(*args, env=env, **kw)
        check_hostile(res, rc, culprit)
        return res


def _repo_listing() -> set[str]:
    return {str(p) for p in [*REPO.iterdir(), *(REPO / "resources" / "samples").iterdir()]}


@pytest.fixture
def case(tmp_path):
    c = Case(tmp_path)
    before = snapshot(tmp_path, c.dir)
    repo_before = _repo_listing()
    yield c
    assert snapshot(tmp_path, c.dir) == before, "something was written outside the case's folder"
    assert _repo_listing() == repo_before, "something was written into the repository"


@pytest.fixture
def shown_warnings(monkeypatch) -> list[str]:
    """The texts of the warning boxes the designer shows in the test (none blocks); asked whether to save, the
    designer is told to discard."""
    from PySide6 import QtWidgets

    texts: list[str] = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning",
                        staticmethod(lambda _parent, _title, text, *a, **k: texts.append(text)))
    monkeypatch.setattr(QtWidgets.QMessageBox, "question",
                        staticmethod(lambda *a, **k: QtWidgets.QMessageBox.StandardButton.Discard))
    return texts


@pytest.fixture
def designer(qtbot, tmp_path):
    """Opens a designer window, the plugins loaded afresh, with the settings file ``settings_file`` (by default
    settings.ini in tmp_path) and its autosave folder in tmp_path."""
    from PySide6 import QtCore

    from app.designer.main_window import MainWindow
    from engine.plugins import load_plugins

    def open_window(settings_file: str | None = None) -> MainWindow:
        settings = QtCore.QSettings(settings_file or str(tmp_path / "settings.ini"), QtCore.QSettings.Format.IniFormat)
        window = MainWindow(registry=load_plugins(), settings=settings, autosave_dir=str(tmp_path / "autosave"))
        qtbot.addWidget(window)
        window.show()
        return window
    return open_window


def conv(name: str, src: str, extra: str = "", channels: int = 4) -> str:
    """XML of a convolution layer."""
    return (f'<layer name="{name}" type="convolution"><param name="num_output_channels" value="{channels}"/>'
            f'{extra}<input index="0" source="{src}"/></layer>')


def inp(name: str = "input", dims: str = "1x3x16x16") -> str:
    return f'<layer name="{name}" type="input"><param name="dimensions" value="{dims}"/></layer>'


def out(src: str, name: str = "output") -> str:
    return f'<layer name="{name}" type="output"><input index="0" source="{src}"/></layer>'


SMALL = "\n".join([inp(), conv("c1", "input"), out("c1")])
