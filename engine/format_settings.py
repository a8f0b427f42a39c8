"""A layer's own tensor format setting (``LayerSpec.format``): its words, its parsing and its canonical text.
``engine.formats`` builds the network's per-layer formats and conversions on it; the model and the model file only
need this (so they import nothing that imports them)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from engine.errors import LayerLabError
from engine.tensor import Layout, Precision, TensorFormat

#: the words a layer format setting is made of
PRECISIONS = ("fp16", "fp32")
LAYOUTS = ("nchw", "nhwc")


class LayerFormatError(LayerLabError):
    """A layer format setting that cannot be read, or names a layer the network does not have."""


@dataclass(frozen=True)
class LayerFormat:
    """A layer's own format setting: a precision and/or a layout (None: the network's)."""

    precision: Precision | None = None
    layout: Layout | None = None

    @classmethod
    def parse(cls, text: str | None, what: str = "layer format") -> LayerFormat:
        """``fp32``, ``nhwc``, ``fp32 nchw`` (``,`` ``|`` or spaces between), ``default`` or empty."""
        precision = layout = None
        tokens = [t for t in re.split(r"[|,\s]+", (text or "").strip().lower()) if t]
        if tokens == ["default"]:
            return cls()
        for tok in tokens:
            if tok in PRECISIONS and precision is None:
                precision = Precision(tok)
            elif tok in LAYOUTS and layout is None:
                layout = Layout(tok)
            else:
                raise LayerFormatError(f"{what} {text!r}: expected a precision (fp32 or fp16), a layout (nchw or "
                                       "nhwc), both (e.g. fp32,nchw), or default")
        return cls(precision, layout)

    def __str__(self) -> str:
        """The canonical text: ``fp32``, ``nhwc``, ``fp32 nhwc``, or empty for the network's format."""
        return " ".join(p.value for p in (self.precision, self.layout) if p is not None)

    def __bool__(self) -> bool:
        return self.precision is not None or self.layout is not None

    @property
    def badge(self) -> str:
        """The short text the designer shows on a layer with this setting: ``fp32``, ``NCHW``, ``fp32 NCHW``."""
        return " ".join(t for t in (self.precision.value if self.precision else "",
                                    self.layout.value.upper() if self.layout else "") if t)

    def over(self, network: TensorFormat) -> TensorFormat:
        """The format this setting gives a layer of a network in format ``network``."""
        return TensorFormat(self.precision or network.precision, self.layout or network.layout)


def canonical(text: str | None, what: str = "layer format") -> str:
    """The canonical text of a layer format setting (raises LayerFormatError for a bad one)."""
    return str(LayerFormat.parse(text, what))


