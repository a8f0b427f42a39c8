"""Runs one hostile case: the public ``layerlab`` command (``python -m app``, as the console script) in a
subprocess, inside the case's own folder, under a memory limit, and checks what every case must hold.

Every case asserts: the exit status; that stderr's error line names the culprit; that no Python traceback
appears; that exit status 3 (a bug in LayerLab) is never reached; that nothing is written outside the
case's folder (the folder holding it is compared before and after); and that memory stays bounded (the
process runs under ``RLIMIT_AS``, so an unbounded allocation fails instead of exhausting the machine)."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
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


def run_layerlab(args: list[str], case_dir: Path, env: dict[str, str] | None = None, stdin: str | None = None,
                 timeout: float = TIMEOUT_S, memory: int = MEMORY_LIMIT) -> Result:
    """``layerlab ARGS`` run with ``case_dir`` as working folder, home and cache, under the memory limit."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "LAYERLAB_PLUGIN_PATH")}
    full_env.update(PYTHONPATH=str(REPO), HOME=str(case_dir), XDG_CACHE_HOME=str(case_dir / ".cache"),
                    PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1", QT_QPA_PLATFORM="offscreen")
    full_env.update(env or {})

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    proc = subprocess.run([sys.executable, "-m", "app", *args], cwd=case_dir, env=full_env, input=stdin,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit)
    return Result(proc.returncode, proc.stdout, proc.stderr)


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
