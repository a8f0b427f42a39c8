"""The edit commands of a model document's definitions: templates (engine.templates builds, checks and uses
them), custom layers (engine.custom) and the user's fusing rules. Each is one undoable command of the document,
as every edit of a layer is (``Model`` inherits them; the document's undo stack records them)."""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from engine.descriptors import is_identifier
from engine.errors import LayerLabError
from engine.events import CustomLayerChanged, FusingRulesChanged, TemplateAdded, TemplateChanged, TemplateRemoved


class DefinitionEdits:
    """Template, custom-layer and fusing-rule commands of a ``Model`` (which provides the state and ``_push``)."""

    name: str
    layers: dict[str, Any]
    templates: dict[str, str]
    custom_layers: dict[str, str]
    fusing_rules: list[Any]
    events: Any

    def _push(self, text: str, do: Callable[[], None], undo: Callable[[], None]) -> None:
        raise NotImplementedError

    def _template_uses(self, name: str) -> list[str]:
        """Layers and other templates that use template ``name``."""
        ltype = f"template:{name}"
        users = [n for n, s in self.layers.items() if s.type == ltype]
        marker = f'type="{ltype}"'  # template texts are canonical XML: attributes in double quotes
        return users + [f"template {t}" for t, text in self.templates.items() if t != name and marker in text]

    def add_template(self, name: str, text: str) -> None:
        """Add the definition ``text`` (canonical XML, see engine.templates) of a new template ``name``."""
        if not is_identifier(name):
            raise LayerLabError(f"{name!r} is not a valid template name: use letters, digits and '_', not starting with a digit")
        if name in self.templates:
            raise LayerLabError(f"a template named {name!r} already exists")

        def do() -> None:
            self.templates[name] = text
            self.events.emit(TemplateAdded(name))

        def undo() -> None:
            del self.templates[name]
            self.events.emit(TemplateRemoved(name))

        self._push(f"Add template {name}", do, undo)

    def set_template(self, name: str, text: str) -> None:
        """Replace the definition of template ``name`` (its instances follow)."""
        if name not in self.templates:
            raise LayerLabError(f"no template named {name!r} in network {self.name}")
        old = self.templates[name]
        if old == text:
            return

        def apply(v: str) -> Callable[[], None]:
            def f() -> None:
                self.templates[name] = v
                self.events.emit(TemplateChanged(name))
            return f

        self._push(f"Edit template {name}", apply(text), apply(old))

    def remove_template(self, name: str) -> None:
        """Delete template ``name``; refused while layers or other templates use it."""
        if name not in self.templates:
            raise LayerLabError(f"no template named {name!r} in network {self.name}")
        users = self._template_uses(name)
        if users:
            raise LayerLabError(f"template {name} is still used by {', '.join(users)}: delete or ungroup those first")
        order = list(self.templates)
        index, text = order.index(name), self.templates[name]

        def do() -> None:
            del self.templates[name]
            self.events.emit(TemplateRemoved(name))

        def undo() -> None:
            items = list(self.templates.items())
            items.insert(index, (name, text))
            self.templates = dict(items)
            self.events.emit(TemplateAdded(name))

        self._push(f"Delete template {name}", do, undo)

    def set_custom_layer(self, name: str, text: str | None) -> None:
        """Add or replace (``text``: its XML, see engine.custom) or delete (None) custom layer ``name``'s definition."""
        old = dict(self.custom_layers)
        new = dict(old)
        if text is None:
            new.pop(name, None)
        else:
            new[name] = text
        if new == old:
            return

        def apply(v: dict[str, str]) -> Callable[[], None]:
            def f() -> None:
                self.custom_layers = dict(v)
                self.events.emit(CustomLayerChanged(name, f"custom:{name}"))
            return f

        verb = "Delete" if text is None else ("Edit" if name in old else "Add")
        self._push(f"{verb} custom layer {name}", apply(new), apply(old))

    def set_fusing_rules(self, rules: list[Any]) -> None:
        """Replace the user's fusing rules (``FusingRuleSpec`` items)."""
        old = copy.deepcopy(self.fusing_rules)
        new = copy.deepcopy(rules)

        def apply(v: list[Any]) -> Callable[[], None]:
            def f() -> None:
                self.fusing_rules = copy.deepcopy(v)
                self.events.emit(FusingRulesChanged())
            return f

        self._push("Edit fusing rules", apply(new), apply(old))
