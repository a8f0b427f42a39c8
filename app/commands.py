"""Command dispatch for worker objects: ``cmd_<name>(payload)`` methods run in the worker thread."""
from __future__ import annotations

import traceback
from collections.abc import Callable

from engine.errors import LayerLabError


def dispatch(target: object, what: str, command: str, payload: object, fail: Callable[[str, str], None]) -> None:
    """Run ``target.cmd_<command>(payload)`` in the calling (worker) thread; user errors and bugs are
    reported through ``fail(command, message)``, never raised, so the thread survives them."""
    method = getattr(target, f"cmd_{command}", None)
    if method is None:
        fail(command, f"{what} has no command {command!r}")
        return
    try:
        method(payload)
    except LayerLabError as exc:
        fail(command, str(exc))
    except Exception as exc:  # a bug must not kill the worker thread
        traceback.print_exc()
        fail(command, f"internal error: {type(exc).__name__}: {exc}")
