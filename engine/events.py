"""Model events: one class per kind of change, with typed fields (plain Python, no Qt).

A consumer dispatches on the class (``isinstance(ev, LayerRenamed)``, or a table keyed by class); the
classes of one family share a base (``LayerEvent`` carries the layer, ``TemplateEvent`` the template), so
"any change of a template" is ``isinstance(ev, TemplateEvent)``. In the designer, every widget receives
them through the one bridge of its model (``canvas.bridge.ModelBridge``), never from the model directly.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """A change of the model (the base of every event class)."""


@dataclass(frozen=True)
class LayerEvent(Event):
    """A change of one layer; ``layer`` is its (current) name."""

    layer: str


@dataclass(frozen=True)
class LayerAdded(LayerEvent):
    """A layer was added (or came back by undo)."""


@dataclass(frozen=True)
class LayerRemoved(LayerEvent):
    """A layer was removed."""


@dataclass(frozen=True)
class LayerRenamed(LayerEvent):
    """A layer was renamed from ``old`` to ``layer`` (links follow)."""

    old: str


@dataclass(frozen=True)
class LinkChanged(LayerEvent):
    """Input ``index`` of ``layer`` now reads ``source`` (None: disconnected)."""

    index: int
    source: str | None


@dataclass(frozen=True)
class ParamChanged(LayerEvent):
    """A parameter (or the permanent flag) of ``layer`` changed."""


@dataclass(frozen=True)
class ActivationChanged(LayerEvent):
    """The activation (or its coefficients) of ``layer`` changed."""


@dataclass(frozen=True)
class LayerMoved(LayerEvent):
    """The canvas position of ``layer`` changed."""


@dataclass(frozen=True)
class GroupChanged(LayerEvent):
    """The group ``layer`` is in changed (``engine.groups``)."""


@dataclass(frozen=True)
class NetworkChanged(Event):
    """The network parameters (name, version) changed."""


@dataclass(frozen=True)
class SettingsChanged(Event):
    """Network setting ``key`` changed."""

    key: str


@dataclass(frozen=True)
class FusingRulesChanged(Event):
    """The model's own fusing rules changed (added, removed, switched)."""


@dataclass(frozen=True)
class TemplateEvent(Event):
    """A change of template ``name``."""

    name: str


@dataclass(frozen=True)
class TemplateAdded(TemplateEvent):
    """Template ``name`` was added."""


@dataclass(frozen=True)
class TemplateRemoved(TemplateEvent):
    """Template ``name`` was removed."""


@dataclass(frozen=True)
class TemplateChanged(TemplateEvent):
    """The definition of template ``name`` changed."""


@dataclass(frozen=True)
class CustomLayerChanged(Event):
    """Custom layer ``name``'s definition was added, replaced or deleted; its instances have type ``layer_type``."""

    name: str
    layer_type: str


@dataclass(frozen=True)
class ModifiedChanged(Event):
    """The model's unsaved-changes flag became ``modified``."""

    modified: bool


@dataclass(frozen=True)
class EditRefused(Event):
    """An edit was refused (the model is read-only); ``message`` says why."""

    message: str


class EventEmitter:
    """The smallest observer: callbacks receive each Event in order of connection."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[Event], None]] = []

    def connect(self, callback: Callable[[Event], None]) -> None:
        self._callbacks.append(callback)

    def disconnect(self, callback: Callable[[Event], None]) -> None:
        self._callbacks.remove(callback)

    def emit(self, event: Event) -> None:
        for cb in list(self._callbacks):
            cb(event)
