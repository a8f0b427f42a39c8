"""Where a network's layer outputs live, and which layers a run must compute because of it.

A network's layers write into a few pooled buffers ("slots"). Pure functions over the layer graph, no arrays:

* ``buffer_roots``: a layer that passes an input through unchanged (bypass, or a fused conversion) writes no
  buffer of its own; its output is its root's buffer.
* ``assign_slots``: each root gets a slot; a slot is free again after the last layer reading the root's output
  (reuse by liveness over the execution order), except for pinned buffers (network inputs and outputs, permanent
  and protected layers), never recycled. A free slot that fits is chosen best-fit, otherwise the largest free one
  grows.
* ``assign_slots`` also lets a layer write over one of its inputs (``overwrites``): a residual sum's output in its
  residual's buffer, where the layer is that buffer's last reader (one buffer written instead of two: resnet50's
  1x1 layers with their residual at 56x56 and 28x28 took 0.247 instead of 0.27 ms on two Zen 5 cores).
* ``join_chains``: a join of channels (a concatenation) whose leading inputs are exactly an earlier join's inputs
  shares that join's buffer (sized for the longest) and writes only its new inputs: DenseNet's blocks join all
  earlier outputs again in every layer, which copied ever-growing tensors, once per layer.
* ``evaluation_set``: a run computes the affected layers and their dependents, plus the producers whose buffers
  were recycled although a layer to compute still reads them.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence


def buffer_roots(order: Sequence[str], inputs: Mapping[str, Sequence[str | None]],
                 aliased: Mapping[str, int | None]) -> dict[str, str]:
    """Each layer's root: the layer whose buffer holds its output. ``aliased[name]`` is the index of the input that
    layer ``name`` passes through unchanged (None: it writes a buffer of its own); aliases are followed up to a
    layer writing its own buffer (an unconnected aliased input, or a loop of aliases, stops there)."""
    roots = {}
    for start in order:
        name, seen = start, set()
        while True:
            b, ins = aliased.get(name), inputs[name]
            if b is None or b >= len(ins) or ins[b] is None or name in seen:
                break
            seen.add(name)
            name = ins[b]  # type: ignore[assignment]
        roots[start] = name
    return roots


def join_chains(order: Sequence[str], inputs: Mapping[str, Sequence[str | None]],
                joins: Collection[str]) -> dict[str, tuple[str, str | None, int]]:
    """Joins that extend an earlier join in its buffer. ``joins``: the layers that may (``Layer.joins_channels``,
    of one storage format). A join whose leading inputs are exactly an earlier join's inputs, in order, extends
    that one (the longest such prefix; each join is extended by one later join at most: a chain, not a tree).

    Returns, for every join of a chain, the chain's first join (whose buffer they all share), the join it extends
    (None for the first) and how many of its leading inputs that one wrote (0 for the first). A join may pass over
    those inputs only where the join it extends ran before it in the same run (the buffer then holds them)."""
    pos = {n: i for i, n in enumerate(order)}
    by_inputs: dict[tuple[str | None, ...], list[str]] = {}
    for n in order:
        if n in joins:
            by_inputs.setdefault(tuple(inputs[n]), []).append(n)
    chains: dict[str, tuple[str, str | None, int]] = {}
    extended: set[str] = set()
    for n in order:
        ins = tuple(inputs[n]) if n in joins else ()
        prev = next((p for k in range(len(ins) - 1, 0, -1) for p in reversed(by_inputs.get(ins[:k], []))
                     if pos[p] < pos[n] and p not in extended), None)
        if prev is not None:
            extended.add(prev)
            head = chains.setdefault(prev, (prev, None, 0))[0]
            chains[n] = (head, prev, len(inputs[prev]))
    return chains


def assign_slots(order: Sequence[str], roots: Mapping[str, str], readers: Mapping[str, Sequence[str]],
                 pinned: Collection[str], sizes: Mapping[str, int], reuse: bool,
                 shared: Mapping[str, str] | None = None,
                 overwrites: Mapping[str, Sequence[str]] | None = None) -> tuple[list[int], dict[str, int]]:
    """Assign a slot to every layer's output buffer. ``order``: the execution order; ``roots``: each layer's root
    (``buffer_roots``); ``readers``: the layers reading each layer; ``pinned``: layers whose buffers (their roots')
    are never recycled; ``sizes``: each root's buffer size in bytes; ``reuse``: recycle slots at all; ``shared``:
    roots that write into another root's slot (a chain of joins: each root maps to the chain's first, whose size
    must hold the longest); ``overwrites``: roots that may write into the buffer of another root they read (the roots
    of some of their inputs, of the same size, in order of preference): the first they are the last reader of and
    that is not pinned (with ``reuse`` only).

    Returns the capacity of each slot in bytes and the slot of every layer (an alias shares its root's slot). A
    root's slot is released after the last layer that reads the root or any of its aliases (or of the roots sharing
    it) runs, for a layer later in the order to take: the smallest free slot that fits, else the largest free one,
    grown to fit."""
    if shared:
        roots = {n: shared.get(r, r) for n, r in roots.items()}
    pos = {n: i for i, n in enumerate(order)}
    last_use: dict[str, int] = {}
    pinned_roots: set[str] = set()
    for n in order:
        r = roots[n]
        last_use[r] = max(last_use.get(r, pos[r]), pos[n], *(pos[reader] for reader in readers[n]))
        if n in pinned:
            pinned_roots.add(r)
    capacity: list[int] = []
    slot_of: dict[str, int] = {}
    free: list[int] = []
    release_at: dict[int, list[int]] = {}
    for n in order:
        if roots[n] == n:
            over = next((r for r in (overwrites or {}).get(n, ()) if reuse and r in slot_of and r not in pinned_roots
                         and last_use[r] == pos[n] and sizes[r] == sizes[n]), None)
            if over is not None:
                slot_of[n] = slot_of[over]  # its buffer is no longer read after n: n writes over it
                release_at[pos[n]].remove(slot_of[over])
            else:
                slot_of[n] = _take_slot(sizes[n], capacity, free, reuse)
            if n not in pinned_roots:
                release_at.setdefault(last_use[n], []).append(slot_of[n])
        free.extend(release_at.pop(pos[n], []))  # after n ran, the slots it read last are free
    return capacity, {n: slot_of[roots[n]] for n in order}


def _take_slot(need: int, capacity: list[int], free: list[int], reuse: bool) -> int:
    """A slot for a buffer of ``need`` bytes: the smallest free slot that fits, else the largest free one grown to
    fit, else a new one."""
    if reuse and free:
        fitting = [s for s in free if capacity[s] >= need]
        slot = min(fitting, key=capacity.__getitem__) if fitting else max(free, key=capacity.__getitem__)
        free.remove(slot)
        capacity[slot] = max(capacity[slot], need)
        return slot
    capacity.append(need)
    return len(capacity) - 1


def holds_output(name: str, roots: Mapping[str, str], slot_of: Mapping[str, int], owner: Sequence[str | None]) -> bool:
    """Whether layer ``name``'s output is in its buffer now: ``owner[slot]`` is the root that last wrote each slot."""
    r = roots[name]
    return owner[slot_of[r]] == r


def evaluation_set(wanted: Collection[str], order: Sequence[str], inputs: Mapping[str, Sequence[str | None]],
                   readers: Mapping[str, Sequence[str]], roots: Mapping[str, str], slot_of: Mapping[str, int],
                   owner: Sequence[str | None], downstream: bool = True) -> set[str]:
    """The layers to compute: the ``wanted`` ones (and every layer downstream of them when ``downstream``), plus,
    following the execution ``order`` with the slots' current ``owner`` (see ``holds_output``), each producer whose
    buffer another layer took although a layer to compute still reads it (and that producer's root)."""
    todo = set(wanted)
    stack = list(wanted) if downstream else []
    while stack:
        for r in readers[stack.pop()]:
            if r not in todo:
                todo.add(r)
                stack.append(r)
    while True:
        owned = list(owner)
        added = False
        for n in order:
            if n not in todo:
                continue
            for s in inputs[n]:
                if s is None or s in todo:
                    continue
                if not holds_output(s, roots, slot_of, owned):
                    todo.add(s)
                    todo.add(roots[s])
                    added = True
            if roots[n] == n:
                owned[slot_of[n]] = n
        if not added:
            return todo
