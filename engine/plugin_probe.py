"""Trying a plugin in a separate process before it is loaded into a running program.

A plugin is Python code: once imported, nothing stops it from ending the process (``os._exit``), crashing it (a
segmentation fault in native code) or never returning (a loop at import). On the command line that is the user's
own trusted code and the command ends or hangs with it. A long-running program (the designer) instead first loads a
new plugin in a child process, through the same loader (``engine.plugins.load_plugin_entry``), with a time limit:
only a plugin whose child ends normally is then loaded into the program itself. ``probe_key`` names a plugin's
current files (path, modification times, sizes), so that a plugin that passed is not tried again until it changes.
Qt-free."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from engine.limits import cut

#: how long a plugin may take to import and register in the child process, in seconds
PROBE_TIMEOUT_S = 15.0
_MARK = "layerlab-probe-result:"
_ROOT = Path(__file__).resolve().parent.parent  # the folder holding the engine package


@dataclass(frozen=True)
class ProbeResult:
    """What a child process that loaded plugin ``entry`` found: ``ok`` when it loaded and the process ended
    normally; otherwise ``reason`` says what went wrong and ``kind`` what sort of thing it was: ``"crashed"``,
    ``"exited"``, ``"hung"`` (it would have taken the program down) or ``"failed"`` (the loader caught it: an
    exception at import or registration, as it would in the program)."""

    entry: str
    ok: bool
    reason: str = ""
    collections: tuple[str, ...] = ()
    kind: str = "ok"

    @property
    def fatal(self) -> bool:
        """Loading it into the program would have crashed, ended or hung the program."""
        return self.kind in ("crashed", "exited", "hung")

    def __str__(self) -> str:
        if self.ok:
            return f"plugin {self.entry}: loads ({', '.join(self.collections) or 'no collection'})"
        return f"plugin {self.entry} refused: {self.reason}"


def probe_key(entry: str | os.PathLike[str]) -> str:
    """A key naming plugin ``entry`` (a ``*.py`` file or a package folder) as its files are now: its resolved path,
    and the modification time and size of each of its ``*.py`` files. Any edit gives another key."""
    path = Path(entry).resolve()
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    parts = [str(path)]
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        parts.append(f"{f.relative_to(path) if path.is_dir() else f.name}:{st.st_mtime_ns}:{st.st_size}")
    return "|".join(parts)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def probe_entry(entry: str | os.PathLike[str], timeout: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Load plugin ``entry`` in a child process (same interpreter, same loader) that is killed after ``timeout``
    seconds; the result says whether loading it into this process is safe, and if not, why."""
    entry = str(Path(entry).resolve())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)])
    env.setdefault("QT_QPA_PLATFORM", "offscreen")  # a plugin's Qt extras must not open a window
    code = "import sys; from engine.plugin_probe import _child; _child(sys.argv[1])"
    proc = subprocess.Popen([sys.executable, "-c", code, entry], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(Path(entry).parent), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return ProbeResult(entry, False, f"it did not finish loading within {timeout:g} s (a loop or a wait at "
                                         "import?); it was stopped and not loaded", kind="hung")
    rc = proc.returncode
    if rc < 0:
        return ProbeResult(entry, False, f"loading it crashed the process ({_signal_name(-rc)}); it was not loaded",
                           kind="crashed")
    found = None
    for line in out.decode("utf-8", "replace").splitlines():
        if line.startswith(_MARK):
            found = line[len(_MARK):]
    if found is None or rc != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        detail = f": {cut(last[0], 200)[1:-1]}" if last[0] else ""
        return ProbeResult(entry, False, f"loading it ended the process with exit status {rc} (os._exit at "
                                         f"import?){detail}; it was not loaded", kind="exited")
    try:
        data = json.loads(found)
        names, failures = tuple(data["collections"]), list(data["failures"])
    except (ValueError, KeyError, TypeError):
        return ProbeResult(entry, False, "the process that loaded it reported nonsense; it was not loaded",
                           kind="exited")
    if failures:
        return ProbeResult(entry, False, str(failures[0]), names, kind="failed")
    return ProbeResult(entry, True, "", names)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child and whatever it started (its own process group), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _child(entry: str) -> None:
    """In the child process: load ``entry`` into a fresh registry and print what came of it."""
    from engine.plugins import load_plugin_entry  # noqa: PLC0415 - only the child needs the loader
    from engine.registry import Registry  # noqa: PLC0415

    registry = Registry()
    load_plugin_entry(registry, entry)
    result = {"collections": sorted(registry.plugins), "failures": [f.reason for f in registry.failures]}
    sys.stdout.write("\n" + _MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)  # the plugin's exit handlers and threads are not the probe's business


__all__ = ["PROBE_TIMEOUT_S", "ProbeResult", "probe_entry", "probe_key"]
