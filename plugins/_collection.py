"""What the built-in collections' ``register`` functions share: one module per layer or activation, registered in
the order the collection lists them, then the collection's fusing rules."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from engine.registry import Registrar


def registering(package: str, layers: Sequence[str] = (), activations: Sequence[str] = (),
                rules: Sequence[str] = ()) -> Callable[[Registrar], None]:
    """A collection's ``register(registrar)``: the ``LAYER`` of each module named in ``layers`` and the ``ACTIVATION``
    of each named in ``activations`` (modules of ``package``, imported when the collection registers, in order), then
    the fusing ``rules``."""

    def register(registrar: Registrar) -> None:
        for name in layers:
            registrar.layer(importlib.import_module(f"{package}.{name}").LAYER)
        for name in activations:
            registrar.activation(importlib.import_module(f"{package}.{name}").ACTIVATION)
        for rule in rules:
            registrar.fusing_rule(rule)

    return register
