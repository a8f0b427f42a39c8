"""The Analysis window: the analysis panels around the network's output. Analysis Output and Channel
Inspector are tabs in the middle; Model Inputs, Parameter Editor and Network Overview are docks; the
debugger controls are a toolbar. Closing the window (or the Analysis Output tab) stops analysis."""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from app.analysis.controller import AnalysisController
from app.docks import add_dock


class AnalysisWindow(QtWidgets.QMainWindow):
    """Shows an AnalysisController's panels. ``closed`` when the user closes it."""

    closed = QtCore.Signal()

    def __init__(self, controller: AnalysisController, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent, QtCore.Qt.WindowType.Window)
        self.ctl = controller
        self.setObjectName("AnalysisWindow")
        self.setWindowTitle("LayerLab Analysis")
        self.setDockNestingEnabled(True)
        self.resize(1500, 900)
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.setTabsClosable(True)
        self.tabs.addTab(controller.output, "Analysis Output")
        self.tabs.addTab(controller.inspector, "Channel Inspector")
        self.tabs.tabBar().setTabButton(0, QtWidgets.QTabBar.ButtonPosition.RightSide, None)
        self.tabs.tabCloseRequested.connect(self._close_tab)
        self.setCentralWidget(self.tabs)
        A = QtCore.Qt.DockWidgetArea
        self.inputs_dock = self._dock("Model Inputs", "ModelInputsDock", controller.inputs, A.LeftDockWidgetArea)
        self.overview_dock = self._dock("Network Overview", "NetworkOverviewDock", controller.overview_panel,
                                        A.RightDockWidgetArea)
        self.params_dock = self._dock("Parameter Editor", "ParameterEditorDock", controller.params, A.RightDockWidgetArea)
        self.splitDockWidget(self.overview_dock, self.params_dock, QtCore.Qt.Orientation.Vertical)
        self.precision_dock = self._dock("Precision", "PrecisionDock", controller.precision, A.RightDockWidgetArea)
        self.tabifyDockWidget(self.params_dock, self.precision_dock)
        self.params_dock.raise_()
        controller.proxy.drift.connect(self._show_precision)  # Compare Precision's follow-up (a method: disconnected
        # when this window is deleted, while the proxy serves the next analysis)
        self.resizeDocks([self.inputs_dock, self.overview_dock], [360, 370], QtCore.Qt.Orientation.Horizontal)
        self.resizeDocks([self.overview_dock, self.params_dock], [560, 300], QtCore.Qt.Orientation.Vertical)
        self.quick = QtWidgets.QToolBar("Analysis")
        self.quick.setObjectName("AnalysisToolBar")
        self.act_stop = self.quick.addAction(self.style().standardIcon(QtWidgets.QStyle.StandardPixmap.SP_BrowserStop),
                                             "Stop Analysis", self.close)
        self.act_inspector = self.quick.addAction("Channel Inspector", self.show_inspector)
        self.act_inspector.setShortcut(QtGui.QKeySequence("Ctrl+I"))
        self.quick.addAction(controller.overview_panel.act_rerun)
        self.act_compare = self.quick.addAction("Compare Precision…", lambda: controller.compare_precision_dialog(self))
        self.quick.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.addToolBar(self.quick)
        self.addToolBar(controller.debug)
        self.status = QtWidgets.QLabel()
        self.statusBar().addWidget(self.status, 1)
        controller.message.connect(self.status.setText)
        controller.overview.inspect_requested.connect(lambda _name: self.show_inspector())

    def _dock(self, title: str, name: str, widget: QtWidgets.QWidget, area: QtCore.Qt.DockWidgetArea) -> QtWidgets.QDockWidget:
        return add_dock(self, title, name, widget, area)

    def show_inspector(self) -> None:
        """View > Channel Inspector: (re)open its tab and show it."""
        if self.tabs.indexOf(self.ctl.inspector) < 0:
            self.tabs.addTab(self.ctl.inspector, "Channel Inspector")
        self.tabs.setCurrentWidget(self.ctl.inspector)
        if self.ctl.overview.current:
            self.ctl.inspect(self.ctl.overview.current)

    def _close_tab(self, index: int) -> None:
        if self.tabs.widget(index) is self.ctl.inspector:
            self.tabs.removeTab(index)  # the inspector can be closed and reopened during analysis

    def _show_precision(self, _result: object) -> None:
        self.precision_dock.raise_()

    def closeEvent(self, ev: QtGui.QCloseEvent) -> None:  # noqa: N802 (Qt API)
        self.ctl.stop()
        self.closed.emit()
        super().closeEvent(ev)
