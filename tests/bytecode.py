"""Bytecode for the test run, written once before the test processes start.

On a clean clone no module has bytecode yet, and each parallel test process imported every module of the project
and every test module from source: Python compiled the former and pytest rewrote the latter's asserts (about
15 CPU seconds a process on a 2-core machine, a third of collecting the suite), each process doing all of it
because they collect the same files in the same order at the same time. Here the controlling process writes
that bytecode first, shared out over the machine's cores; the test processes then read it. What is written is
what Python and pytest would write themselves (pytest checks its files by the source's hash and Python its own by
the source's time stamp and size), so a file written here that does not match is simply compiled again."""
from __future__ import annotations

import ast
import importlib.util
import multiprocessing
import os
import py_compile
from pathlib import Path

#: the folders of the repository whose modules the tests import
PACKAGES = ("engine", "app", "canvas", "plugins", "resources", "tests")


def _is_test_module(path: Path) -> bool:
    """A module pytest rewrites the asserts of (``python_files`` at its default, and conftest files)."""
    return path.name == "conftest.py" or (path.name.startswith("test_") or path.name.endswith("_test.py"))


def _pytest_pyc(path: Path) -> Path:
    from _pytest.assertion.rewrite import PYC_TAIL  # noqa: PLC0415

    return path.parent / "__pycache__" / (path.stem + PYC_TAIL)


def _write_rewritten(path: Path) -> None:
    """What pytest's import hook writes for a test module: the module with its asserts rewritten."""
    from _pytest.assertion.rewrite import _write_pyc_fp, rewrite_asserts  # noqa: PLC0415

    pyc = _pytest_pyc(path)
    source = path.read_bytes()
    tree = ast.parse(source, filename=str(path))
    rewrite_asserts(tree, source, str(path), None)
    code = compile(tree, str(path), "exec", dont_inherit=True)
    pyc.parent.mkdir(exist_ok=True)
    partial = pyc.with_name(f"{pyc.name}.{os.getpid()}")
    with open(partial, "wb") as fp:
        _write_pyc_fp(fp, importlib.util.source_hash(source), code)
    os.replace(partial, pyc)


def _compile(paths: list[str]) -> int:
    """Write the bytecode of ``paths``; the number written. A file that cannot be compiled is left to the import
    that reports it."""
    written = 0
    for name in paths:
        path = Path(name)
        try:
            if _is_test_module(path):
                _write_rewritten(path)
            else:
                py_compile.compile(name, cfile=importlib.util.cache_from_source(name), doraise=True)
            written += 1
        except (SyntaxError, py_compile.PyCompileError, OSError, ValueError):
            continue
    return written


def missing(root: Path) -> list[str]:
    """The modules under ``root``'s packages with no bytecode yet (or older than their source)."""
    todo = []
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            if "bench" in path.parts:
                continue
            pyc = _pytest_pyc(path) if _is_test_module(path) else Path(importlib.util.cache_from_source(str(path)))
            try:
                if pyc.stat().st_mtime >= path.stat().st_mtime:
                    continue
            except OSError:
                pass
            todo.append(str(path))
    return todo


def precompile(root: Path, processes: int | None = None) -> int:
    """Write the missing bytecode of the repository at ``root`` in ``processes`` processes (default: one per
    core this process may use); the number of modules written."""
    todo = sorted(missing(root), key=lambda p: -os.path.getsize(p))
    if not todo:
        return 0
    processes = processes or len(os.sched_getaffinity(0))
    if processes < 2 or len(todo) < 8:
        return _compile(todo)
    shares = [todo[i::processes] for i in range(processes)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        return sum(pool.map(_compile, shares))
