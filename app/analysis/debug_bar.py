"""Debugger controls: Pause, Step, Resume and Stop, and where execution is paused."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets


class DebuggerControls(QtWidgets.QToolBar):
    """Buttons for the debugger; the owner connects the actions. ``set_paused`` updates the state."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Debugger", parent)
        self.setObjectName("DebuggerToolBar")
        P = QtWidgets.QStyle.StandardPixmap
        icon = self.style().standardIcon
        self.act_pause = self.addAction(icon(P.SP_MediaPause), "Pause")
        self.act_pause.setToolTip("Pause after the layer being computed")
        self.act_step = self.addAction(icon(P.SP_MediaSkipForward), "Step")
        self.act_step.setToolTip("Compute the next layer and pause again")
        self.act_resume = self.addAction(icon(P.SP_MediaPlay), "Resume")
        self.act_resume.setToolTip("Run to the next breakpoint, or finish the inference")
        self.act_stop = self.addAction(icon(P.SP_MediaStop), "Stop")
        self.act_stop.setToolTip("Abort the paused inference")
        self.state = QtWidgets.QLabel("  not debugging")
        self.addWidget(self.state)
        self.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.set_paused(None)

    def set_paused(self, info) -> None:  # noqa: ANN001 - engine.debugger.PauseInfo or None
        """Show where execution paused (None: running or idle)."""
        paused = info is not None
        self.act_step.setEnabled(paused)
        self.act_resume.setEnabled(paused)
        self.act_stop.setEnabled(paused)
        self.act_pause.setEnabled(not paused)
        self.state.setText(f"  paused after {info.layer} ({info.reason})" if paused else "  not paused")
        self.state.setStyleSheet("color: #f0b040; font-weight: bold;" if paused else "color: #9aa0a6;")
