"""The built-in collections file their layers under the category constants (engine.categories)."""
from __future__ import annotations

from engine.categories import Category


def test_every_builtin_layer_uses_known_categories(registry):
    known = {v for k, v in vars(Category).items() if k.isupper()}
    builtin = [d for d in registry.layer_descs() if d.collection in ("standard", "analysis")]
    assert builtin and all(d.categories for d in builtin)
    assert {c for d in builtin for c in d.categories} <= known - {Category.TEMPLATES, Category.OTHER}
