"""``layerlab`` run in this process (``app.cli.main``), for tests that run it hundreds of times: the exit status,
what it printed, and a time limit (SIGALRM) so that a case that hangs fails instead of stopping the suite."""
from __future__ import annotations

import contextlib
import io
import signal
from dataclasses import dataclass
from pathlib import Path


class Hang(Exception):
    """The command ran past its time limit."""


@dataclass
class Outcome:
    rc: int
    out: str
    err: str


def layerlab(args: list[str | Path], timeout: float = 30.0) -> Outcome:
    """Run ``layerlab ARGS`` in this process; an uncaught exception propagates (a bug in itself), SystemExit gives
    its code, and running past ``timeout`` seconds raises :class:`Hang`."""
    from app.cli import main  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()

    def alarm(signum: int, frame: object) -> None:
        raise Hang(f"layerlab {' '.join(map(str, args))} ran past {timeout} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stderr(err):
            try:
                rc = main([str(a) for a in args], out=out)
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 2
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return Outcome(rc, out.getvalue(), err.getvalue())


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and modification time (to see what a command wrote)."""
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}
