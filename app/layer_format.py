"""The designer's per-layer Precision and Layout choices (parameter window, layer right-click menu): the words the
user picks from and the layer format setting each gives (``engine.formats``). Imports no Qt."""
from __future__ import annotations

from engine.formats import LayerFormat
from engine.model import Model
from engine.tensor import Layout, Precision

#: the Precision choices: the network's, or the layer's own
PRECISION_CHOICES = ("network default", "fp16", "fp32")
#: the Layout choices: the network's, or the layer's own
LAYOUT_CHOICES = ("default", "NCHW", "NHWC")


def precision_choice(text: str) -> str:
    """The Precision choice a layer format setting shows as."""
    p = LayerFormat.parse(text).precision
    return p.value if p is not None else PRECISION_CHOICES[0]


def layout_choice(text: str) -> str:
    """The Layout choice a layer format setting shows as."""
    lo = LayerFormat.parse(text).layout
    return lo.value.upper() if lo is not None else LAYOUT_CHOICES[0]


def with_precision(text: str, choice: str) -> str:
    """The setting ``text`` with its precision set to ``choice`` (its layout kept)."""
    fmt = LayerFormat.parse(text)
    return str(LayerFormat(Precision(choice) if choice in ("fp16", "fp32") else None, fmt.layout))


def with_layout(text: str, choice: str) -> str:
    """The setting ``text`` with its layout set to ``choice`` (its precision kept)."""
    fmt = LayerFormat.parse(text)
    return str(LayerFormat(fmt.precision, Layout(choice.lower()) if choice.lower() in ("nchw", "nhwc") else None))


def set_precision(model: Model, names: list[str], choice: str) -> None:
    """Set the Precision of ``names`` to ``choice``: one undo step."""
    with model.macro(f"Set precision {choice}"):
        for n in names:
            model.set_layer_format(n, with_precision(model.layers[n].format, choice))


def set_layout(model: Model, names: list[str], choice: str) -> None:
    """Set the Layout of ``names`` to ``choice``: one undo step."""
    with model.macro(f"Set layout {choice}"):
        for n in names:
            model.set_layer_format(n, with_layout(model.layers[n].format, choice))
