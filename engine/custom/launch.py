"""The launch line of a custom layer's CUDA kernel, e.g.

    k_custom<16,16,8!>[1,1,1,1](out, in[0], out.c, out.h, out.w){}

* ``k_custom``: the kernel's name (a kernel entry point declared ``extern "C"`` in the code);
* ``<X,Y,Z>``: the thread block (1 to 3 sizes; missing ones are 1). A size followed by ``!`` is fixed: its
  grid dimension is 1 whatever the tensor size (the kernel loops over that axis itself);
* ``[n,c,h,w]`` (optional): stepping, how many elements along each axis one thread handles;
* ``(...)``: the kernel's arguments: ``out`` and ``in``/``in[i]`` are the tensors' device pointers; any
  other argument is an expression of the shape-script language (sizes such as ``out.c`` or ``in[1].w``,
  parameters, numbers), passed as ``int``, or as ``float`` when it involves a float parameter, a decimal
  number or ``/``;
* ``{}`` (optional): bytes of dynamic shared memory, ``{4096}``; empty means none.

The grid is sized for one thread per output element: X covers W, Y covers H and Z covers N x C (each
divided by its stepping)."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from engine.custom.script import (
    TENSORS,
    Node,
    Ref,
    Scope,
    ScriptError,
    Values,
    check_names,
    evaluate,
    parse_expressions,
    uses_float,
)
from engine.errors import LayerLabError
from engine.tensor import Dims

MAX_THREADS = 1024
_GRID_LIMITS = (2**31 - 1, 65535, 65535)
_HEADER = re.compile(r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*<(?P<block>[^<>]*)>\s*(?:\[(?P<step>[^\[\]]*)\]\s*)?"
                     r"\((?P<args>.*)\)\s*(?:\{(?P<smem>[^{}]*)\}\s*)?;?\s*$", re.S)


class LaunchError(ScriptError):
    """A launch line that cannot be parsed or used: the reason and the column."""


@dataclass(frozen=True)
class Argument:
    """One kernel argument: a tensor (``tensor`` = 'out' or the input index) or a number expression."""

    text: str
    tensor: str | int | None = None
    expr: Node | None = None
    is_float: bool = False


@dataclass(frozen=True)
class LaunchSpec:
    """A parsed launch line."""

    kernel: str
    block: tuple[int, int, int]
    fixed: tuple[bool, bool, bool]
    steps: tuple[int, int, int, int]
    args: tuple[Argument, ...]
    shared_bytes: int = 0

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    def block_problem(self) -> str | None:
        """Why the block cannot be launched (more threads than CUDA allows), or None. The parser accepts such a
        block (the vendor's own example, <16,16,8!>, has 2048 threads); checks and launches refuse it."""
        if self.threads > MAX_THREADS:
            size = "x".join(map(str, self.block))
            return f"the block {size} has {self.threads} threads, more than the CUDA limit of {MAX_THREADS}"
        return None

    def grid(self, out: Dims) -> tuple[int, int, int]:
        """Grid dimensions for one thread per output element (fixed dimensions are 1)."""
        sn, sc, sh, sw = self.steps
        threads = (math.ceil(out.w / sw), math.ceil(out.h / sh), math.ceil(out.c / sc) * math.ceil(out.n / sn))
        grid = tuple(1 if fixed else max(1, math.ceil(t / b)) for t, b, fixed in zip(threads, self.block, self.fixed))
        for axis, g, limit in zip("XYZ", grid, _GRID_LIMITS):
            if g > limit:
                raise LayerLabError(f"kernel {self.kernel}: grid {axis} of {g} blocks exceeds the CUDA limit of {limit} "
                                    f"(output {out}): use stepping or larger blocks")
        return grid  # type: ignore[return-value]

    def scalar_values(self, values: Values) -> list[int | float | None]:
        """The number arguments' values (None for tensors): int or float per ``is_float``."""
        out: list[int | float | None] = []
        for a in self.args:
            if a.expr is None:
                out.append(None)
                continue
            v = evaluate(a.expr, values)
            if a.is_float:
                out.append(float(v))
            elif v.denominator != 1:
                raise LaunchError(f"argument {a.text!r} = {float(v):g} is not a whole number (an int argument)",
                                  a.expr.col)
            elif not -(2**31) <= v < 2**31:
                raise LaunchError(f"argument {a.text!r} = {v} does not fit a 32-bit int", a.expr.col)
            else:
                out.append(int(v))
        return out


def parse_launch(text: str, scope: Scope | None = None) -> LaunchSpec:
    """Parse a launch line; with ``scope``, check the arguments' names too. Raises LaunchError."""
    m = _HEADER.match(text)
    if m is None:
        raise LaunchError(_header_problem(text), _header_column(text))
    block, fixed = _block(m.group("block"), m.start("block") + 1)
    steps = _steps(m.group("step"), m.start("step") + 1) if m.group("step") is not None else (1, 1, 1, 1)
    args = _arguments(m.group("args"), m.start("args"), scope)
    smem = (m.group("smem") or "").strip()
    if smem and not smem.isdigit():
        raise LaunchError(f"shared memory bytes {smem!r} is not a whole number", m.start("smem") + 1)
    return LaunchSpec(m.group("name"), block, fixed, steps, args, int(smem or 0))


def _header_problem(text: str) -> str:
    if not text.strip():
        return "the launch line is empty"
    if not re.match(r"\s*[A-Za-z_]", text):
        return "a launch line starts with the kernel's name"
    if "<" not in text or ">" not in text:
        return "expected the thread block after the kernel name, as in k<16,16,1>(...)"
    if "(" not in text or not text.rstrip().rstrip(";").rstrip().rstrip("}").rstrip("{ 0123456789").endswith(")"):
        return "expected the argument list in parentheses after the block (and [stepping]), as in k<256>(out, in)"
    return "expected name<block>[stepping](arguments){shared bytes}, as in k<16,16,1>[1,1,1,1](out, in[0]){}"


def _header_column(text: str) -> int:
    m = re.match(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*", text)
    return (m.end() + 1) if m else (len(text) - len(text.lstrip()) + 1)


def _block(text: str, col: int) -> tuple[tuple[int, int, int], tuple[bool, bool, bool]]:
    sizes, fixed = [], []
    parts = text.split(",")
    if len(parts) > 3:
        raise LaunchError(f"a thread block has 1 to 3 sizes (X, Y, Z), found {len(parts)}", col)
    offset = col
    for part in parts:
        m = re.fullmatch(r"\s*(\d+)\s*(!?)\s*", part)
        if m is None:
            raise LaunchError(f"block size {part.strip()!r} is not a whole number (optionally followed by !)", offset)
        v = int(m.group(1))
        if v < 1:
            raise LaunchError("block sizes must be at least 1", offset)
        sizes.append(v)
        fixed.append(bool(m.group(2)))
        offset += len(part) + 1
    while len(sizes) < 3:
        sizes.append(1)
        fixed.append(False)
    return (sizes[0], sizes[1], sizes[2]), (fixed[0], fixed[1], fixed[2])


def _steps(text: str, col: int) -> tuple[int, int, int, int]:
    parts = text.split(",")
    if len(parts) != 4 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise LaunchError("stepping is 4 whole numbers of at least 1 (n, c, h, w), as in [1,1,1,1]", col)
    return tuple(int(p) for p in parts)  # type: ignore[return-value]


def _arguments(text: str, offset: int, scope: Scope | None) -> tuple[Argument, ...]:
    if not text.strip():
        return ()
    try:
        nodes = parse_expressions(text)
    except ScriptError as exc:
        raise LaunchError(f"argument list: {exc.message}", exc.column + offset) from None
    params: Mapping[str, str] = scope.params if scope is not None else {}
    parts = _split_top(text)
    out = []
    for i, node in enumerate(nodes):
        piece = parts[i].strip() if i < len(parts) else ""
        if isinstance(node, Ref) and node.name in TENSORS and node.attr is None:
            if scope is not None:
                try:
                    check_names([Ref(node.name, node.index, "n", node.col)], scope)
                except ScriptError as exc:
                    raise LaunchError(exc.message, exc.column + offset) from None
            out.append(Argument(piece, "out" if node.name == "out" else (node.index or 0)))
            continue
        if scope is not None:
            try:
                check_names([node], scope)
            except ScriptError as exc:
                raise LaunchError(exc.message, exc.column + offset) from None
        out.append(Argument(piece, None, node, uses_float(node, params)))
    return tuple(out)


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts

