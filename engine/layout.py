"""Automatic canvas layout: a layered (Sugiyama) drawing, flowing left to right, computed by igraph's compiled
Sugiyama layout (ranking with cycles broken, crossing reduction, dummy vertices on long links).

Each layer's column follows its rank in the graph; inside a column, layers and the lanes of the links passing
through it are stacked in igraph's order without overlapping. The work grows about linearly with the number of
layers and links, and nothing recurses per layer, so graphs of any depth (a 10,000-layer chain) lay out. Used by
the designer's Arrange command and by importers, whose graphs come without positions. Qt-free: sizes are plain
numbers (the canvas passes its node sizes; defaults fit a typical node)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.model import LayerSpec

if TYPE_CHECKING:
    from engine.registry import Registry

NODE_SIZE = (180.0, 120.0)  # width, height of a node whose size is not given
COLUMN_GAP = 90.0  # free space between columns (where the links run)
ROW_GAP = 30.0  # free space between two layers of one column
LANE = 12.0  # room a link passing through a column takes there (between the layers of that column)
BAND_GAP = 160.0  # free space between two bands of a folded drawing (where the links to the next band run)
CROSSING_SWEEPS = 10  # igraph's crossing-reduction iterations (its default of 100 takes seconds on densenet121)


#: an estimate of the designer's node box without fonts (canvas.nodes.node_box measures the real one): pixels a
#: character of the 13 px bold title and of the 12 px info lines, and the fixed parts. Taken from DejaVu Sans, one
#: of the widest default fonts (identifiers average 7.8-8.6 px a character in the title, capitals 9.8), so the
#: real boxes are as large or smaller and the drawing never overlaps, only spreads a little on narrower fonts.
TITLE_CHAR, INFO_CHAR, INFO_LINE, PORT_ROW, TITLE_ROW = 9.2, 7.6, 14.5, 23.0, 28.0
def estimated_node_size(title: str, inputs: int, info: list[str]) -> tuple[float, float]:
    """(width, height) of a node with this title, ``inputs`` input ports (one output) and these info lines, as the
    designer would draw it (a generous estimate: see :data:`TITLE_CHAR`)."""
    width = max(len(title) * TITLE_CHAR + 32.0, max((len(t) for t in info), default=0) * INFO_CHAR + 18.0, 120.0)
    return width, TITLE_ROW + max(inputs, 1) * PORT_ROW + len(info) * INFO_LINE + 12.0


def estimated_sizes(layers: Mapping[str, LayerSpec], registry: Registry) -> dict[str, tuple[float, float]]:
    """:func:`estimated_node_size` of every layer: the info lines a node shows (its type, main parameters,
    activation, output shape) counted from the layer's descriptor, for drawings made where there is no canvas to
    measure (the command line's import)."""
    sizes = {}
    for name, spec in layers.items():
        desc = registry.find_layer(spec.type)
        info = [desc.display_name if desc else f"{spec.type} (unknown)"]
        if desc is not None:
            info += [f"{p.name}: {spec.params.get(p.name, p.default_text)}" for p in desc.params if p.main]
        if spec.activation and spec.activation != "none":
            info.append(f"activation: {spec.activation}")
        if spec.permanent:
            info.append("permanent")
        info.append("→ 1×1024×1024×1024")  # the output shape, shown once the network is planned
        inputs = max(len(spec.inputs), len(desc.inputs) if desc else 0) + (1 if desc and desc.infinite_input else 0)
        sizes[name] = estimated_node_size(name, inputs, info)
    return sizes


@dataclass
class Drawing:
    """A layered drawing: the top-left (x, y) of every layer, and for each link that spans more than one column
    (``(source, target)``) the points it should pass through, one per column crossed, in lanes kept free of
    layers (where a link drawn straight would run behind the layers between its ends)."""

    positions: dict[str, tuple[float, float]] = field(default_factory=dict)
    bends: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)


def _links(layers: Mapping[str, LayerSpec]) -> list[tuple[str, str]]:
    """Distinct (source, target) links between different layers of ``layers``."""
    return [(src, name) for name, spec in layers.items() for src in dict.fromkeys(spec.inputs)
            if src is not None and src != name and src in layers]


def layered_drawing(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]] | None = None,
                    origin: tuple[float, float] = (0.0, 0.0)) -> Drawing:
    """The left-to-right layered drawing of ``layers`` (see :func:`layered_positions`) with the bend points of its
    long links."""
    import igraph  # noqa: PLC0415 - imported when a layout is asked for

    sizes = sizes or {}
    names = list(layers)
    index = {n: i for i, n in enumerate(names)}
    links = _links(layers)
    graph = igraph.Graph(n=len(names), edges=[(index[s], index[t]) for s, t in links], directed=True)
    drawing = Drawing()
    top = origin[1]
    for members in sorted(graph.connected_components(mode="weak"), key=min):  # in the order of the layers
        sub = graph.induced_subgraph(members, implementation="create_from_scratch") if len(members) < len(names) \
            else graph
        if sub.ecount():
            coords, paths = igraph.GraphBase._layout_sugiyama(sub, None, None, 1, 1, CROSSING_SWEEPS)
        else:
            coords, paths = [[0.0, 0.0]], []
        vertex_names = [names[v] for v in members]  # induced_subgraph keeps the vertices' order
        top = _place(sub, vertex_names, coords, paths, sizes, origin[0], top, drawing) + 2 * ROW_GAP
    return drawing


def _place(sub: object, vertex_names: list[str], coords: list[list[float]], paths: list[list[list[float]]],
           sizes: Mapping[str, tuple[float, float]], left: float, top: float, drawing: Drawing) -> float:
    """Columns from igraph's ranks (as wide as their widest layer); inside a column, layers and lanes in igraph's
    order, each as near the middle of what links into it from the left as the items above it allow (one pass
    over the columns, left to right). Adds to ``drawing``; returns the bottom of the component."""
    edges = sub.get_edgelist()  # type: ignore[attr-defined]
    n = len(vertex_names)
    rank = [int(r) for _, r in coords]
    across = [a for a, _ in coords]
    height = [sizes.get(name, NODE_SIZE)[1] for name in vertex_names]
    ups: list[list[int]] = [[] for _ in range(n)]
    lanes: list[list[int]] = []  # per edge, its lane items
    for e, points in enumerate(paths):
        s, t = edges[e]
        chain = [s]
        for a, r in points:
            chain.append(len(rank))
            rank.append(int(r))
            across.append(a)
            height.append(LANE)
            ups.append([])
        chain.append(t)
        lanes.append(chain[1:-1])
        if rank[s] > rank[t]:  # a link reversed to break a cycle: its lanes run from the target
            chain.reverse()
        for lo, hi in zip(chain, chain[1:]):
            ups[hi].append(lo)
    for s, t in edges:
        if abs(rank[s] - rank[t]) == 1:
            ups[max(s, t, key=rank.__getitem__)].append(min(s, t, key=rank.__getitem__))
    columns: dict[int, list[int]] = {}
    for item in sorted(range(len(rank)), key=lambda i: (rank[i], across[i])):
        columns.setdefault(rank[item], []).append(item)
    column_x, widths, x = {}, {}, left
    for r in sorted(columns):
        column_x[r] = x
        widths[r] = max((sizes.get(vertex_names[i], NODE_SIZE)[0] for i in columns[r] if i < n), default=LANE)
        x += widths[r] + COLUMN_GAP
    centre = [0.0] * len(rank)
    bottom = top
    for r in sorted(columns):
        free = top
        for item in columns[r]:
            placed = [centre[u] for u in ups[item] if rank[u] < r]
            y = max(free, sum(placed) / len(placed) - height[item] / 2 if placed else top)
            centre[item] = y + height[item] / 2
            free = y + height[item] + (ROW_GAP if item < n else LANE / 2)  # a lane's neighbours: half a lane
            bottom = max(bottom, y + height[item])
            if item < n:
                drawing.positions[vertex_names[item]] = (round(column_x[r], 1), round(y, 1))
    for e, items in enumerate(lanes):
        if items:
            s, t = edges[e]
            bend = [(round(column_x[rank[i]] + widths[rank[i]] / 2, 1), round(centre[i], 1)) for i in items]
            drawing.bends[(vertex_names[s], vertex_names[t])] = bend if rank[s] < rank[t] else bend[::-1]
    return bottom


def layered_positions(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]] | None = None,
                      origin: tuple[float, float] = (0.0, 0.0)) -> dict[str, tuple[float, float]]:
    """Top-left (x, y) of every layer in a left-to-right layered drawing, rounded to 0.1; ``sizes`` gives
    (width, height) per layer. Unlinked groups of layers are stacked one under another; cycles are allowed
    (a link of each is reversed to rank them)."""
    return layered_drawing(layers, sizes, origin).positions
def overlaps(positions: Mapping[str, tuple[float, float]], sizes: Mapping[str, tuple[float, float]]) -> list[tuple[str, str]]:
    """Pairs of layers whose boxes overlap (for checks and tests)."""
    boxes = sorted((p[0], p[1], p[0] + sizes.get(n, NODE_SIZE)[0], p[1] + sizes.get(n, NODE_SIZE)[1], n)
                   for n, p in positions.items())
    found = []
    for i, (_x0, y0, x1, y1, a) in enumerate(boxes):
        for u0, v0, _u1, v1, b in boxes[i + 1:]:
            if u0 >= x1:
                break
            if v0 < y1 and y0 < v1:
                found.append((a, b))
    return found


def fold_to_aspect(positions: dict[str, tuple[float, float]], sizes: dict[str, tuple[float, float]],
                   aspect: float) -> dict[str, tuple[float, float]]:
    """A left-to-right drawing much wider than ``aspect`` (width / height of the view) cut into bands stacked
    one under another, like lines of text, so that fitting it to the view keeps the layers readable. Whole
    columns (layers with the same x) stay together; a drawing that is not too wide is returned as it is."""
    if not positions:
        return dict(positions)
    left = min(x for x, _ in positions.values())
    top = min(y for _, y in positions.values())
    right = max(x + sizes[n][0] for n, (x, _) in positions.items())
    bottom = max(y + sizes[n][1] for n, (_, y) in positions.items())
    width, height = right - left, bottom - top + BAND_GAP
    bands = max(1, round((width / (aspect * height)) ** 0.5))
    if bands == 1:
        return dict(positions)
    columns = sorted({x for x, _ in positions.values()})
    per_band = width / bands
    band_of = {x: min(bands - 1, int((x - left) / per_band)) for x in columns}
    start = {}
    for x in columns:
        start.setdefault(band_of[x], x)
    return {n: (round(left + x - start[band_of[x]], 1), round(y + band_of[x] * height, 1))
            for n, (x, y) in positions.items()}


def readable_positions(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]] | None = None,
                       aspect: float = 1.6) -> dict[str, tuple[float, float]]:
    """The layered drawing of ``layers`` folded into bands for a view of width / height ``aspect``: how an imported
    graph is placed (the designer passes its node sizes and its view's shape; the command line
    :func:`estimated_sizes`)."""
    sizes = {n: (sizes or {}).get(n, NODE_SIZE) for n in layers}
    return fold_to_aspect(layered_positions(layers, sizes), sizes, aspect)


def grouped_positions(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]],
                      collapsed: set[str], aspect: float = 1.6) -> dict[str, tuple[float, float]]:
    """A readable drawing of a grouped network: the layers of each group of ``collapsed`` (outermost ones count)
    laid out together in one block (``readable_positions``), then those blocks and the other layers laid out as
    one graph, each block where its group stands. So a collapsed group's box takes its layers' place, and
    expanding it shows them there, not spread over the whole drawing."""
    from engine.groups import outermost_collapsed  # noqa: PLC0415

    unit = {}
    for n, s in layers.items():
        top = outermost_collapsed(s.group, collapsed) if s.group else None
        unit[n] = n if top is None else f"group:{top}"  # (a layer name holds no ':')
    blocks: dict[str, dict[str, LayerSpec]] = {}
    for name, spec in layers.items():
        if unit[name] != name:
            blocks.setdefault(unit[name], {})[name] = spec
    inner: dict[str, dict[str, tuple[float, float]]] = {}
    outer_sizes: dict[str, tuple[float, float]] = {}
    for path, members in blocks.items():
        pos = readable_positions(members, sizes, aspect)
        left, top = min(x for x, _ in pos.values()), min(y for _, y in pos.values())
        inner[path] = {n: (x - left, y - top) for n, (x, y) in pos.items()}
        outer_sizes[path] = (max(x + sizes.get(n, NODE_SIZE)[0] for n, (x, _) in inner[path].items()),
                             max(y + sizes.get(n, NODE_SIZE)[1] for n, (_, y) in inner[path].items()))
    outer: dict[str, LayerSpec] = {}
    for name, spec in layers.items():
        key = unit[name]
        node = outer.setdefault(key, LayerSpec(key, "group" if key in blocks else spec.type))
        for src in spec.inputs:
            if src is not None and src in unit and unit[src] != key and unit[src] not in node.inputs:
                node.inputs.append(unit[src])
        if key not in blocks:
            outer_sizes[key] = sizes.get(name, NODE_SIZE)
    placed = readable_positions(outer, outer_sizes, aspect)
    out = {}
    for key, (x, y) in placed.items():
        if key in inner:
            for name, (dx, dy) in inner[key].items():
                out[name] = (round(x + dx, 1), round(y + dy, 1))
        else:
            out[key] = (x, y)
    return out
