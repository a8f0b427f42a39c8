"""Launch lines of custom CUDA kernels: parsing, grid sizing (one thread per output element, fixed
dimensions, stepping), argument values, and errors with their column. Pure Python: no GPU needed."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.custom.launch import LaunchError, parse_launch
from engine.custom.script import Scope, Values
from engine.errors import LayerLabError
from engine.tensor import Dims

SCOPE = Scope(2, {"alpha": "float", "k": "uint", "mode": "enum"}, has_out=True)


def test_the_seed_launch_line() -> None:
    spec = parse_launch("k_custom<16,16,8!>[1,1,1,1](out,in[0],out.c,out.h,out.w){}", SCOPE)
    assert spec.kernel == "k_custom"
    assert (spec.block, spec.fixed, spec.steps, spec.shared_bytes) == ((16, 16, 8), (False, False, True), (1, 1, 1, 1), 0)
    assert [a.tensor for a in spec.args] == ["out", 0, None, None, None]
    assert [a.text for a in spec.args] == ["out", "in[0]", "out.c", "out.h", "out.w"]
    out = Dims(2, 20, 100, 50)
    assert spec.grid(out) == (4, 7, 1)  # X scales with W, Y with H, Z is fixed
    assert spec.scalar_values(Values([Dims(2, 5, 200, 100)], {}, out)) == [None, None, 20, 100, 50]


def test_grid_covers_every_output_element() -> None:
    spec = parse_launch("k<16,16,8>(out)")
    assert spec.grid(Dims(2, 20, 100, 50)) == (4, 7, 5)  # Z covers N x C = 40 in blocks of 8
    assert spec.grid(Dims(1, 1, 1, 1)) == (1, 1, 1)
    assert parse_launch("k<256>(out)").grid(Dims(1, 3, 5, 1000)) == (4, 5, 3)  # missing sizes are 1


def test_stepping_divides_the_threads_per_axis() -> None:
    spec = parse_launch("k<16,16,4>[1,2,1,4](out)")
    # W 100 / 4 = 25 threads -> 2 blocks; H 33 -> 3 blocks; C 6 / 2 = 3 times N 2 = 6 threads -> 2 blocks
    assert spec.grid(Dims(2, 6, 33, 100)) == (2, 3, 2)
    assert parse_launch("k<8,8,1>[2,1,3,1](out)").grid(Dims(3, 1, 30, 8)) == (1, 2, 2)  # H 30 / 3 = 10 threads -> 2 blocks


def test_every_dimension_may_be_fixed() -> None:
    assert parse_launch("k<32!,8,1!>(out)").grid(Dims(4, 4, 64, 640)) == (1, 8, 1)


def test_blocks_over_1024_threads_parse_but_are_refused_by_the_check() -> None:
    spec = parse_launch("k_custom<16,16,8!>(out)")
    assert spec.threads == 2048
    assert "2048 threads, more than the CUDA limit of 1024" in spec.block_problem()
    assert parse_launch("k<32,32,1!>(out)").block_problem() is None


def test_argument_types_and_values() -> None:
    spec = parse_launch("k<1>(out, in[1], alpha, alpha * 2, k + out.c, in[1].w // 2, 0.5, in.h / 2)", SCOPE)
    assert [a.is_float for a in spec.args] == [False, False, True, True, False, False, True, True]
    values = Values([Dims(1, 2, 8, 8), Dims(1, 3, 5, 7)], {"alpha": 0.25, "k": 4}, Dims(1, 3, 5, 7))
    assert spec.scalar_values(values) == [None, None, 0.25, 0.5, 7, 3, 0.5, 4.0]


def test_shared_memory_and_trailing_semicolon() -> None:
    assert parse_launch("k<64>(out){4096};").shared_bytes == 4096
    assert parse_launch("  k<64>()  ").args == ()


@pytest.mark.parametrize(("text", "column", "words"), [
    ("", 1, "empty"),
    ("<16>(out)", 1, "starts with the kernel's name"),
    ("k(out)", 2, "thread block"),
    ("k<16>", 2, "argument list"),
    ("k<16,16,8,2>(out)", 3, "1 to 3 sizes"),
    ("k<16,x>(out)", 6, "'x' is not a whole number"),
    ("k<0>(out)", 3, "at least 1"),
    ("k<16>[1,1,1](out)", 7, "stepping is 4 whole numbers"),
    ("k<16>(out, bogus)", 12, "unknown name 'bogus'"),
    ("k<16>(out, in[2])", 12, "the layer has 2 input(s)"),
    ("k<16>(out, mode)", 12, "of type enum"),
    ("k<16>(out[1])", 7, "one output"),
    ("k<16>(out, in.c +)", 18, "expected a number"),
    ("k<16>(out){x}", 12, "shared memory"),
])
def test_errors_give_the_column(text: str, column: int, words: str) -> None:
    with pytest.raises(LaunchError) as info:
        parse_launch(text, SCOPE)
    assert (info.value.column, words in info.value.message) == (column, True), info.value


def test_int_arguments_must_fit_32_bits() -> None:
    values = Values([Dims(1, 3, 5, 7)], {"alpha": 0.5, "k": 4}, Dims(1, 3, 5, 7))
    with pytest.raises(LaunchError, match="32-bit"):
        parse_launch("k<1>(out.c * 99999 * 99999)", SCOPE).scalar_values(values)


def test_grid_beyond_the_cuda_limit_is_an_error() -> None:
    with pytest.raises(LayerLabError, match="grid Y of 70000 blocks exceeds the CUDA limit"):
        parse_launch("k<1,1,1>(out)").grid(Dims(1, 1, 70000, 1))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="k_<>[](){},!0123456789 outin.chw+-*/%alpha;x\n", max_size=50))
def test_random_launch_text_gives_a_spec_or_a_launch_error(text: str) -> None:
    try:
        spec = parse_launch(text, SCOPE)
    except LaunchError as exc:
        assert exc.message and 1 <= exc.column <= len(text) + 1, (text, exc)
        return
    assert spec.kernel and len(spec.block) == 3 and all(b >= 1 for b in spec.block)
    try:
        spec.grid(Dims(2, 3, 17, 33))
        spec.scalar_values(Values([Dims(2, 3, 34, 66), Dims(1, 1, 1, 1)], {"alpha": 0.5, "k": 2}, Dims(2, 3, 17, 33)))
    except (LaunchError, LayerLabError):
        pass
