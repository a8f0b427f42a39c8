"""Descriptors: what a layer or activation is, as data. The palette, the parameter window, the docs
browser, the type checker and the exporters read these, never the layer code."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from engine.epilogues import EPILOGUE_TABLE
from engine.errors import ParameterError
from engine.limits import cut
from engine.tensor import FORMATS, MAX_RANK, MIN_RANK, Dims, TensorFormat

PARAM_TYPES = ("string", "uint", "int", "float", "enum", "dimension", "bool")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
#: largest magnitude of an integer parameter (larger values describe no tensor that fits in any memory)
MAX_INT_PARAM = 1 << 40


def is_identifier(name: str) -> bool:
    """Layer names must be identifier-style: a letter or '_' then letters, digits or '_'."""
    return bool(_IDENT.match(name or ""))


class InputKind(str, Enum):
    PRIMARY = "primary"  # mandatory
    SECONDARY = "secondary"  # optional; for weighted layers it replaces a weight
    PRIMARY_INFINITE = "primary_infinite"  # any number (>= 1) of mandatory inputs


@dataclass(frozen=True)
class InputDesc:
    name: str
    kind: InputKind = InputKind.PRIMARY
    doc: str = ""
    weight: str | None = None  # secondary input that replaces this weight of the layer


@dataclass(frozen=True)
class ParamDesc:
    """One layer parameter. Values travel as text in the model file and are parsed here."""

    name: str
    type: str
    default: Any
    doc: str = ""
    enum_values: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    legacy_names: tuple[str, ...] = ()
    main: bool = False  # shown on the canvas node
    #: a dimension parameter whose sizes are taken as written, of any rank 1 to 6 (an input's size), instead of
    #: a spatial HxW or single size when one or two are given
    any_rank: bool = False

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"parameter {self.name}: unknown type {self.type!r}, expected one of {PARAM_TYPES}")
        if self.type == "enum" and self.default not in self.enum_values:
            raise ValueError(f"parameter {self.name}: default {self.default!r} not in {self.enum_values}")

    def allowed(self) -> str:
        """What values are allowed, in words (used in error messages and docs)."""
        if self.type == "enum":
            return "one of " + ", ".join(self.enum_values)
        if self.type == "bool":
            return "true or false"
        if self.type == "dimension":
            low = f" (each at least {_num(self.min)})" if self.min is not None and self.min < 0 else ""
            if self.any_rank:
                return f"dimensions NxCxHxW or {MIN_RANK} to {MAX_RANK} sizes of another rank" + low
            return "dimensions NxCxHxW, HxW or a single size" + low
        if self.type == "string":
            return "text"
        kind = {"uint": "an integer", "int": "an integer", "float": "a number"}[self.type]
        lo = self.min if self.min is not None else (0 if self.type == "uint" else None)
        rng = ""
        if lo is not None and self.max is not None:
            rng = f" in [{_num(lo)}, {_num(self.max)}]"
        elif lo is not None:
            rng = f" >= {_num(lo)}"
        elif self.max is not None:
            rng = f" <= {_num(self.max)}"
        return kind + rng

    def parse(self, text: Any) -> Any:
        """Typed value of ``text``; raises ValueError with the allowed values when invalid."""
        if not isinstance(text, str):
            text = self.format(text)
        raw = text.strip()
        try:
            if self.type == "string":
                return text
            if self.type == "bool":
                low = raw.lower()
                if low in ("true", "1", "yes", "on"):
                    return True
                if low in ("false", "0", "no", "off"):
                    return False
                raise ValueError
            if self.type == "enum":
                if raw not in self.enum_values:
                    raise ValueError
                return raw
            if self.type == "dimension":
                parts = [p for p in re.split(r"[x×,\s]+", raw) if p]
                digits = [p[1:] if p.startswith("-") else p for p in parts]  # the sign: checked against min below
                if not all(d.isascii() and d.isdigit() and len(d) <= 13 for d in digits):
                    raise ValueError
                vals = [int(p) for p in parts]
                if any(v < (self.min if self.min is not None and self.min < 0 else 0) for v in vals):
                    raise ValueError
                if not self.any_rank and len(vals) == 1:
                    return Dims(1, 1, vals[0], vals[0])
                if not self.any_rank and len(vals) == 2:
                    return Dims(1, 1, vals[0], vals[1])
                if MIN_RANK <= len(vals) <= MAX_RANK:
                    return Dims(*vals)
                raise ValueError
            if self.type in ("uint", "int"):
                if not raw.isascii():
                    raise ValueError
                value: float = int(raw)
            else:
                value = float(raw)
                if not math.isfinite(value):
                    raise ValueError
        except ValueError:
            raise ValueError(f"{cut(text)} is not {self.allowed()}") from None
        if self.type in ("uint", "int") and abs(value) > MAX_INT_PARAM:
            raise ValueError(f"{cut(text)} is not {self.allowed()} (at most {MAX_INT_PARAM} in magnitude)")
        lo = self.min if self.min is not None else (0 if self.type == "uint" else None)
        if (lo is not None and value < lo) or (self.max is not None and value > self.max):
            raise ValueError(f"{cut(text)} is not {self.allowed()}")
        return value

    def format(self, value: Any) -> str:
        """Text of a typed value, as written to the model file."""
        if self.type == "bool":
            return "true" if value else "false"
        if self.type == "dimension":
            if isinstance(value, str):
                return value
            d = Dims(1, 1, *value) if len(value) == 2 and not self.any_rank else Dims(*value)
            return str(d)
        if self.type == "float":
            return _num(float(value))
        return str(value)

    @property
    def default_text(self) -> str:
        return self.format(self.default)

    @property
    def spatial(self) -> bool:
        """A dimension parameter about H and W only (kernel size, stride, padding, factors): its default
        has N = C = 1. Editors show and write it as ``HxW``."""
        return self.type == "dimension" and isinstance(self.default, Dims) and self.default.n == self.default.c == 1


#: every rank a tensor may have (a layer's ``ranks`` when it takes any)
ANY_RANK = tuple(range(MIN_RANK, MAX_RANK + 1))


def ranks_text(ranks: tuple[int, ...]) -> str:
    """The ranks in words: "tensors of rank 4 (N x C x H x W)", "tensors of rank 3 to 6", "tensors of any rank"."""
    if tuple(ranks) == ANY_RANK:
        return "tensors of any rank"
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    words = ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]} to {run[-1]}" for run in runs)
    return f"tensors of rank {words}" + (" (N x C x H x W)" if tuple(ranks) == (4,) else "")


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


@dataclass(frozen=True)
class CoefDesc:
    name: str
    default: float
    doc: str = ""
    min: float | None = None
    max: float | None = None


#: Fused epilogues: what a hand-written kernel may apply to its result before writing it (name -> the function), from
#: the one table of ``engine.epilogues``. An activation that computes one of them says so (``ActivationDesc.epilogue``),
#: so kernels fuse it without knowing its name; the epilogue reads the activation's coefficients it names.
EPILOGUES: dict[str, str] = {name: e.formula for name, e in EPILOGUE_TABLE.items()}


@dataclass(frozen=True)
class ActivationDesc:
    """An activation function: name and its float coefficients. ``epilogue`` names the fused epilogue
    (``EPILOGUES``) that computes exactly this activation, if one does."""

    name: str
    display_name: str
    summary: str
    coefficients: tuple[CoefDesc, ...] = ()
    documentation: str = ""
    legacy_names: tuple[str, ...] = ()
    collection: str = ""
    epilogue: str | None = None

    def __post_init__(self) -> None:
        if self.epilogue is not None and self.epilogue not in EPILOGUES:
            raise ValueError(f"activation {self.name}: unknown fused epilogue {self.epilogue!r} "
                             f"(known: {', '.join(EPILOGUES)})")
        if self.epilogue is not None:
            missing = [c for c in EPILOGUE_TABLE[self.epilogue].coefficients
                       if c not in {d.name for d in self.coefficients}]
            if missing:
                raise ValueError(f"activation {self.name}: the {self.epilogue} epilogue needs a coefficient named "
                                 f"{' and '.join(missing)}")

    def coefficient_values(self, given: dict[str, Any], owner: str = "") -> dict[str, float]:
        """Coefficients with defaults filled in; raises ParameterError for unknown or bad values."""
        known = {c.name: c for c in self.coefficients}
        where = f"{owner}: " if owner else ""
        out = {c.name: float(c.default) for c in self.coefficients}
        for key, raw in given.items():
            if key not in known:
                names = ", ".join(known) or "none"
                raise ParameterError(f"{where}activation {self.name} has no coefficient {cut(key)} (it has: {names})")
            try:
                val = float(raw)
                if not math.isfinite(val):
                    raise ValueError
            except (TypeError, ValueError):
                raise ParameterError(f"{where}activation {self.name} coefficient {key}={cut(raw)} is not a number") from None
            c = known[key]
            if (c.min is not None and val < c.min) or (c.max is not None and val > c.max):
                raise ParameterError(
                    f"{where}activation {self.name} coefficient {key}={cut(raw)} is outside [{c.min}, {c.max}]"
                )
            out[key] = val
        return out


def activation_text(name: str, coefs: dict[str, Any]) -> str:
    """An activation and its coefficients as one parameter value: ``clamp(min=0, max=6)``, ``silu``, ``none``."""
    if not coefs:
        return name or "none"
    return f"{name}({', '.join(f'{k}={v}' for k, v in coefs.items())})"


def parse_activation_text(text: str, owner: str = "") -> tuple[str, dict[str, str]]:
    """The activation name and coefficients of ``activation_text``'s form; raises ParameterError for another."""
    where = f"{owner}: " if owner else ""
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*", text)
    if m is None:
        raise ParameterError(f"{where}{cut(text)} is not an activation (name, or name(coefficient=value, ...))")
    coefs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
        key, eq, value = part.partition("=")
        if not eq or not is_identifier(key.strip()):
            raise ParameterError(f"{where}{cut(part)} in activation {cut(text)} is not coefficient=value")
        coefs[key.strip()] = value.strip()
    return m.group(1), coefs


@dataclass(frozen=True)
class LayerDesc:
    """What a layer type is: its name, palette placement, documentation, inputs and parameters."""

    name: str
    display_name: str
    summary: str
    categories: tuple[str, ...] = ()
    documentation: str = ""
    inputs: tuple[InputDesc, ...] = ()
    params: tuple[ParamDesc, ...] = ()
    formats: tuple[TensorFormat, ...] = FORMATS
    generates_output: bool = True
    legacy_names: tuple[str, ...] = ()
    collection: str = ""
    weights: tuple[str, ...] = field(default=())  # names of the weights the layer may need
    #: the tensor ranks the layer's inputs may have (4: N x C x H x W); the type checker refuses others
    ranks: tuple[int, ...] = (4,)
    #: a condition in the fusing rule language over the layer's parameters (``operation == 'sum'``); where it holds,
    #: the order of the layer's data inputs does not change its result, so a fusing rule's inner layer matches at
    #: any of them (a convolution at either input of a sum); empty: the order matters
    inputs_commute: str = ""
    #: the string parameter holding a second activation, applied inside the layer: a fused layer made of two layers
    #: that both have one (the inner layer's goes there, as ``activation_text`` writes it; the outer layer's is the
    #: fused layer's own); empty: the layer has one activation
    inner_activation: str = ""

    def rank_problem(self, inputs: list[Dims | None], sources: list[str | None]) -> str | None:
        """Why input dimensions ``inputs`` (read from the layers ``sources``) have a rank this layer does not
        take, naming the source layer; None when every rank is accepted."""
        for i, d in enumerate(inputs):
            if d is not None and len(d) not in self.ranks:
                src = sources[i] if i < len(sources) else None
                return (f"input {i}{f' (from layer {src})' if src else ''} is a tensor of rank {len(d)} ({d}), but "
                        f"{self.name} takes {ranks_text(self.ranks)}")
        return None

    def param(self, name: str) -> ParamDesc:
        for p in self.params:
            if p.name == name or name in p.legacy_names:
                return p
        raise KeyError(name)

    @property
    def infinite_input(self) -> bool:
        return any(i.kind is InputKind.PRIMARY_INFINITE for i in self.inputs)

    def mandatory_inputs(self, connected: int) -> list[int]:
        """Indices of inputs that must be connected, given how many input slots exist."""
        out = []
        for idx, inp in enumerate(self.inputs):
            if inp.kind is InputKind.PRIMARY:
                out.append(idx)
            elif inp.kind is InputKind.PRIMARY_INFINITE:
                out.append(idx)
        return out

    def unconnected_inputs(self, links: list[str | None]) -> list[int]:
        """Indices of mandatory inputs that ``links`` (the sources by input index) leave unconnected."""
        missing = []
        for i, inp in enumerate(self.inputs):
            if inp.kind is InputKind.PRIMARY and (i >= len(links) or links[i] is None):
                missing.append(i)
            elif inp.kind is InputKind.PRIMARY_INFINITE and not any(links[i:]):
                missing.append(i)
        return missing

    def links_beyond_inputs(self, links: list[str | None]) -> list[int]:
        """Indices of links on inputs this layer does not take (beyond its inputs, none of them infinite)."""
        if self.infinite_input:
            return []
        return [i for i in range(len(self.inputs), len(links)) if links[i] is not None]

    def input_desc(self, index: int) -> InputDesc | None:
        """Descriptor of input slot ``index`` (an infinite input covers every slot from its own on)."""
        if index < len(self.inputs):
            return self.inputs[index]
        if self.inputs and self.inputs[-1].kind is InputKind.PRIMARY_INFINITE:
            return self.inputs[-1]
        return None

    def canonical_param_name(self, name: str) -> str | None:
        try:
            return self.param(name).name
        except KeyError:
            return None

    def parse_params(self, layer: str, raw: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        """Typed parameters (defaults filled in) and warnings for unknown names.

        Raises ParameterError naming the layer, the parameter, the bad value and what is allowed."""
        values = {p.name: p.default for p in self.params}
        warnings: list[str] = []
        for key, text in raw.items():
            canon = self.canonical_param_name(key)
            if canon is None:
                warnings.append(f"{self.name} {layer}: unknown parameter {cut(key)} ignored")
                continue
            p = self.param(canon)
            try:
                values[canon] = p.parse(text)
            except ValueError as exc:
                raise ParameterError(f"{self.name} {layer}: parameter {canon}: {exc}") from None
        return values, warnings
