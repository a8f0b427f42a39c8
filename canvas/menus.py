"""The canvas's right-click menus: the layer menu and the background menu, filled with the designer's actions, and
what a right-click or a click on a link finds under the cursor."""
from __future__ import annotations

import warnings
from typing import Any

from NodeGraphQt.qgraphics.pipe import PipeItem
from NodeGraphQt.qgraphics.port import PortItem
from PySide6 import QtCore, QtGui

from canvas.constants import (
    LINK_PICK_PX,
)
from canvas.nodes import (
    LayerNode,
    LayerNodeItem,
)


class CanvasMenusMixin:
    """``ModelCanvas``'s context menus and event filter."""

    # ---- right-click menus -----------------------------------------------------------------------
    def set_context_actions(self, node_items: list[tuple[str, QtGui.QAction] | None],
                            graph_items: list[tuple[str, QtGui.QAction] | None]) -> None:
        """Fill NodeGraphQt's context menus: ``node_items`` on a node (or the selection), ``graph_items`` on
        the empty canvas; each (label, action) command triggers the application's own action, so a menu
        entry and the main menu do the same thing; None is a separator. Before a menu shows, a node that is
        right-clicked outside the selection becomes the selection, and each command takes its action's
        enabled state."""
        nodes_menu = self.get_context_menu("nodes")
        graph_menu = self.get_context_menu("graph")
        with warnings.catch_warnings():  # NodeGraphQt compares Qt versions with distutils' deprecated LooseVersion
            warnings.filterwarnings("ignore", "distutils Version classes are deprecated", DeprecationWarning)
            self._add_commands(nodes_menu, graph_menu, node_items, graph_items)

    def _add_commands(self, nodes_menu: Any, graph_menu: Any, node_items: list[tuple[str, QtGui.QAction] | None],
                      graph_items: list[tuple[str, QtGui.QAction] | None]) -> None:
        for items, menu in ((node_items, nodes_menu), (graph_items, graph_menu)):
            for item in items:
                if item is None:
                    qmenu = nodes_menu.qmenu.get_menu(LayerNode.__name__) if menu is nodes_menu else graph_menu.qmenu
                    if qmenu is not None:
                        qmenu.addSeparator()
                    continue
                label, action = item
                if menu is nodes_menu:
                    cmd = menu.add_command(label, lambda _graph, _node, a=action: a.trigger(), node_class=LayerNode)
                else:
                    cmd = menu.add_command(label, lambda _graph, a=action: a.trigger())
                cmd.qaction.setStatusTip(action.statusTip())
                self._menu_commands.append((cmd, action))

    def context_command(self, label: str, menu: str = "nodes") -> Any:
        """The NodeGraphQt command labelled ``label`` in context menu ``menu`` (``nodes`` or ``graph``)."""
        return self.get_context_menu(menu).get_command(label)

    def _on_context_menu(self, menu: Any, node: Any) -> None:
        name = self.layer_of(node) if node is not None else None
        if name is not None and name not in self.selected_layers():
            self.select_layers([name])
        for cmd, action in self._menu_commands:
            cmd.qaction.setEnabled(action.isEnabled())

    def pipe_at(self, scene_pos: QtCore.QPointF) -> Any:
        """The link drawn within a few screen pixels of ``scene_pos`` (None where there is a node or a port, or
        no link)."""
        viewer = self.viewer()
        tol = LINK_PICK_PX / max(viewer.transform().m11(), 1e-6)
        area = QtCore.QRectF(scene_pos.x() - tol, scene_pos.y() - tol, 2 * tol, 2 * tol)
        near = viewer.scene().items(area)
        if any(isinstance(i, (PortItem, LayerNodeItem)) and i.sceneBoundingRect().contains(scene_pos) for i in near):
            return None
        stroker = QtGui.QPainterPathStroker()
        stroker.setWidth(2 * tol)
        for item in near:
            if isinstance(item, PipeItem) and item.input_port and item.output_port and \
                    stroker.createStroke(item.path()).contains(scene_pos):
                return item
        return None

    def reset_modifiers(self) -> None:
        """Forget the modifier keys the viewer believes held (a dialog took the key release: without this the
        canvas stays in Ctrl-deselect mode with its hint drawn)."""
        viewer = self.viewer()
        viewer.ALT_state = viewer.CTRL_state = viewer.SHIFT_state = False
        viewer._cursor_text.setVisible(False)
