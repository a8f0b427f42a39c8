"""Nodes made when they are needed: the canvas of a large model creates NodeGraphQt's items for a layer only when it
comes into view, is looked up (selected, searched, edited through ``canvas.nodes[name]``), or is near the view while
the canvas is idle. Until then a layer is drawn by the overview from its measured box (``NodeGeom``), which the same
layout rule as a node item gives (``canvas.nodes.node_box``)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from PySide6 import QtCore


class NodeGeom(NamedTuple):
    """Where a layer's node is on the scene: its box, body colour, node item (None while it has none), the centre
    of its output port (None without one) and of each input port."""

    rect: QtCore.QRectF
    color: tuple[int, ...]
    view: Any
    out: QtCore.QPointF | None
    ins: list[QtCore.QPointF]


class LazyNodes(Mapping[str, Any]):
    """``canvas.nodes``: every layer on the canvas by name, in model order. Looking a layer up (``nodes[name]``,
    ``nodes.get(name)``) creates its node when it has none yet; ``name in nodes``, ``len`` and iterating over the
    names create nothing. ``values()`` and ``items()`` create every node: the canvas itself uses ``created()``."""

    def __init__(self, make: Callable[[str], Any]) -> None:
        self._all: dict[str, Any] = {}
        self._make = make

    def __getitem__(self, name: str) -> Any:
        node = self._all[name]
        return node if node is not None else self._make(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._all))

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, name: object) -> bool:
        return name in self._all

    def created(self, name: str) -> Any:
        """The node of ``name`` if it has been made, else None (never makes one)."""
        return self._all.get(name)

    def created_items(self) -> list[tuple[str, Any]]:
        """(name, node) of every layer whose node exists."""
        return [(n, v) for n, v in self._all.items() if v is not None]

    def pending(self) -> list[str]:
        """Names of the layers that have no node yet."""
        return [n for n, v in self._all.items() if v is None]

    def add(self, name: str, node: Any = None) -> None:
        """Record ``name`` (with its node, or None until it is made)."""
        self._all[name] = node

    def pop(self, name: str) -> Any:
        """Forget ``name``; returns its node (None if it had none)."""
        return self._all.pop(name, None)

    def rename(self, old: str, new: str) -> None:
        """``old`` is now called ``new`` (it moves to the end of the order, as a re-added layer)."""
        self._all[new] = self._all.pop(old)
