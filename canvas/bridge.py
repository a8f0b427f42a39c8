"""The one bridge between a Model's plain-Python events and Qt signals."""
from __future__ import annotations

from PySide6 import QtCore

from engine.events import Event
from engine.model import Model


class ModelBridge(QtCore.QObject):
    """Re-emits every event of one Model (an ``engine.events.Event``) as the Qt signal ``event``; views and
    dialogs connect to this, never to the Model."""

    event = QtCore.Signal(object)

    def __init__(self, model: Model, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.model = model
        model.events.connect(self._on_event)

    def _on_event(self, event: Event) -> None:
        self.event.emit(event)

    def detach(self) -> None:
        """Stop listening to the model (when its document closes)."""
        try:
            self.model.events.disconnect(self._on_event)
        except ValueError:
            pass
