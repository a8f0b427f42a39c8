"""One open model in the designer: the Model, its bridge, its canvas, its file and its live type check."""
from __future__ import annotations

import itertools
from pathlib import Path

from PySide6 import QtCore

from canvas.bridge import ModelBridge
from canvas.graph import ModelCanvas
from engine.custom.scope import scoped
from engine.events import Event, ModifiedChanged, NetworkChanged
from engine.model import Model
from engine.registry import Registry
from engine.run import stored_weights
from engine.tensor import Dims
from engine.typecheck import CheckMemo, Diagnostic, check

_ids = itertools.count(1)


class Document(QtCore.QObject):
    """An open model. ``checked`` is emitted with fresh diagnostics shortly after every edit;
    ``state_changed`` when the title (file name, modified marker) changes."""

    checked = QtCore.Signal(list)
    state_changed = QtCore.Signal()

    def __init__(self, model: Model, registry: Registry, path: str | None = None,
                 parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.id = next(_ids)
        self.model = model
        self.registry = scoped(model, registry, always=True)  # the model's custom layers resolve too
        self.path = path
        self.recovered = False  # opened from an autosave copy: unsaved until saved
        self.bridge = ModelBridge(model, self)
        self.canvas = ModelCanvas(model, self.registry, self.bridge, self)
        self.diagnostics: list[Diagnostic] = []
        self.shapes: dict[str, Dims] = {}
        self._memo = CheckMemo()  # unchanged layers are not checked again
        self._timer = QtCore.QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(40)
        self._timer.timeout.connect(self.run_check)
        self.bridge.event.connect(self._on_event)
        self.run_check()

    @property
    def modified(self) -> bool:
        return self.model.modified or self.recovered

    @property
    def title(self) -> str:
        """File name (or the network name for a new model)."""
        return Path(self.path).name if self.path else f"{self.model.name} (new)"

    def _on_event(self, ev: Event) -> None:
        if isinstance(ev, (ModifiedChanged, NetworkChanged)):
            self.state_changed.emit()
        if not isinstance(ev, ModifiedChanged):
            self._timer.start()

    def run_check(self) -> None:
        """Type-check now (normally called by the debounce timer after edits)."""
        self._timer.stop()
        self.diagnostics = check(self.model, self.registry, self._memo, stored_weights(self.model))
        self.shapes = self._memo.shapes_out
        self.canvas.set_analysis(self.diagnostics, self.shapes)
        self.checked.emit(self.diagnostics)

    def mark_saved(self, path: str) -> None:
        self.path = path
        self.recovered = False
        self.state_changed.emit()

    def close(self) -> None:
        self._timer.stop()
        self.bridge.detach()
