"""Fusing rules: text rules that replace a layer and the layer feeding it by one (fused) layer.

A rule names the tensor formats it applies to, the replacement layer type, and a pattern: the outer
layer (with an optional condition) and, in braces, the inner layer that feeds its input 0 (with its own
optional condition)::

    fp16|nhwc|conv_bn = batch_normalization[act == 'none' || act == 'relu'] {convolution[act == 'none']}

Grammar (EBNF; whitespace between tokens is free, ``#`` starts a comment that runs to the end of the
rule, precision and layout may be written in any case)::

    rule       = precision "|" layout "|" type "=" pattern ;
    precision  = "fp32" | "fp16" | "*" ;
    layout     = "nchw" | "nhwc" | "*" ;
    pattern    = layer [ "{" layer "}" ] ;             (* outer layer { inner layer } *)
    layer      = type [ "[" condition "]" ] ;
    condition  = and { "||" and } ;
    and        = unary { "&&" unary } ;
    unary      = "!" unary | "(" condition ")" | comparison ;
    comparison = operand [ ( "==" | "!=" | "<" | ">" | "<=" | ">=" ) operand ] ;
    operand    = name | string | number | "true" | "false" ;
    type       = name ;                                 (* a layer type; legacy names work *)
    name       = letter_or_underscore { letter_or_underscore | digit } ;
    string     = "'" { any character but "'" or "\\" | "\\'" | "\\\\" } "'" ;
    number     = [ "-" ] digits [ "." digits ] [ ( "e" | "E" ) [ "+" | "-" ] digits ] ;

In a condition, ``act`` is the layer's activation (``'none'`` when it has none) and any other name is
one of the layer's parameters (legacy names work); unset parameters have their default value. A literal
compared with a parameter is read the way the parameter's own values are read, so ``kernel_size == 3``,
``kernel_size == '3x3'`` and ``bias == true`` all work (numbers compare as numbers, whatever the
parameter's range); a literal the parameter cannot take is unequal to it and not ordered. Dimensions
are ordered component-wise: ``a <= b`` when no component of a exceeds b's, ``a < b`` when moreover they
differ (``kernel_size <= 3``: at most 3x3; ``kernel_size < 3``: 1x3 or 2x2 but not 3x3). Values of
different kinds (a number and a string) are unequal and not ordered. A bare operand is a condition only
when it is true/false (a bool parameter such as ``bias``, or a literal). ``&&`` binds tighter than
``||``; ``!`` applies to the comparison or parenthesized condition that follows it.

Applying rules (``apply_rules``) never changes the input model: it returns a new one in which each
match is replaced by one layer of the replacement type, named after the outer layer; the fused layer
reads the inner layer's inputs and the outer layer's other inputs, and every reader of the outer layer
reads it. Parameters and weights of the replacement are taken from the two source layers by name (see
``apply_rules``).
"""
from __future__ import annotations

import copy
import operator
import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.descriptors import InputKind, LayerDesc, ParamDesc
from engine.errors import LayerLabError, ParameterError
from engine.graph import execution_order
from engine.layer import Layer
from engine.limits import MAX_RULE_DEPTH, cut
from engine.model import LayerSpec, Model
from engine.registry import Registry
from engine.tensor import FORMATS, Dims, Layout, Precision, TensorFormat
from engine.weights import WeightsSource

#: Rules the standard collection registers (``registrar.fusing_rule``). Each applies only where the
#: fused layer computes exactly what the chain computes:
#: * conv_bn applies the activation after the normalization, so the convolution must have none;
#: * conv_pool applies the activation between the convolution and the pooling, so the pooling must
#:   have none, except ReLU after max pooling, which gives the same result in either order;
#: * upscale_concat (a U-Net decoder step in one pass over memory) applies its activation to every
#:   channel, as the concatenation does, so the upsample must have none. The concatenation's input 1 (the
#:   skip tensor) becomes the fused layer's input 1; a concatenation of more inputs is not fused, and one
#:   whose input 0 is not the upsample never matches (the channel order would change).
BUILTIN_RULES: list[str] = [
    "*|*|conv_bn = batch_normalization {convolution[act == 'none']}",
    "*|*|conv_pool = pooling[act == 'none' || pool_type == 'max' && act == 'relu'] {convolution}",
    "*|*|upscale_concat = concatenation {upsample[act == 'none']}",
]


class FusingRuleError(LayerLabError):
    """A fusing rule cannot be read or used: names the rule (and its file and line), the column and
    what was expected."""


# ---- tokens ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Token:
    """One token of a rule: ``kind`` is 'name', 'number', 'string', 'op' or 'end'; ``col`` is 1-based."""

    kind: str
    text: str
    value: Any
    col: int


_OPERATORS = ("==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "|", "=", "[", "]", "{", "}", "(", ")", "*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _label(text: str, name: str | None) -> str:
    return f"rule {cut(name if name else text.strip())}"


def tokenize(text: str, name: str | None = None) -> list[Token]:
    """Tokens of a rule, ending with an 'end' token; raises FusingRuleError on a stray character."""
    toks: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "#":
            break
        col = i + 1
        if ch == "'":
            j, chars = i + 1, []
            while j < n and text[j] != "'":
                if text[j] == "\\" and j + 1 < n and text[j + 1] in "'\\":
                    j += 1
                chars.append(text[j])
                j += 1
            if j >= n:
                raise FusingRuleError(f"{_label(text, name)}: column {col}: expected a closing ' for the string "
                                      "started here, found the end of the rule")
            toks.append(Token("string", text[i:j + 1], "".join(chars), col))
            i = j + 1
            continue
        m = _NUMBER.match(text, i)
        if m and (ch != "-" or m.end() > i + 1):
            raw = m.group()
            if len(raw) > 40:
                raise FusingRuleError(f"{_label(text, name)}: column {col}: the number {cut(raw, 30)} is too long "
                                      "(at most 40 characters)")
            value: float | int = float(raw) if any(c in raw for c in ".eE") else int(raw)
            toks.append(Token("number", raw, value, col))
            i = m.end()
            continue
        m = _NAME.match(text, i)
        if m:
            toks.append(Token("name", m.group(), m.group(), col))
            i = m.end()
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is None:
            hint = {"&": "expected '&&'", '"': "expected a string in single quotes"}.get(ch, "unexpected character")
            raise FusingRuleError(f"{_label(text, name)}: column {col}: {hint}, found {ch!r}")
        toks.append(Token("op", op, op, col))
        i += len(op)
    end = toks[-1].col + len(toks[-1].text) if toks else 1
    toks.append(Token("end", "", None, end))
    return toks


# ---- condition syntax tree ---------------------------------------------------------------------------

_BAD = object()  # a literal that the compared parameter cannot take

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
}


class _View:
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

    def resolve(self, view: _View, label: str) -> tuple[Any, ParamDesc | None]:
        if self.kind != "name":
            return self.value, None
        if self.value == "act":
            return view.act, None
        found = view.param(self.value)
        if found is None:
            raise FusingRuleError(f"{label}: column {self.col}: {_no_param(view.desc, self.value)}")
        return found

    def literal_text(self) -> str:
        """The literal as a parameter value text (what a model file would hold)."""
        if self.kind == "string":
            return str(self.value)
        if self.kind == "bool":
            return "true" if self.value else "false"
        v = self.value
        return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)

    def evaluate(self, view: _View, label: str) -> bool:
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

    def evaluate(self, view: _View, label: str) -> bool:
        lv, lp = self.left.resolve(view, label)
        rv, rp = self.right.resolve(view, label)
        if lp is not None and rp is None and self.right.kind != "name":
            rv = _coerce(lp, self.right)
        elif rp is not None and lp is None and self.left.kind != "name":
            lv = _coerce(rp, self.left)
        return compare_values(lv, self.op, rv)

    def to_text(self) -> str:
        return f"{self.left.to_text()} {self.op} {self.right.to_text()}"


@dataclass(frozen=True)
class Not:
    item: Node
    col: int

    def evaluate(self, view: _View, label: str) -> bool:
        return not self.item.evaluate(view, label)

    def to_text(self) -> str:
        return f"!{_wrap(self.item)}"


@dataclass(frozen=True)
class And:
    items: tuple[Node, ...]

    def evaluate(self, view: _View, label: str) -> bool:
        return all(i.evaluate(view, label) for i in self.items)

    def to_text(self) -> str:
        return " && ".join(_wrap(i) if isinstance(i, Or) else i.to_text() for i in self.items)


@dataclass(frozen=True)
class Or:
    items: tuple[Node, ...]

    def evaluate(self, view: _View, label: str) -> bool:
        return any(i.evaluate(view, label) for i in self.items)

    def to_text(self) -> str:
        return " || ".join(i.to_text() for i in self.items)


Node = Operand | Compare | Not | And | Or


def _wrap(node: Node) -> str:
    return node.to_text() if isinstance(node, (Operand, Not)) else f"({node.to_text()})"


def _coerce(pd: ParamDesc, lit: Operand) -> Any:
    """The literal read as a value of the parameter (numbers stay numbers, whatever the range)."""
    try:
        if pd.type in ("uint", "int", "float"):
            return lit.value if lit.kind == "number" else float(lit.literal_text())
        return pd.parse(lit.literal_text())
    except ValueError:
        return _BAD


def compare_values(a: Any, op: str, b: Any) -> bool:
    """``a op b`` with the rule language's semantics (see the module documentation)."""
    if a is _BAD or b is _BAD:
        return op == "!="
    if isinstance(a, Dims) and isinstance(b, Dims):
        if op in ("==", "!="):
            return _COMPARE[op](tuple(a), tuple(b))
        weak = operator.le if op in ("<", "<=") else operator.ge
        ordered = all(weak(x, y) for x, y in zip(a, b))
        return ordered and (op in ("<=", ">=") or a != b)
    kinds = {_kind(a), _kind(b)}
    if len(kinds) != 1 or kinds == {"other"}:
        return op == "!="
    return bool(_COMPARE[op](a, b))


def _kind(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "other"


def _no_param(desc: LayerDesc, name: str) -> str:
    have = ", ".join(p.name for p in desc.params) or "none"
    return f"{desc.name} has no parameter {name!r} (its parameters: act, {have})" if desc.params else (
        f"{desc.name} has no parameter {name!r} (only act can be tested)")


# ---- rules -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LayerPattern:
    """One layer of a pattern: its type and an optional condition."""

    type: str
    condition: Node | None
    col: int

    def holds(self, spec: LayerSpec, desc: LayerDesc, label: str, act: str | None = None) -> bool:
        """True when the condition holds for this layer (which has the pattern's type); ``act`` is its
        activation's canonical name when the spec uses a legacy one."""
        if self.condition is None:
            return True
        try:
            return self.condition.evaluate(_View(spec, desc, act), label)
        except ParameterError:  # the layer's own parameters are invalid: the network build reports it
            return False

    def to_text(self) -> str:
        return self.type + (f"[{self.condition.to_text()}]" if self.condition is not None else "")


@dataclass(frozen=True)
class FusingRule:
    """A parsed rule. ``inner`` is None for a one-layer pattern (an alternative implementation)."""

    text: str
    name: str
    precision: Precision | None  # None: any
    layout: Layout | None  # None: any
    replacement: str
    outer: LayerPattern
    inner: LayerPattern | None

    @property
    def formats(self) -> tuple[TensorFormat, ...]:
        """The tensor formats this rule applies to."""
        return tuple(f for f in FORMATS if self.applies_to(f))

    def applies_to(self, fmt: TensorFormat) -> bool:
        return (self.precision in (None, fmt.precision)) and (self.layout in (None, fmt.layout))

    @property
    def label(self) -> str:
        return f"rule {self.name!r}"

    def __str__(self) -> str:
        return self.text

    def to_text(self) -> str:
        """The rule in canonical spelling (parses back to an equal rule)."""
        head = f"{self.precision.value if self.precision else '*'}|{self.layout.value if self.layout else '*'}"
        inner = f" {{{self.inner.to_text()}}}" if self.inner else ""
        return f"{head}|{self.replacement} = {self.outer.to_text()}{inner}"


class _Parser:
    def __init__(self, text: str, name: str | None) -> None:
        self.text = text
        self.label = _label(text, name)
        self.toks = tokenize(text, name)
        self.pos = 0
        self.depth = 0  # nesting of '(' and '!' (the parser and the tree it builds are recursive)

    @property
    def tok(self) -> Token:
        return self.toks[self.pos]

    def next(self) -> Token:
        t = self.toks[self.pos]
        self.pos += 1
        return t

    def fail(self, expected: str, tok: Token | None = None) -> FusingRuleError:
        t = tok or self.tok
        found = "the end of the rule" if t.kind == "end" else cut(t.text)
        return FusingRuleError(f"{self.label}: column {t.col}: expected {expected}, found {found}")

    def is_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def expect(self, op: str, what: str) -> Token:
        if not self.is_op(op):
            raise self.fail(what)
        return self.next()

    def name(self, what: str) -> Token:
        if self.tok.kind != "name":
            raise self.fail(what)
        return self.next()

    # rule = precision "|" layout "|" type "=" pattern
    def rule(self, name: str | None) -> FusingRule:
        precision = self.choice({p.value: p for p in Precision}, "a precision (fp32, fp16 or *)")
        self.expect("|", "'|' after the precision")
        layout = self.choice({lo.value: lo for lo in Layout}, "a layout (nchw, nhwc or *)")
        self.expect("|", "'|' after the layout")
        replacement = self.name("the replacement layer type").text
        self.expect("=", "'=' after the replacement layer type")
        outer = self.layer("the outer layer type of the pattern")
        inner = None
        if self.is_op("{"):
            self.next()
            inner = self.layer("the inner layer type inside '{'")
            self.expect("}", "'}' after the inner layer (a pattern has two layers at most)")
        if self.tok.kind != "end":
            expected = "'{' or the end of the rule" if inner is None else "the end of the rule"
            if inner is None and outer.condition is None:
                expected = "'[', " + expected
            raise self.fail(expected)
        head = f"{precision.value if precision else '*'}|{layout.value if layout else '*'}|{replacement}"
        return FusingRule(self.text, name or head, precision, layout, replacement, outer, inner)

    def choice(self, options: dict[str, Any], what: str) -> Any:
        if self.is_op("*"):
            self.next()
            return None
        if self.tok.kind == "name" and self.tok.text.lower() in options:
            return options[self.next().text.lower()]
        raise self.fail(what)

    # layer = type [ "[" condition "]" ]
    def layer(self, what: str) -> LayerPattern:
        t = self.name(what)
        cond = None
        if self.is_op("["):
            self.next()
            cond = self.condition()
            if self.is_op("|", "="):
                hint = {"|": "'||' for or", "=": "'==' to compare"}[self.tok.text]
                raise self.fail(f"']' after condition (use {hint})")
            self.expect("]", "']' after condition")
        return LayerPattern(t.text, cond, t.col)

    # condition = and { "||" and }
    def condition(self) -> Node:
        items = [self.conjunction()]
        while self.is_op("||"):
            self.next()
            items.append(self.conjunction())
        return items[0] if len(items) == 1 else Or(tuple(items))

    # and = unary { "&&" unary }
    def conjunction(self) -> Node:
        items = [self.unary()]
        while self.is_op("&&"):
            self.next()
            items.append(self.unary())
        return items[0] if len(items) == 1 else And(tuple(items))

    # unary = "!" unary | "(" condition ")" | comparison
    def unary(self) -> Node:
        if self.is_op("!", "("):
            self.depth += 1
            if self.depth > MAX_RULE_DEPTH:
                raise FusingRuleError(f"{self.label}: column {self.tok.col}: the condition is nested more than "
                                      f"{MAX_RULE_DEPTH} levels deep")
            try:
                return self._nested()
            finally:
                self.depth -= 1
        return self.comparison()

    def _nested(self) -> Node:
        if self.is_op("!"):
            col = self.next().col
            return Not(self.unary(), col)
        if self.is_op("("):
            self.next()
            inside = self.condition()
            self.expect(")", "')' to close the parenthesis")
            return inside
        return self.comparison()

    # comparison = operand [ op operand ]
    def comparison(self) -> Node:
        left = self.operand()
        if self.is_op(*_COMPARE):
            op = self.next()
            return Compare(left, op.text, self.operand(), op.col)
        if self.is_op("="):
            raise self.fail("'==' to compare (or ']', '&&', '||')")
        return left

    def operand(self) -> Operand:
        t = self.tok
        if t.kind == "name":
            self.next()
            if t.text in ("true", "false"):
                return Operand("bool", t.text == "true", t.text, t.col)
            return Operand("name", t.text, t.text, t.col)
        if t.kind in ("string", "number"):
            self.next()
            return Operand(t.kind, t.value, t.text, t.col)
        raise self.fail("a parameter name, act, a number or a 'string'")


def parse_rule(text: str, name: str | None = None) -> FusingRule:
    """Parse one rule. ``name`` identifies it in messages and in ``FusedModel.applied`` (default: its
    head, e.g. ``fp16|nhwc|conv_bn``). Raises FusingRuleError naming the rule, the column and what was
    expected."""
    return _Parser(text, name).rule(name)


# ---- checking a rule against the registry -------------------------------------------------------------

def check_rule(rule: FusingRule, registry: Registry) -> list[str]:
    """Problems that make the rule unusable with these plugins (unknown layer types, parameters or
    activations, literals a parameter cannot take, a replacement that supports none of the rule's
    formats). Empty when the rule is fine."""
    problems: list[str] = []
    rep = registry.find_layer(rule.replacement)
    if rep is None:
        problems.append(f"{rule.label}: replacement layer type {rule.replacement!r} is unknown "
                        f"({registry.suggest_layer(rule.replacement)})")
    elif not any(f in rep.formats for f in rule.formats):
        problems.append(f"{rule.label}: {rep.name} supports none of the formats {', '.join(map(str, rule.formats))}")
    for pat in (rule.outer, rule.inner):
        if pat is None:
            continue
        desc = registry.find_layer(pat.type)
        if desc is None:
            problems.append(f"{rule.label}: column {pat.col}: unknown layer type {pat.type!r} "
                            f"({registry.suggest_layer(pat.type)})")
        elif pat.condition is not None:
            _check_node(pat.condition, desc, registry, rule.label, problems, as_condition=True)
    return problems


def _check_node(node: Node, desc: LayerDesc, registry: Registry, label: str, problems: list[str],
                as_condition: bool) -> None:
    if isinstance(node, (And, Or)):
        for item in node.items:
            _check_node(item, desc, registry, label, problems, True)
    elif isinstance(node, Not):
        _check_node(node.item, desc, registry, label, problems, True)
    elif isinstance(node, Operand):
        kind = _check_operand(node, desc, label, problems)
        if as_condition and kind is not None and kind != "bool":
            problems.append(f"{label}: column {node.col}: {node.text} is not true or false; compare it with a value")
    elif isinstance(node, Compare):
        for side, other in ((node.left, node.right), (node.right, node.left)):
            _check_operand(side, desc, label, problems)
            if side.kind == "name" and other.kind != "name":
                if side.value == "act":
                    known = {"none", *registry.activation_names}
                    if other.kind != "string" or (other.value not in known and registry.find_activation(other.value) is None):
                        problems.append(f"{label}: column {other.col}: {other.text} is not an activation "
                                        f"(known: none, {', '.join(registry.activation_names)})")
                elif _param(desc, side.value) is not None and _coerce(_param(desc, side.value), other) is _BAD:
                    pd = _param(desc, side.value)
                    problems.append(f"{label}: column {other.col}: {other.text} is not a value of {desc.name} "
                                    f"parameter {pd.name} ({pd.allowed()})")


def _param(desc: LayerDesc, name: str) -> ParamDesc | None:
    try:
        return desc.param(name)
    except KeyError:
        return None


def _check_operand(op: Operand, desc: LayerDesc, label: str, problems: list[str]) -> str | None:
    """The operand's kind ('bool', 'string', ...) or None when unknown; records an unknown name."""
    if op.kind != "name":
        return op.kind
    if op.value == "act":
        return "string"
    pd = _param(desc, op.value)
    if pd is None:
        problems.append(f"{label}: column {op.col}: {_no_param(desc, op.value)}")
        return None
    return "bool" if pd.type == "bool" else pd.type


# ---- applying rules ----------------------------------------------------------------------------------

@dataclass
class FusedModel:
    """The result of ``apply_rules``.

    ``applied``: (rule name, inner layer, outer layer, fused layer) for each fusion, in order.
    ``weight_map``: (fused layer, weight) -> (source layer, source weight), the source being a layer of
    the input model; ``MappedWeights`` reads weights through it.
    ``sources``: copies of the input model's layers that ``weight_map`` refers to.
    ``merged``: each layer that no longer exists -> the layer that now computes it.
    ``skipped``: (rule name, inner, outer, reason) for matches whose conditions held but that were not
    fused (the intermediate output is needed elsewhere, or the replacement cannot represent them)."""

    model: Model
    applied: list[tuple[str, str, str, str]] = field(default_factory=list)
    weight_map: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    sources: dict[str, LayerSpec] = field(default_factory=dict)
    merged: dict[str, str] = field(default_factory=dict)
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)


class _Refused(Exception):
    """A match that cannot be fused; the message says why."""


def copy_model(model: Model) -> Model:
    """A new Model with the same content (layers, settings, rules, templates), a fresh undo stack and
    no file path (so saving it never overwrites the original by accident)."""
    out = Model(model.name, model.version)
    out.layers = {n: copy.deepcopy(s) for n, s in model.layers.items()}
    out.settings = dict(model.settings)
    out.fusing_rules = copy.deepcopy(model.fusing_rules)
    out.templates = dict(model.templates)
    out.custom_layers = dict(model.custom_layers)
    return out


def apply_rules(model: Model, registry: Registry, fmt: TensorFormat, rules: list[FusingRule],
                protected: AbstractSet[str] = frozenset()) -> FusedModel:
    """Apply the rules that apply to ``fmt`` until none matches; returns a new model (``model`` is unchanged).

    Order: passes over the rules in list order; for each rule, candidate outer layers in execution order
    (a layer fused in a pass can take part in a later match of the same pass). Passes repeat until one
    fuses nothing, so chains fuse whatever their length (conv_bn followed by a conv_bn_pool rule...).

    A match is the outer layer and the layer linked to its input 0, both of the pattern's types and
    meeting their conditions. It is never fused when the inner layer's output is needed elsewhere: it has
    another reader (or another link to the outer layer), it is permanent, it is a network input or read
    by an output layer, or its name is in ``protected`` (breakpoints, inspected layers).

    The fused layer, named after the outer layer (keeping its position and permanent flag):
    * parameters: each parameter of the replacement takes the value of the same-named parameter of the
      inner layer, else of the outer layer; a prefixed name ``p_x`` (``bn_epsilon``, ``pool_stride``)
      not found in either takes parameter ``x`` of the outer layer, else of the inner layer. Parameters
      left at their default stay unset unless the defaults differ. A parameter of a source layer that the
      replacement has no name for must be at its default, otherwise the match is not fused.
    * weights: resolved by the same naming rule (``bias`` from the convolution, ``bn_bias`` from the
      batch normalization's ``bias``); every weight of both source layers must be covered. Weights of the
      replacement that come from neither are read under the fused layer's own name.
    * activation: the one of the outer layer, else of the inner layer; when both have one the match is
      not fused (a layer has one activation). Where the replacement applies it is its own business: the
      rule's conditions must only match where that gives the chain's result.
    * inputs: the inner layer's inputs at the same indices, and the outer layer's other data inputs
      (1, 2, ...; its input 0 is the inner layer) at theirs, so ``concatenation(upsample(x), skip)``
      becomes ``upscale_concat(x, skip)``; a secondary input of either layer that replaces a weight moves
      to the replacement's input replacing the corresponding weight. The match is not fused when the
      replacement has no data input at such an index, when two inputs land on one index, or when a
      mandatory input of the replacement would stay unconnected.

    A one-layer pattern replaces a layer by another type with the same rules, exact names only; each
    one-layer rule replaces a given layer once at most (so rules that undo each other cannot loop).

    Raises FusingRuleError when a condition names a parameter its layer type lacks or tests a
    non-boolean value as a condition (``check_rule`` finds these before any model is seen)."""
    fuser = _Fuser(model, registry, fmt, protected)
    active = [r for r in rules if r.applies_to(fmt)]
    changed = True
    while changed:
        changed = False
        for rule in active:
            changed |= fuser.pass_over(rule)
    result = fuser.result
    result.skipped = list(fuser.skipped.values())
    return result


class _Fuser:
    def __init__(self, model: Model, registry: Registry, fmt: TensorFormat, protected: AbstractSet[str]) -> None:
        self.original = model
        self.model = copy_model(model)
        self.registry = registry
        self.fmt = fmt
        self.protected = frozenset(protected)
        self.result = FusedModel(self.model)
        self.fused_names: set[str] = set()
        self.replaced_once: set[tuple[str, str]] = set()
        self.skipped: dict[tuple[str, str, str], tuple[str, str, str, str]] = {}

    def pass_over(self, rule: FusingRule) -> bool:
        outer_desc = self.registry.find_layer(rule.outer.type)
        inner_desc = self.registry.find_layer(rule.inner.type) if rule.inner else None
        if outer_desc is None or (rule.inner is not None and inner_desc is None):
            return False
        changed = False
        for name in execution_order(self.model):
            spec = self.model.layers.get(name)
            if spec is None or self.registry.find_layer(spec.type) is not outer_desc:
                continue
            if not rule.outer.holds(spec, outer_desc, rule.label, self._act(spec)):
                continue
            inner = None
            if rule.inner is not None:
                src = spec.inputs[0] if spec.inputs else None
                inner = self.model.layers.get(src) if src else None
                if inner is None or self.registry.find_layer(inner.type) is not inner_desc:
                    continue
                if not rule.inner.holds(inner, inner_desc, rule.label, self._act(inner)):  # type: ignore[arg-type]
                    continue
            elif (rule.text, name) in self.replaced_once:
                continue
            try:
                self.fuse(rule, inner, spec)
            except _Refused as why:
                key = (rule.name, inner.name if inner else "", name)
                self.skipped[key] = (*key, str(why))
                continue
            self.skipped.pop((rule.name, inner.name if inner else "", name), None)
            changed = True
        return changed

    def _act(self, spec: LayerSpec) -> str:
        desc = self.registry.find_activation(spec.activation) if spec.activation not in ("", "none") else None
        return desc.name if desc else (spec.activation or "none")

    # ---- one fusion ------------------------------------------------------------------------------
    def _desc(self, spec: LayerSpec) -> LayerDesc:
        desc = self.registry.find_layer(spec.type)
        assert desc is not None
        return desc

    def _check_inner_free(self, inner: LayerSpec, outer: LayerSpec) -> None:
        others = [f"{r}:{i}" for r, i in self.model.readers(inner.name) if (r, i) != (outer.name, 0)]
        if others:
            raise _Refused(f"the output of {inner.name} is also read by {', '.join(others)}")
        if inner.permanent:
            raise _Refused(f"{inner.name} is permanent")
        if inner.name in self.protected:
            raise _Refused(f"{inner.name} is protected (breakpoint or inspected)")
        if getattr(self.registry.layer_class(inner.type), "is_network_input", False):
            raise _Refused(f"{inner.name} is a network input")
        if getattr(self.registry.layer_class(outer.type), "is_network_output", False):
            raise _Refused(f"{inner.name} is a network output (read by output layer {outer.name})")

    def fuse(self, rule: FusingRule, inner: LayerSpec | None, outer: LayerSpec) -> None:
        rep = self.registry.find_layer(rule.replacement)
        if rep is None:
            raise _Refused(f"replacement layer type {rule.replacement!r} is not loaded")
        if self.fmt not in rep.formats:
            raise _Refused(f"{rep.name} does not support tensor format {self.fmt}")
        if inner is not None:
            self._check_inner_free(inner, outer)
        elif rep is self._desc(outer):
            raise _Refused(f"{outer.name} already is a {rep.name}")
        roles = ([inner] if inner is not None else []) + [outer]
        descs = [self._desc(s) for s in roles]
        params = self._params(rep, roles, descs)
        weights = _resolve(list(rep.weights), [set(d.weights) for d in descs])
        for k, (s, d) in enumerate(zip(roles, descs)):
            missing = sorted(set(d.weights) - {w for kk, w in weights.values() if kk == k})
            if missing:
                raise _Refused(f"{rep.name} has no weight for {d.name} {s.name}'s {', '.join(missing)}")
        inputs = self._inputs(rep, roles, descs, weights, has_inner=inner is not None)
        acts = [s for s in reversed(roles) if s.activation and s.activation != "none"]
        if len(acts) > 1:
            raise _Refused(f"both {inner.name} and {outer.name} have an activation")  # type: ignore[union-attr]
        act = acts[0] if acts else None
        fused = LayerSpec(outer.name, rep.name, params, act.activation if act else "none",
                          dict(act.act_coefs) if act else {}, inputs, outer.position, outer.permanent)
        self._record_weights(rule, rep, roles, weights)
        self.model.layers = {n: (fused if n == outer.name else s) for n, s in self.model.layers.items()
                             if inner is None or n != inner.name}
        if inner is not None:
            self.result.merged[inner.name] = outer.name
            for k, v in self.result.merged.items():
                if v == inner.name:
                    self.result.merged[k] = outer.name
            self.fused_names.discard(inner.name)
        else:
            self.replaced_once.add((rule.text, outer.name))
        self.fused_names.add(outer.name)
        self.result.applied.append((rule.name, inner.name if inner else "", outer.name, outer.name))

    def _params(self, rep: LayerDesc, roles: list[LayerSpec], descs: list[LayerDesc]) -> dict[str, str]:
        texts = [{c: v for k, v in s.params.items() if (c := d.canonical_param_name(k))} for s, d in zip(roles, descs)]
        mapping = _resolve([p.name for p in rep.params], [{p.name for p in d.params} for d in descs])
        out: dict[str, str] = {}
        for name, (k, src) in mapping.items():
            fpd, spd = rep.param(name), descs[k].param(src)
            text = texts[k].get(src)
            if text is None:
                if spd.default_text == fpd.default_text:
                    continue
                text = spd.default_text
            try:
                fpd.parse(text)
            except ValueError as exc:
                raise _Refused(f"{rep.name} parameter {name} cannot take {descs[k].name} {roles[k].name}'s "
                               f"{src}: {exc}") from None
            out[name] = text
        for k, (s, d) in enumerate(zip(roles, descs)):
            covered = {src for kk, src in mapping.values() if kk == k}
            for pname, text in texts[k].items():
                if pname in covered:
                    continue
                pd = d.param(pname)
                try:
                    at_default = pd.parse(text) == pd.default
                except ValueError:
                    at_default = False
                if not at_default:
                    raise _Refused(f"{rep.name} has no parameter for {d.name} {s.name}'s {pname} = {text!r}")
        return out

    def _inputs(self, rep: LayerDesc, roles: list[LayerSpec], descs: list[LayerDesc],
                weights: dict[str, tuple[int, str]], has_inner: bool) -> list[str | None]:
        by_source = {v: fw for fw, v in weights.items()}
        placed: dict[int, tuple[str, str]] = {}  # slot -> (source layer, which input of which layer it was)
        outer_k = len(roles) - 1
        for k, (s, d) in enumerate(zip(roles, descs)):
            for i, src in enumerate(s.inputs):
                if src is None or (has_inner and k == outer_k and i == 0):
                    continue
                idesc = d.input_desc(i)
                what = f"{d.name} {s.name}'s input {i} ({idesc.name if idesc else i})"
                if idesc is not None and idesc.weight:
                    fw = by_source.get((k, idesc.weight))
                    slot = next((j for j, inp in enumerate(rep.inputs) if fw is not None and inp.weight == fw), None)
                else:  # a data input keeps its index (the outer layer's input 0 is the inner layer)
                    rdesc = rep.input_desc(i)
                    slot = i if rdesc is not None and not rdesc.weight else None
                if slot is None:
                    raise _Refused(f"{rep.name} has no input for {what}")
                if slot in placed:
                    raise _Refused(f"{rep.name} input {slot} cannot take both {placed[slot][1]} and {what}")
                placed[slot] = (src, what)
        for j, inp in enumerate(rep.inputs):
            if inp.kind is InputKind.PRIMARY and j not in placed:
                who = " or ".join(f"{d.name} {s.name}" for s, d in zip(roles, descs))
                raise _Refused(f"{rep.name} needs input {j} ({inp.name}), and no input of {who} goes there")
        inputs: list[str | None] = [None] * (max(placed) + 1 if placed else 0)
        for slot, (src, _) in placed.items():
            inputs[slot] = src
        return inputs

    def _record_weights(self, rule: FusingRule, rep: LayerDesc, roles: list[LayerSpec],
                        weights: dict[str, tuple[int, str]]) -> None:
        wm = self.result.weight_map
        new: dict[tuple[str, str], tuple[str, str]] = {}
        for fw, (k, sw) in weights.items():
            src = roles[k].name
            if (src, sw) in wm:
                new[(roles[-1].name, fw)] = wm[(src, sw)]
            elif src not in self.fused_names:
                new[(roles[-1].name, fw)] = (src, sw)
        gone = {s.name for s in roles}
        for key in [key for key in wm if key[0] in gone]:
            del wm[key]
        wm.update(new)
        for layer, _ in new.values():
            self.result.sources.setdefault(layer, copy.deepcopy(self.original.layers[layer]))


def _resolve(names: list[str], sources: list[set[str]]) -> dict[str, tuple[int, str]]:
    """Where each replacement name comes from: (source index, source name); sources are [inner, outer]
    (or [outer]). Exact names: inner first. Prefixed names ``p_x`` (two-layer patterns only): ``x`` of
    the outer first."""
    out: dict[str, tuple[int, str]] = {}
    for n in names:
        k = next((k for k, s in enumerate(sources) if n in s), None)
        if k is not None:
            out[n] = (k, n)
            continue
        if "_" in n and len(sources) > 1:
            rest = n.split("_", 1)[1]
            k = next((k for k in reversed(range(len(sources))) if rest in sources[k]), None)
            if k is not None:
                out[n] = (k, rest)
    return out


# ---- weights of a fused network ----------------------------------------------------------------------

class MappedWeights(WeightsSource):
    """Weights of a fused network, read from ``base`` under the source layers' names.

    A fused layer's weight found in ``fused.weight_map`` is asked from ``base`` as the source layer's
    weight (a stand-in layer of the source's type and name, so seeded random weights and weights folders
    give exactly the values the unfused network loads); other weights are asked as they are."""

    def __init__(self, base: WeightsSource, fused: FusedModel, registry: Registry) -> None:
        self.base = base
        self.weight_map = dict(fused.weight_map)
        self.sources = fused.sources
        self.registry = registry
        self._layers: dict[str, Layer] = {}

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        target = self.weight_map.get((layer.name, weight))
        if target is None:
            return self.base.get(layer, weight, shape)
        src, src_weight = target
        return self.base.get(self._source_layer(src, layer), src_weight, shape)

    def _source_layer(self, name: str, like: Layer) -> Layer:
        key = f"{name}|{like.fmt}"
        if key not in self._layers:
            spec = self.sources[name]
            cls = self.registry.layer_class(spec.type)
            if cls is None:
                raise FusingRuleError(f"weights of fused layer {like.name}: source layer {name} has unknown type {spec.type!r}")
            values, _ = cls.desc.parse_params(name, spec.params)
            self._layers[key] = cls(name, values, None, like.fmt, like.backend)
        return self._layers[key]


# ---- where rules come from ---------------------------------------------------------------------------

def load_rule(text: str, where: str, registry: Registry, name: str | None = None) -> FusingRule:
    """Parse and check one rule; errors start with ``where`` (a plugin, a model rule, ``file:line``)."""
    try:
        rule = parse_rule(text, name)
    except FusingRuleError as exc:
        raise FusingRuleError(f"{where}: {exc}") from None
    problems = check_rule(rule, registry)
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise FusingRuleError(f"{where}: {problems[0]}{more}")
    return rule


#: model setting listing the plugin rules the model switches off (their texts, one per line)
DISABLED_RULES_SETTING = "fusing_disabled"


def disabled_plugin_rules(model: Model) -> set[str]:
    """Texts of the plugins' fusing rules that ``model`` switches off (its ``fusing_disabled`` setting)."""
    return {t.strip() for t in model.settings.get(DISABLED_RULES_SETTING, "").splitlines() if t.strip()}


def set_plugin_rule_enabled(model: Model, text: str, enabled: bool) -> None:
    """Switch a plugin's fusing rule on or off for ``model`` (kept in its file; one undo step)."""
    off = disabled_plugin_rules(model)
    off = off - {text.strip()} if enabled else off | {text.strip()}
    model.set_setting(DISABLED_RULES_SETTING, "\n".join(sorted(off)) or None)


def rules_from(registry: Registry, model: Model, mode: str) -> list[FusingRule]:
    """The rules to apply: ``'on'``: the registry's enabled rules (less those the model switches off, see
    :func:`disabled_plugin_rules`) then the model's enabled rules;
    ``'off'``: none; anything else is a file with one rule per line (blank lines and ``#`` comments
    ignored). Errors name the plugin, the model rule or the file and line."""
    choice = mode.strip()
    if choice.lower() == "off":
        return []
    if choice.lower() == "on":
        off = disabled_plugin_rules(model)
        rules = [load_rule(r.text, f"plugin {r.collection}", registry) for r in registry.fusing_rules
                 if r.enabled and r.text.strip() not in off]
        rules += [load_rule(r.text, f"network {model.name} fusing rule {i}", registry)
                  for i, r in enumerate(model.fusing_rules, 1) if r.enabled]
        return rules
    path = Path(mode)
    if not path.is_file():
        raise FusingRuleError(f"fusing rules {mode!r}: expected on, off or a rules file, and there is no file {path}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise FusingRuleError(f"fusing rules file {path}: cannot read it: {exc}") from None
    rules = []
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            rules.append(load_rule(line, f"{path}:{lineno}", registry))
    return rules
