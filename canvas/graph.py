"""ModelCanvas: the NodeGraphQt view of one Model.

User gestures on the canvas (connect, detach, move, rename, drop, delete) are turned into Model commands;
the canvas itself changes only in answer to Model events coming through the ModelBridge. NodeGraphQt's own
undo stack is never used, so undo/redo is the Model's alone."""
from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterable
from typing import Any

from NodeGraphQt import NodeGraph
from NodeGraphQt.constants import ViewerEnum
from NodeGraphQt.qgraphics.pipe import PipeItem
from NodeGraphQt.qgraphics.port import PortItem
from PySide6 import QtCore, QtGui, QtWidgets

from canvas.bridge import ModelBridge
from canvas.clipboard import clipboard_templates, copy_layers, paste_specs
from canvas.lazy import BoxIndex, LazyNodes, NodeGeom
from canvas.nodes import (
    LayerNode,
    LayerNodeItem,
    Run,
    category_color,
    info_size,
    input_port_center,
    input_port_name,
    make_node_class,
    node_box,
    output_port_center,
)
from canvas.overview import OVERVIEW_LOD, OverviewItem
from engine.descriptors import InputKind, LayerDesc
from engine.errors import LayerLabError
from engine.events import (
    ActivationChanged,
    CustomLayerChanged,
    Event,
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
from engine.layout import layered_positions
from engine.model import Model
from engine.registry import Registry
from engine.templates import find_desc, template_name, template_type
from engine.tensor import Dims
from engine.typecheck import Diagnostic

#: text/plain payload of a palette drag: ``layerlab-layer:<type>``
DRAG_PREFIX = "layerlab-layer:"
NODE_SIZE_GUESS = (180.0, 90.0)
TEXT = "#d8d8d8"
LINK_PICK_PX = 5.0  # a click this close to a link (on screen) selects it
POSITION_DECIMALS = 1  # positions are kept to a tenth of a scene unit (what the canvas can show)
FREE_GAP = 60.0  # space left between a new layer and its neighbours
#: models of up to this many layers get every node at once; larger ones get nodes as they are needed (canvas.lazy);
#: LAYERLAB_EAGER_LAYERS=0 makes every canvas lazy (to run the tests through that path)
EAGER_LAYERS = int(os.environ.get("LAYERLAB_EAGER_LAYERS", "300"))
PREFETCH_BUDGET_S = 0.005  # idle time spent per turn of the event loop making nodes near the view
BULK_UNINDEXED = 100  # making this many nodes at once, the scene's index is rebuilt once at the end

#: the scale ``focus_layer`` zooms in to from further out: nodes drawn in full (``canvas.nodes.DETAIL_LOD``)
FOCUS_SCALE = 0.8


def snap_position(pos: tuple[float, float]) -> tuple[float, float]:
    """A canvas position as stored in the model and the file (no 13-decimal noise from the view transform)."""
    return (round(float(pos[0]), POSITION_DECIMALS), round(float(pos[1]), POSITION_DECIMALS))
#: model events after which the overview (zoomed-out drawing) recomputes its boxes and lines
STRUCTURE_EVENTS = (LayerEvent, TemplateEvent, CustomLayerChanged)


_PRESSES = (QtCore.QEvent.Type.MouseButtonPress, QtCore.QEvent.Type.MouseButtonDblClick)


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
        self._build_all()

    def _build_all(self) -> None:
        """Record every layer; a small model gets all its nodes and links now, in bulk (no repaint, one layout per
        node), a large one as they are needed (when seen, looked up, or near the view while idle)."""
        for name in self.net_model.layers:
            self.nodes.add(name)
        self._eager = len(self.nodes) <= EAGER_LAYERS
        if self._eager:
            viewer = self.viewer()
            viewer.setUpdatesEnabled(False)
            try:
                self._materialize_many(list(self.nodes), neighbours=False)
            finally:
                viewer.setUpdatesEnabled(True)
        self.overview = OverviewItem(lambda: self.nodes, self._geometry, self._links, self._overview_detail,
                                     lambda: [node for _, node in self.nodes.created_items()], lambda: self._severity)
        self.scene().addItem(self.overview)
        self.overview.invalidate()

    @property
    def lazy(self) -> bool:
        """Whether nodes are made as they are needed (a large model) rather than all at once."""
        return not self._eager

    @property
    def making_nodes(self) -> bool:
        """Whether idle time is still making the nodes near the view."""
        return self._prefetch.isActive()

    def created_count(self) -> int:
        """How many layers have their node items now."""
        return len(self.nodes.created_items())

    def _reader_index(self) -> dict[str, list[str]]:
        """Layer -> the layers that read it (kept until the links change)."""
        if self._readers is None:
            index: dict[str, list[str]] = {}
            for name, spec in self.net_model.layers.items():
                for src in spec.inputs:
                    if src and name not in index.setdefault(src, []):
                        index[src].append(name)
            self._readers = index
        return self._readers

    def _neighbours(self, name: str) -> list[str]:
        """The layers ``name`` reads and the layers reading it."""
        spec = self.net_model.layers.get(name)
        sources = [s for s in spec.inputs if s] if spec is not None else []
        return sources + self._reader_index().get(name, [])

    def _materialize(self, name: str) -> LayerNode:
        """Make ``name``'s node (and its neighbours', so that every link of it is drawn)."""
        if name not in self.net_model.layers:
            raise KeyError(name)
        self._materialize_many([name])
        return self.nodes.created(name)

    def _materialize_many(self, names: Iterable[str], neighbours: bool = True) -> list[str]:
        """Make the nodes of ``names`` that have none (with ``neighbours``, of the layers linked to them too), in
        one bulk pass: items, one layout each, then their links to every node that exists. Returns the names
        made."""
        wanted = [n for n in names if n in self.nodes and self.nodes.created(n) is None and n in self.net_model.layers]
        if neighbours and wanted:
            more = [other for name in wanted for other in self._neighbours(name)
                    if other in self.nodes and self.nodes.created(other) is None]
            wanted = list(dict.fromkeys(wanted + more))
        if not wanted:
            return []
        self._bulk = True
        LayerNodeItem.defer_layout = True
        scene = self.scene()
        reindex = len(wanted) >= BULK_UNINDEXED  # many items placed at once: one index rebuild, not one per move
        if reindex:
            scene.setItemIndexMethod(QtWidgets.QGraphicsScene.ItemIndexMethod.NoIndex)
            QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.CursorShape.WaitCursor)
        try:
            made = [self._create_node(name) for name in wanted]
            for name in wanted:
                self._sync_ports(name)
            LayerNodeItem.defer_layout = False
            for node in made:
                node.view.draw_node()
                node.place_badge()
            fresh = set(wanted)
            readers = self._reader_index()
            for name in wanted:  # links last: each is drawn once, between placed ports
                self._sync_links(name)
            for reader in dict.fromkeys(r for name in wanted for r in readers.get(name, ()) if r not in fresh):
                if self.nodes.created(reader) is not None:
                    self._sync_links(reader)
        finally:
            self._bulk = False
            LayerNodeItem.defer_layout = False
            if reindex:
                scene.setItemIndexMethod(QtWidgets.QGraphicsScene.ItemIndexMethod.BspTreeIndex)
                QtWidgets.QApplication.restoreOverrideCursor()
        if self.overview is not None:
            self.overview.adopt(wanted, made)
        return wanted

    def _geometry(self, name: str) -> NodeGeom:
        """Where ``name``'s node is: measured from its items when it has them (they may be being dragged), else
        from the model (position) and the layout rule (size)."""
        node = self.nodes.created(name)
        if node is not None:
            view = node.view
            outs = node.output_ports()
            return NodeGeom(view.sceneBoundingRect(), tuple(view.color[:3]), view,
                            outs[0].view.sceneBoundingRect().center() if outs else None,
                            [p.view.sceneBoundingRect().center() for p in node.input_ports()])
        return self._predicted(name)

    def _predicted(self, name: str) -> NodeGeom:
        """``name``'s box from the model and the layout rule (kept until the layer changes)."""
        geom = self._geo.get(name)
        if geom is None:
            geom = self._geo[name] = self._measure(name)
        return geom

    def _measure(self, name: str) -> NodeGeom:
        """The box a node for ``name`` would have (the layout rule of its items, without making them)."""
        spec = self.net_model.layers[name]
        desc = self._desc(name)
        n_in = self._wanted_ports(name)
        has_out = desc is None or desc.generates_output
        w, h = node_box(name, [input_port_name(desc, i) for i in range(n_in)], [None] if has_out else [],
                        info_size(self._info_lines(name)))
        x, y = spec.position
        out = QtCore.QPointF(x + output_port_center(w)[0], y + output_port_center(w)[1]) if has_out else None
        ins = [QtCore.QPointF(x + input_port_center(i)[0], y + input_port_center(i)[1]) for i in range(n_in)]
        return NodeGeom(QtCore.QRectF(x, y, w, h), category_color(desc), None, out, ins)

    def node_rect(self, name: str) -> QtCore.QRectF:
        """``name``'s node box on the scene (whether or not its items exist yet)."""
        return self._geometry(name).rect

    def _desc(self, name: str) -> LayerDesc | None:
        node = self.nodes.created(name)
        return node.desc if node is not None else self._node_class(self.net_model.layers[name].type).desc

    def _overview_detail(self, name: str) -> str:
        """The line under a layer's name on the zoomed-out canvas: its output shape, else its type."""
        shape = self._shapes.get(name)
        if shape is not None:
            return _dims_text(shape)
        desc = self._desc(name) if name in self.net_model.layers else None
        return desc.display_name if desc is not None else ""

    def _links(self) -> list[tuple[str, str, int]]:
        """Every link of the model: (source, target, input index)."""
        return [(src, name, i) for name, spec in self.net_model.layers.items() for i, src in enumerate(spec.inputs) if src]

    def get_unique_name(self, name: str) -> str:
        """Node titles are layer names, which the Model keeps unique (NodeGraphQt's own search is quadratic)."""
        return name

    # ---- queries ---------------------------------------------------------------------------------
    def layer_of(self, node: Any) -> str | None:
        """Layer name shown by a node (or node view item)."""
        return self._names.get(getattr(node, "id", None))

    def selected_layers(self) -> list[str]:
        """Selected layer names, in model order."""
        picked = {self._names.get(item.id) for item in self.viewer().selected_nodes()}
        return [name for name in self.nodes if name in picked]

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
                        value = _compact_dims(p, value)
                    lines.append([(f"{p.name}: ", TEXT, False, False), (value, TEXT, True, False)])
        if spec.activation and spec.activation != "none":
            lines.append([("activation: ", TEXT, False, False), (spec.activation, TEXT, True, False)])
        if spec.permanent:
            lines.append([("permanent", TEXT, False, True)])
        shape = self._shapes.get(name)
        lines.append([(f"→ {_dims_text(shape)}", "#8fd18f", False, False)] if shape is not None
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
    def _node_moved(self, view: Any) -> None:
        """A node item moved (dragged, or placed from the model): refresh the overview once, after the moves."""
        name = self.layer_of(view)
        if name is not None:
            self._moved.add(name)
        if not self._moves_pending:
            self._moves_pending = True
            QtCore.QTimer.singleShot(0, self._after_moves)

    def _after_moves(self) -> None:
        self._moves_pending = False
        moved, self._moved = self._moved, set()
        if self.overview is not None:
            self.overview.invalidate(moved)

    def _on_model_event(self, ev: Event) -> None:
        if isinstance(ev, LayerEvent):
            self._forget(ev.layer)
            if not isinstance(ev, (ParamChanged, ActivationChanged, LayerMoved)):  # layers or links changed
                self._readers = None
                self._index = None
        if isinstance(ev, LayerRenamed):
            self._forget(ev.old)
        elif isinstance(ev, (TemplateEvent, CustomLayerChanged)):
            self._geo.clear()
            self._index = None
            self._covered = QtCore.QRectF()
        self._apply_event(ev)
        if self.overview is not None and isinstance(ev, STRUCTURE_EVENTS):
            if self.overview.active and isinstance(ev, (LayerAdded, LinkChanged, TemplateChanged)):
                self.overview.apply_mode()  # new nodes and links follow the current mode
            if isinstance(ev, (LayerRenamed, TemplateEvent, CustomLayerChanged)):
                self.overview.invalidate()
            else:
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
        if not moves:
            return
        try:
            with self.net_model.macro("Move " + ", ".join(n for n, _ in moves)):
                for name, pos in moves:
                    self.net_model.move_layer(name, snap_position(pos))
        except LayerLabError as exc:  # a read-only model (analysis mode): the nodes go back where they were
            for name, _ in moves:
                x, y = self.net_model.layers[name].position
                self.nodes[name].set_pos(x, y)
            self.status_message.emit(f"Move refused: {exc}")

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
        files = [u.toLocalFile() for u in mimedata.urls() if u.isLocalFile()] if mimedata.hasUrls() else []
        if files:
            self.files_dropped.emit(files)
            return
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

    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:
        kind = event.type()
        if kind == QtCore.QEvent.Type.Paint and obj is self.viewer().viewport():
            self._before_paint()
        elif kind in _PRESSES and obj is self.viewer().viewport():
            self._fitted = True
            self._materialize_at(self.viewer().mapToScene(event.position().toPoint()))
        elif kind == QtCore.QEvent.Type.MouseMove and obj is self.viewer().viewport():
            self._materialize_in_band(event.position().toPoint())
        elif kind in (QtCore.QEvent.Type.Wheel, QtCore.QEvent.Type.KeyPress):
            self._fitted = True
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

    # ---- nodes made as they are needed (large models) ---------------------------------------------
    def _view_rect(self) -> QtCore.QRectF:
        viewer = self.viewer()
        return viewer.mapToScene(viewer.viewport().rect()).boundingRect()

    def _pending_in(self, area: QtCore.QRectF) -> list[tuple[str, bool, float]]:
        """Layers without a node whose box, or a link of which, crosses ``area``: (name, whether its box does,
        distance from the area's centre), nearest first."""
        pending = self.nodes.pending()
        if not pending:
            return []
        if self._index is not None and self._stale and not self._index.update(self._stale, self._predicted):
            self._index = None
        self._stale.clear()
        if self._index is None:
            self._index = BoxIndex(list(self.nodes), self._predicted, self._links())
        return self._index.crossing(area, set(pending))

    def _make(self, found: list[tuple[str, bool, float]]) -> None:
        """Make the nodes ``_pending_in`` found: those whose box is in the area with their neighbours (every link
        of a shown node drawn), those only reached by a link crossing it alone (the link drawn, nothing more)."""
        self._materialize_many([n for n, by_box, _ in found if by_box])
        self._materialize_many([n for n, by_box, _ in found if not by_box], neighbours=False)

    def _forget(self, name: str) -> None:
        """``name``'s box may have changed: measured again when it is needed."""
        self._geo.pop(name, None)
        self._stale.add(name)
        self._covered = QtCore.QRectF()

    def _before_paint(self) -> None:
        """Before the canvas paints: pick the drawing mode for the scale, and, zoomed in, make the nodes in view
        that have none yet (and their neighbours, so that their links are drawn); then look for more to make
        near the view while idle."""
        if self._eager:
            return
        scale = self.viewer().transform().m11()
        if self.overview is not None:
            self.overview.set_active(scale < OVERVIEW_LOD)
        if not self._fitted or not self.nodes.pending():
            return
        if scale >= OVERVIEW_LOD:
            view = self._view_rect()
            if not self._covered.contains(view):
                self._make(self._pending_in(view))
                self._covered = view
        if not self._prefetch.isActive():
            self._prefetch.start()

    def _prefetch_tick(self) -> None:
        """Idle time: make the nodes nearest the view centre, within what one zoom-in to detail reaches, for at
        most PREFETCH_BUDGET_S per turn of the event loop (so a gesture waits at most that long)."""
        try:
            self._prefetch_near_view()
        except RuntimeError:  # the canvas was closed before the timer came due
            pass

    def _prefetch_near_view(self) -> None:
        if self._eager or not self._fitted or not self.nodes.pending():
            return
        viewer = self.viewer()
        vp = viewer.viewport().rect()
        scale = max(viewer.transform().m11(), OVERVIEW_LOD)
        size = QtCore.QSizeF(2.0 * vp.width() / scale, 2.0 * vp.height() / scale)
        # around the view centre (Zoom In, the keyboard) and the mouse pointer (the wheel zooms at the pointer)
        centers = [viewer.mapToScene(vp.center())]
        cursor = viewer.viewport().mapFromGlobal(QtGui.QCursor.pos())
        if vp.contains(cursor):
            centers.append(viewer.mapToScene(cursor))
        step = size.width() / 8  # the list is redone when the view moved by an eighth of the region or more
        key = (tuple((round(c.x() / step), round(c.y() / step)) for c in centers), round(size.width()), len(self.nodes))
        if key != self._todo_key:  # the view moved: what is near it now, nearest first
            self._todo_key = key
            found: dict[str, tuple[str, bool, float]] = {}
            for c in centers:
                for item in self._pending_in(QtCore.QRectF(c.x() - size.width() / 2, c.y() - size.height() / 2,
                                                           size.width(), size.height())):
                    if item[0] not in found or item[2] < found[item[0]][2]:
                        found[item[0]] = item
            self._todo = sorted(found.values(), key=lambda t: t[2])
        start = time.perf_counter()
        while self._todo and time.perf_counter() - start < PREFETCH_BUDGET_S:
            self._make(self._todo[:2])
            self._todo = [t for t in self._todo[2:] if self.nodes.created(t[0]) is None and t[0] in self.nodes]
        if self._todo:
            self._prefetch.start()

    def _materialize_at(self, pos: QtCore.QPointF) -> None:
        """A press at ``pos``: make the nodes under it and the links near it first, so the press reaches them."""
        if self._eager or not self.nodes.pending():
            return
        tol = max(LINK_PICK_PX, 12.0) / max(self.viewer().transform().m11(), 1e-6)
        self._make(self._pending_in(QtCore.QRectF(pos.x() - tol, pos.y() - tol, 2 * tol, 2 * tol)))

    def _materialize_in_band(self, pos: QtCore.QPoint) -> None:
        """While a rubber band is drawn, the nodes it covers get their items (so that it selects them)."""
        viewer = self.viewer()
        if self._eager or not (viewer.LMB_state and viewer._rubber_band.isActive) or not self.nodes.pending():
            return
        rect = QtCore.QRect(viewer._origin_pos, pos).normalized()
        area = viewer.mapToScene(rect).boundingRect()
        pending = [n for n in self.nodes.pending() if self._geometry(n).rect.intersects(area)]
        self._materialize_many(pending, neighbours=False)

    # ---- editing operations (menus and tests call these) -----------------------------------------
    def view_center(self) -> tuple[float, float]:
        vp = self.viewer().viewport().rect().center()
        p = self.viewer().mapToScene(vp)
        return snap_position((p.x() - NODE_SIZE_GUESS[0] / 2, p.y() - NODE_SIZE_GUESS[1] / 2))

    def free_center(self) -> tuple[float, float]:
        """Where a new layer goes: the view centre, or the first free place below it (never on another node)."""
        return self.free_spot(*self.view_center())

    def add_layer(self, layer_type: str, pos: tuple[float, float] | None = None) -> str | None:
        """Add a layer of ``layer_type`` (a plugin layer or ``template:NAME``; at the view centre by default),
        select it, return its name."""
        if find_desc(self.net_model, self.registry, layer_type) is None:
            self.status_message.emit(f"Unknown layer type {layer_type!r}")
            return None
        name = self.net_model.add_layer(layer_type, position=pos or self.free_center())
        self.select_layers([name])
        self.status_message.emit(f"Added {name}")
        return name

    def free_spot(self, x: float, y: float, size: tuple[float, float] = NODE_SIZE_GUESS,
                  step: float | None = None) -> tuple[float, float]:
        """The first position from (x, y) downwards where a node of ``size`` overlaps no other node."""
        step = step or size[1] + FREE_GAP / 2
        column = QtCore.QRectF(x, y, *size).adjusted(-FREE_GAP / 4, -FREE_GAP / 4, FREE_GAP / 4, 200 * step)
        boxes = [r for r in (self.node_rect(n) for n in self.nodes) if r.intersects(column)]
        for i in range(200):
            rect = QtCore.QRectF(x, y + i * step, *size).adjusted(-FREE_GAP / 4, -FREE_GAP / 4, FREE_GAP / 4, FREE_GAP / 4)
            if not any(r.intersects(rect) for r in boxes):
                return snap_position((x, y + i * step))
        return snap_position((x, y))

    def add_layer_at_port(self, item: PortItem) -> str | None:
        """Double-click on a free port: create an input (output) layer linked to it, in free space beside the
        port (left of an input, right of the output)."""
        ref = self._port_ref(item)
        if ref is None or item.connected_pipes:
            return None
        name, idx = ref
        layer_type = "output" if idx is None else "input"
        if self.registry.find_layer(layer_type) is None:
            return None
        node_rect = self.nodes[name].view.sceneBoundingRect()
        port_y = item.sceneBoundingRect().center().y() - NODE_SIZE_GUESS[1] / 2
        if idx is None:
            pos = self.free_spot(node_rect.right() + FREE_GAP, port_y)
        else:
            pos = self.free_spot(node_rect.left() - FREE_GAP - NODE_SIZE_GUESS[0], port_y)
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
        """Select exactly ``names`` (their nodes are made if they have none yet)."""
        wanted = [n for n in dict.fromkeys(names) if n in self.nodes]
        self._materialize_many(wanted)
        self.clear_selection()
        for name in wanted:
            self.nodes[name].view.selected = True  # (not set_selected: it pushes onto NodeGraphQt's unused undo stack)
        self.selection_changed.emit(self.selected_layers())

    def focus_layer(self, name: str) -> None:
        """Select ``name`` and centre the view on it, zoomed in to where its ports and parameters are drawn when
        the view was zoomed out further (a Type Check row of a large model, a report's layer)."""
        if name in self.nodes:
            self._fitted = True
            self.select_layers([name])
            if self.viewer().transform().m11() < FOCUS_SCALE:
                self.zoom_to(name, FOCUS_SCALE)
            else:
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

    def cursor_scene_pos(self) -> QtCore.QPointF | None:
        """Where the mouse pointer is on the canvas (None when it is outside the canvas)."""
        viewer = self.viewer()
        local = viewer.viewport().mapFromGlobal(QtGui.QCursor.pos())
        return viewer.mapToScene(local) if viewer.viewport().rect().contains(local) else None

    def paste(self, text: str | None = None, at: tuple[float, float] | None = None) -> list[str]:
        """Paste layers (from the clipboard by default) with their top-left corner at ``at``: by default at the
        mouse pointer when it is on the canvas, else beside the copied layers' own places (never on top of
        them); returns the new names."""
        if text is None:
            mime = QtGui.QGuiApplication.clipboard().mimeData()
            text = bytes(mime.data("application/x-layerlab-layers")).decode() if mime else ""
            text = text or QtGui.QGuiApplication.clipboard().text()
        try:
            specs = paste_specs(self.net_model, text, (0.0, 0.0))
        except (ValueError, TypeError, KeyError):
            self.status_message.emit("Nothing to paste: the clipboard holds no layers")
            return []
        if not specs:
            return []
        left = min(sp.position[0] for sp in specs)
        top = min(sp.position[1] for sp in specs)
        if at is None:
            cursor = self.cursor_scene_pos()
            if cursor is not None:
                at = (cursor.x(), cursor.y())
            else:
                right = max(sp.position[0] for sp in specs) + NODE_SIZE_GUESS[0]
                at = self.free_spot(right + FREE_GAP, top)
        for sp in specs:
            sp.position = snap_position((sp.position[0] - left + at[0], sp.position[1] - top + at[1]))
        needed = clipboard_templates(text)
        kept = [n for n, t in needed.items() if n in self.net_model.templates and self.net_model.templates[n] != t]
        custom = clipboard_templates(text, "custom-layers")
        kept += [n for n, t in custom.items() if self.net_model.custom_layers.get(n, t) != t]
        with self.net_model.macro("Paste"):
            for n, t in custom.items():
                if n not in self.net_model.custom_layers:
                    self.net_model.set_custom_layer(n, t)
            for n, t in needed.items():
                if n not in self.net_model.templates:
                    self.net_model.add_template(n, t)
            self.net_model.add_layers(specs, "Paste")
        names = [s.name for s in specs]
        self.select_layers(names)
        note = f" (this network's own definition of {', '.join(kept)} used)" if kept else ""
        self.status_message.emit(f"Pasted {len(names)} layer(s){note}")
        return names

    def duplicate_selection(self) -> list[str]:
        names = self.selected_layers()
        return self.paste(copy_layers(self.net_model, names)) if names else []

    def select_all_layers(self) -> None:
        self.select_layers(list(self.nodes))

    def arrange(self, names: Iterable[str] | None = None) -> int:
        """Lay out ``names`` (default: every layer) left to right by depth (engine.layout, igraph), from the
        top-left corner they occupy now, as one undo step; returns how many layers moved."""
        wanted = set(names) if names is not None else set(self.nodes)
        layers = {n: s for n, s in self.net_model.layers.items() if n in wanted and n in self.nodes}
        if not layers:
            return 0
        sizes = self.node_sizes(layers)
        origin = (min(s.position[0] for s in layers.values()), min(s.position[1] for s in layers.values()))
        positions = layered_positions(layers, sizes, origin)
        moves = [(n, p) for n, p in positions.items() if tuple(layers[n].position) != p]
        if moves:
            with self.net_model.macro("Arrange " + (f"{len(moves)} layers" if names is not None else "network")):
                for name, pos in moves:
                    self.net_model.move_layer(name, pos)
        self.status_message.emit(f"Arranged {len(layers)} layer(s)" if moves else "Already arranged")
        return len(moves)

    def node_sizes(self, names: Iterable[str]) -> dict[str, tuple[float, float]]:
        """(width, height) of the nodes of ``names`` (whether or not their items exist yet)."""
        return {n: (r.width(), r.height()) for n, r in ((n, self.node_rect(n)) for n in names)}

    def fit(self) -> None:
        """Frame the whole network (never magnified beyond 1:1)."""
        if not self.nodes:
            return
        self._fitted = True
        viewer = self.viewer()
        rect = QtCore.QRectF()
        for name in self.nodes:
            rect = rect.united(self.node_rect(name))
        rect = rect.adjusted(-40, -40, 40, 40)
        vp = viewer.viewport().size()
        if rect.width() < vp.width() and rect.height() < vp.height():
            center = rect.center()
            rect = QtCore.QRectF(0, 0, vp.width(), vp.height())
            rect.moveCenter(center)
        viewer._scene_range = rect
        viewer._update_scene()
        self._follow_zoom()

    def zoom_to(self, name: str, scale: float = 1.0) -> None:
        """Show layer ``name`` at the centre of the view at ``scale`` (1.0: one scene unit per pixel)."""
        viewer = self.viewer()
        vp = viewer.viewport().size()
        rect = QtCore.QRectF(0, 0, vp.width() / scale, vp.height() / scale)
        rect.moveCenter(self.node_rect(name).center())
        self._fitted = True
        viewer._scene_range = rect
        viewer._update_scene()
        self._follow_zoom()

    def _follow_zoom(self) -> None:
        """Pick the drawing mode for the new scale now (wheel zooms are caught when the overview paints)."""
        if self.overview is not None:
            self.overview.set_active(self.viewer().transform().m11() < OVERVIEW_LOD)

    def zoom(self, steps: int) -> None:
        """Zoom in (positive) or out (negative) by 10% steps around the view centre."""
        self._fitted = True
        for _ in range(abs(steps)):
            self.viewer()._set_viewer_zoom(1.0 if steps > 0 else -1.0, 0.0)
        self._follow_zoom()

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


