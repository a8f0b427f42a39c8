"""Conditions of a fusing rule: the syntax tree of ``[...]`` and what it means on a layer.

See ``engine.fusing`` for the language; this module evaluates it (typed parameter values, component-wise
ordering of dimensions, literals read the way the parameter reads its own values)."""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.descriptors import LayerDesc, ParamDesc
from engine.fusing.errors import FusingRuleError
from engine.model import LayerSpec
from engine.tensor import Dims

UNREADABLE = object()  # a literal that the compared parameter cannot take

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
}


class LayerView:
    """A layer seen by a condition: its activation and its typed parameters (parsed on first use)."""

    def __init__(self, spec: LayerSpec, desc: LayerDesc, act: str | None = None) -> None:
        self.spec = spec
        self.desc = desc
        self.act = act or spec.activation or "none"
        self._values: dict[str, Any] | None = None

    def param(self, name: str) -> tuple[Any, ParamDesc] | None:
        try:
            pd = self.desc.param(name)
        except KeyError:
            return None
        if self._values is None:
            self._values, _ = self.desc.parse_params(self.spec.name, self.spec.params)
        return self._values[pd.name], pd


@dataclass(frozen=True)
class Operand:
    """A name (``act`` or a parameter), a string, a number or a bool literal."""

    kind: str  # 'name', 'string', 'number', 'bool'
    value: Any
    text: str
    col: int

    def resolve(self, view: LayerView, label: str) -> tuple[Any, ParamDesc | None]:
        if self.kind != "name":
            return self.value, None
        if self.value == "act":
            return view.act, None
        found = view.param(self.value)
        if found is None:
            raise FusingRuleError(f"{label}: column {self.col}: {no_param_message(view.desc, self.value)}")
        return found

    def literal_text(self) -> str:
        """The literal as a parameter value text (what a model file would hold)."""
        if self.kind == "string":
            return str(self.value)
        if self.kind == "bool":
            return "true" if self.value else "false"
        v = self.value
        return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)

    def evaluate(self, view: LayerView, label: str) -> bool:
        value, _ = self.resolve(view, label)
        if not isinstance(value, (bool, np.bool_)):
            raise FusingRuleError(f"{label}: column {self.col}: {self.text} is not true or false; "
                                  f"compare it with a value (e.g. {self.text} == ...)")
        return bool(value)

    def to_text(self) -> str:
        return self.text


@dataclass(frozen=True)
class Compare:
    left: Operand
    op: str
    right: Operand
    col: int

    def evaluate(self, view: LayerView, label: str) -> bool:
        lv, lp = self.left.resolve(view, label)
        rv, rp = self.right.resolve(view, label)
        if lp is not None and rp is None and self.right.kind != "name":
            rv = coerce_literal(lp, self.right)
        elif rp is not None and lp is None and self.left.kind != "name":
            lv = coerce_literal(rp, self.left)
        return compare_values(lv, self.op, rv)

    def to_text(self) -> str:
        return f"{self.left.to_text()} {self.op} {self.right.to_text()}"


@dataclass(frozen=True)
class Not:
    item: Node
    col: int

    def evaluate(self, view: LayerView, label: str) -> bool:
        return not self.item.evaluate(view, label)

    def to_text(self) -> str:
        return f"!{_wrap(self.item)}"


@dataclass(frozen=True)
class And:
    items: tuple[Node, ...]

    def evaluate(self, view: LayerView, label: str) -> bool:
        return all(i.evaluate(view, label) for i in self.items)

    def to_text(self) -> str:
        return " && ".join(_wrap(i) if isinstance(i, Or) else i.to_text() for i in self.items)


@dataclass(frozen=True)
class Or:
    items: tuple[Node, ...]

    def evaluate(self, view: LayerView, label: str) -> bool:
        return any(i.evaluate(view, label) for i in self.items)

    def to_text(self) -> str:
        return " || ".join(i.to_text() for i in self.items)


Node = Operand | Compare | Not | And | Or


def _wrap(node: Node) -> str:
    return node.to_text() if isinstance(node, (Operand, Not)) else f"({node.to_text()})"


def coerce_literal(pd: ParamDesc, lit: Operand) -> Any:
    """The literal read as a value of the parameter (numbers stay numbers, whatever the range)."""
    try:
        if pd.type in ("uint", "int", "float"):
            return lit.value if lit.kind == "number" else float(lit.literal_text())
        return pd.parse(lit.literal_text())
    except ValueError:
        return UNREADABLE


def compare_values(a: Any, op: str, b: Any) -> bool:
    """``a op b`` with the rule language's semantics (see the module documentation)."""
    if a is UNREADABLE or b is UNREADABLE:
        return op == "!="
    if isinstance(a, Dims) and isinstance(b, Dims):
        if op in ("==", "!="):
            return COMPARISONS[op](tuple(a), tuple(b))
        weak = operator.le if op in ("<", "<=") else operator.ge
        ordered = all(weak(x, y) for x, y in zip(a, b))
        return ordered and (op in ("<=", ">=") or a != b)
    kinds = {_kind(a), _kind(b)}
    if len(kinds) != 1 or kinds == {"other"}:
        return op == "!="
    return bool(COMPARISONS[op](a, b))


def _kind(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "other"


def no_param_message(desc: LayerDesc, name: str) -> str:
    have = ", ".join(p.name for p in desc.params) or "none"
    return f"{desc.name} has no parameter {name!r} (its parameters: act, {have})" if desc.params else (
        f"{desc.name} has no parameter {name!r} (only act can be tested)")
