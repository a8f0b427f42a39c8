"""Read-only models during analysis: each locked Model gets a ``read_only`` reason, so every edit,
undo and redo is refused with ReadOnlyError (a LayerLabError, reported like any refused edit) and the
reason goes to the status bar through ``notify``."""
from __future__ import annotations

from collections.abc import Callable

from engine.model import Event, Model, ReadOnlyError

MESSAGE = "Analysis is running: the models are read-only (Stop Analysis to edit)"

__all__ = ["MESSAGE", "ReadOnlyError", "ReadOnlyGuard"]


class ReadOnlyGuard:
    """Locks models against edits; ``notify(message)`` is called for every refused edit."""

    def __init__(self, notify: Callable[[str], None] | None = None) -> None:
        self.notify = notify
        self.locked: list[Model] = []

    def lock(self, models: list[Model]) -> None:
        for model in models:
            if any(m is model for m in self.locked):
                continue
            model.read_only = "while analysis runs"
            model.events.connect(self._on_event)
            self.locked.append(model)

    def unlock(self) -> None:
        for model in self.locked:
            model.read_only = None
            model.events.disconnect(self._on_event)
        self.locked = []

    def _on_event(self, event: Event) -> None:
        if event.kind == "edit_refused":
            self.refused()

    def is_locked(self, model: Model) -> bool:
        return any(m is model for m in self.locked)

    def refused(self) -> None:
        """Tell the user why an edit was refused."""
        if self.notify is not None:
            self.notify(MESSAGE)
