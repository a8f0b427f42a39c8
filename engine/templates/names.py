"""Template names: the layer type of an instance (``template:NAME``) and the names of expanded layers."""
from __future__ import annotations

from engine.categories import Category
from engine.model import Model

TEMPLATE_PREFIX = "template:"
#: separator of expanded names: ``<instance>__<layer>``
SEP = "__"
CATEGORY = Category.TEMPLATES


def template_type(name: str) -> str:
    """The layer type of an instance of template ``name``."""
    return TEMPLATE_PREFIX + name


def template_name(layer_type: str) -> str | None:
    """The template an instance of ``layer_type`` uses (None for a plugin layer type)."""
    return layer_type[len(TEMPLATE_PREFIX):] if layer_type.startswith(TEMPLATE_PREFIX) else None


def has_instances(model: Model) -> bool:
    return any(s.type.startswith(TEMPLATE_PREFIX) for s in model.layers.values())


def instances_of(model: Model, name: str) -> list[str]:
    """Layers of ``model`` that are instances of template ``name``."""
    t = template_type(name)
    return [n for n, s in model.layers.items() if s.type == t]
