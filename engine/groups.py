"""Groups: name scopes over a model's layers (``features > denseblock3 > denselayer12``).

A layer's ``group`` is the path of the innermost group holding it (``"features/denseblock3"``; empty: none); a group
is every prefix of such a path, so its parent and its members follow from the layers and travel with them (paste,
rename, delete need nothing more). Importers make groups from the scopes of node names; the canvas collapses and
expands them (a view state: only membership is model data).

Why not templates: a template is a reusable definition with instances (a new layer type); a group is a view over
layers that already exist, each still edited, run and profiled on its own."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.errors import LayerLabError

SEP = "/"


class GroupError(LayerLabError):
    """A group path that cannot be stored (an empty step, or a ``/`` at either end)."""


@dataclass
class Group:
    """One group: its ``path`` (``"features/denseblock3"``), display ``name`` (the last step), ``parent`` path
    (``""`` at the top), and the layers inside it, its subgroups' included, in model order."""

    path: str
    name: str
    parent: str
    members: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


def check_path(path: str) -> str:
    """``path`` if it is a valid group path (``""`` or non-empty steps joined by ``/``), else GroupError."""
    if path and any(not step.strip() for step in path.split(SEP)):
        raise GroupError(f"group path {path!r} has an empty step (steps are joined by '/')")
    return path


def ancestors(path: str) -> list[str]:
    """Every group a layer of group ``path`` is inside, outermost first (``a/b`` -> ``["a", "a/b"]``)."""
    steps = path.split(SEP) if path else []
    return [SEP.join(steps[:i + 1]) for i in range(len(steps))]


def groups_of(layers: Mapping[str, object]) -> dict[str, Group]:
    """The groups of ``layers`` (name -> anything with a ``group`` attribute), by path, parents before children."""
    out: dict[str, Group] = {}
    for name, spec in layers.items():
        for path in ancestors(getattr(spec, "group", "")):
            g = out.get(path)
            if g is None:
                parent = path.rpartition(SEP)[0]
                g = out[path] = Group(path, path.rpartition(SEP)[2], parent)
                if parent:
                    out[parent].children.append(path)
            g.members.append(name)
    return out


def scope_groups(scopes: Mapping[str, str]) -> dict[str, str]:
    """Group paths from node names' scopes (``/features/denseblock3/denselayer12/conv2/Conv``): a layer goes in
    the scope holding its node (the name's last step is the operator), and a scope holding only one layer is no
    group (that layer goes to the scope above), so ``conv2`` above is not a group and the layer lands in
    ``features/denseblock3/denselayer12``. ``scopes``: layer -> node name; layers without a scope are left out."""
    paths = {}
    for layer, node in scopes.items():
        steps = [s for s in node.split("/") if s.strip()][:-1]
        if steps:
            paths[layer] = steps
    count: dict[tuple[str, ...], int] = {}
    for steps in paths.values():
        for i in range(1, len(steps) + 1):
            key = tuple(steps[:i])
            count[key] = count.get(key, 0) + 1
    out = {}
    for layer, steps in paths.items():
        while steps and count[tuple(steps)] < 2:
            steps = steps[:-1]
        if steps:
            out[layer] = SEP.join(steps)
    return out


def initial_collapsed(groups: Mapping[str, Group], loose: int, limit: int = 24) -> set[str]:
    """Which groups a large network opens with collapsed: the top-level ones, then, one level at a time, all the
    collapsed groups opened together (replaced by what they hold) while the boxes shown stay within ``limit``, so
    the groups of one level look alike. ``loose``: layers in no group (each one box)."""
    collapsed = {p for p, g in groups.items() if not g.parent}
    shown = loose + len(collapsed)
    while collapsed:
        inside = 0
        for path in collapsed:
            g = groups[path]
            inside += len(g.children) + len(g.members) - sum(len(groups[c].members) for c in g.children)
        if shown - len(collapsed) + inside > limit:
            break
        shown += inside - len(collapsed)
        collapsed = {c for path in collapsed for c in groups[path].children}
    return collapsed


def outermost_collapsed(path: str, collapsed: Iterable[str]) -> str | None:
    """The outermost group of ``collapsed`` that a layer of group ``path`` is inside (None: it is shown)."""
    closed = collapsed if isinstance(collapsed, (set, frozenset, dict)) else set(collapsed)
    return next((p for p in ancestors(path) if p in closed), None)


def _without_repeats(name: str) -> str:
    """``name`` without the steps PyTorch's scopes repeat (``features_features_3_block_block_1_block_1_0`` ->
    ``features_3_block_1_0``): a run of one to three ``_``-separated words, starting with a word that is not a
    number, that the next words start with again is left out once (``block_1_1`` stays: block 1, its part 1)."""
    words = name.split("_")
    i = 0
    while i < len(words):
        for k in (3, 2, 1):
            if (i + 2 * k <= len(words) and not words[i].isdigit()
                    and words[i:i + k] == words[i + k:i + 2 * k]):
                del words[i:i + k]
                break
        else:
            i += 1
    return "_".join(words)


def short_labels(names: Iterable[str]) -> dict[str, str]:
    """Labels for layer names shown where they must be cut (zoomed out): an imported name ends with its operator
    (``layer1_0_conv1_Conv``), which all the layers of that operator share, so the label leaves it out where the
    rest stays distinct (``layer1_0_conv1``), and PyTorch's repeated scope steps go
    (``features_features_3_block_block_1_...`` reads ``features_3_block_1_...``, the stage number near the end that
    a label cut at its start keeps). Names whose shorter form another name has are kept whole."""
    names = list(names)
    short = {}
    for name in names:
        head, sep, tail = name.rpartition("_")
        short[name] = _without_repeats(head if sep and head and tail[:1].isupper() else name)
    count: dict[str, int] = {}
    for label in [*short.values(), *names]:
        count[label] = count.get(label, 0) + 1
    return {n: s if s == n or count[s] == 1 else n for n, s in short.items()}


def compact_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Labels for boxes too narrow for a label of :func:`short_labels` (name -> label): its words before the last cut
    to the numbers they hold (``features_3_1_block_2_fc1`` -> ``3_1_2_fc1``,
    ``features_denseblock3_denselayer12_conv2`` -> ``3_12_conv2``), so that the stage and block numbers stay where a
    plain cut keeps only the end many layers share. A label whose compact form another label has is the shortest
    end of it that no other label ends with, uncut."""
    words = {n: label.split("_") for n, label in labels.items()}
    ends: dict[tuple[str, ...], int] = {}
    for w in words.values():
        for k in range(1, len(w) + 1):
            ends[tuple(w[-k:])] = ends.get(tuple(w[-k:]), 0) + 1
    tails = {}
    for n, w in words.items():
        k = next((k for k in range(1, len(w) + 1) if ends[tuple(w[-k:])] == 1), len(w))
        tails[n] = w[-k:]
    compact = {}
    for n, w in words.items():
        numbers = ["".join(ch for ch in word if ch.isdigit()) for word in w[:-1]]
        compact[n] = "_".join([x for x in numbers if x] + w[-1:])
    count: dict[str, int] = {}
    for label in compact.values():
        count[label] = count.get(label, 0) + 1
    return {n: c if count[c] == 1 else "_".join(tails[n]) for n, c in compact.items()}


#: a network of more than this many layers, some in groups, opens with groups collapsed (:func:`opening_collapsed`)
COLLAPSE_LAYERS = 150
#: the least size of a collapsed group's box on the canvas (scene units): layouts leave it room
BOX_SIZE = (240.0, 78.0)


def opens_collapsed(layers: Mapping[str, Any]) -> bool:
    """Whether a network opens with groups collapsed: more than ``COLLAPSE_LAYERS`` layers, some in groups."""
    return len(layers) > COLLAPSE_LAYERS and any(s.group for s in layers.values())


def opening_collapsed(layers: Mapping[str, Any]) -> set[str]:
    """The groups a network opens with collapsed (:func:`initial_collapsed`) where :func:`opens_collapsed`; else
    none. The designer draws them so, and an import lays their layers out together (each where its box will
    stand)."""
    if not opens_collapsed(layers):
        return set()
    return initial_collapsed(groups_of(layers), sum(1 for s in layers.values() if not s.group))
