"""The Model document: the single source of truth for a network design.

Every edit is a command on the model's undo stack (so undo/redo behave the same from the GUI and from
tests) and emits a plain-Python event (``engine.events``: one class per kind). The canvas and panels are
views that listen to these events. The model holds parameter values as text, exactly as in the file; descriptors parse them."""
from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.descriptors import is_identifier
from engine.errors import GraphError, LayerLabError
from engine.events import (
    ActivationChanged,
    EditRefused,
    EventEmitter,
    GroupChanged,
    LayerAdded,
    LayerEvent,
    LayerMoved,
    LayerRemoved,
    LayerRenamed,
    LinkChanged,
    ModifiedChanged,
    NetworkChanged,
    ParamChanged,
    SettingsChanged,
)
from engine.formats import canonical
from engine.groups import check_path
from engine.model_definitions import DefinitionEdits
from engine.undo import Command, Macro, UndoStack

FILE_FORMAT_VERSION = 1


@dataclass
class LayerSpec:
    """One layer of the design: identity, parameters (as text), activation, input links, canvas position, and its
    own tensor format setting (``format``: empty for the network's, else e.g. ``fp32`` or ``fp32 nchw``, see
    ``engine.formats``)."""

    name: str
    type: str
    params: dict[str, str] = field(default_factory=dict)
    activation: str = "none"
    act_coefs: dict[str, str] = field(default_factory=dict)
    inputs: list[str | None] = field(default_factory=list)
    position: tuple[float, float] = (0.0, 0.0)
    permanent: bool = False
    note: str = ""  # free text shown in the layer's tooltip (e.g. the ONNX node it was imported from)
    format: str = ""
    group: str = ""  # path of the innermost group holding the layer (``engine.groups``); empty: none

    def __deepcopy__(self, memo: dict[int, Any]) -> LayerSpec:
        """A copy whose dicts and list are new (every other field is immutable): what ``copy.deepcopy`` makes,
        without its generic walk, which dominated copying a model of thousands of layers."""
        return dataclasses.replace(self, params=dict(self.params), act_coefs=dict(self.act_coefs),
                                   inputs=list(self.inputs))


@dataclass
class FusingRuleSpec:
    text: str
    enabled: bool = True


class ReadOnlyError(LayerLabError):
    """An edit of a model that is read-only (for example while analysis mode runs)."""


class Model(DefinitionEdits):
    """A network design. Mutate it only through its methods; each is one undoable command.

    While ``read_only`` holds a reason, every edit, undo and redo is refused with ReadOnlyError."""

    def __init__(self, name: str = "network", version: str = "1.0") -> None:
        self.name = name
        self.version = version
        self.layers: dict[str, LayerSpec] = {}
        self.settings: dict[str, str] = {}
        self.fusing_rules: list[FusingRuleSpec] = []
        self.templates: dict[str, str] = {}  # template name -> its XML text, kept verbatim
        self.custom_layers: dict[str, str] = {}  # custom layer name -> its XML text, kept verbatim
        self.path: str | None = None
        #: the folder relative paths inside the model (network layers' files) start from, when it has no path of
        #: its own (a copy keeps its original's folder)
        self.folder: str | None = None
        self.load_warnings: list[str] = []
        self.events = EventEmitter()
        self._undo = UndoStack()
        self.read_only: str | None = None
        self.weights_source: Any = None  # in-memory weights of a model imported from another format (not saved)

    def _check_writable(self, action: str) -> None:
        """Raise ReadOnlyError (after an ``edit_refused`` event) while the model is read-only."""
        if self.read_only:
            message = f"{action} refused: model {self.name} is read-only {self.read_only}"
            self.events.emit(EditRefused(message))
            raise ReadOnlyError(message)

    # ---- content equality (for round trips) -------------------------------------------------
    def content(self) -> dict[str, Any]:
        """Everything the model holds that a file stores, as plain data."""
        return {
            "name": self.name,
            "version": self.version,
            "layers": [copy.deepcopy(v.__dict__) for v in self.layers.values()],
            "settings": dict(self.settings),
            "fusing_rules": [(r.text, r.enabled) for r in self.fusing_rules],
            "templates": dict(self.templates),
            "custom_layers": dict(self.custom_layers),
        }

    def copy(self, layers: bool = True) -> Model:
        """A new Model with the same content (layers, settings, rules, templates), a fresh undo stack and no file
        path (saving it never overwrites the original); ``layers=False``: no layers (the caller sets its own)."""
        out = Model(self.name, self.version)
        if layers:
            out.layers = {n: copy.deepcopy(s) for n, s in self.layers.items()}
        out.settings = dict(self.settings)
        out.fusing_rules = copy.deepcopy(self.fusing_rules)
        out.templates = dict(self.templates)
        out.custom_layers = dict(self.custom_layers)
        out.folder = self.folder if self.path is None else str(Path(self.path).resolve().parent)
        out.weights_source = self.weights_source  # an import's in-memory weights run with the copy too
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Model) and self.content() == other.content()

    __hash__ = None  # type: ignore[assignment]

    # ---- queries ---------------------------------------------------------------------------------
    def layer(self, name: str) -> LayerSpec:
        try:
            return self.layers[name]
        except KeyError:
            raise LayerLabError(f"no layer named {name!r} in network {self.name}") from None

    def readers(self, name: str) -> list[tuple[str, int]]:
        """(layer, input index) of every link leaving ``name``."""
        return [(l.name, i) for l in self.layers.values() for i, s in enumerate(l.inputs) if s == name]

    def unique_name(self, base: str) -> str:
        """``base_N`` with the smallest N >= 1 not used yet (``convolution_3``)."""
        base = base if is_identifier(base) else "layer"
        return next(f"{base}_{n}" for n in itertools.count(1) if f"{base}_{n}" not in self.layers)

    def depends_on(self, layer: str, ancestor: str) -> bool:
        """True if ``ancestor`` feeds ``layer`` directly or indirectly (or is it)."""
        seen, stack = set(), [layer]
        while stack:
            cur = stack.pop()
            if cur == ancestor:
                return True
            if cur in seen or cur not in self.layers:
                continue
            seen.add(cur)
            stack.extend(s for s in self.layers[cur].inputs if s)
        return False

    # ---- undo stack (engine.undo) ---------------------------------------------------------------
    @property
    def modified(self) -> bool:
        return self._undo.modified

    def mark_clean(self) -> None:
        was = self.modified
        self._undo.mark_clean()
        if was:
            self.events.emit(ModifiedChanged(False))

    def can_undo(self) -> bool:
        return self._undo.can_undo()

    def can_redo(self) -> bool:
        return self._undo.can_redo()

    def undo_text(self) -> str:
        return self._undo.undo_text()

    def redo_text(self) -> str:
        return self._undo.redo_text()

    def undo(self) -> None:
        self._step("undo", self._undo.undo)

    def redo(self) -> None:
        self._step("redo", self._undo.redo)

    def _step(self, action: str, move: Callable[[], None]) -> None:
        self._check_writable(action)
        was = self.modified
        move()
        self._emit_modified(was)

    def _emit_modified(self, was: bool) -> None:
        if was != self.modified:
            self.events.emit(ModifiedChanged(self.modified))

    @contextmanager
    def macro(self, text: str) -> Iterator[None]:
        """Group the commands issued inside into one undo step."""
        with self._undo.macro(text, self._record):
            yield

    def _push(self, text: str, do: Callable[[], None], undo: Callable[[], None]) -> None:
        self._check_writable(text)
        cmd = Command(text, do, undo)
        if self._undo.push(cmd):
            self._record(cmd)

    def _record(self, step: Command | Macro) -> None:
        was = self.modified
        self._undo.record(step)
        self._emit_modified(was)

    def clear_undo(self) -> None:
        self._undo.clear()

    # ---- edit commands ---------------------------------------------------------------------------
    def _check_new_name(self, name: str) -> None:
        if not is_identifier(name):
            raise LayerLabError(f"{name!r} is not a valid layer name: use letters, digits and '_', not starting with a digit")
        if name in self.layers:
            raise LayerLabError(f"a layer named {name!r} already exists")

    def add_layer(
        self,
        type: str,
        name: str | None = None,
        params: dict[str, str] | None = None,
        inputs: list[str | None] | None = None,
        activation: str = "none",
        act_coefs: dict[str, str] | None = None,
        position: tuple[float, float] = (0.0, 0.0),
        permanent: bool = False,
    ) -> str:
        """Add a layer (a unique name is generated when none is given, ``resblock_1`` for ``template:resblock``);
        returns its name."""
        name = name or self.unique_name(type.rpartition(":")[2])
        self._check_new_name(name)
        for src in inputs or []:
            if src is not None and src not in self.layers:
                raise LayerLabError(f"layer {name}: input {src!r} does not exist")
        spec = LayerSpec(
            name, type, {k: str(v) for k, v in (params or {}).items()}, activation,
            {k: str(v) for k, v in (act_coefs or {}).items()}, list(inputs or []),
            (float(position[0]), float(position[1])), permanent,
        )
        self._insert_layers([spec], f"Add {name}")
        return name

    def add_layers(self, specs: list[LayerSpec], text: str = "Paste", before: str | None = None) -> None:
        """Insert several complete layers in one command (paste, duplicate, templates), at the end of the
        model order or ``before`` an existing layer."""
        if before is not None:
            self.layer(before)
        for s in specs:
            self._check_new_name(s.name)
        names = {s.name for s in specs} | set(self.layers)
        for s in specs:
            for src in s.inputs:
                if src is not None and src not in names:
                    raise LayerLabError(f"layer {s.name}: input {src!r} does not exist")
        self._insert_layers([copy.deepcopy(s) for s in specs], text, before)

    def _insert_layers(self, specs: list[LayerSpec], text: str, before: str | None = None) -> None:
        def do() -> None:
            if before is None:
                self.layers.update((s.name, copy.deepcopy(s)) for s in specs)
            else:
                items = list(self.layers.items())
                at = next(i for i, (n, _) in enumerate(items) if n == before)
                items[at:at] = [(s.name, copy.deepcopy(s)) for s in specs]
                self.layers = dict(items)
            for s in specs:
                self.events.emit(LayerAdded(s.name))

        def undo() -> None:
            for s in reversed(specs):
                del self.layers[s.name]
                self.events.emit(LayerRemoved(s.name))

        self._push(text, do, undo)

    def remove_layers(self, names: list[str]) -> None:
        """Delete layers and every link entering or leaving them, as one command."""
        names = [n for n in self.layers if n in set(names)]
        if not names:
            return
        order = list(self.layers)
        removed = {n: (order.index(n), copy.deepcopy(self.layers[n])) for n in names}
        cut = [(r, i, n) for n in names for r, i in self.readers(n) if r not in removed]

        def do() -> None:
            for r, i, _ in cut:
                self.layers[r].inputs[i] = None
                self.events.emit(LinkChanged(r, i, None))
            for n in names:
                del self.layers[n]
                self.events.emit(LayerRemoved(n))

        def undo() -> None:
            items = list(self.layers.items())
            for n in sorted(names, key=lambda k: removed[k][0]):
                items.insert(removed[n][0], (n, copy.deepcopy(removed[n][1])))
            self.layers = dict(items)
            for n in names:
                self.events.emit(LayerAdded(n))
            for r, i, n in cut:
                self.layers[r].inputs[i] = n
                self.events.emit(LinkChanged(r, i, n))

        self._push("Delete " + ", ".join(names), do, undo)

    def remove_layer(self, name: str) -> None:
        self.layer(name)
        self.remove_layers([name])

    def connect(self, source: str, target: str, index: int, allow_cycle: bool = False) -> None:
        """Link ``source``'s output to input ``index`` of ``target`` (replacing a link already there)."""
        self.layer(source)
        spec = self.layer(target)
        if index < 0:
            raise LayerLabError(f"layer {target}: input index {index} is negative")
        if not allow_cycle and self.depends_on(source, target):
            raise GraphError(f"linking {source} to {target} would create a cycle")
        old = spec.inputs[index] if index < len(spec.inputs) else None
        old_len = len(spec.inputs)
        if old == source:
            return

        def do() -> None:
            ins = self.layers[target].inputs
            while len(ins) <= index:
                ins.append(None)
            ins[index] = source
            self.events.emit(LinkChanged(target, index, source))

        def undo() -> None:
            ins = self.layers[target].inputs
            ins[index] = old
            del ins[old_len:]
            self.events.emit(LinkChanged(target, index, old))

        self._push(f"Connect {source} to {target}:{index}", do, undo)

    def disconnect(self, target: str, index: int) -> None:
        """Remove the link entering input ``index`` of ``target``."""
        spec = self.layer(target)
        if index >= len(spec.inputs) or spec.inputs[index] is None:
            return
        old = spec.inputs[index]

        def do() -> None:
            self.layers[target].inputs[index] = None
            self.events.emit(LinkChanged(target, index, None))

        def undo() -> None:
            self.layers[target].inputs[index] = old
            self.events.emit(LinkChanged(target, index, old))

        self._push(f"Disconnect {target}:{index}", do, undo)

    def _set_attr(self, name: str, text: str, getter: Callable[[LayerSpec], Any],
                  setter: Callable[[LayerSpec, Any], None], value: Any, kind: type[LayerEvent]) -> None:
        old = copy.deepcopy(getter(self.layer(name)))
        if old == value:
            return
        value = copy.deepcopy(value)

        def apply(v: Any) -> Callable[[], None]:
            def f() -> None:
                setter(self.layers[name], copy.deepcopy(v))
                self.events.emit(kind(name))
            return f

        self._push(text, apply(value), apply(old))

    def set_param(self, name: str, param: str, value: str | None) -> None:
        """Set a parameter's text (None removes it, so the default applies)."""
        def setter(s: LayerSpec, v: str | None) -> None:
            if v is None:
                s.params.pop(param, None)
            else:
                s.params[param] = v
        self._set_attr(name, f"Set {name}.{param}", lambda s: s.params.get(param), setter,
                       None if value is None else str(value), ParamChanged)

    def set_activation(self, name: str, activation: str, coefs: dict[str, str] | None = None) -> None:
        def setter(s: LayerSpec, v: tuple[str, dict[str, str]]) -> None:
            s.activation, s.act_coefs = v[0], dict(v[1])
        self._set_attr(name, f"Set {name} activation", lambda s: (s.activation, s.act_coefs), setter,
                       (activation, {k: str(v) for k, v in (coefs or {}).items()}), ActivationChanged)

    def set_permanent(self, name: str, permanent: bool) -> None:
        self._set_attr(name, f"Set {name} permanent", lambda s: s.permanent,
                       lambda s, v: setattr(s, "permanent", v), bool(permanent), ParamChanged)

    def set_layer_format(self, name: str, fmt: str) -> None:
        """Set a layer's own tensor format (``fp32``, ``nhwc``, ``fp32 nchw``...; empty or ``default``: the
        network's), validated and stored in canonical spelling; one undoable command."""
        self._set_attr(name, f"Set {name} format", lambda s: s.format, lambda s, v: setattr(s, "format", v),
                       canonical(fmt, f"layer {name}: format"), ParamChanged)

    def set_group(self, names: list[str], path: str) -> None:
        """Put the layers ``names`` in group ``path`` (``"features/denseblock3"``; empty: in no group); one
        undoable command."""
        path = check_path(path)
        with self.macro(f"Group {len(names)} layers as {path}" if path else f"Ungroup {len(names)} layers"):
            for name in names:
                self._set_attr(name, f"Group {name}", lambda s: s.group, lambda s, v: setattr(s, "group", v), path,
                               GroupChanged)

    def move_layer(self, name: str, position: tuple[float, float]) -> None:
        self._set_attr(name, f"Move {name}", lambda s: s.position, lambda s, v: setattr(s, "position", v),
                       (float(position[0]), float(position[1])), LayerMoved)

    def rename_layer(self, old: str, new: str) -> None:
        """Rename a layer and every link that refers to it."""
        self.layer(old)
        if old == new:
            return
        self._check_new_name(new)

        def ren(a: str, b: str) -> Callable[[], None]:
            def f() -> None:
                self.layers = {(b if k == a else k): v for k, v in self.layers.items()}
                self.layers[b].name = b
                for spec in self.layers.values():
                    spec.inputs = [b if s == a else s for s in spec.inputs]
                self.events.emit(LayerRenamed(b, a))
            return f

        self._push(f"Rename {old} to {new}", ren(old, new), ren(new, old))

    def set_network(self, name: str | None = None, version: str | None = None) -> None:
        """Set the network parameters (name, version)."""
        if name is not None and not is_identifier(name):
            raise LayerLabError(f"{name!r} is not a valid network name: use letters, digits and '_'")
        old = (self.name, self.version)
        new = (name if name is not None else self.name, version if version is not None else self.version)
        if old == new:
            return

        def apply(v: tuple[str, str]) -> Callable[[], None]:
            def f() -> None:
                self.name, self.version = v
                self.events.emit(NetworkChanged())
            return f

        self._push("Set network parameters", apply(new), apply(old))

    def set_setting(self, key: str, value: str | None) -> None:
        """Network settings stored with the model (backend, format, weights folder, ...)."""
        old = self.settings.get(key)
        if old == value:
            return

        def apply(v: str | None) -> Callable[[], None]:
            def f() -> None:
                if v is None:
                    self.settings.pop(key, None)
                else:
                    self.settings[key] = v
                self.events.emit(SettingsChanged(key))
            return f

        self._push(f"Set {key}", apply(value), apply(old))
