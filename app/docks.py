"""Dock widgets of the designer's and the analysis mode's main windows, made one way."""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets


def add_dock(window: QtWidgets.QMainWindow, title: str, name: str, widget: QtWidgets.QWidget,
             area: QtCore.Qt.DockWidgetArea) -> QtWidgets.QDockWidget:
    """Dock ``widget`` in ``window`` at ``area`` under ``title``; ``name`` is the object name the saved window
    layout knows the dock by."""
    dock = QtWidgets.QDockWidget(title, window)
    dock.setObjectName(name)
    dock.setWidget(widget)
    window.addDockWidget(area, dock)
    return dock
