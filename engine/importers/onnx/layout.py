"""Canvas positions of an imported graph: a layered (Sugiyama) drawing by grandalf, flowing left to right
(each layer's column follows its depth in the graph, and the order inside a column reduces crossings)."""
from __future__ import annotations

from engine.model import LayerSpec

NODE_W, NODE_H = 160.0, 80.0
COLUMN, ROW = 240.0, 110.0


class _View:
    """The box grandalf lays out (its size in its top-to-bottom drawing: w across, h along the flow)."""

    w, h = NODE_H, NODE_W
    xy = (0.0, 0.0)


def layered_positions(layers: dict[str, LayerSpec]) -> dict[str, tuple[float, float]]:
    """(x, y) of every layer: columns by depth, rows ordered to reduce edge crossings (grandalf)."""
    from grandalf.graphs import Edge, Graph, Vertex  # noqa: PLC0415 - only importing lays out graphs
    from grandalf.layouts import SugiyamaLayout  # noqa: PLC0415

    vertices = {name: Vertex(name) for name in layers}
    for v in vertices.values():
        v.view = _View()
    edges = [Edge(vertices[src], vertices[name]) for name, spec in layers.items() for src in dict.fromkeys(spec.inputs)
             if src is not None and src in vertices]
    graph = Graph(list(vertices.values()), edges)
    positions: dict[str, tuple[float, float]] = {}
    offset = 0.0
    for component in graph.C:
        sug = SugiyamaLayout(component)
        sug.init_all()
        sug.draw(N=1)
        top = min(v.view.xy[0] for v in component.sV)
        rows = [v.view.xy[0] - top for v in component.sV]
        for v, row in zip(component.sV, rows):
            depth = sug.grx[v].rank
            positions[v.data] = (round(depth * COLUMN, 1), round(offset + row * ROW / (NODE_H + 10), 1))
        offset += max(rows, default=0.0) * ROW / (NODE_H + 10) + 2 * ROW
    return positions
