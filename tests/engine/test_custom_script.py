"""The shape-script language: examples, errors with their column, and property tests (random valid scripts
agree with an independent evaluation of the tree they were written from; random text gives a ScriptError or
a result, never another exception)."""
from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.custom.script import (
    Scope,
    ScriptError,
    Values,
    check_names,
    check_shape_script,
    evaluate,
    parse_expressions,
    parse_shape,
    shape_of,
)
from engine.tensor import Dims

SCOPE = Scope(2, {"k": "uint", "alpha": "float", "flag": "bool", "mode": "enum", "size": "dimension"})
INPUTS = [Dims(2, 3, 16, 24), Dims(1, 5, 7, 9)]
PARAMS = {"k": 3, "alpha": 0.5, "flag": True, "mode": "a", "size": Dims(1, 1, 4, 6)}
VALUES = Values(INPUTS, PARAMS)


def shape(text: str, values: Values = VALUES) -> Dims:
    return shape_of(check_shape_script(text, SCOPE), values)


def error(text: str, values: Values = VALUES) -> ScriptError:
    with pytest.raises(ScriptError) as info:
        shape(text, values)
    return info.value


def test_seed_example() -> None:
    assert shape("in.n, in.c * 4, in.h / 2, in.w / 2") == Dims(2, 12, 8, 12)


def test_inputs_parameters_and_functions() -> None:
    assert shape("in[1].n, in[0].c + in[1].c, ceil(in[1].h / 2), floor(in[1].w / 2)") == Dims(1, 8, 4, 4)
    assert shape("k, max(in.c, 4, 2) * flag, size.h * size.w, min(in.w, 100) // k") == Dims(3, 4, 24, 8)
    assert shape("1, in.c * alpha * 2, (in.h + 2) % 5 + 1, -(-in.w)") == Dims(1, 3, 4, 24)
    assert shape("  in . n ,in.c,in.h//3,in.w-23 ") == Dims(2, 3, 5, 1)


def test_operator_precedence_and_associativity() -> None:
    assert shape("1, 2 + 3 * 4, 20 - 5 - 3, 48 / 4 / 2") == Dims(1, 14, 12, 6)
    assert shape("1, (2 + 3) * 4, 20 - (5 - 3), 48 / (4 / 2)") == Dims(1, 20, 18, 24)
    assert shape("1, 7 // 2 * 2, 2 * 7 % 4, -3 + 5") == Dims(1, 6, 2, 2)


@pytest.mark.parametrize(("text", "column", "words"), [
    ("in.n, in.c *, in.h, in.w", 13, "expected a number"),
    ("in.n, in.c, in.h", 1, "4 sizes"),
    ("in.n, in.c, in.h, in.w, 1", 25, "4 sizes"),
    ("in.n, in.c, in.h, in.w)", 23, "expected an operator"),
    ("in.n, in.c $ 2, in.h, in.w", 12, "unexpected character '$'"),
    ("in.n, in.x, in.h, in.w", 10, "expected n, c, h or w"),
    ("in.n, in.c, bogus, in.w", 13, "unknown name 'bogus'"),
    ("in.n, in, in.h, in.w", 7, "in is a tensor"),
    ("in.n, in[2].c, in.h, in.w", 7, "the layer has 2 input(s)"),
    ("in.n, out.c, in.h, in.w", 7, "'out' is not known here"),
    ("in.n, mode, in.h, in.w", 7, "of type enum"),
    ("in.n, size, in.h, in.w", 7, "is a dimension"),
    ("in.n, k.h, in.h, in.w", 7, "is a number, it has no .h"),
    ("in.n, ceil(1, 2), in.h, in.w", 7, "ceil takes 1 argument"),
    ("in.n, max(1), in.h, in.w", 7, "max takes 2 or more"),
    ("in.n, min 2, in.h, in.w", 11, "expected '(' after min"),
    ("in.n, (in.c, in.h, in.w", 12, "expected ')'"),
    ("", 1, "empty"),
])
def test_syntax_and_name_errors_give_the_column(text: str, column: int, words: str) -> None:
    exc = error(text)
    assert exc.column == column, exc
    assert words in exc.message
    assert str(exc).startswith(f"column {column}:")


@pytest.mark.parametrize(("text", "column", "words"), [
    ("in.n, in.c / (k - 3), in.h, in.w", 12, "division by zero"),
    ("in.n, in.c % 0, in.h, in.w", 12, "division by zero"),
    ("in.n, in.c, in[1].h / 2, in.w", 13, "h = 3.5 is not a whole number"),
    ("in.n, in.c - 3, in.h, in.w", 7, "c = 0 must be at least 1"),
    ("in.n, in.c, in.h, -in.w", 19, "w = -24 must be at least 1"),
    ("in.n, 99999 * 99999, in.h, in.w", 7, "too large"),
])
def test_evaluation_errors(text: str, column: int, words: str) -> None:
    exc = error(text)
    assert (exc.column, words in exc.message) == (column, True), exc


def test_unconnected_input_is_reported() -> None:
    exc = error("in[1].n, in.c, in.h, in.w", Values([INPUTS[0], None], PARAMS))
    assert "in[1] is not connected" in exc.message


def test_infinite_inputs_accept_any_index_statically() -> None:
    check_names(parse_expressions("in[7].c"), Scope(None, {}))
    with pytest.raises(ScriptError, match="in\\[7\\]: the layer has 2 input"):
        evaluate(parse_expressions("in[7].c")[0], Values(INPUTS, {}))


def test_deep_nesting_and_long_text_are_errors_not_crashes() -> None:
    with pytest.raises(ScriptError, match="nested more than"):
        parse_expressions("(" * 500 + "1" + ")" * 500)
    with pytest.raises(ScriptError, match="nested more than"):
        parse_expressions("-" * 500 + "1")
    with pytest.raises(ScriptError, match="longer than"):
        parse_expressions("1+" * 2000 + "1")


# ---- property tests -----------------------------------------------------------------------------------
OPS = ("+", "-", "*", "/", "//", "%")
PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2}
REFS = {"in.n": 2, "in.c": 3, "in.h": 16, "in.w": 24, "in[1].c": 5, "in[1].h": 7, "k": 3, "alpha": Fraction(1, 2),
        "flag": 1, "size.w": 6}

leaves = st.one_of(
    st.integers(0, 50).map(lambda v: ("num", str(v))),
    st.sampled_from(["0.5", "1.25", "2.0", ".5"]).map(lambda v: ("num", v)),
    st.sampled_from(sorted(REFS)).map(lambda r: ("ref", r)),
)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.just("bin"), st.sampled_from(OPS), children, children),
        st.tuples(st.just("neg"), children),
        st.tuples(st.just("paren"), children),
        st.tuples(st.just("call"), st.sampled_from(["ceil", "floor"]), st.lists(children, min_size=1, max_size=1)),
        st.tuples(st.just("call"), st.sampled_from(["min", "max"]), st.lists(children, min_size=2, max_size=3)),
    )


trees = st.recursive(leaves, _extend, max_leaves=12)


def render(tree: tuple) -> tuple[str, int]:
    """Text of a tree with only the parentheses precedence needs (plus the explicit 'paren' nodes), and the
    precedence of its top operator (4: an atom)."""
    kind = tree[0]
    if kind in ("num", "ref"):
        return tree[1], 4
    if kind == "paren":
        return f"({render(tree[1])[0]})", 4
    if kind == "neg":
        text, prec = render(tree[1])
        return (f"-{text}" if prec >= 3 else f"-({text})"), 3
    if kind == "call":
        return f"{tree[1]}({', '.join(render(a)[0] for a in tree[2])})", 4
    op, (lt, lp), (rt, rp) = tree[1], render(tree[2]), render(tree[3])
    p = PREC[op]
    left = lt if lp >= p else f"({lt})"
    right = rt if rp > p else f"({rt})"
    return f"{left} {op} {right}", p


class Zero(Exception):
    pass


def reference(tree: tuple) -> Fraction:
    """Independent evaluation of the tree (exact fractions)."""
    kind = tree[0]
    if kind == "num":
        return Fraction(tree[1])
    if kind == "ref":
        return Fraction(REFS[tree[1]])
    if kind == "paren":
        return reference(tree[1])
    if kind == "neg":
        return -reference(tree[1])
    if kind == "call":
        args = [reference(a) for a in tree[2]]
        return {"min": min, "max": max}[tree[1]](args) if tree[1] in ("min", "max") else \
            Fraction({"ceil": math.ceil, "floor": math.floor}[tree[1]](args[0]))
    a, b = reference(tree[2]), reference(tree[3])
    op = tree[1]
    if op in ("/", "//", "%") and b == 0:
        raise Zero
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
            "//": lambda: Fraction(math.floor(a / b)), "%": lambda: a - b * math.floor(a / b)}[op]()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees)
def test_random_valid_expressions_agree_with_the_reference(tree: tuple) -> None:
    text, _ = render(tree)
    nodes = parse_expressions(text)
    check_names(nodes, SCOPE)
    assert len(nodes) == 1
    try:
        expected = reference(tree)
    except Zero:
        with pytest.raises(ScriptError, match="division by zero"):
            evaluate(nodes[0], VALUES)
        return
    assert evaluate(nodes[0], VALUES) == expected, text


@settings(max_examples=150, deadline=None)
@given(st.lists(trees, min_size=4, max_size=4))
def test_random_scripts_give_a_shape_or_a_script_error(items: list[tuple]) -> None:
    text = ", ".join(render(t)[0] for t in items)
    try:
        dims = shape(text)
    except ScriptError as exc:
        assert exc.message and 1 <= exc.column <= len(text) + 1
        return
    assert dims == Dims(*(int(reference(t)) for t in items))


ALPHABET = "in.chw[]0123456789+-*/%(), kminaxceilfloorout_$#\"'\\\n\t.é"


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=60))
def test_random_text_never_raises_anything_but_a_script_error(text: str) -> None:
    try:
        nodes = parse_shape(text)
        check_names(nodes, SCOPE)
        shape_of(nodes, VALUES)
    except ScriptError as exc:
        assert exc.message and 1 <= exc.column <= len(text) + 1, (text, exc)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_unicode_never_raises_anything_but_a_script_error(text: str) -> None:
    try:
        shape_of(check_shape_script(text, SCOPE), VALUES)
    except ScriptError as exc:
        assert exc.message and 1 <= exc.column <= len(text) + 1, (text, exc)
