"""How a backend serves an operation: its candidates as rows of one table, one selector that picks the
candidate for a problem (timing them where more than one applies), and the typed result a kernel returns.

Every backend operation (``conv2d``, ``pool2d``, ...) is a :class:`OperationTable`: an ordered list of
:class:`Candidate` rows, each a name (what a profile shows), an ``applies`` test, a ``prepare`` step that derives
what the candidate needs from the weights (cached by the caller), and a ``launch``. The table asks its
:class:`Selector` which applicable row to run: with one row there is nothing to choose; with several, the selector
times each once on the real buffers (where the backend can time) and keeps the fastest. Choices are cached in
memory and on disk (one JSON file per device, driver and LayerLab version under the user's cache folder), so a
second process does not time again."""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

#: bump when the meaning of a cached choice changes (candidate names, keys)
CACHE_FORMAT = 2


@dataclasses.dataclass(frozen=True)
class Launched:
    """What a kernel returns when it served the call: which candidate ran and, where the whole operation is one
    call that can run again on the same arrays, that call (the network may replay it instead of the layer's
    ``forward``). A kernel that does not serve a case returns None (the caller falls back)."""

    candidate: str
    replay: Callable[[], None] | None = None


_served: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("served_candidates", default=None)


@contextlib.contextmanager
def served_candidates() -> Iterator[list[str]]:
    """Collect the names of the candidates that serve operations run inside the block, in order: how a profile
    learns which candidate computed a layer (layers never know)."""
    names: list[str] = []
    token = _served.set(names)
    try:
        yield names
    finally:
        _served.reset(token)


def note_served(candidate: str) -> None:
    """Tell an open ``served_candidates`` block (if any) that ``candidate`` served an operation."""
    names = _served.get()
    if names is not None:
        names.append(candidate)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One way to compute an operation.

    ``applies(problem)`` is cheap and pure; ``prepare(problem)`` derives what the candidate needs from the
    problem's weights (None: nothing to derive); ``launch(problem, prepared)`` runs it and returns a
    :class:`Launched` (or None when it declines at run time, e.g. a library without a plan for the case)."""

    name: str
    applies: Callable[[Any], bool]
    launch: Callable[[Any, Any], Launched | None]
    prepare: Callable[[Any], Any] | None = None


def settings_key() -> str:
    """The LayerLab version the cached choices belong to."""
    try:
        from importlib.metadata import version
        return version("layerlab")
    except Exception:  # running from a source tree that was never installed
        return "source"


def cache_folder() -> Path:
    """The user's cache folder for LayerLab (``$XDG_CACHE_HOME/layerlab``, else ``~/.cache/layerlab``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "layerlab"


class Selector:
    """Chooses among the applicable candidates of an operation for one problem key and remembers the choice,
    in memory and in ``path`` (a JSON file; None keeps choices in memory only). ``identity`` names the device,
    driver and LayerLab version: a file written for another identity is ignored."""

    def __init__(self, path: Path | None, identity: str) -> None:
        self.path = path
        self.identity = identity
        self._lock = threading.Lock()
        self._choices: dict[str, str] = self._load()

    def _load(self) -> dict[str, str]:
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("identity") != self.identity or data.get("format") != CACHE_FORMAT:
            return {}
        choices = data.get("choices")
        return {str(k): str(v) for k, v in choices.items()} if isinstance(choices, dict) else {}

    def _save(self) -> None:
        if self.path is None:
            return
        # another process may have written choices since this one loaded the file: keep them (ours win on a clash)
        self._choices = {**self._load(), **self._choices}
        with contextlib.suppress(OSError):  # a read-only cache folder only costs timing again next time
            from engine.atomic import atomic_write_text
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps({"format": CACHE_FORMAT, "identity": self.identity,
                                                     "choices": self._choices}, indent=0, sort_keys=True),
                              what="kernel choice cache")

    def known(self, op: str, key: Hashable) -> str | None:
        """The remembered choice for ``key`` of ``op``, or None."""
        return self._choices.get(f"{op}|{key!r}")

    def choose(self, op: str, key: Hashable, names: Sequence[str], time: Callable[[str], float | None] | None,
               default: str) -> str:
        """The candidate to run for ``key``: the remembered one when it is still among ``names``; else, where
        ``time`` is given, the fastest by ``time(name)`` (None: it declined), remembered; else ``default``."""
        tag = f"{op}|{key!r}"
        chosen = self._choices.get(tag)
        if chosen in names:
            return chosen
        if time is None or len(names) < 2:
            return default if default in names or not names else names[0]
        with self._lock:
            chosen = self._choices.get(tag)
            if chosen in names:
                return chosen
            times = {name: time(name) for name in names}
            done = {name: t for name, t in times.items() if t is not None}
            chosen = min(done, key=done.__getitem__) if done else (default if default in names else names[0])
            self._choices[tag] = chosen
            self._save()
        return chosen


class OperationTable:
    """The candidates of one operation on one backend, in order of preference, and the selector that picks."""

    def __init__(self, op: str, candidates: Sequence[Candidate], selector: Selector) -> None:
        names = [c.name for c in candidates]
        if len(set(names)) != len(names):
            raise ValueError(f"operation {op!r}: candidate names repeat ({', '.join(names)})")
        self.op = op
        self.candidates = tuple(candidates)
        self.selector = selector

    def applicable(self, problem: Any) -> list[Candidate]:
        """The rows whose ``applies`` accepts ``problem``, in table order."""
        return [c for c in self.candidates if c.applies(problem)]

    def run(self, problem: Any, key: Hashable, prepared: Callable[[Candidate], Any],
            time: Callable[[Candidate, Any], float | None] | None = None) -> Launched | None:
        """Run the chosen applicable candidate on ``problem``; where it declines, the next ones in table order.
        ``prepared(candidate)`` gives the candidate's prepared weights (the caller caches them); ``time`` (None:
        do not time, e.g. during graph capture) measures one candidate in milliseconds."""
        rows = self.applicable(problem)
        if not rows:
            return None
        by_name = {c.name: c for c in rows}
        timer = None if time is None else (lambda name: time(by_name[name], prepared(by_name[name])))
        first = self.selector.choose(self.op, key, [c.name for c in rows], timer, rows[0].name)
        order = [by_name[first]] + [c for c in rows if c.name != first]
        for cand in order:
            done = cand.launch(problem, prepared(cand))
            if done is not None:
                note_served(done.candidate)
                return done
        return None
