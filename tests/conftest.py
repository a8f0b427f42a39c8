from __future__ import annotations

import fcntl
import functools
import gc
import importlib.util
import os
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Python's bytecode cache on in the test processes and the processes tests start: where the environment turns it off
# (PYTHONDONTWRITEBYTECODE), every one of them compiles the engine's modules from source again, and pytest rewrites
# every test module's asserts again in each test process.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

import pytest  # noqa: E402

from engine.backends import cupy_usable  # noqa: E402

#: the packages a test needs Qt for (the GPU machine has none of them)
QT_PACKAGES = ("PySide6", "NodeGraphQt", "pyqtgraph")
HAVE_QT = importlib.util.find_spec("PySide6") is not None


@functools.cache
def _module_uses_qt(module: types.ModuleType) -> bool:
    """Whether ``module`` holds a name from the Qt packages (once per module, not once per test)."""
    return any((getattr(v, "__module__", None) or getattr(v, "__name__", "") or "").split(".")[0] in QT_PACKAGES
               for v in vars(module).values() if not isinstance(v, (str, int, float, bytes)))


def _needs_qt(item: pytest.Item) -> bool:
    """A test needs Qt when it asks for a QApplication (``qtbot``, directly or through a fixture) or its module
    holds a name from the Qt packages."""
    if "qtbot" in getattr(item, "fixturenames", ()):
        return True
    module = getattr(item, "module", None)
    return module is not None and _module_uses_qt(module)


#: said once per run where the GPU tests are left out
NO_GPU = "no usable CUDA GPU (CuPy backend): the tests marked gpu are deselected"


def pytest_report_header(config: pytest.Config) -> str | None:
    return None if cupy_usable() else NO_GPU


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The run's last lines say that the GPU tests were left out (the header is not shown with ``-q``)."""
    if not cupy_usable():
        terminalreporter.write_line(NO_GPU)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``qt`` marker on the tests that need Qt (``-m "not qt"`` runs the Qt-free ones). Where no CUDA GPU is
    usable the GPU tests are deselected (the header and the run's last lines say so), as ``-m "not gpu"`` would:
    each would only be skipped, and a skipped test still goes through the whole run protocol (a third of the suite:
    7 CPU seconds on 2 cores)."""
    qt_skip = None if HAVE_QT else pytest.mark.skip(reason="qt: needs PySide6, which is not installed")
    if not cupy_usable():
        gpu = [item for item in items if "gpu" in item.keywords]
        if gpu:
            items[:] = [item for item in items if "gpu" not in item.keywords]
            config.hook.pytest_deselected(items=gpu)
    for item in items:
        if _needs_qt(item):
            item.add_marker(pytest.mark.qt)
            if qt_skip is not None:
                item.add_marker(qt_skip)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """Where Qt is not installed (the GPU machine), a test module that cannot import a Qt package is skipped as
    ``qt`` instead of failing to collect."""
    report = yield
    if not HAVE_QT and report.failed and isinstance(collector, pytest.Module):
        text = str(report.longrepr)
        missing = [p for p in QT_PACKAGES if re.search(rf"ModuleNotFoundError: .*\b{p}\b", text)]
        if missing:
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), 0, f"Skipped: qt: needs {missing[0]}, which is not installed")
    return report


def _warm_family(family: str, blocking: bool) -> bool:
    """Compile the CPU kernels of ``family`` (:data:`engine.backends.cpu.warmup.FAMILIES`) where Numba's cache lacks
    them, holding that family's lock (loading what another process compiled meanwhile). Not ``blocking``: False,
    doing nothing, where another process holds it."""
    from engine.backends.cpu import warmup
    from engine.backends.cpu.compile_cache import warmup_lock_path

    with open(warmup_lock_path(family), "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        try:
            warmup.warm([family])  # (its kernels cached: it loads them, in seconds)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return True


@pytest.fixture(scope="session", autouse=True)
def _cpu_kernels_compiled() -> None:
    """Compile the CPU kernels before the first test, as the designer does at its first start: on a clean clone
    Numba takes minutes, which tests waiting on a worker thread or a process with a time limit must not spend, and
    test processes compiling the same kernel at once would each spend them. Parallel test processes share the
    kernel families out (a lock per family): each compiles the families no other has taken, then waits for the
    others' (and loads them)."""
    from engine.backends.cpu import warmup
    from engine.backends.cpu.backend import cpu_kernels

    if cpu_kernels() is None or not warmup.needed():
        return
    taken = [family for family in warmup.FAMILIES if not _warm_family(family, blocking=False)]
    for family in taken:
        _warm_family(family, blocking=True)


@pytest.fixture(scope="module", autouse=True)
def _gpu_memory_given_back(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test module, the GPU memory this process's CuPy pools and PyTorch's caching allocator keep for
    reuse goes back to the device: parallel test processes share one GPU, and a pool never shrinks on its own (one
    module's large network would hold its memory for the rest of the run, failing the other processes' allocations).
    With ``LAYERLAB_TEST_GPU_MEMORY_LOG`` set to a file, each module's largest pool is appended to it first."""
    yield
    held = 0
    if "cupy" in sys.modules:
        gc.collect()  # arrays a failed run's traceback still reached
        cupy = sys.modules["cupy"]
        try:
            pool = cupy.get_default_memory_pool()
            held = pool.total_bytes()
            pool.free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001 - no usable device: nothing held
            pass
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None and torch.cuda.is_initialized():
        held += torch.cuda.memory_reserved()
        torch.cuda.empty_cache()
    log = os.environ.get("LAYERLAB_TEST_GPU_MEMORY_LOG")
    if log and held:
        with open(log, "a") as f:
            f.write(f"{held / 2**30:8.2f} GiB {os.environ.get('PYTEST_XDIST_WORKER', '')} "
                    f"{request.node.nodeid}\n")


@pytest.fixture(autouse=True)
def _own_cache_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test process its own user cache folder (notices given, timing choices): tests neither read what the
    user's runs or a parallel test process left there nor write into the user's."""
    cache = tmp_path_factory.getbasetemp() / "user-cache"
    cache.mkdir(exist_ok=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))


@pytest.fixture(scope="session")
def registry():
    from engine.plugins import load_plugins

    reg = load_plugins()
    assert not reg.failures, reg.failures
    return reg


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Clear the clipboard and destroy every widget while the QApplication still exists: a clipboard
    still holding our mime data when Qt shuts down (offscreen platform) ends the process with a segfault."""

    if "PySide6.QtWidgets" not in sys.modules:
        return
    from PySide6 import QtCore, QtWidgets

    app = QtWidgets.QApplication.instance()
    if app is None:
        return
    QtWidgets.QApplication.clipboard().clear()
    for widget in QtWidgets.QApplication.topLevelWidgets():
        widget.deleteLater()  # no close(): a window with unsaved changes would ask
    gc.collect()
    QtCore.QCoreApplication.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)
    app.processEvents()
    gc.collect()
