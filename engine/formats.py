"""Tensor formats as a user writes them: the network's format (``fp16 nhwc``, or ``auto``: the backend's default)
and a layer's own format setting (``LayerSpec.format``, ``--layer-format NAME=...``), their words, parsing,
canonical text and defaults, and a run's format settings parsed once (``FormatSettings``).

* A layer's format setting is text: ``fp32``, ``fp16``, ``nchw``, ``nhwc`` or a precision and a layout together
  (``fp32 nchw``, ``fp32,nchw``, ``fp32|nchw``); empty or ``default`` is the network's format. A part left out
  follows the network (``fp32`` on an ``fp16 nhwc`` network is ``fp32 nhwc``).
* The tensor type itself (``TensorFormat``, ``Dims``, views between layouts) is ``engine.tensor``; the network's
  per-layer formats and the conversions between them are ``engine.format_conversion``.

Imports only ``engine.tensor`` and ``engine.errors``: the model and the model file read settings through it."""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.errors import LayerLabError
from engine.tensor import Layout, Precision, TensorFormat

AUTO = "auto"
#: The tensor format ``auto`` stands for, by backend (docs/scripting.md, "Tensor formats: the default"): NHWC on both, because
#: the GPU's tensor cores and the CPU kernels both read channels contiguously; fp16 only where the device computes
#: in fp16 (the GPU). The NumPy backend has no fp16 arithmetic: it stores fp16 and computes in fp32, slower and
#: less exact than fp32 itself.
DEFAULT_FORMATS: dict[str, str] = {"cupy": "fp16 nhwc", "numpy": "fp32 nhwc"}

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


def parse_assignments(values: Iterable[str] | None) -> tuple[tuple[str, str], ...]:
    """``NAME=FORMAT`` items (the ``--layer-format`` flag) -> ((name, canonical format), ...)."""
    out = []
    for value in values or []:
        name, sep, text = str(value).partition("=")
        if not sep or not name.strip():
            raise LayerFormatError(f"--layer-format {value!r}: expected NAME=FORMAT, e.g. conv3=fp32 or "
                                   "conv3=fp32,nchw")
        out.append((name.strip(), canonical(text, f"layer {name.strip()}: format")))
    return tuple(out)


def nearest_supported(wanted: TensorFormat, supported: Iterable[TensorFormat]) -> TensorFormat:
    """``wanted`` if supported, else the supported format sharing its precision (then its layout), else the
    first supported one."""
    options = list(supported)
    if wanted in options or not options:
        return wanted
    for keep in (lambda f: f.precision is wanted.precision, lambda f: f.layout is wanted.layout):
        match = [f for f in options if keep(f)]
        if match:
            return match[0]
    return options[0]


def parse_network_format(text: str | None) -> TensorFormat | None:
    """The network's format ``text``: None for an empty or ``auto`` one (the backend's default), else the format
    (raises for a bad one)."""
    if not text or text.strip().lower() == AUTO:
        return None
    return TensorFormat.parse(text)


def default_format(backend_name: str) -> TensorFormat:
    """The format ``auto`` stands for on backend ``backend_name`` (the one rule, ``DEFAULT_FORMATS``)."""
    return TensorFormat.parse(DEFAULT_FORMATS.get(backend_name, DEFAULT_FORMATS["numpy"]))


def format_text(fmt: TensorFormat | None) -> str:
    """``auto`` for None, else the canonical ``fp16 nhwc`` spelling."""
    return AUTO if fmt is None else f"{fmt.precision.value} {fmt.layout.value}"


def normalize_format(text: str | None) -> str:
    """``auto`` for an empty or ``auto`` format, else the canonical ``fp16 nhwc`` spelling (raises for a bad one)."""
    return format_text(parse_network_format(text))


def tensor_format(text: str | None, backend_name: str) -> TensorFormat:
    """The tensor format a run uses: ``text``, or for ``auto`` the default of the backend (the one rule)."""
    return parse_network_format(text) or default_format(backend_name)


@dataclass(frozen=True)
class FormatSettings:
    """A run's format settings, parsed once: the network's format (None: ``auto``, the backend's default) and the
    layer format settings put over the model's own (name, setting)."""

    network: TensorFormat | None = None
    layers: tuple[tuple[str, LayerFormat], ...] = ()

    @classmethod
    def parse(cls, network: str | None, layers: Iterable[tuple[str, str]] = ()) -> FormatSettings:
        """Read ``network`` (``auto``, ``fp16 nhwc``, ...) and the (layer, setting) pairs; raises LayerLabError
        (LayerFormatError for a layer's setting) naming the first bad one."""
        return cls(parse_network_format(network),
                   tuple((name, LayerFormat.parse(text, f"layer {name}: format")) for name, text in layers))

    def for_backend(self, backend_name: str) -> TensorFormat:
        """The network's format on backend ``backend_name``."""
        return self.network or default_format(backend_name)

    def overrides(self) -> dict[str, LayerFormat]:
        """The layer settings by layer name (a later pair for a name wins)."""
        return dict(self.layers)


__all__ = ["AUTO", "DEFAULT_FORMATS", "FormatSettings", "LAYOUTS", "LayerFormat", "LayerFormatError", "PRECISIONS",
           "canonical", "default_format", "format_text", "nearest_supported", "normalize_format", "parse_assignments",
           "parse_network_format", "tensor_format"]
