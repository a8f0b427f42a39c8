"""Automatic canvas layout: a layered (Sugiyama) drawing by grandalf, flowing left to right.

Each layer's column follows its depth in the graph; inside a column, grandalf orders the layers to reduce link
crossings. Used by the designer's Arrange command and by importers, whose graphs come without positions.
Qt-free: sizes are plain numbers (the canvas passes its node sizes; defaults fit a typical node)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from engine.model import LayerSpec

if TYPE_CHECKING:
    from engine.registry import Registry

NODE_SIZE = (180.0, 120.0)  # width, height of a node whose size is not given
COLUMN_GAP = 90.0  # free space between columns (where the links run)
ROW_GAP = 30.0  # free space between two layers of one column
BAND_GAP = 160.0  # free space between two bands of a folded drawing (where the links to the next band run)


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


class _Box:
    """What grandalf lays out: in its top-to-bottom drawing ``w`` runs across the flow, ``h`` along it."""

    def __init__(self, width: float, height: float) -> None:
        self.w, self.h = height, width
        self.xy = (0.0, 0.0)


def layered_positions(layers: Mapping[str, LayerSpec], sizes: Mapping[str, tuple[float, float]] | None = None,
                      origin: tuple[float, float] = (0.0, 0.0)) -> dict[str, tuple[float, float]]:
    """Top-left (x, y) of every layer in a left-to-right layered drawing, rounded to 0.1; ``sizes`` gives
    (width, height) per layer. Unlinked groups of layers are stacked one under another; cycles are allowed
    (grandalf reverses a link of each to rank them)."""
    from grandalf.graphs import Edge, Graph, Vertex  # noqa: PLC0415 - imported when a layout is asked for
    from grandalf.layouts import SugiyamaLayout  # noqa: PLC0415

    sizes = sizes or {}
    vertices = {name: Vertex(name) for name in layers}
    for name, v in vertices.items():
        v.view = _Box(*sizes.get(name, NODE_SIZE))
    edges = [Edge(vertices[src], vertices[name]) for name, spec in layers.items() for src in dict.fromkeys(spec.inputs)
             if src is not None and src in vertices and src != name]
    graph = Graph(list(vertices.values()), edges)
    positions: dict[str, tuple[float, float]] = {}
    top = origin[1]
    for component in sorted(graph.C, key=lambda c: min(list(layers).index(v.data) for v in c.sV)):
        sug = SugiyamaLayout(component)
        sug.yspace = ROW_GAP  # grandalf's spacing across the flow (our rows)
        sug.init_all()
        sug.draw(N=1)
        ranks = {v.data: sug.grx[v].rank for v in component.sV}
        widths: dict[int, float] = {}
        for v in component.sV:
            widths[ranks[v.data]] = max(widths.get(ranks[v.data], 0.0), v.view.h)
        column_x, x = {}, origin[0]
        for rank in sorted(widths):
            column_x[rank] = x
            x += widths[rank] + COLUMN_GAP
        low = min(v.view.xy[0] - v.view.w / 2 for v in component.sV)
        bottom = top
        for v in component.sV:
            y = top + v.view.xy[0] - v.view.w / 2 - low
            positions[v.data] = (round(column_x[ranks[v.data]], 1), round(y, 1))
            bottom = max(bottom, y + v.view.w)
        top = bottom + 2 * ROW_GAP
    return positions


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
