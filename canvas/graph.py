"""ModelCanvas: the NodeGraphQt view of one Model.

User gestures on the canvas (connect, detach, move, rename, drop, delete) are turned into Model commands;
the canvas itself changes only in answer to Model events coming through the ModelBridge. NodeGraphQt's own
undo stack is never used, so undo/redo is the Model's alone."""
from __future__ import annotations

import html
import warnings
from collections.abc import Iterable
from typing import Any

from NodeGraphQt import NodeGraph
from NodeGraphQt.constants import ViewerEnum
from NodeGraphQt.qgraphics.port import PortItem
from PySide6 import QtCore, QtGui

from canvas.bridge import ModelBridge
from canvas.clipboard import clipboard_templates, copy_layers, paste_specs
from canvas.nodes import LayerNode, make_node_class
from engine.descriptors import InputKind, LayerDesc
from engine.errors import LayerLabError
from engine.events import (
    ActivationChanged,
    Event,
    LayerAdded,
    LayerMoved,
    LayerRemoved,
    LayerRenamed,
    LinkChanged,
    ParamChanged,
    TemplateEvent,
)
from engine.formats import LayerFormat
from engine.model import Model
from engine.registry import Registry
from engine.templates import find_desc, template_name, template_type
from engine.tensor import Dims
from engine.typecheck import Diagnostic

#: text/plain payload of a palette drag: ``layerlab-layer:<type>``
DRAG_PREFIX = "layerlab-layer:"
NODE_SIZE_GUESS = (180.0, 90.0)


def _dims_text(d: Dims) -> str:
    return "×".join(str(v) for v in d)


def _compact_dims(p: Any, text: str) -> str:
    """``1x1x3x3`` -> ``3×3`` (leading 1s of N and C dropped) for the node label."""
    try:
        d = list(p.parse(text))
    except ValueError:
        return text
    while len(d) > 2 and d[0] == 1:
        d.pop(0)
    if len(d) == 2 and d[0] == d[1]:
        return str(d[0]) if p.name != "dimensions" else "×".join(map(str, d))
    return "×".join(map(str, d))


class ModelCanvas(NodeGraph):
    """Node graph showing ``model``; emits ``selection_changed(list[str])`` and ``status_message(str)``."""

    selection_changed = QtCore.Signal(list)
    status_message = QtCore.Signal(str)

    def __init__(self, model: Model, registry: Registry, bridge: ModelBridge,
                 parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.net_model = model
        self.registry = registry
        self.bridge = bridge
        self.nodes: dict[str, LayerNode] = {}
        self._classes: dict[str, type[LayerNode]] = {}
        self._diags: dict[str, list[Diagnostic]] = {}
        self._shapes: dict[str, Dims] = {}
        self._grid = True
        self._menu_commands: list[tuple[Any, QtGui.QAction]] = []
        self.set_acyclic(False)  # cycles reach the Model, which refuses them with a message
        self.set_pipe_collision(False)
        self.set_background_color(34, 36, 40)
        self.set_grid_color(48, 51, 56)
        for desc in registry.layer_descs():
            cls = self._node_class(desc.name)
            self.register_node(cls, alias=desc.display_name)
        self.node_selection_changed.connect(self._on_selection)
        self.context_menu_prompt.connect(self._on_context_menu)
        for act in (self.viewer().qaction_for_undo(), self.viewer().qaction_for_redo()):
            if act is not None:  # NodeGraphQt's own undo stack stays unused: undo belongs to the Model
                act.setShortcuts([])
                act.setVisible(False)
        self.viewer().viewport().installEventFilter(self)
        bridge.event.connect(self._on_model_event)
        for name in model.layers:
            self._create_node(name)
        for name in model.layers:
            self._sync_links(name)

    # ---- queries ---------------------------------------------------------------------------------
    def layer_of(self, node: Any) -> str | None:
        """Layer name shown by a node (or node view item)."""
        nid = getattr(node, "id", None)
        for name, n in self.nodes.items():
            if n.id == nid:
                return name
        return None

    def selected_layers(self) -> list[str]:
        """Selected layer names, in model order."""
        ids = {n.id for n in self.selected_nodes()}
        return [name for name, n in self.nodes.items() if n.id in ids]

    def port_of(self, layer: str, index: int | None) -> Any:
        """The Port of input ``index`` of ``layer`` (``None``: its output)."""
        node = self.nodes[layer]
        return node.output_ports()[0] if index is None else node.input_ports()[index]

    def snapshot(self) -> dict[str, Any]:
        """What the canvas shows, as plain data (for comparing with the Model in tests)."""
        out: dict[str, Any] = {}
        for name, node in self.nodes.items():
            links = []
            for port in node.input_ports():
                conn = port.connected_ports()
                links.append(self.layer_of(conn[0].node()) if conn else None)
            while links and links[-1] is None:
                links.pop()
            x, y = node.pos()
            out[name] = {"type": node.layer_type, "inputs": links, "position": (round(x, 3), round(y, 3)),
                         "title": node.name()}
        return out

    # ---- node and link views ---------------------------------------------------------------------
    def _node_class(self, layer_type: str) -> type[LayerNode]:
        """The node class of a layer type (a template's is made again when its definition changed)."""
        desc = find_desc(self.net_model, self.registry, layer_type)
        cls = self._classes.get(layer_type)
        if cls is None or cls.desc != desc:
            cls = self._classes[layer_type] = make_node_class(layer_type, desc)
        return cls

    def _refresh_template_nodes(self, name: str) -> None:
        """Rebuild the nodes of template ``name``'s instances (ports and parameters follow its definition)."""
        selected = set(self.selected_layers())
        ltype = template_type(name)
        for layer, spec in self.net_model.layers.items():
            if spec.type != ltype or layer not in self.nodes:
                continue
            self._remove_node(layer)
            self._create_node(layer)
            self._sync_links(layer)
            for reader, _ in self.net_model.readers(layer):
                self._sync_links(reader)
            if layer in selected:
                self.nodes[layer].set_selected(True)

    def _create_node(self, name: str) -> None:
        spec = self.net_model.layers[name]
        node = self._node_class(spec.type)()
        self.add_node(node, pos=list(spec.position), selected=False, push_undo=False)
        node.set_property("name", name, push_undo=False)
        node.view.name = name
        self.nodes[name] = node
        self._update_info(name)

    def _remove_node(self, name: str) -> None:
        node = self.nodes.pop(name, None)
        if node is None:
            return
        for port in node.input_ports() + node.output_ports():
            for other in port.connected_ports():
                port.disconnect_from(other, push_undo=False, emit_signal=False)
        self.remove_node(node, push_undo=False)

    def _wanted_ports(self, name: str) -> int:
        spec = self.net_model.layers[name]
        desc = self.nodes[name].desc
        last = max((i for i, s in enumerate(spec.inputs) if s is not None), default=-1)
        if desc is None:
            return max(len(spec.inputs), last + 1)
        if desc.infinite_input:
            return max(len(desc.inputs), last + 2)  # a free port after the last connected one
        return max(len(desc.inputs), last + 1)

    def _sync_links(self, name: str) -> None:
        """Make the input ports and links of ``name``'s node match the Model exactly."""
        node = self.nodes.get(name)
        if node is None or name not in self.net_model.layers:
            return
        spec = self.net_model.layers[name]
        wanted = self._wanted_ports(name)
        while len(node.input_ports()) < wanted:
            node.add_input_slot(len(node.input_ports()))
        while len(node.input_ports()) > wanted:
            port = node.input_ports()[-1]
            for other in port.connected_ports():
                port.disconnect_from(other, push_undo=False, emit_signal=False)
            node.delete_input(port)
        for i, port in enumerate(node.input_ports()):
            src = spec.inputs[i] if i < len(spec.inputs) else None
            src_port = None
            if src is not None and src in self.nodes and self.nodes[src].output_ports():
                src_port = self.nodes[src].output_ports()[0]
            current = port.connected_ports()
            view_ok = len(port.view.connected_pipes) == len(current)
            if view_ok and current == ([src_port] if src_port else []):
                continue
            for other in current:
                port.disconnect_from(other, push_undo=False, emit_signal=False)
            for pipe in list(port.view.connected_pipes):
                pipe.delete()
            if src_port is not None:
                port.connect_to(src_port, push_undo=False, emit_signal=False)
        node.view.draw_node()
        node.place_badge()

    def _update_info(self, name: str) -> None:
        node = self.nodes.get(name)
        spec = self.net_model.layers.get(name)
        if node is None or spec is None:
            return
        desc = node.desc
        if template_name(spec.type) is not None:
            kind = f"template {desc.display_name}" if desc else f"{spec.type} (missing or broken)"
            lines = [f"<span style='color:#e0c070'>{html.escape(kind)}</span>"]
        else:
            lines = [f"<span style='color:#9aa4b0'>{html.escape(desc.display_name if desc else spec.type + ' (unknown)')}</span>"]
        if desc:
            for p in desc.params:
                if p.main:
                    value = spec.params.get(p.name, p.default_text)
                    if p.type == "dimension":
                        value = _compact_dims(p, value)
                    lines.append(f"{html.escape(p.name)}: <b>{html.escape(value)}</b>")
        if spec.activation and spec.activation != "none":
            lines.append(f"activation: <b>{html.escape(spec.activation)}</b>")
        if spec.permanent:
            lines.append("<i>permanent</i>")
        shape = self._shapes.get(name)
        if shape is not None:
            lines.append(f"<span style='color:#8fd18f'>→ {_dims_text(shape)}</span>")
        else:
            lines.append("<span style='color:#777'>→ ?</span>")
        node.set_info("<br>".join(lines))
        diags = self._diags.get(name, [])
        sev = "error" if any(d.severity == "error" for d in diags) else ("warning" if diags else "")
        node.badge.show_diagnostics(sev, [f"{d.severity}: {d.message}" for d in diags])
        node.format_badge.show_format(LayerFormat.parse(spec.format).badge if spec.format else "")
        node.place_badge()

    def set_analysis(self, diagnostics: list[Diagnostic], shapes: dict[str, Dims]) -> None:
        """Show type-check results: output shapes and badges on the nodes."""
        self._diags = {}
        for d in diagnostics:
            if d.layer:
                self._diags.setdefault(d.layer, []).append(d)
        self._shapes = dict(shapes)
        for name in self.nodes:
            self._update_info(name)

    def badge_severity(self, name: str) -> str:
        return self.nodes[name].badge.severity

    # ---- Model events -> view --------------------------------------------------------------------
    def _on_model_event(self, ev: Event) -> None:
        if isinstance(ev, LayerAdded) and ev.layer in self.net_model.layers:
            self._create_node(ev.layer)
            self._sync_links(ev.layer)
            for reader, _ in self.net_model.readers(ev.layer):
                self._sync_links(reader)
        elif isinstance(ev, LayerRemoved):
            self._remove_node(ev.layer)
        elif isinstance(ev, LayerRenamed):
            name = ev.layer
            node = self.nodes.pop(ev.old)
            self.nodes[name] = node
            node.set_property("name", name, push_undo=False)
            node.view.name = name
            node.view.draw_node()
            node.place_badge()
            self._update_info(name)
        elif isinstance(ev, LinkChanged):
            self._sync_links(ev.layer)
        elif isinstance(ev, (ParamChanged, ActivationChanged)):
            self._update_info(ev.layer)
        elif isinstance(ev, TemplateEvent):
            self._refresh_template_nodes(ev.name)
        elif isinstance(ev, LayerMoved) and ev.layer in self.nodes:
            x, y = self.net_model.layers[ev.layer].position
            if tuple(self.nodes[ev.layer].pos()) != (x, y):
                self.nodes[ev.layer].set_pos(x, y)

    # ---- user gestures -> Model commands ---------------------------------------------------------
    def _port_ref(self, item: PortItem) -> tuple[str, int | None] | None:
        """(layer, input index or None for the output) of a port view item."""
        name = self.layer_of(item.node)
        if name is None:
            return None
        if item.port_type == "out":
            return name, None
        views = [p.view for p in self.nodes[name].input_ports()]
        return (name, views.index(item)) if item in views else None

    def _on_connection_changed(self, disconnected: list, connected: list) -> None:  # noqa: D401 (NodeGraphQt slot)
        """The viewer reports links the user made or removed; apply them to the Model."""
        touched: set[str] = set()
        links = []
        for a, b in connected:
            ra, rb = self._port_ref(a), self._port_ref(b)
            if not ra or not rb:
                continue
            (src, _), (dst, idx) = (ra, rb) if ra[1] is None else (rb, ra)
            links.append((src, dst, idx))
            touched.add(dst)
        cuts = []
        for a, b in disconnected:
            ra, rb = self._port_ref(a), self._port_ref(b)
            if not ra or not rb:
                continue
            dst, idx = ra if ra[1] is not None else rb
            touched.add(dst)
            if not any(d == dst and i == idx for _, d, i in links):
                cuts.append((dst, idx))
        refused = [(src, dst) for src, dst, _ in links if self.net_model.depends_on(src, dst)]
        if refused:
            src, dst = refused[0]
            self.status_message.emit(f"Link refused: linking {src} to {dst} would create a cycle")
        else:
            try:
                with self.net_model.macro("Connect" if links else "Disconnect"):
                    for dst, idx in cuts:
                        self.net_model.disconnect(dst, idx)
                    for src, dst, idx in links:
                        self.net_model.connect(src, dst, idx)
            except LayerLabError as exc:
                self.status_message.emit(f"Link refused: {exc}")
        for dst in touched:
            self._sync_links(dst)

    def _on_connection_sliced(self, ports: list) -> None:
        self._on_connection_changed(ports, [])

    def _on_insert_node(self, pipe: Any, node_id: str, prev_node_pos: dict) -> None:
        pass  # dropping a node onto a link does nothing; links are made explicitly

    def _on_nodes_moved(self, node_data: dict) -> None:
        moves = []
        for view in node_data:
            name = self.layer_of(view)
            if name is not None:
                moves.append((name, tuple(view.xy_pos)))
        if moves:
            with self.net_model.macro("Move " + ", ".join(n for n, _ in moves)):
                for name, pos in moves:
                    self.net_model.move_layer(name, pos)

    def _on_node_name_changed(self, node_id: str, name: str) -> None:
        node = self.get_node_by_id(node_id)
        old = self.layer_of(node)
        if old is None or old == name:
            return
        try:
            self.net_model.rename_layer(old, name)
        except LayerLabError as exc:
            self.status_message.emit(f"Rename refused: {exc}")
            node.view.name = old
            node.view.draw_node()

    def _on_search_triggered(self, node_type: str, pos: tuple) -> None:
        for layer_type, cls in self._classes.items():
            if cls.type_ == node_type:
                self.add_layer(layer_type, (pos[0], pos[1]))

    def _on_node_data_dropped(self, mimedata: QtCore.QMimeData, pos: QtCore.QPoint) -> None:
        text = mimedata.text() if mimedata.hasText() else ""
        if text.startswith(DRAG_PREFIX):
            self.add_layer(text[len(DRAG_PREFIX):], (float(pos.x()), float(pos.y())))

    def _on_selection(self, selected: list, deselected: list) -> None:
        self.selection_changed.emit(self.selected_layers())

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

    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.MouseButtonDblClick and event.button() == QtCore.Qt.MouseButton.LeftButton:
            scene_pos = self.viewer().mapToScene(event.position().toPoint())
            for item in self.viewer().scene().items(scene_pos):
                if isinstance(item, PortItem):
                    if self.add_layer_at_port(item):
                        return True
                    break
        return super().eventFilter(obj, event)

    # ---- editing operations (menus and tests call these) -----------------------------------------
    def view_center(self) -> tuple[float, float]:
        vp = self.viewer().viewport().rect().center()
        p = self.viewer().mapToScene(vp)
        return (p.x() - NODE_SIZE_GUESS[0] / 2, p.y() - NODE_SIZE_GUESS[1] / 2)

    def add_layer(self, layer_type: str, pos: tuple[float, float] | None = None) -> str | None:
        """Add a layer of ``layer_type`` (a plugin layer or ``template:NAME``; at the view centre by default),
        select it, return its name."""
        if find_desc(self.net_model, self.registry, layer_type) is None:
            self.status_message.emit(f"Unknown layer type {layer_type!r}")
            return None
        name = self.net_model.add_layer(layer_type, position=pos or self.view_center())
        self.select_layers([name])
        self.status_message.emit(f"Added {name}")
        return name

    def add_layer_at_port(self, item: PortItem) -> str | None:
        """Double-click on a free port: create an input (output) layer linked to it."""
        ref = self._port_ref(item)
        if ref is None or item.connected_pipes:
            return None
        name, idx = ref
        x, y = self.net_model.layers[name].position
        if idx is None:
            layer_type, pos = "output", (x + 260.0, y)
        else:
            layer_type, pos = "input", (x - 260.0, y + 60.0 * idx)
        if self.registry.find_layer(layer_type) is None:
            return None
        with self.net_model.macro(f"Add {layer_type} for {name}"):
            new = self.net_model.add_layer(layer_type, position=pos)
            if idx is None:
                self.net_model.connect(name, new, 0)
            else:
                self.net_model.connect(new, name, idx)
        self.select_layers([new])
        self.status_message.emit(f"Added {new} linked to {name}")
        return new

    def select_layers(self, names: Iterable[str]) -> None:
        wanted = set(names)
        self.clear_selection()
        for name, node in self.nodes.items():
            if name in wanted:
                node.set_selected(True)
        self.selection_changed.emit(self.selected_layers())

    def focus_layer(self, name: str) -> None:
        """Select ``name`` and centre the view on it."""
        if name in self.nodes:
            self.select_layers([name])
            self.center_on([self.nodes[name]])

    def delete_selection(self) -> None:
        """Delete the selected nodes, or else the selected links."""
        names = self.selected_layers()
        if names:
            self.net_model.remove_layers(names)
            self.status_message.emit(f"Deleted {len(names)} layer(s)")
            return
        cuts = []
        for pipe in self.viewer().selected_pipes():
            ref = self._port_ref(pipe.input_port)
            if ref and ref[1] is not None:
                cuts.append(ref)
        if cuts:
            with self.net_model.macro("Delete links"):
                for dst, idx in cuts:
                    self.net_model.disconnect(dst, idx)
            for dst, _ in cuts:
                self._sync_links(dst)

    def copy_selection(self) -> str | None:
        names = self.selected_layers()
        if not names:
            return None
        text = copy_layers(self.net_model, names)
        mime = QtCore.QMimeData()
        mime.setData("application/x-layerlab-layers", text.encode())
        mime.setText(text)
        QtGui.QGuiApplication.clipboard().setMimeData(mime)
        return text

    def cut_selection(self) -> None:
        names = self.selected_layers()
        if self.copy_selection():
            with self.net_model.macro("Cut"):
                self.net_model.remove_layers(names)

    def paste(self, text: str | None = None, offset: tuple[float, float] = (40.0, 40.0)) -> list[str]:
        """Paste layers (from the clipboard by default); returns the new names."""
        if text is None:
            mime = QtGui.QGuiApplication.clipboard().mimeData()
            text = bytes(mime.data("application/x-layerlab-layers")).decode() if mime else ""
            text = text or QtGui.QGuiApplication.clipboard().text()
        try:
            specs = paste_specs(self.net_model, text, offset)
        except (ValueError, TypeError, KeyError):
            self.status_message.emit("Nothing to paste: the clipboard holds no layers")
            return []
        if not specs:
            return []
        needed = clipboard_templates(text)
        kept = [n for n, t in needed.items() if n in self.net_model.templates and self.net_model.templates[n] != t]
        with self.net_model.macro("Paste"):
            for n, t in needed.items():
                if n not in self.net_model.templates:
                    self.net_model.add_template(n, t)
            self.net_model.add_layers(specs, "Paste")
        names = [s.name for s in specs]
        self.select_layers(names)
        note = f" (this network's own template {', '.join(kept)} used)" if kept else ""
        self.status_message.emit(f"Pasted {len(names)} layer(s){note}")
        return names

    def duplicate_selection(self) -> list[str]:
        names = self.selected_layers()
        return self.paste(copy_layers(self.net_model, names)) if names else []

    def select_all_layers(self) -> None:
        self.select_layers(list(self.nodes))

    def fit(self) -> None:
        """Frame the whole network (never magnified beyond 1:1)."""
        if not self.nodes:
            return
        viewer = self.viewer()
        rect = viewer._combined_rect([n.view for n in self.nodes.values()]).adjusted(-40, -40, 40, 40)
        vp = viewer.viewport().size()
        if rect.width() < vp.width() and rect.height() < vp.height():
            center = rect.center()
            rect = QtCore.QRectF(0, 0, vp.width(), vp.height())
            rect.moveCenter(center)
        viewer._scene_range = rect
        viewer._update_scene()

    def zoom(self, steps: int) -> None:
        """Zoom in (positive) or out (negative) by 10% steps around the view centre."""
        for _ in range(abs(steps)):
            self.viewer()._set_viewer_zoom(1.0 if steps > 0 else -1.0, 0.0)

    def show_grid(self, on: bool) -> None:
        self._grid = on
        self.set_grid_mode(ViewerEnum.GRID_DISPLAY_LINES.value if on else ViewerEnum.GRID_DISPLAY_NONE.value)

    @property
    def grid_shown(self) -> bool:
        return self._grid


def layer_desc_inputs(desc: LayerDesc) -> list[str]:
    """Input kinds of a descriptor as words (for tooltips)."""
    words = {InputKind.PRIMARY: "primary", InputKind.SECONDARY: "secondary", InputKind.PRIMARY_INFINITE: "any number"}
    return [f"{i.name} ({words[i.kind]})" for i in desc.inputs]


def make_palette_mime(layer_type: str) -> QtCore.QMimeData:
    """The drag payload the palette gives and the canvas accepts."""
    mime = QtCore.QMimeData()
    mime.setText(DRAG_PREFIX + layer_type)
    return mime


