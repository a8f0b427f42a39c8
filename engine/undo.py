"""The undo stack of a model document: commands (a text, a do and an undo), macros that group several into one
step, and the index of the state last saved, so that "modified" follows undo and redo."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Command:
    """One edit: ``do`` applies it, ``undo`` reverts it; ``text`` names it in the Edit menu."""

    text: str
    do: Callable[[], None]
    undo: Callable[[], None]


@dataclass
class Macro:
    """Commands undone and redone as one step."""

    text: str
    commands: list[Command] = field(default_factory=list)

    def do(self) -> None:
        for c in self.commands:
            c.do()

    def undo(self) -> None:
        for c in reversed(self.commands):
            c.undo()


class UndoStack:
    """Applied commands with a position: undo moves back, redo forward, a new command drops what was undone."""

    def __init__(self) -> None:
        self._steps: list[Command | Macro] = []
        self._index = 0
        self._clean = 0
        self._macro: Macro | None = None
        self._depth = 0

    @property
    def modified(self) -> bool:
        """The state differs from the one last marked clean (saved)."""
        return self._index != self._clean

    def mark_clean(self) -> None:
        self._clean = self._index

    def can_undo(self) -> bool:
        return self._index > 0

    def can_redo(self) -> bool:
        return self._index < len(self._steps)

    def undo_text(self) -> str:
        return self._steps[self._index - 1].text if self.can_undo() else ""

    def redo_text(self) -> str:
        return self._steps[self._index].text if self.can_redo() else ""

    def undo(self) -> None:
        if self.can_undo():
            self._index -= 1
            self._steps[self._index].undo()

    def redo(self) -> None:
        if self.can_redo():
            self._steps[self._index].do()
            self._index += 1

    @contextmanager
    def macro(self, text: str, record: Callable[[Macro], None]) -> Iterator[None]:
        """Group the commands pushed inside into one step, handed to ``record`` when the outermost macro ends."""
        if self._macro is None:
            self._macro = Macro(text)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                macro, self._macro = self._macro, None
                if macro.commands:
                    record(macro)

    def push(self, cmd: Command) -> bool:
        """Apply ``cmd``; inside a macro it joins the macro (False), else it is a step of its own to record (True)."""
        cmd.do()
        if self._macro is not None:
            self._macro.commands.append(cmd)
            return False
        return True

    def record(self, step: Command | Macro) -> None:
        """Add an applied step at the current position, dropping the steps that were undone."""
        del self._steps[self._index:]
        if self._clean > self._index:
            self._clean = -1  # the clean state can no longer be reached
        self._steps.append(step)
        self._index += 1

    def clear(self) -> None:
        self._steps.clear()
        self._index = self._clean = 0
