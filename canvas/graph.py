"""ModelCanvas: the NodeGraphQt view of one Model.

User gestures on the canvas (connect, detach, move, rename, drop, delete) are turned into Model commands;
the canvas itself changes only in answer to Model events coming through the ModelBridge. NodeGraphQt's own
undo stack is never used, so undo/redo is the Model's alone."""
from __future__ import annotations

from typing import Any

from NodeGraphQt import NodeGraph
from NodeGraphQt.qgraphics.port import PortItem
from PySide6 import QtCore, QtGui

from canvas.bridge import ModelBridge
from canvas.constants import (
    DRAG_PREFIX,
    EAGER_LAYERS,
    PRESSES,
    STRUCTURE_EVENTS,
    TEXT,
    compact_dims,
    dims_text,
)
from canvas.editing import CanvasEditingMixin
from canvas.gestures import GesturesMixin
from canvas.groups import KEY, GroupsMixin
from canvas.lazy import BoxIndex, LazyNodes, NodeGeom
from canvas.lazy_canvas import LazyCanvasMixin
from canvas.menus import CanvasMenusMixin
from canvas.nodes import (
    LayerNode,
    Run,
    make_node_class,
)
from canvas.overview import OverviewItem
from canvas.routes import RoutesMixin
from engine.descriptors import InputKind, LayerDesc
from engine.events import (
    ActivationChanged,
    CustomLayerChanged,
    Event,
    GroupChanged,
    LayerAdded,
    LayerEvent,
    LayerMoved,
    LayerRemoved,
    LayerRenamed,
    LinkChanged,
    ParamChanged,
    TemplateChanged,
    TemplateEvent,
)
from engine.formats import LayerFormat
from engine.model import Model
from engine.registry import Registry
from engine.templates import find_desc, template_name, template_type
from engine.tensor import Dims
from engine.typecheck import Diagnostic


class ModelCanvas(GroupsMixin, RoutesMixin, CanvasEditingMixin, CanvasMenusMixin, GesturesMixin, LazyCanvasMixin,
                  NodeGraph):
    """Node graph showing ``model``; emits ``selection_changed(list[str])`` and ``status_message(str)``."""

    selection_changed = QtCore.Signal(list)
    status_message = QtCore.Signal(str)
    files_dropped = QtCore.Signal(list)  # local files dropped on the canvas (the window opens or imports them)

    def __init__(self, model: Model, registry: Registry, bridge: ModelBridge,
                 parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.net_model = model
        self.registry = registry
        self.bridge = bridge
        #: every layer's node by name; a node is made when first looked up or seen (canvas.lazy)
        self.nodes = LazyNodes(self._materialize)
        self._names: dict[str, str] = {}  # node id -> layer name
        self._geo: dict[str, NodeGeom] = {}  # measured boxes of the layers without a node
        self._index: BoxIndex | None = None  # where every layer's box is, for finding what is in view
        self._stale: set[str] = set()  # layers whose boxes changed since the index was made
        self._readers: dict[str, list[str]] | None = None  # layer -> layers reading it (None: to compute)
        self._labels: dict[tuple[str, bool], str] | None = None  # (layer, compact) -> its label zoomed out
        self._eager = True  # every node is made at once (small models)
        self._fitted = False  # the view has been placed (nodes are made for it only then)
        self._covered = QtCore.QRectF()  # the scene area whose nodes all exist (in detail mode)
        self._prefetch = QtCore.QTimer(self)
        self._prefetch.setSingleShot(True)
        self._prefetch.setInterval(0)
        self._prefetch.timeout.connect(self._prefetch_tick)
        self._todo: list[tuple[str, bool, float]] = []  # layers to make while idle, nearest the view first
        self._todo_key: tuple = ()
        self._bulk = False  # building many nodes: layouts wait until the end
        self._moves_pending = False
        self._moved: set[str] = set()
        self.overview: OverviewItem | None = None
        self._classes: dict[str, type[LayerNode]] = {}
        self._diags: dict[str, list[Diagnostic]] = {}
        self._severity: dict[str, str] = {}  # layer -> "error" or "warning" (the worst of its diagnostics)
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
        self.viewer().installEventFilter(self)
        bridge.event.connect(self._on_model_event)
        self._init_routes()
        self._build_all()

    def _build_all(self) -> None:
        """Record every layer; a small model gets all its nodes and links now, in bulk (no repaint, one layout per
        node), a large one (or one opening with its groups collapsed) as they are needed (when seen, looked up, or
        near the view while idle)."""
        for name in self.net_model.layers:
            self.nodes.add(name)
        self._eager = len(self.nodes) <= EAGER_LAYERS and not self.opens_collapsed()
        if self._eager:
            viewer = self.viewer()
            viewer.setUpdatesEnabled(False)
            try:
                self._materialize_many(list(self.nodes), neighbours=False)
            finally:
                viewer.setUpdatesEnabled(True)
        self.overview = OverviewItem(self._shown_names, self._shown_geometry, self._shown_links, self._overview_detail,
                                     lambda: [node for _, node in self.nodes.created_items()], lambda: self._severity,
                                     pinned=lambda name: name.startswith(KEY), any_pinned=lambda: bool(self._boxes),
                                     route=self._overview_route,
                                     label=self._overview_label)
        self.scene().addItem(self.overview)
        self._init_groups()

    def get_unique_name(self, name: str) -> str:
        """Node titles are layer names, which the Model keeps unique (NodeGraphQt's own search is quadratic)."""
        return name

    # Qt calls an event filter of the QObject's own class (not one inherited from a plain mixin)
    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:
        kind = event.type()
        if kind == QtCore.QEvent.Type.Paint and obj is self.viewer().viewport():
            self._routes_before_paint()
            self._before_paint()
            self._frames_before_paint()
        elif kind in PRESSES and obj is self.viewer().viewport():
            self._fitted = True
            self._materialize_at(self.viewer().mapToScene(event.position().toPoint()))
        elif kind == QtCore.QEvent.Type.MouseMove and obj is self.viewer().viewport():
            self._materialize_in_band(event.position().toPoint())
        elif kind in (QtCore.QEvent.Type.Wheel, QtCore.QEvent.Type.KeyPress):
            self._fitted = True
        if kind == QtCore.QEvent.Type.ContextMenu and obj is self.viewer().viewport() and self._frame_menu(event):
            return True
        if event.type() == QtCore.QEvent.Type.FocusOut and obj is self.viewer():
            self.reset_modifiers()
        if event.type() == QtCore.QEvent.Type.MouseButtonPress and event.button() == QtCore.Qt.MouseButton.LeftButton \
                and event.modifiers() == QtCore.Qt.KeyboardModifier.NoModifier:
            pipe = self.pipe_at(self.viewer().mapToScene(event.position().toPoint()))
            if pipe is not None:  # a click on a link selects it (NodeGraphQt only selects links by rubber band)
                self.clear_selection()
                self.viewer().scene().clearSelection()
                pipe.setSelected(True)
                self.selection_changed.emit([])
                self.status_message.emit("Link selected: Delete removes it")
                return True
        if event.type() == QtCore.QEvent.Type.MouseButtonDblClick and event.button() == QtCore.Qt.MouseButton.LeftButton:
            scene_pos = self.viewer().mapToScene(event.position().toPoint())
            for item in self.viewer().scene().items(scene_pos):
                if isinstance(item, PortItem):
                    if self.add_layer_at_port(item):
                        return True
                    break
        return super().eventFilter(obj, event)

    # ---- queries ---------------------------------------------------------------------------------
    def layer_of(self, node: Any) -> str | None:
        """Layer name shown by a node (or node view item)."""
        return self._names.get(getattr(node, "id", None))

    def selected_layers(self) -> list[str]:
        """Selected layer names, in model order."""
        picked = {self._names.get(item.id) for item in self.viewer().selected_nodes()}
        return [name for name in self.nodes if name in picked] if picked else []  # (asked after every edit)

    def port_of(self, layer: str, index: int | None) -> Any:
        """The Port of input ``index`` of ``layer`` (``None``: its output)."""
        node = self.nodes[layer]
        return node.output_ports()[0] if index is None else node.input_ports()[index]

    def snapshot(self) -> dict[str, Any]:
        """What the canvas shows, as plain data (for comparing with the Model in tests)."""
        out: dict[str, Any] = {}
        self._materialize_many(list(self.nodes))  # every node made, with every link between them
        for name, node in self.nodes.items():
            x, y = node.pos()
            out[name] = {"type": node.layer_type, "inputs": self.links_shown(name),
                         "position": (round(x, 3), round(y, 3)), "title": node.name()}
        return out

    def links_shown(self, name: str) -> list[str | None]:
        """The layers the node of ``name`` shows linked to its inputs, by input (trailing free ports left out);
        empty while it has no node."""
        node = self.nodes.created(name)
        links = []
        for port in node.input_ports() if node is not None else []:
            conn = port.connected_ports()
            links.append(self.layer_of(conn[0].node()) if conn else None)
        while links and links[-1] is None:
            links.pop()
        return links

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
        self.refresh_nodes_of_type(template_type(name))

    def refresh_nodes_of_type(self, ltype: str) -> None:
        """Rebuild the nodes of every layer of type ``ltype`` (ports and parameters follow its descriptor, e.g.
        after a template's, a custom layer's definition or a network layer's file changed)."""
        selected = set(self.selected_layers())
        for layer, spec in self.net_model.layers.items():
            if spec.type != ltype or layer not in self.nodes:
                continue
            self._forget(layer)
            if self.nodes.created(layer) is None:
                continue  # made with the new definition when it is needed
            self._remove_node(layer)
            self.nodes.add(layer)
            self._materialize_many([layer], neighbours=False)
            if layer in selected:
                self.nodes[layer].set_selected(True)

    def _create_node(self, name: str) -> LayerNode:
        spec = self.net_model.layers[name]
        node = self._node_class(spec.type)()
        node.NODE_NAME = name  # add_node names the node after it (get_unique_name keeps it: names are unique)
        self.add_node(node, pos=list(spec.position), selected=False, push_undo=False)
        self.nodes.add(name, node)
        self._names[node.id] = name
        node.view.on_moved = self._node_moved
        self._update_info(name, forget=False)  # the box it was measured with (the same layout rule)
        return node

    def _remove_node(self, name: str) -> None:
        self._forget(name)
        node = self.nodes.pop(name)
        if node is None:
            return
        self._names.pop(node.id, None)
        for port in node.input_ports() + node.output_ports():
            for other in port.connected_ports():
                port.disconnect_from(other, push_undo=False, emit_signal=False)
        self.remove_node(node, push_undo=False)

    def _wanted_ports(self, name: str) -> int:
        spec = self.net_model.layers[name]
        desc = self._desc(name)
        last = max((i for i, s in enumerate(spec.inputs) if s is not None), default=-1)
        if desc is None:
            return max(len(spec.inputs), last + 1)
        if desc.infinite_input:
            return max(len(desc.inputs), last + 2)  # a free port after the last connected one
        return max(len(desc.inputs), last + 1)

    def _sync_ports(self, name: str) -> None:
        """Give ``name``'s node the input ports the Model needs (a free one after an open-ended input's links)."""
        node = self.nodes[name]
        wanted = self._wanted_ports(name)
        while len(node.input_ports()) < wanted:
            node.add_input_slot(len(node.input_ports()))
        while len(node.input_ports()) > wanted:
            port = node.input_ports()[-1]
            for other in port.connected_ports():
                port.disconnect_from(other, push_undo=False, emit_signal=False)
            node.delete_input(port)

    def _sync_links(self, name: str) -> None:
        """Make the input ports and links of ``name``'s node match the Model exactly."""
        node = self.nodes.created(name)
        if node is None or name not in self.net_model.layers:
            return
        spec = self.net_model.layers[name]
        self._sync_ports(name)
        for i, port in enumerate(node.input_ports()):
            src = spec.inputs[i] if i < len(spec.inputs) else None
            src_port = None
            src_node = self.nodes.created(src) if src is not None else None
            if src_node is not None and src_node.output_ports():
                src_port = src_node.output_ports()[0]
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
        if not self._bulk:
            node.view.draw_node()
            node.place_badge()

    def _info_lines(self, name: str) -> list[list[Run]]:
        """What a node shows under its ports: its type, main parameters, activation and output shape."""
        spec = self.net_model.layers[name]
        desc = self._desc(name)
        if template_name(spec.type) is not None:
            kind = f"template {desc.display_name}" if desc else f"{spec.type} (missing or broken)"
            lines = [[(kind, "#e0c070", False, False)]]
        else:
            lines = [[(desc.display_name if desc else spec.type + " (unknown)", "#9aa4b0", False, False)]]
        if desc:
            for p in desc.params:
                if p.main:
                    value = spec.params.get(p.name, p.default_text)
                    if p.type == "dimension":
                        value = compact_dims(p, value)
                    lines.append([(f"{p.name}: ", TEXT, False, False), (value, TEXT, True, False)])
        if spec.activation and spec.activation != "none":
            lines.append([("activation: ", TEXT, False, False), (spec.activation, TEXT, True, False)])
        if spec.permanent:
            lines.append([("permanent", TEXT, False, True)])
        shape = self._shapes.get(name)
        lines.append([(f"→ {dims_text(shape)}", "#8fd18f", False, False)] if shape is not None
                     else [("→ ?", "#777777", False, False)])
        return lines

    def _update_info(self, name: str, forget: bool = True) -> None:
        if forget:
            self._forget(name)  # its box may change: measured again when it is needed
        node = self.nodes.created(name)
        if node is None or name not in self.net_model.layers:
            return
        node.set_info(self._info_lines(name), layout=not self._bulk)
        node.view.set_note(self.net_model.layers[name].note)
        diags = self._diags.get(name, [])
        sev = "error" if any(d.severity == "error" for d in diags) else ("warning" if diags else "")
        node.badge.show_diagnostics(sev, [f"{d.severity}: {d.message}" for d in diags])
        spec = self.net_model.layers[name]
        node.format_badge.show_format(LayerFormat.parse(spec.format).badge if spec.format else "")
        if not self._bulk:
            node.place_badge()

    def set_analysis(self, diagnostics: list[Diagnostic], shapes: dict[str, Dims]) -> None:
        """Show type-check results: output shapes and badges on the nodes (only the nodes whose results
        changed are touched)."""
        diags: dict[str, list[Diagnostic]] = {}
        for d in diagnostics:
            if d.layer:
                diags.setdefault(d.layer, []).append(d)
        old_diags, old_shapes = self._diags, self._shapes
        self._diags, self._shapes = diags, dict(shapes)
        self._severity = {n: "error" if any(d.severity == "error" for d in ds) else "warning" for n, ds in diags.items()}
        changed = {n for n in set(old_diags) | set(diags) if old_diags.get(n) != diags.get(n)}
        changed |= {n for n in set(old_shapes) | set(shapes) if old_shapes.get(n) != shapes.get(n)}
        for name in changed:
            self._update_info(name)
        if self.overview is not None and changed:
            self.overview.invalidate(changed)  # the output shape is part of a node's size

    def badge_severity(self, name: str) -> str:
        return self.nodes[name].badge.severity

    # ---- Model events -> view --------------------------------------------------------------------
    def _on_model_event(self, ev: Event) -> None:
        if isinstance(ev, LayerEvent):
            self._forget(ev.layer)
            self._layer_changed_routes(ev)
            if not isinstance(ev, (ParamChanged, ActivationChanged, LayerMoved)):  # layers or links changed
                self._readers = None
                self._labels = None
                self._index = None
        if isinstance(ev, LayerRenamed):
            self._forget(ev.old)
            self._forget_routes(ev.old)
        elif isinstance(ev, (TemplateEvent, CustomLayerChanged)):
            self._geo.clear()
            self._index = None
            self._covered = QtCore.QRectF()
        self._apply_event(ev)
        if isinstance(ev, (GroupChanged, LayerAdded, LayerRemoved, LayerRenamed)):
            self._groups_changed()
        elif isinstance(ev, LayerMoved):
            self._groups_changed(moved_only=True)
            self._node_moved(ev.layer)
        if self.overview is not None and isinstance(ev, STRUCTURE_EVENTS):
            if self.overview.active and isinstance(ev, (LayerAdded, LinkChanged, TemplateChanged)):
                self.overview.apply_mode()  # new nodes and links follow the current mode
            if isinstance(ev, (LayerRenamed, TemplateEvent, CustomLayerChanged)):
                self.overview.invalidate()
            elif not isinstance(ev, LayerMoved):  # (a burst of moves, as Arrange makes: the overview redone once)
                self.overview.invalidate([ev.layer] if isinstance(ev, LayerEvent) else None)

    def _apply_event(self, ev: Event) -> None:
        if isinstance(ev, LayerAdded) and ev.layer in self.net_model.layers:
            self.nodes.add(ev.layer)
            # a large model makes it when it is seen or looked up, or now when a node linked to it exists (every
            # node shows all its links)
            if self._eager or any(self.nodes.created(n) is not None for n in self._neighbours(ev.layer)):
                self._materialize_many([ev.layer], neighbours=False)
            elif self.viewer().isVisible():
                self.viewer().viewport().update()
        elif isinstance(ev, LayerRemoved):
            self._remove_node(ev.layer)
        elif isinstance(ev, LayerRenamed):
            name = ev.layer
            self.nodes.rename(ev.old, name)
            node = self.nodes.created(name)
            if node is None:
                return
            self._names[node.id] = name
            node.set_property("name", name, push_undo=False)
            node.view.name = name
            node.view.draw_node()
            node.place_badge()
            self._update_info(name)
        elif isinstance(ev, LinkChanged):
            if self.nodes.created(ev.layer) is not None:  # its new sources get nodes, so its links are drawn
                self._materialize_many(self.net_model.layers[ev.layer].inputs, neighbours=False)
            self._sync_links(ev.layer)
        elif isinstance(ev, (ParamChanged, ActivationChanged)):
            self._update_info(ev.layer)
        elif isinstance(ev, TemplateEvent):
            self._refresh_template_nodes(ev.name)
        elif isinstance(ev, CustomLayerChanged):
            self.refresh_nodes_of_type(ev.layer_type)
        elif isinstance(ev, LayerMoved) and self.nodes.created(ev.layer) is not None:
            x, y = self.net_model.layers[ev.layer].position
            node = self.nodes.created(ev.layer)
            if tuple(node.pos()) != (x, y):
                node.set_pos(x, y)


def layer_desc_inputs(desc: LayerDesc) -> list[str]:
    """Input kinds of a descriptor as words (for tooltips)."""
    words = {InputKind.PRIMARY: "primary", InputKind.SECONDARY: "secondary", InputKind.PRIMARY_INFINITE: "any number"}
    return [f"{i.name} ({words[i.kind]})" for i in desc.inputs]


def make_palette_mime(layer_type: str) -> QtCore.QMimeData:
    """The drag payload the palette gives and the canvas accepts."""
    mime = QtCore.QMimeData()
    mime.setText(DRAG_PREFIX + layer_type)
    return mime


