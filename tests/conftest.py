from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from engine.backends import cupy_usable  # noqa: E402

try:  # the GPU machine has no Qt: GUI tests are collected only where PySide6 imports
    import PySide6  # noqa: F401

    collect_ignore_glob: list[str] = []
except ImportError:
    collect_ignore = ["canvas"]
    collect_ignore_glob = ["app/test_[!c]*.py", "app/test_c[!l]*.py"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if cupy_usable():
        return
    skip = pytest.mark.skip(reason="no usable CUDA GPU (CuPy backend)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _cpu_kernels_compiled():
    """Compile the CPU kernels once, before any test, as the designer does at its first start: on a clean clone
    Numba takes about half a minute, which tests waiting on a worker thread with a timeout must not spend."""
    from engine.backends.cpu import warmup

    if warmup.needed():
        warmup.warm()


@pytest.fixture(scope="session")
def registry():
    from engine.plugins import load_plugins

    reg = load_plugins()
    assert not reg.failures, reg.failures
    return reg


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Clear the clipboard and destroy every widget while the QApplication still exists: a clipboard
    still holding our mime data when Qt shuts down (offscreen platform) ends the process with a segfault."""
    import gc
    import sys

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
