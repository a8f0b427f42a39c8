"""Automatic canvas layout: a layered (Sugiyama) drawing, flowing left to right, computed by igraph's compiled
Sugiyama layout (ranking with cycles broken, crossing reduction, dummy vertices on long links).

Each layer's column follows its rank in the graph; inside a column, layers and the lanes of the links passing
through it are stacked in igraph's order without overlapping. The work grows about linearly with the number of
layers and links, and nothing recurses per layer, so graphs of any depth (a 10,000-layer chain) lay out. Used by
the designer's Arrange command and by importers, whose graphs come without positions. Qt-free: sizes are plain
numbers (the canvas passes its node sizes; defaults fit a typical node)."""
from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
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
BLOCK_SHARE = 0.3  # a collapsed group's block is at least this share of the largest one's width and height
LOOSE_SHARE = 0.5  # beside collapsed groups, a layer in none has a place at least this share of the least block's
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
    """A layered drawing: the top-left (x, y) of every layer, and for each link (``(source, target)``) the route
    it takes so that it never runs behind a layer: where it leaves its source's column (the column's right
    edge), then the entry and exit of each lane it passes through in the columns it crosses (lanes are kept free
    of layers), and where it enters its target's column, plus detours through the free space between bands
    when the drawing is folded. Between two points of a route the link runs either straight (the points share
    their x or their y) or, in the free space between two columns, from one height to the other. The first and
    the last point's heights are those of the source and target boxes' tops: the canvas draws from the real
    ports (see :func:`route_through`)."""

    positions: dict[str, tuple[float, float]] = field(default_factory=dict)
    bends: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)
    #: (x, y, width, height) of each collapsed group's block in a grouped drawing (:func:`grouped_drawing`)
    blocks: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)


def route_through(start: tuple[float, float], route: list[tuple[float, float]],
                  end: tuple[float, float]) -> list[tuple[float, float]]:
    """The polyline of a link from its output port ``start`` to its input port ``end`` along ``route`` (a
    :class:`Drawing` route): level with the port to the edge of the source's column, then the route, then
    level with the input port into it. Each segment is horizontal, vertical, or crosses the free space between
    two columns."""
    if len(route) < 2:
        return [start, end]
    first, last = route[0], route[-1]
    middle = route[1:-1]
    return [start, (first[0], start[1]), *middle, (last[0], end[1]), end]


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
        s, t = edges[e]
        if rank[s] >= rank[t]:  # a link reversed to break a cycle: drawn as the canvas draws any link
            continue
        a, b = vertex_names[s], vertex_names[t]
        route = [(round(column_x[rank[s]] + widths[rank[s]], 1), drawing.positions[a][1])]
        for i in items:
            x, y = column_x[rank[i]], round(centre[i], 1)
            route += [(round(x, 1), y), (round(x + widths[rank[i]], 1), y)]
        route.append((round(column_x[rank[t]], 1), drawing.positions[b][1]))
        drawing.bends[(a, b)] = route
    for s, t in edges:  # links between neighbouring columns (igraph gives them no path)
        if rank[t] - rank[s] == 1 and (vertex_names[s], vertex_names[t]) not in drawing.bends:
            a, b = vertex_names[s], vertex_names[t]
            drawing.bends[(a, b)] = [(round(column_x[rank[s]] + widths[rank[s]], 1), drawing.positions[a][1]),
                                     (round(column_x[rank[t]], 1), drawing.positions[b][1])]
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
    return fold_drawing(Drawing(dict(positions)), sizes, aspect).positions


def group_boundaries(columns: Mapping[float, Iterable[str]]) -> list[float]:
    """The columns (left edges) where a new block starts: those whose layers' groups (``LayerSpec.group`` paths, the
    innermost ones) share none with the column before. A band cut there keeps each block in one band."""
    out, before = [], None
    for x in sorted(columns):
        here = set(columns[x])
        if before is not None and not here & before:
            out.append(x)
        before = here
    return out


def _bands(columns: list[float], extent: dict[float, list[float]], left: float, width: float,
           aspect: float, prefer: Sequence[float] = ()
           ) -> tuple[int, dict[float, int], list[tuple[float, float]], list[float]]:
    """How many bands to cut a drawing of these ``columns`` (left edges; their vertical ``extent``) into: the
    count whose folded drawing fits a view of shape ``aspect`` largest. A cut moves to the nearest column of
    ``prefer`` (where a block starts, :func:`group_boundaries`) within a third of a band's width. Returns the count,
    each column's band, each band's (top, bottom) and the cuts (the left edge of each band after the first)."""
    wanted = sorted(prefer)

    def edges_of(bands: int) -> list[float]:
        per_band = width / bands
        edges: list[float] = []
        for k in range(1, bands):
            edge = left + k * per_band
            i = bisect.bisect_left(wanted, edge)
            near = [p for p in wanted[max(0, i - 1):i + 1] if abs(p - edge) <= per_band / 3]
            edge = min(near, key=lambda p: abs(p - edge)) if near else edge
            edges.append(max(edge, edges[-1]) if edges else edge)
        return edges

    def cut(bands: int) -> tuple[float, dict[float, int], list[tuple[float, float]], list[float]]:
        edges = edges_of(bands)
        band_of = {x: bisect.bisect_right(edges, x) for x in columns}
        spans = [(math.inf, -math.inf)] * bands
        widths = [(math.inf, -math.inf)] * bands
        for x in columns:
            b, (lo, hi) = band_of[x], extent[x]
            spans[b] = (min(spans[b][0], lo), max(spans[b][1], hi))
            widths[b] = (min(widths[b][0], x), max(widths[b][1], x))
        spans = [s if s[0] <= s[1] else (0.0, 0.0) for s in spans]
        wide = max((hi - lo for lo, hi in widths if lo <= hi), default=0.0) + width / max(len(columns), 1)
        height = sum(hi - lo for lo, hi in spans) + BAND_GAP * (bands - 1)
        return max(wide / aspect, height), band_of, spans, edges  # the larger side, in the view's shape

    overall = max(hi for _, hi in extent.values()) - min(lo for lo, _ in extent.values()) + BAND_GAP
    guess = max(1, round((width / (aspect * overall)) ** 0.5))
    if guess == 1:  # not much wider than the view: kept in one piece
        return 1, dict.fromkeys(columns, 0), [(min(lo for lo, _ in extent.values()), overall - BAND_GAP)], []
    candidates = sorted({max(1, min(len(columns), b)) for b in range(1, 4 * guess + 2)})
    if len(candidates) > 48:  # (a very long drawing: around the guess, coarser far from it)
        candidates = sorted({max(1, round(guess * 1.08 ** k)) for k in range(-20, 21)} | {1})
    best = min((cut(b)[0], b) for b in candidates)[1]
    _, band_of, spans, edges = cut(best)
    return best, band_of, spans, edges


def fold_drawing(drawing: Drawing, sizes: Mapping[str, tuple[float, float]], aspect: float,
                 groups: Mapping[str, str] | None = None) -> Drawing:
    """:func:`fold_to_aspect` of a drawing with its routes: a route's points move with their columns, and a link
    reaching into a later band leaves its band through the free space after its column, runs back along the
    gap under the band, and comes down left of the drawing into the band of its target. ``groups`` (each layer's
    group path): bands are cut where a block starts where one is near (:func:`group_boundaries`)."""
    positions = drawing.positions
    if not positions:
        return Drawing()
    left = min(x for x, _ in positions.values())
    top = min(y for _, y in positions.values())
    right = max(x + sizes[n][0] for n, (x, _) in positions.items())
    columns = sorted({x for x, _ in positions.values()})
    # each column's vertical extent (its layers and the lanes through it): a band is as tall as its own columns
    extent = {x: [math.inf, -math.inf] for x in columns}
    for n, (x, y) in positions.items():
        extent[x][0], extent[x][1] = min(extent[x][0], y), max(extent[x][1], y + sizes[n][1])
    for route in drawing.bends.values():
        for x, y in route[1:-1:2]:  # lane entries lie on their column's left edge
            if x in extent:
                extent[x][0], extent[x][1] = min(extent[x][0], y - LANE), max(extent[x][1], y + LANE)
    members: dict[float, list[str]] = {x: [] for x in columns}
    for n, (x, _) in positions.items():
        members[x].append((groups or {}).get(n, ""))
    prefer = group_boundaries(members) if groups else []
    bands, band_of, spans, edges = _bands(columns, extent, left, right - left, aspect, prefer)
    if bands == 1:
        return Drawing(dict(positions), {k: list(v) for k, v in drawing.bends.items()})
    start: dict[int, float] = {}
    for x in columns:
        start.setdefault(band_of[x], x)
    shift, y = [], top  # each band's vertical shift: stacked one under another, BAND_GAP apart
    for b in range(bands):
        shift.append(y - spans[b][0])
        y += spans[b][1] - spans[b][0] + BAND_GAP

    def band(x: float) -> int:  # of a column's left edge (as ``band_of``)
        return bisect.bisect_right(edges, x)

    def move(x: float, y: float, b: int) -> tuple[float, float]:
        return round(left + x - start[b], 1), round(y + shift[b], 1)

    out = Drawing({n: move(x, y, band_of[x]) for n, (x, y) in positions.items()})
    for link, route in drawing.bends.items():
        src, dst = link
        b0 = band_of[positions[src][0]]
        points = [(route[0][0], route[0][1], b0)]
        for i, (x, y) in enumerate(route[1:], 1):  # a lane's entry (odd) on a column's left edge, its exit after it
            points.append((x, y, band(x) if i % 2 else points[-1][2]))
        points[-1] = (*route[-1], band_of[positions[dst][0]])
        folded = [move(*points[0])]
        for (x0, _y0, b0_), (x1, y1, b1) in zip(points, points[1:]):
            if b1 != b0_:  # out to the gap under band b0_, back left of the drawing, down into band b1
                gx = round(left + x0 - start[b0_] + COLUMN_GAP / 2, 1)
                gy = round(spans[b0_][1] + shift[b0_] + BAND_GAP / 2, 1)
                lx = round(left - COLUMN_GAP / 2, 1)
                ny = move(x1, y1, b1)[1]
                folded += [(gx, folded[-1][1]), (gx, gy), (lx, gy), (lx, ny)]
            folded.append(move(x1, y1, b1))
        out.bends[link] = folded
    return out


def readable_drawing(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]] | None = None,
                     aspect: float = 1.6) -> Drawing:
    """The layered drawing of ``layers`` folded into bands for a view of width / height ``aspect``, with its
    routes: how an imported graph is placed (the designer passes its node sizes and its view's shape; the
    command line :func:`estimated_sizes`)."""
    sizes = {n: (sizes or {}).get(n, NODE_SIZE) for n in layers}
    return fold_drawing(layered_drawing(layers, sizes), sizes, aspect, {n: s.group for n, s in layers.items()})


def readable_positions(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]] | None = None,
                       aspect: float = 1.6) -> dict[str, tuple[float, float]]:
    """The positions of :func:`readable_drawing`."""
    return readable_drawing(layers, sizes, aspect).positions


def grouped_drawing(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]],
                    collapsed: set[str], aspect: float = 1.6, box: tuple[float, float] = (0.0, 0.0),
                    share: float = BLOCK_SHARE) -> Drawing:
    """A readable drawing of a grouped network: the layers of each group of ``collapsed`` (outermost ones count)
    laid out together in one block (:func:`banded_drawing`), then those blocks and the other layers laid out as
    one graph, each block where its group stands, centred in a place at least ``box`` large (the size of a
    collapsed group's box on the canvas) and at least ``share`` of the largest block's width and height (so a
    small group's box and name stay readable beside a large one when the whole drawing is fitted to a view).
    So a collapsed group's box takes its layers' place, and expanding it shows them there, not spread over the
    whole drawing. A layer in no collapsed group stands centred in a place at least :data:`LOOSE_SHARE` of that
    least block (its name is drawn in that room when the drawing is fitted to a view, as readable as the boxes').
    Routes: those inside each block, and those between the blocks and layers, a block named
    ``group:PATH``; ``blocks``: each block's place."""
    from engine.groups import outermost_collapsed  # noqa: PLC0415

    unit = {}
    for n, s in layers.items():
        top = outermost_collapsed(s.group, collapsed) if s.group else None
        unit[n] = n if top is None else f"group:{top}"  # (a layer name holds no ':')
    blocks: dict[str, dict[str, LayerSpec]] = {}
    for name, spec in layers.items():
        if unit[name] != name:
            blocks.setdefault(unit[name], {})[name] = spec
    inner: dict[str, Drawing] = {}
    outer_sizes: dict[str, tuple[float, float]] = {}
    extent: dict[str, tuple[float, float, float, float]] = {}
    for path, members in blocks.items():
        block = banded_drawing(members, sizes, aspect)
        pos = block.positions
        x0, y0 = min(x for x, _ in pos.values()), min(y for _, y in pos.values())
        w = max(x + sizes.get(n, NODE_SIZE)[0] for n, (x, _) in pos.items()) - x0
        h = max(y + sizes.get(n, NODE_SIZE)[1] for n, (_, y) in pos.items()) - y0
        inner[path], extent[path] = block, (x0, y0, w, h)
    least = (max((e[2] for e in extent.values()), default=0.0) * share,
             max((e[3] for e in extent.values()), default=0.0) * share)
    for path, block in inner.items():
        x0, y0, w, h = extent[path]
        outer_sizes[path] = (max(w, box[0], least[0]), max(h, box[1], least[1]))
        dx, dy = -x0 + (outer_sizes[path][0] - w) / 2, -y0 + (outer_sizes[path][1] - h) / 2
        pos = block.positions
        inner[path] = Drawing({n: (x + dx, y + dy) for n, (x, y) in pos.items()},
                              {k: [(x + dx, y + dy) for x, y in r] for k, r in block.bends.items()})
    outer: dict[str, LayerSpec] = {}
    for name, spec in layers.items():
        key = unit[name]
        node = outer.setdefault(key, LayerSpec(key, "group" if key in blocks else spec.type))
        for src in spec.inputs:
            if src is not None and src in unit and unit[src] != key and unit[src] not in node.inputs:
                node.inputs.append(unit[src])
        if key not in blocks:
            w, h = sizes.get(name, NODE_SIZE)
            outer_sizes[key] = (max(w, LOOSE_SHARE * least[0]), max(h, LOOSE_SHARE * least[1])) if blocks else (w, h)
    placed = readable_drawing(outer, outer_sizes, aspect)
    out = Drawing(bends=dict(placed.bends))
    for key, (x, y) in placed.positions.items():
        if key in inner:
            out.blocks[key[len("group:"):]] = (x, y, *outer_sizes[key])
            for name, (dx, dy) in inner[key].positions.items():
                out.positions[name] = (round(x + dx, 1), round(y + dy, 1))
            for link, route in inner[key].bends.items():
                out.bends[link] = [(round(x + px, 1), round(y + py, 1)) for px, py in route]
        else:
            w, h = sizes.get(key, NODE_SIZE)
            out.positions[key] = (round(x + (outer_sizes[key][0] - w) / 2, 1), round(y + (outer_sizes[key][1] - h) / 2, 1))
    return out


def grouped_positions(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]],
                      collapsed: set[str], aspect: float = 1.6) -> dict[str, tuple[float, float]]:
    """The positions of :func:`grouped_drawing`."""
    return grouped_drawing(layers, sizes, collapsed, aspect).positions


#: a banded drawing's long links share at most this many lanes above each band
BAND_LANES = 6


def _ranks(names: list[str], links: list[tuple[str, str]]) -> tuple[list[int], list[tuple[int, int]]]:
    """Each layer's column (the longest path of links reaching it) and the links that run forward, in one pass in
    the order the links allow (Kahn's); where a cycle stops it, the first layer left goes on and its links from the
    layers not placed yet run backward (they are left out of the ranking)."""
    index = {n: i for i, n in enumerate(names)}
    succ: list[list[int]] = [[] for _ in names]
    pending = [0] * len(names)
    for s, t in links:
        succ[index[s]].append(index[t])
        pending[index[t]] += 1
    rank = [0] * len(names)
    done = [False] * len(names)
    ready = [i for i in range(len(names)) if not pending[i]]
    forward, nxt = [], 0
    while True:
        while ready:
            v = ready.pop()
            done[v] = True
            for t in succ[v]:
                if not done[t]:
                    rank[t] = max(rank[t], rank[v] + 1)
                    forward.append((v, t))
                    pending[t] -= 1
                    if not pending[t]:
                        ready.append(t)
        while nxt < len(names) and done[nxt]:
            nxt += 1
        if nxt == len(names):
            return rank, forward
        ready.append(nxt)  # (a cycle: its first layer left goes on)
        pending[nxt] = 0


def banded_drawing(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]] | None = None,
                   aspect: float = 1.6) -> Drawing:
    """A compact layered drawing folded into bands for a view of width / height ``aspect``, for networks whose
    links skip far ahead (a dense block links every layer to every later one): columns hold only layers (no lane
    per long link, which piles a dense block into one tall staircase), each layer level with the middle of what
    links into it, and a link that skips columns runs in one of :data:`BAND_LANES` lanes above its target's band
    (one lane per source), reached and left through the free space between columns; a link into a later band
    leaves through the gap under its own band and comes down left of the drawing. Time linear in layers and links."""
    sizes = {n: (sizes or {}).get(n, NODE_SIZE) for n in layers}
    names = list(layers)
    if not names:
        return Drawing()
    links = _links(layers)
    rank, forward = _ranks(names, links)
    ups: list[list[int]] = [[] for _ in names]
    for s, t in forward:
        ups[t].append(s)
    columns: dict[int, list[int]] = {}
    for v in range(len(names)):
        columns.setdefault(rank[v], []).append(v)
    centre = [0.0] * len(names)
    extent: dict[float, list[float]] = {}
    column_x, widths, x = {}, {}, 0.0
    for r in sorted(columns):
        members = columns[r]
        want = {v: sum(centre[u] for u in ups[v]) / len(ups[v]) if ups[v] else 0.0 for v in members}
        members.sort(key=lambda v: (want[v], v))
        free = -math.inf
        for v in members:
            h = sizes[names[v]][1]
            y = max(free, want[v] - h / 2)
            centre[v] = y + h / 2
            free = y + h + ROW_GAP
        column_x[r], widths[r] = x, max(sizes[names[v]][0] for v in members)
        extent[x] = [centre[members[0]] - sizes[names[members[0]]][1] / 2, free - ROW_GAP]
        x += widths[r] + COLUMN_GAP
    xs = sorted(extent)
    prefer = group_boundaries({column_x[r]: [layers[names[v]].group for v in columns[r]] for r in columns})
    bands, band_of, spans, _ = _bands(xs, extent, 0.0, x - COLUMN_GAP, aspect, prefer)
    band = [band_of[column_x[rank[v]]] for v in range(len(names))]
    # lanes: one per source of the long links into a band, at most BAND_LANES (shared round the sources beyond)
    lane_of: dict[tuple[int, int], int] = {}
    for s, t in sorted(forward, key=lambda e: (rank[e[0]], e[0])):
        if band[s] != band[t] or rank[t] - rank[s] > 1:
            lane_of.setdefault((band[t], s), sum(1 for b, _ in lane_of if b == band[t]) % BAND_LANES)
    lanes = [0] * bands
    for (b, _), k in lane_of.items():
        lanes[b] = max(lanes[b], k + 1)
    start: dict[int, float] = {}
    for cx in xs:
        start.setdefault(band_of[cx], cx)
    shift, tops, y = [], [], 0.0
    for b in range(bands):
        y += (lanes[b] + 1) * LANE if lanes[b] else 0.0
        shift.append(y - spans[b][0])
        tops.append(y)
        y += spans[b][1] - spans[b][0] + BAND_GAP / 2
    out = Drawing()
    left_of = {r: column_x[r] - start[band_of[column_x[r]]] for r in columns}
    for v, n in enumerate(names):
        out.positions[n] = (round(left_of[rank[v]], 1), round(centre[v] - sizes[n][1] / 2 + shift[band[v]], 1))
    back_x = round(-COLUMN_GAP / 2, 1)
    for s, t in forward:
        a, b = names[s], names[t]
        (_, ys_), (xt, yt) = out.positions[a], out.positions[b]
        exit_x, entry_x = round(left_of[rank[s]] + widths[rank[s]], 1), xt
        route = [(exit_x, ys_)]
        if band[s] != band[t]:  # down the gap under the source's band, back left of the drawing
            gy = round(tops[band[s]] + spans[band[s]][1] - spans[band[s]][0] + BAND_GAP / 8, 1)
            route += [(round(exit_x + COLUMN_GAP / 2, 1), gy), (back_x, gy)]
        if band[s] != band[t] or rank[t] - rank[s] > 1:  # along a lane above the target's band
            lane_y = round(tops[band[t]] - (lane_of[(band[t], s)] + 1) * LANE, 1)
            if band[s] != band[t]:
                route.append((back_x, lane_y))
            else:
                route.append((round(exit_x + COLUMN_GAP / 2, 1), lane_y))
            route.append((round(entry_x - COLUMN_GAP / 2, 1), lane_y))
        route.append((entry_x, yt))
        out.bends[(a, b)] = route
    return out


def expanded_drawing(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]],
                     aspect: float = 1.6, blocks: set[str] | None = None) -> Drawing:
    """A readable drawing of a network drawn with its groups expanded (View > Expand All, Edit > Arrange): the
    layers of each group of ``blocks`` (default: those the network would open collapsed with,
    ``engine.groups.initial_collapsed``) together in one banded block, the blocks and the other layers laid out as
    one graph (:func:`grouped_drawing`, with no room kept for boxes); a network without groups as one
    :func:`banded_drawing`. So each block of an imported network reads as a few bands at Fit to View instead of
    one staircase of its long links."""
    from engine.groups import groups_of, initial_collapsed  # noqa: PLC0415

    if blocks is None:
        groups = groups_of(layers)
        blocks = initial_collapsed(groups, sum(1 for s in layers.values() if not s.group)) if groups else set()
    if not blocks:
        return banded_drawing(layers, sizes, aspect)
    drawing = grouped_drawing(layers, sizes, blocks, aspect, share=0.0)
    drawing.bends = {k: r for k, r in drawing.bends.items() if k[0] in layers and k[1] in layers}
    drawing.blocks = {}
    return drawing
