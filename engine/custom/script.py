"""The shape-script language of custom layers: a small, safe expression language of our own.

A shape script is four comma-separated expressions giving the output's N, C, H and W, for example
``in.n, in.c * 4, in.h / 2, in.w / 2``. Expressions are made of

* numbers (``2``, ``0.5``),
* input sizes: ``in.n in.c in.h in.w`` (the first input) and ``in[i].n`` ... (input ``i``, from 0),
* the layer's parameters by name (numbers and booleans; a dimension parameter gives ``p.n p.c p.h p.w``),
* ``+ - * / // %``, unary minus, parentheses, and the functions ``min(a, b, ...)``, ``max(a, b, ...)``,
  ``ceil(x)`` and ``floor(x)``.

``/`` is exact division (``7 / 2`` is 3.5), ``//`` rounds down; each size must come out a whole number of
at least 1. Launch-line arguments use the same expressions, where ``out`` (the output) is known too.

The text is tokenized and parsed here into a tree, then evaluated with exact fractions: nothing is ever
handed to Python's ``eval``. Every problem is a ``ScriptError`` carrying the 1-based column."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from engine.errors import LayerLabError
from engine.tensor import Dims

#: the attributes of a tensor (or dimension parameter) reference
ATTRS = ("n", "c", "h", "w")
FUNCTIONS = ("min", "max", "ceil", "floor")
TENSORS = ("in", "out")
RESERVED = TENSORS + FUNCTIONS
MAX_LENGTH = 2000
MAX_DEPTH = 60
MAX_SIZE = 2**31 - 1


class ScriptError(LayerLabError):
    """A shape script (or launch argument) that cannot be parsed or evaluated: the reason and the column."""

    def __init__(self, message: str, column: int) -> None:
        self.message = message
        self.column = column
        super().__init__(f"column {column}: {message}")


# ---- syntax tree ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Num:
    value: Fraction
    col: int
    decimal: bool = False  # written with a decimal point


@dataclass(frozen=True)
class Ref:
    """``name``, ``name.attr``, ``name[index]`` or ``name[index].attr``."""

    name: str
    index: int | None
    attr: str | None
    col: int


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Node
    col: int


@dataclass(frozen=True)
class Bin:
    op: str
    left: Node
    right: Node
    col: int


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Node, ...]
    col: int


Node = Num | Ref | Unary | Bin | Call


# ---- tokens -----------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?|\.\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>//|[-+*/%(),.\[\]]))")


@dataclass(frozen=True)
class _Tok:
    kind: str  # num, name, op, end
    text: str
    col: int


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            rest = text[pos:]
            stripped = rest.lstrip()
            if not stripped:
                break
            col = pos + len(rest) - len(stripped) + 1
            raise ScriptError(f"unexpected character {stripped[0]!r}", col)
        kind = m.lastgroup or "op"
        out.append(_Tok(kind, m.group(kind), m.start(kind) + 1))
        pos = m.end()
    out.append(_Tok("end", "", len(text) + 1))
    return out


# ---- parser -----------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str) -> None:
        if len(text) > MAX_LENGTH:
            raise ScriptError(f"the text is longer than {MAX_LENGTH} characters", MAX_LENGTH + 1)
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str, what: str) -> _Tok:
        if self.tok.text != text or self.tok.kind == "end":
            raise ScriptError(f"expected {what}, found {self._found()}", self.tok.col)
        return self.take()

    def _found(self) -> str:
        return "the end of the text" if self.tok.kind == "end" else repr(self.tok.text)

    def expr_list(self) -> list[Node]:
        items = [self.expr()]
        while self.tok.text == "," and self.tok.kind == "op":
            self.take()
            items.append(self.expr())
        if self.tok.kind != "end":
            raise ScriptError(f"expected an operator, ',' or the end of the text, found {self._found()}", self.tok.col)
        return items

    def expr(self) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ScriptError(f"the expression is nested more than {MAX_DEPTH} levels deep", self.tok.col)
        node = self.term()
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            op = self.take()
            node = Bin(op.text, node, self.term(), op.col)
        self.depth -= 1
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/", "//", "%"):
            op = self.take()
            node = Bin(op.text, node, self.unary(), op.col)
        return node

    def unary(self) -> Node:
        if self.tok.kind == "op" and self.tok.text in ("-", "+"):
            op = self.take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise ScriptError(f"the expression is nested more than {MAX_DEPTH} levels deep", op.col)
            node = Unary(op.text, self.unary(), op.col)
            self.depth -= 1
            return node
        return self.atom()

    def atom(self) -> Node:
        t = self.tok
        if t.kind == "num":
            self.take()
            return Num(Fraction(t.text), t.col, "." in t.text)
        if t.kind == "op" and t.text == "(":
            self.take()
            node = self.expr()
            self.expect(")", "')'")
            return node
        if t.kind == "name":
            self.take()
            if t.text in FUNCTIONS:
                return self.call(t)
            index = None
            if self.tok.kind == "op" and self.tok.text == "[":
                self.take()
                if self.tok.kind != "num" or not self.tok.text.isdigit():
                    raise ScriptError(f"expected an input index (0, 1, ...) after '{t.text}[', found {self._found()}",
                                      self.tok.col)
                index = int(self.take().text)
                self.expect("]", "']'")
            attr = None
            if self.tok.kind == "op" and self.tok.text == ".":
                self.take()
                if self.tok.kind != "name" or self.tok.text not in ATTRS:
                    raise ScriptError(f"expected n, c, h or w after '.', found {self._found()}", self.tok.col)
                attr = self.take().text
            return Ref(t.text, index, attr, t.col)
        raise ScriptError(f"expected a number, a name or '(', found {self._found()}", t.col)

    def call(self, name: _Tok) -> Node:
        self.expect("(", f"'(' after {name.text}")
        args = [self.expr()]
        while self.tok.kind == "op" and self.tok.text == ",":
            self.take()
            args.append(self.expr())
        self.expect(")", f"')' closing {name.text}(")
        if name.text in ("ceil", "floor") and len(args) != 1:
            raise ScriptError(f"{name.text} takes 1 argument, got {len(args)}", name.col)
        if name.text in ("min", "max") and len(args) < 2:
            raise ScriptError(f"{name.text} takes 2 or more arguments, got {len(args)}", name.col)
        return Call(name.text, tuple(args), name.col)


def parse_expressions(text: str) -> list[Node]:
    """The comma-separated expressions of ``text`` as syntax trees; raises ScriptError."""
    if not text.strip():
        raise ScriptError("the text is empty", 1)
    return _Parser(text).expr_list()


def parse_shape(text: str) -> list[Node]:
    """A shape script: exactly four expressions (N, C, H, W); raises ScriptError."""
    nodes = parse_expressions(text)
    if len(nodes) != 4:
        raise ScriptError(f"a shape script gives 4 sizes (n, c, h, w) separated by commas, found {len(nodes)}",
                          1 if len(nodes) < 4 else _col(nodes[4]))
    return nodes


def _col(node: Node) -> int:
    return node.col if not isinstance(node, Bin) else _col(node.left)


# ---- names: what a script may refer to ----------------------------------------------------------------
@dataclass(frozen=True)
class Scope:
    """What names mean, without sizes: the number of inputs (None: any number), parameter types by
    name, and whether ``out`` exists (launch arguments)."""

    inputs: int | None
    params: Mapping[str, str]
    has_out: bool = False


NUMERIC_PARAM_TYPES = ("uint", "int", "float", "bool")


def check_names(nodes: Sequence[Node], scope: Scope) -> None:
    """Raise ScriptError for the first reference ``scope`` does not know (unknown name, input index out of
    range, tensor or dimension used without .n/.c/.h/.w, parameter that is not a number)."""
    for node in nodes:
        for ref in _refs(node):
            _check_ref(ref, scope, allow_tensor=False)


def _refs(node: Node) -> list[Ref]:
    if isinstance(node, Ref):
        return [node]
    if isinstance(node, Num):
        return []
    if isinstance(node, Unary):
        return _refs(node.operand)
    if isinstance(node, Bin):
        return _refs(node.left) + _refs(node.right)
    return [r for a in node.args for r in _refs(a)]


def _check_ref(ref: Ref, scope: Scope, allow_tensor: bool) -> None:
    if ref.name in TENSORS:
        if ref.name == "out" and not scope.has_out:
            raise ScriptError("'out' is not known here (a shape script computes out from in)", ref.col)
        if ref.name == "out" and ref.index not in (None, 0):
            raise ScriptError("a layer has one output: use out, not out[i]", ref.col)
        if ref.name == "in" and ref.index is not None and scope.inputs is not None and ref.index >= scope.inputs:
            raise ScriptError(f"in[{ref.index}]: the layer has {scope.inputs} input(s), numbered from 0", ref.col)
        if ref.name == "in" and scope.inputs == 0:
            raise ScriptError("the layer has no inputs", ref.col)
        if ref.attr is None and not allow_tensor:
            raise ScriptError(f"{_ref_text(ref)} is a tensor: use {_ref_text(ref)}.n, .c, .h or .w", ref.col)
        return
    ptype = scope.params.get(ref.name)
    if ptype is None:
        known = ", ".join(scope.params) or "none"
        raise ScriptError(f"unknown name {ref.name!r} (known: in, in[i]{', out' if scope.has_out else ''}, "
                          f"the parameters: {known})", ref.col)
    if ref.index is not None:
        raise ScriptError(f"parameter {ref.name} cannot be indexed", ref.col)
    if ptype == "dimension":
        if ref.attr is None:
            raise ScriptError(f"parameter {ref.name} is a dimension: use {ref.name}.n, .c, .h or .w", ref.col)
    elif ref.attr is not None:
        raise ScriptError(f"parameter {ref.name} is a number, it has no .{ref.attr}", ref.col)
    elif ptype not in NUMERIC_PARAM_TYPES:
        raise ScriptError(f"parameter {ref.name} is of type {ptype}: only number, boolean and dimension "
                          "parameters can be used", ref.col)


def _ref_text(ref: Ref) -> str:
    return ref.name + (f"[{ref.index}]" if ref.index is not None else "")


# ---- evaluation -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Values:
    """What names mean, with sizes: the inputs' dimensions (None: unconnected), the output's (launch
    arguments only) and the parameters' typed values."""

    inputs: Sequence[Dims | None]
    params: Mapping[str, Any]
    out: Dims | None = None


def evaluate(node: Node, values: Values) -> Fraction:
    """The exact value of an expression; raises ScriptError (unknown name, division by zero, ...)."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Ref):
        return _lookup(node, values)
    if isinstance(node, Unary):
        v = evaluate(node.operand, values)
        return -v if node.op == "-" else v
    if isinstance(node, Bin):
        a, b = evaluate(node.left, values), evaluate(node.right, values)
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        if node.op == "*":
            return a * b
        if b == 0:
            raise ScriptError(f"division by zero ('{node.op}' with a right side of 0)", node.col)
        if node.op == "/":
            return a / b
        if node.op == "//":
            return Fraction(math.floor(a / b))
        return a - b * math.floor(a / b)  # %: the sign of the divisor, like Python
    args = [evaluate(a, values) for a in node.args]
    if node.func == "min":
        return min(args)
    if node.func == "max":
        return max(args)
    if node.func == "ceil":
        return Fraction(math.ceil(args[0]))
    return Fraction(math.floor(args[0]))


def _lookup(ref: Ref, values: Values) -> Fraction:
    if ref.name in TENSORS:
        if ref.name == "out":
            dims = values.out
            if dims is None:
                raise ScriptError("'out' is not known here (a shape script computes out from in)", ref.col)
        else:
            i = ref.index or 0
            if i >= len(values.inputs):
                raise ScriptError(f"in[{i}]: the layer has {len(values.inputs)} input(s) here", ref.col)
            dims = values.inputs[i]
            if dims is None:
                raise ScriptError(f"in[{i}] is not connected", ref.col)
        if ref.attr is None:
            raise ScriptError(f"{_ref_text(ref)} is a tensor: use {_ref_text(ref)}.n, .c, .h or .w", ref.col)
        return Fraction(getattr(dims, ref.attr))
    if ref.name not in values.params:
        raise ScriptError(f"unknown name {ref.name!r}", ref.col)
    v = values.params[ref.name]
    if ref.attr is not None:
        if not isinstance(v, Dims):
            raise ScriptError(f"parameter {ref.name} has no .{ref.attr}", ref.col)
        return Fraction(getattr(v, ref.attr))
    if isinstance(v, bool):
        return Fraction(int(v))
    if isinstance(v, int | float) and math.isfinite(v):
        return Fraction(v)
    raise ScriptError(f"parameter {ref.name} is not a number", ref.col)


def shape_of(nodes: Sequence[Node], values: Values) -> Dims:
    """Output dimensions given by a parsed shape script: each size a whole number in [1, 2**31-1]."""
    sizes = []
    for axis, node in zip(ATTRS, nodes, strict=True):
        v = evaluate(node, values)
        if v.denominator != 1:
            raise ScriptError(f"size {axis} = {float(v):g} is not a whole number (use // or ceil/floor to round)",
                              _col(node))
        if v < 1:
            raise ScriptError(f"size {axis} = {v} must be at least 1", _col(node))
        if v > MAX_SIZE:
            raise ScriptError(f"size {axis} = {v} is too large", _col(node))
        sizes.append(int(v))
    return Dims(*sizes)


def check_shape_script(text: str, scope: Scope) -> list[Node]:
    """Parse a shape script and check its names: the parsed script, or a ScriptError (for live validation)."""
    nodes = parse_shape(text)
    check_names(nodes, scope)
    return nodes


def uses_float(node: Node, params: Mapping[str, str]) -> bool:
    """True when an expression may give a fraction: a decimal number, '/', or a float parameter."""
    if isinstance(node, Num):
        return node.decimal
    if isinstance(node, Ref):
        return node.name not in TENSORS and params.get(node.name) == "float"
    if isinstance(node, Unary):
        return uses_float(node.operand, params)
    if isinstance(node, Bin):
        return node.op == "/" or uses_float(node.left, params) or uses_float(node.right, params)
    return node.func in ("min", "max") and any(uses_float(a, params) for a in node.args)
