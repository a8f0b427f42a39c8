"""File > Open Recent: the last model files opened or saved, kept in the settings (``recent``)."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets

MAX_RECENT = 10


class RecentFiles(QtCore.QObject):
    """The Open Recent menu over the settings' list; choosing an entry calls ``open_path``."""

    def __init__(self, settings: QtCore.QSettings, menu: QtWidgets.QMenu,
                 open_path: Callable[[str | os.PathLike[str]], Any]) -> None:
        super().__init__(menu)
        self.settings = settings
        self.menu = menu
        self.open_path = open_path
        menu.aboutToShow.connect(self.fill)
        self.fill()

    def files(self) -> list[str]:
        """The remembered files, the latest first."""
        value = self.settings.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in value or []]

    def add(self, path: str) -> None:
        """Put ``path`` first (at most ``MAX_RECENT`` are kept)."""
        files = [path] + [p for p in self.files() if p != path]
        self.settings.setValue("recent", files[:MAX_RECENT])
        self.fill()

    def fill(self) -> None:
        """Rebuild the menu from the settings."""
        self.menu.clear()
        files = self.files()
        for p in files:
            act = self.menu.addAction(Path(p).name)
            act.setToolTip(p)
            act.setStatusTip(p)
            act.triggered.connect(lambda _c=False, p=p: self.open_path(p))
        if not files:
            self.menu.addAction("(none)").setEnabled(False)
        else:
            self.menu.addSeparator()
            self.menu.addAction("Clear Menu", lambda: (self.settings.setValue("recent", []), self.fill()))
