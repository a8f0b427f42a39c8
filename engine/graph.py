"""Graph algorithms on a Model: execution order and cycle reporting."""
from __future__ import annotations

from engine.errors import GraphError
from engine.model import Model


def find_cycle(model: Model, among: set[str] | None = None) -> list[str]:
    """One cycle as a list of layer names (first == last), or [] when the graph is acyclic. Iterative (an
    explicit stack), so a chain of any length is followed without Python recursion."""
    names = among if among is not None else set(model.layers)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in model.layers:
        if start not in names or start in state:
            continue
        path: list[str] = [start]
        state[start] = 1
        pending = [iter(model.layers[start].inputs)]
        while pending:
            src = next(pending[-1], _DONE)
            if src is _DONE:
                pending.pop()
                state[path.pop()] = 2
                continue
            if src is None or src not in names:
                continue
            if state.get(src) == 1:
                cyc = path[path.index(src):] + [src]
                return list(reversed(cyc))
            if src not in state:
                state[src] = 1
                path.append(src)
                pending.append(iter(model.layers[src].inputs))
    return []


_DONE = object()


def describe_cycle(cycle: list[str], limit: int = 8) -> str:
    """``a -> b -> c -> a``; a long cycle is shortened (its length said) so messages stay one short line."""
    if len(cycle) <= limit + 1:
        return " -> ".join(cycle)
    return " -> ".join(cycle[: limit // 2]) + f" -> ... ({len(cycle) - 1} layers) -> " + " -> ".join(cycle[-limit // 2:])


def execution_order(model: Model) -> list[str]:
    """Layers in topological order (stable: model order among ready layers). Raises GraphError on a cycle."""
    indeg: dict[str, int] = {}
    readers: dict[str, list[str]] = {n: [] for n in model.layers}
    for n, spec in model.layers.items():
        srcs = {s for s in spec.inputs if s is not None}
        indeg[n] = len(srcs)
        for s in srcs:
            readers[s].append(n)
    position = {n: i for i, n in enumerate(model.layers)}
    ready = sorted((n for n, d in indeg.items() if d == 0), key=position.__getitem__)
    order: list[str] = []
    import heapq

    heap = [(position[n], n) for n in ready]
    heapq.heapify(heap)
    while heap:
        _, n = heapq.heappop(heap)
        order.append(n)
        for r in readers[n]:
            indeg[r] -= 1
            if indeg[r] == 0:
                heapq.heappush(heap, (position[r], r))
    if len(order) != len(model.layers):
        rest = set(model.layers) - set(order)
        cyc = find_cycle(model, rest)
        raise GraphError("the network contains a cycle: " + describe_cycle(cyc or sorted(rest)))
    return order
