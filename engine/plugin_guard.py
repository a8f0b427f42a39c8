"""Running a layer's code: a third-party plugin's failure becomes a user-facing error naming the layer."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from engine.errors import LayerLabError, PluginError
from engine.layer import Layer

#: the packages of LayerLab's own code: an exception from there is a LayerLab bug, from anywhere else a plugin's
OWN_PACKAGES = ("engine.", "plugins.standard.", "plugins.activations.", "plugins.analysis.")


@contextlib.contextmanager
def plugin_code(name: str, layer: Layer, what: str) -> Iterator[None]:
    """Run a layer's code: an unexpected exception from a third-party plugin's layer becomes a PluginError naming
    the layer, its type and its module (a user-facing error, not a crash); LayerLab's own layers' exceptions pass
    through unchanged (they are LayerLab bugs)."""
    try:
        yield
    except LayerLabError:
        raise
    except Exception as exc:
        module = type(layer).__module__
        if module.startswith(OWN_PACKAGES):
            raise
        text = str(exc)
        text = text if len(text) <= 300 else text[:300] + "..."
        raise PluginError(f"layer {name} ({layer.desc.name}, plugin module {module}): its {what} code failed: "
                          f"{type(exc).__name__}: {text}") from exc
