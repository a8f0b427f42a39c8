"""The fusing rule language: tokens, the parsed rule (``FusingRule``) and the parser (``parse_rule``).

The grammar is in ``engine.fusing``'s documentation."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from engine.descriptors import LayerDesc
from engine.errors import ParameterError
from engine.fusing.conditions import COMPARISONS, And, Compare, LayerView, Node, Not, Operand, Or
from engine.fusing.errors import FusingRuleError
from engine.limits import MAX_RULE_DEPTH, cut
from engine.model import LayerSpec
from engine.tensor import FORMATS, Layout, Precision, TensorFormat

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
            return self.condition.evaluate(LayerView(spec, desc, act), label)
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
        if self.is_op(*COMPARISONS):
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


def parse_condition(text: str, name: str) -> Node:
    """Parse a condition alone (a descriptor's ``inputs_commute``); ``name`` identifies it in messages. Raises
    FusingRuleError naming it, the column and what was expected."""
    parser = _Parser(text, name)
    node = parser.condition()
    if parser.tok.kind != "end":
        raise parser.fail("'&&', '||' or the end of the condition")
    return node


@functools.lru_cache(maxsize=1024)
def parse_rule(text: str, name: str | None = None) -> FusingRule:
    """Parse one rule. ``name`` identifies it in messages and in ``FusedModel.applied`` (default: its
    head, e.g. ``fp16|nhwc|conv_bn``). Raises FusingRuleError naming the rule, the column and what was
    expected.

    A parsed rule is immutable, so each text is parsed once: every network a model opens applies the collections'
    rules, and parsing them again made opening and running a one-layer network take 2.95 instead of 2.3 ms."""
    return _Parser(text, name).rule(name)
