"""One logger tree for the engine and the plugins (Python's ``logging``).

Every logger is a child of ``layerlab``: ``layerlab.engine.<module>`` for the engine's modules (``layerlab.app.<module>``
for the command line and the designer) and
``layerlab.plugins.<module>`` for plugin code (``plugins.standard.convolution`` ->
``layerlab.plugins.standard.convolution``; a third-party package ``acme.layers`` -> ``layerlab.plugins.acme.layers``).
``get_logger(__name__)`` gives the right one from any module; a layer logs through ``Layer.log``, which adds the
layer's name to each record (``record.layer``), so the type check can show a plugin's warnings on its layer.

What reads the tree: the command line (``configure``: ``-q`` errors only, default warnings, ``-v`` info, ``-vv``
debug, printed as ``layerlab: warning: ...``), the designer's Log dock (a handler of its own) and the type check
(``collect``: the warnings records of a block of code). The engine never configures handlers itself."""
from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

ROOT = "layerlab"
#: verbosity (``-q`` = -1, default 0, ``-v`` = 1, ``-vv`` = 2) -> the least level shown
LEVELS = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG}
#: the tree's root, made first so every module's logger hangs under it
TREE = logging.getLogger(ROOT)


def logger_name(module: str) -> str:
    """The name in the tree of module ``module`` (engine and plugin modules, and third-party plugins)."""
    if module == ROOT or module.startswith(ROOT + "."):
        return module
    if module.split(".")[0] in ("engine", "plugins", "app", "canvas"):
        return f"{ROOT}.{module}"
    return f"{ROOT}.plugins.{module}"


def get_logger(module: str) -> logging.Logger:
    """The logger of ``module`` (pass ``__name__``) in LayerLab's tree."""
    return logging.getLogger(logger_name(module))


def level_of(verbosity: int) -> int:
    """The least level shown at ``verbosity`` (clamped to -1..2)."""
    return LEVELS[max(-1, min(2, verbosity))]


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the current ``sys.stderr`` (which tests may replace after the handler was made)."""

    def __init__(self, level: int) -> None:
        super().__init__(sys.stderr)
        self.setLevel(level)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        kind = {logging.WARNING: "warning", logging.ERROR: "error", logging.CRITICAL: "error"}.get(record.levelno)
        text = record.getMessage()
        if record.levelno < logging.WARNING:
            return f"layerlab: [{record.name.removeprefix(ROOT + '.')}] {text}"
        return f"layerlab: {kind}: {text}"


def configure(verbosity: int = 0) -> logging.Handler:
    """Print the tree's records at ``verbosity`` on stderr (the command line); replaces a handler set before."""
    root = logging.getLogger(ROOT)
    for h in list(root.handlers):
        if isinstance(h, _StderrHandler):
            root.removeHandler(h)
    handler = _StderrHandler(level_of(verbosity))  # its own level: a Log dock may open the tree further
    handler.setFormatter(_Format())
    root.addHandler(handler)
    root.setLevel(level_of(verbosity))
    root.propagate = False
    return handler


class _Sinks(logging.Handler):
    """The one handler every :func:`collect` block of a logger shares: each open block is a (level, records) sink,
    and a record goes to every open sink of its level or below, from whichever thread it comes. Attached once;
    a block only adds and removes its sink. A handler made, attached and detached per block, and the tree's level set
    back at every block's end (which clears the cached levels of every logger in the process), took 16-17 us a block
    against 3-5 (127 loggers, PyTorch imported); the type check opens two blocks a layer."""

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.sinks: list[tuple[int, list[logging.LogRecord]]] = []

    def emit(self, record: logging.LogRecord) -> None:
        for level, records in list(self.sinks):
            if record.levelno >= level:
                records.append(record)


_SINKS: dict[str, _Sinks] = {}


def _sinks_of(name: str) -> _Sinks:
    handler = _SINKS.get(name)
    if handler is None:
        handler = _SINKS.setdefault(name, _Sinks())
        logging.getLogger(name).addHandler(handler)
    return handler


@contextlib.contextmanager
def collect(level: int = logging.WARNING, name: str = ROOT) -> Iterator[list[logging.LogRecord]]:
    """The records of ``level`` and above that ``name``'s loggers emit inside the block (also when the tree's level
    would drop them: the tree is opened to ``level`` for the block)."""
    root = logging.getLogger(name)
    sinks = _sinks_of(name)
    sink: tuple[int, list[logging.LogRecord]] = (level, [])
    old = root.level
    opened = root.getEffectiveLevel() > level
    if opened:
        root.setLevel(level)
    sinks.sinks.append(sink)
    try:
        yield sink[1]
    finally:
        for i in range(len(sinks.sinks) - 1, -1, -1):  # this block's own sink (another may hold equal records)
            if sinks.sinks[i] is sink:
                del sinks.sinks[i]
                break
        if opened:
            root.setLevel(old)


__all__ = ["LEVELS", "ROOT", "collect", "configure", "get_logger", "level_of", "logger_name"]
