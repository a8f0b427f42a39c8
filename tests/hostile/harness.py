"""Runs one hostile case: the public ``layerlab`` command inside the case's own folder, and checks what every
case must hold.

A case runs in this process through the console script's entry point (``app.cli.main``), with the case's folder
as working folder, home and cache, its own environment and standard streams, and a time limit (an alarm that
interrupts the command); that keeps several hundred cases to seconds. ``process=True`` runs it as a real process
instead (``python -m app``, as the console script): for what only a process shows (its exit status after a
signal or ``os._exit``, a display that Qt would abort on, a compile in the background), and under a memory limit
(``RLIMIT_AS``, so an unbounded allocation fails instead of exhausting the machine).

Every case asserts: the exit status; that stderr's error line names the culprit; that no Python traceback
appears; that exit status 3 (a bug in LayerLab) is never reached; and that nothing is written outside the
case's folder (the folder holding it is compared before and after)."""
from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: address-space limit of every case (NumPy, OpenBLAS and Numba reserve a few hundred MiB of it at start)
MEMORY_LIMIT = 3 << 30
TIMEOUT_S = 120


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.startswith("layerlab: error:")]


def snapshot(root: Path, skip: Path) -> dict[str, float]:
    """Every path under ``root`` (outside ``skip``) with its modification time."""
    seen: dict[str, float] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == skip:
            dirnames[:] = []
            continue
        for n in [*dirnames, *filenames]:
            p = here / n
            if p == skip:
                continue
            try:
                seen[str(p)] = p.lstat().st_mtime
            except FileNotFoundError:
                pass
    return seen


#: variables of the calling environment a case never sees
HIDDEN = ("DISPLAY", "WAYLAND_DISPLAY", "LAYERLAB_PLUGIN_PATH")


class CaseTimeout(BaseException):
    """A case ran past its time limit (a BaseException: the command's own ``except Exception`` lets it through)."""


def case_env(case_dir: Path, env: dict[str, str] | None) -> dict[str, str]:
    """The environment of a case: the caller's, less :data:`HIDDEN`, with ``case_dir`` as home and cache."""
    full_env = {k: v for k, v in os.environ.items() if k not in HIDDEN}
    full_env.update(PYTHONPATH=str(REPO), HOME=str(case_dir), XDG_CACHE_HOME=str(case_dir / ".cache"),
                    PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1", QT_QPA_PLATFORM="offscreen")
    full_env.update(env or {})
    return full_env


def run_layerlab(args: list[str], case_dir: Path, env: dict[str, str] | None = None, stdin: str | None = None,
                 timeout: float = TIMEOUT_S, memory: int | None = None, process: bool = False) -> Result:
    """``layerlab ARGS`` run with ``case_dir`` as working folder, home and cache: in this process, or as a real
    process under ``memory`` bytes of address space (:data:`MEMORY_LIMIT` unless given) when ``process`` or
    ``memory`` is given (or when this is not the main thread, where no alarm can bound the run)."""
    if process or memory is not None or threading.current_thread() is not threading.main_thread():
        return _run_process(args, case_dir, case_env(case_dir, env), stdin, timeout, memory or MEMORY_LIMIT)
    return _run_in_process(args, case_dir, case_env(case_dir, env), stdin, timeout)


def _run_process(args: list[str], case_dir: Path, env: dict[str, str], stdin: str | None, timeout: float,
                 memory: int) -> Result:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    proc = subprocess.run([sys.executable, "-m", "app", *args], cwd=case_dir, env=env, input=stdin,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _run_in_process(args: list[str], case_dir: Path, env: dict[str, str], stdin: str | None,
                    timeout: float) -> Result:
    from app.cli import main

    out, err = io.StringIO(), io.StringIO()
    stdin_stream = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    with _case_process_state(case_dir, env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            _replaced_stdin(stdin_stream), _shown_warnings(), _time_limit(timeout, args):
        try:
            rc = main(list(args))
        except SystemExit as exc:  # argparse, or a command that exits
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
    return Result(int(rc), out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _case_process_state(case_dir: Path, env: dict[str, str]) -> Iterator[None]:
    """This process's working folder and environment as a process of the case would have them, restored after."""
    saved_env, saved_cwd, saved_bytecode = dict(os.environ), os.getcwd(), sys.dont_write_bytecode
    os.environ.clear()
    os.environ.update(env)
    os.chdir(case_dir)
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.dont_write_bytecode = saved_bytecode


@contextlib.contextmanager
def _replaced_stdin(stream: io.TextIOBase) -> Iterator[None]:
    saved = sys.stdin
    sys.stdin = stream
    try:
        yield
    finally:
        sys.stdin = saved


@contextlib.contextmanager
def _shown_warnings() -> Iterator[None]:
    """Python warnings printed on (the current) stderr under the default filters, as in a fresh process."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with warnings.catch_warnings():
        warnings.resetwarnings()
        warnings.simplefilter("default")
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def _time_limit(seconds: float, args: list[str]) -> Iterator[None]:
    """Interrupt the command after ``seconds`` (again each second, should something swallow the first)."""
    def expire(signum: int, frame: object) -> None:
        raise CaseTimeout(f"layerlab {' '.join(args)} did not finish in {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, *previous_timer)
        signal.signal(signal.SIGALRM, previous)


def check_hostile(res: Result, rc: int, culprit: str | list[str] | None) -> None:
    """What every case holds: exit status ``rc`` (never 3), one error line naming ``culprit``, no traceback."""
    assert res.rc != 3, f"exit status 3 (a bug in LayerLab):\n{res.err}"
    assert "Traceback" not in res.err and "Traceback" not in res.out, res.err
    assert res.rc == rc, f"exit status {res.rc}, expected {rc}\nstdout: {res.out[-2000:]}\nstderr: {res.err[-2000:]}"
    if rc == 2:
        assert len(res.error_lines) == 1, f"expected one error line:\n{res.err}"
        assert len(res.error_lines[0]) < 1000, f"the message is too long: {res.error_lines[0][:300]}..."
    if culprit:
        text = res.error_lines[0] if res.error_lines else res.err + res.out
        for c in [culprit] if isinstance(culprit, str) else culprit:
            assert c in text, f"the message does not name {c!r}: {text}"
