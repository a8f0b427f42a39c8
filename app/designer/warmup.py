"""The first start after installing: the CPU kernels are compiled in another process (``engine.backends.cpu.warmup``) so
that the first CPU inference starts at once; the status bar says so and says when it ends."""
from __future__ import annotations

from typing import Any

from PySide6 import QtCore

from app.designer.context import Controller, DesignerContext


class KernelWarmup(Controller):
    """The background compile (``process``, None when none was needed) and the timer that watches it."""

    def __init__(self, ctx: DesignerContext) -> None:
        super().__init__(ctx)
        self.process: Any = None
        self.timer = QtCore.QTimer(self)
        self.timer.setInterval(500)
        self.timer.timeout.connect(self._check)

    def start(self) -> None:
        """Start the compile when the kernel cache needs it (nothing otherwise)."""
        from engine.backends.cpu import warmup  # noqa: PLC0415 - the backends load once the window shows

        try:
            self.process = warmup.start_in_background()
        except OSError as exc:
            self.ctx.status(f"Could not start compiling the CPU kernels ({exc}): the first CPU run compiles them", 10000)
            return
        if self.process is None:
            return
        self.ctx.status("Compiling the CPU kernels in the background (first start after installing, about half a "
                        "minute)")
        self.timer.start()

    def _check(self) -> None:
        rc = self.process.poll() if self.process is not None else 0
        if rc is None:
            return
        self.timer.stop()
        self.ctx.status("CPU kernels compiled" if rc == 0 else
                        f"Compiling the CPU kernels failed (exit status {rc}): the first CPU run compiles them", 10000)
