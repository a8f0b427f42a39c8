"""Runtime options shared by the analysis layers.

Each runtime option mirrors one layer parameter: the model gives its starting value, the analysis
tools change it live. An option is described as a JSON object (``name``, ``text``, ``type`` and the
per-type attributes ``min``/``max``/``step`` or ``values``, plus ``value`` and ``default``); new values
arrive as text (as from a line edit) or as typed values, and are validated for structure and range by
the parameter's own descriptor, so the model file and the live editor accept exactly the same values."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from engine.descriptors import ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

#: ParamDesc type -> runtime option type
_OPTION_TYPE = {"float": "float", "int": "int", "uint": "int", "bool": "bool", "enum": "enum", "string": "string"}


@dataclass(frozen=True)
class OptionSpec:
    """A runtime option of an analysis layer, backed by the layer parameter of the same name."""

    name: str
    text: str
    step: float | None = None
    extras: dict[str, Any] = field(default_factory=dict)


def describe(param: ParamDesc, spec: OptionSpec, value: Any) -> dict[str, Any]:
    """The JSON object describing one option with its current value."""
    kind = _OPTION_TYPE[param.type]
    out: dict[str, Any] = {"name": spec.name, "text": spec.text, "type": kind, "value": value,
                           "default": param.default}
    if kind in ("float", "int"):
        lo = param.min if param.min is not None else (0 if param.type == "uint" else None)
        if lo is not None:
            out["min"] = int(lo) if kind == "int" else float(lo)
        if param.max is not None:
            out["max"] = int(param.max) if kind == "int" else float(param.max)
        out["step"] = spec.step if spec.step is not None else (1 if kind == "int" else 0.01)
    elif kind == "enum":
        out["values"] = list(param.enum_values)
    if param.doc:
        out["tooltip"] = param.doc
    out.update(spec.extras)
    return out


class OptionsLayer(Layer):
    """Base of the analysis layers: ``OPTIONS`` lists the parameters that are runtime options.

    Subclasses implement ``option_changed(name, old)`` when a change needs more than storing the
    value (new cached tables, a new noise pattern) and return True there when the output size
    changes (the network then reshapes)."""

    OPTIONS: ClassVar[tuple[OptionSpec, ...]] = ()

    def runtime_options(self) -> list[dict[str, Any]]:
        return [describe(self.desc.param(s.name), s, self.p[s.name]) for s in self.OPTIONS]

    def set_runtime_option(self, name: str, value: Any) -> bool:
        spec = next((s for s in self.OPTIONS if s.name == name), None)
        if spec is None:
            known = ", ".join(s.name for s in self.OPTIONS) or "none"
            raise self.param_error(name, f"{self.desc.name} has no runtime option {name!r} (it has: {known})")
        param = self.desc.param(name)
        if isinstance(value, bool) and param.type in ("float", "int", "uint"):
            raise self.param_error(name, f"{str(value)!r} is not {param.allowed()}")
        try:
            typed = param.parse(value)
        except ValueError as exc:
            raise self.param_error(name, str(exc)) from None
        old = self.p[name]
        if typed == old:
            return False
        self.p = {**self.p, name: typed}
        try:
            self.validate()
        except Exception:
            self.p = {**self.p, name: old}
            raise
        return bool(self.option_changed(name, old))

    def option_changed(self, name: str, old: Any) -> bool:
        """React to a stored new value; return True when the output size changes."""
        return False


def broadcast_dims(layer: Layer, a: Dims, b: Dims | None) -> Dims:
    """Output dimensions of a value-by-value operation on ``a`` and ``b`` (a size 1 broadcasts)."""
    if b is None:
        return a
    out = []
    for axis, (x, y) in enumerate(zip(a, b)):
        if x != y and 1 not in (x, y):
            raise layer.shape_error(f"inputs a {a} and b {b} differ in {'NCHW'[axis]} ({x} vs {y}); "
                                    "they must match or one of them be 1")
        out.append(max(x, y))
    return Dims(*out)
