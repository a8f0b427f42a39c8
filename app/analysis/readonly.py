"""Read-only models during analysis: each locked Model gets a ``read_only`` reason, so every edit,
undo and redo is refused with ReadOnlyError (a LayerLabError, reported like any refused edit) and the
reason goes to the status bar through ``notify``. The guard hears of refused edits through each model's
bridge (``canvas.bridge.ModelBridge``), like every other view."""
from __future__ import annotations

from collections.abc import Callable

from canvas.bridge import ModelBridge
from engine.events import EditRefused, Event
from engine.model import Model, ReadOnlyError

MESSAGE = "Analysis is running: the models are read-only (Stop Analysis to edit)"

__all__ = ["MESSAGE", "ReadOnlyError", "ReadOnlyGuard"]


class ReadOnlyGuard:
    """Locks models against edits; ``notify(message)`` is called for every refused edit."""

    def __init__(self, notify: Callable[[str], None] | None = None) -> None:
        self.notify = notify
        self.locked: list[ModelBridge] = []

    def lock(self, bridges: list[ModelBridge]) -> None:
        """Make the model of each bridge read-only (once each) and listen for refused edits."""
        for bridge in bridges:
            if self.is_locked(bridge.model):
                continue
            bridge.model.read_only = "while analysis runs"
            bridge.event.connect(self._on_event)
            self.locked.append(bridge)

    def unlock(self) -> None:
        for bridge in self.locked:
            bridge.model.read_only = None
            bridge.event.disconnect(self._on_event)
        self.locked = []

    def _on_event(self, event: Event) -> None:
        if isinstance(event, EditRefused):
            self.refused()

    def is_locked(self, model: Model) -> bool:
        return any(b.model is model for b in self.locked)

    def refused(self) -> None:
        """Tell the user why an edit was refused."""
        if self.notify is not None:
            self.notify(MESSAGE)
