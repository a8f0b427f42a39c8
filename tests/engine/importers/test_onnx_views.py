"""Chains of Reshape, Transpose, Flatten, Squeeze and Unsqueeze folded into the fewest layers (engine.importers.onnx.views):
the plan moves values exactly as the chain does, and imported graphs keep onnxruntime's results."""
from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from engine.importers.onnx import import_onnx
from engine.importers.onnx.views import ViewStep, apply_steps, one_layer, view_plan
from tests.engine.importers.helpers import REGISTRY, check_against_ort, reference, rel_l2, run, save_graph, tensor


def _reshape(*sizes: int) -> ViewStep:
    return ViewStep("reshape", sizes, sizes)


def _transpose(dims: tuple[int, ...], *perm: int) -> ViewStep:
    return ViewStep("transpose", perm, tuple(dims[p] for p in perm))


def _random_chain(rng: random.Random) -> tuple[tuple[int, ...], list[ViewStep]]:
    dims = tuple(rng.choice([1, 2, 3, 4, 6]) for _ in range(rng.randint(1, 5)))
    steps, cur = [], dims
    for _ in range(rng.randint(2, 4)):
        if rng.random() < 0.5:
            perm = list(range(len(cur)))
            rng.shuffle(perm)
            step = _transpose(cur, *perm)
        else:
            n, sizes = math.prod(cur), []
            while n > 1 and len(sizes) < 5:
                d = rng.choice([f for f in range(2, n + 1) if n % f == 0])
                sizes.append(d)
                n //= d
            sizes = sizes + [n] if n > 1 else sizes or [1]
            if len(sizes) > 6:
                continue
            step = _reshape(*sizes)
        steps.append(step)
        cur = step.dims
    return dims, steps


def test_plans_move_values_as_their_chains() -> None:
    rng = random.Random(7)
    planned = 0
    for _ in range(400):
        dims, steps = _random_chain(rng)
        if not steps:
            continue
        want = apply_steps(np.arange(math.prod(dims)).reshape(dims), steps)
        plan = view_plan(dims, steps)
        if plan is None:  # a chain no single permutation of axes computes (it is kept as it is)
            continue
        planned += 1
        got = apply_steps(np.arange(math.prod(dims)).reshape(dims), plan)
        assert got.shape == want.shape and np.array_equal(got, want), (dims, steps, plan)
        assert len(plan) <= 3
    assert planned > 250


def test_a_window_partition_is_one_transpose_reading_and_writing_other_sizes() -> None:
    b, c, h, w, p = 1, 64, 56, 56, 7
    five = (b, c, h // p, p, w // p, p)
    steps = [_reshape(*five), _transpose(five, 0, 2, 4, 3, 5, 1), _reshape(b, 64, p * p, c)]
    kind, params = one_layer(view_plan((b, c, h, w), steps))
    assert kind == "transpose" and params["shape"] == "1,64,49,64" and "input_shape" in params
    assert one_layer(view_plan((2, 3, 4), [_reshape(6, 4), _reshape(2, 12)])) == ("reshape", {"shape": "2,12"})
    assert one_layer(view_plan((1, 96, 5, 5), [_transpose((1, 96, 5, 5), 0, 2, 3, 1), _reshape(1, 25, 96)])) == \
        ("transpose", {"perm": "0,2,3,1", "shape": "1,25,96"})


def _chain_graph(tmp_path: Path, extra_output: bool = False) -> Path:
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "s1"], ["a"]),
             helper.make_node("Transpose", ["a"], ["t"], perm=[0, 1, 3, 2, 4, 5]),
             helper.make_node("Reshape", ["t", "s2"], ["b"]),
             helper.make_node("Transpose", ["b"], ["u"], perm=[0, 2, 1]),
             helper.make_node("Unsqueeze", ["u", "ax"], ["y"])]
    outputs = [tensor("y", [6, 16, 4, 1])] + ([tensor("b", [6, 4, 16])] if extra_output else [])
    return save_graph(tmp_path / "chain.onnx", nodes, [tensor("x", [1, 6, 8, 8])], outputs,
                      {"s1": np.array([1, 6, 2, 4, 2, 4], np.int64), "s2": np.array([6, 4, 16], np.int64),
                       "ax": np.array([3], np.int64)})


@pytest.mark.parametrize("clean", [True, False])
def test_an_imported_chain_is_one_layer_with_the_same_values(tmp_path, clean) -> None:
    path = _chain_graph(tmp_path)
    x = np.random.default_rng(0).standard_normal((1, 6, 8, 8)).astype(np.float32)
    result = check_against_ort(path, {"x": x}, tol=1e-6, clean=clean)
    views = [s for s in result.model.layers.values() if s.type in ("reshape", "transpose")]
    assert [(s.type, s.inputs) for s in views] == [("transpose", ["r"])]
    assert any("5 reshape and transpose layers" in f for f in result.folded)


def test_a_chain_read_halfway_folds_on_each_side_of_the_reader(tmp_path) -> None:
    path = _chain_graph(tmp_path, extra_output=True)
    x = np.random.default_rng(1).standard_normal((1, 6, 8, 8)).astype(np.float32)
    result = check_against_ort(path, {"x": x}, tol=1e-6, clean=False)
    views = [s for s in result.model.layers.values() if s.type in ("reshape", "transpose")]
    assert [s.type for s in views] == ["transpose", "transpose"]  # up to the graph output b, and after it


def test_a_chain_that_is_no_permutation_of_axes_keeps_its_values(tmp_path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["a"], perm=[2, 1, 0]),
             helper.make_node("Reshape", ["a", "s"], ["b"]), helper.make_node("Transpose", ["b"], ["y"], perm=[1, 0])]
    path = save_graph(tmp_path / "odd.onnx", nodes, [tensor("x", [1, 4, 3])], [tensor("y", [3, 4])],
                      {"s": np.array([4, 3], np.int64)})
    check_against_ort(path, {"x": np.arange(12, dtype=np.float32).reshape(1, 4, 3)}, tol=1e-6, clean=False)


def test_an_activation_after_a_reshape_moves_to_the_layer_before_it(tmp_path) -> None:
    """Conv -> Reshape -> Relu: the convolution applies relu as it writes; the reshape only moves values."""
    w = np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "s"], ["r"]), helper.make_node("Relu", ["r"], ["y"])]
    path = save_graph(tmp_path / "act.onnx", nodes, [tensor("x", [1, 3, 5, 5])], [tensor("y", [1, 4, 25])],
                      {"w": w, "s": np.array([1, 4, 25], np.int64)})
    result = check_against_ort(path, {"x": np.random.default_rng(3).standard_normal((1, 3, 5, 5)).astype(np.float32)},
                               clean=False)
    acts = {s.type: s.activation for s in result.model.layers.values()}
    assert acts["convolution"] == "relu" and acts["reshape"] == "none"


def test_a_linear_layer_on_tokens_written_with_reshapes_is_one_matmul(tmp_path) -> None:
    """Reshape(tokens, [-1, K]) -> MatMul + Add -> Relu -> Reshape back (what exporters write for nn.Linear on a tensor
    of rank 4): one matmul layer with the weights, the bias and the activation."""
    rng = np.random.default_rng(4)
    nodes = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Reshape", ["t", "rows"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["h"]), helper.make_node("Reshape", ["h", "back"], ["y"])]
    path = save_graph(tmp_path / "linear.onnx", nodes, [tensor("x", [1, 4, 5, 8])], [tensor("y", [1, 4, 5, 6])],
                      {"w": rng.standard_normal((8, 6)).astype(np.float32), "b": rng.standard_normal(6).astype(np.float32),
                       "rows": np.array([-1, 8], np.int64), "back": np.array([1, 4, 5, 6], np.int64)})
    result = check_against_ort(path, {"x": rng.standard_normal((1, 4, 5, 8)).astype(np.float32)}, clean=False)
    layers = [s for s in result.model.layers.values() if s.type not in ("input", "output")]
    assert [s.type for s in layers][-1] == "matmul" and "fully_connected" not in [s.type for s in layers]
    assert layers[-1].activation == "relu" and "reshape" not in [s.type for s in layers]


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,tol", [("fp32 nchw", 1e-5), ("fp16 nhwc", 1e-2)])
def test_folded_chains_on_the_gpu(tmp_path, fmt, tol) -> None:
    """The folded transpose (reading and writing other sizes) on CuPy, against onnxruntime."""
    path = _chain_graph(tmp_path)
    x = np.random.default_rng(5).standard_normal((1, 6, 8, 8)).astype(np.float32)
    result = import_onnx(path, registry=REGISTRY, clean=False)
    got, ref = run(result, {"x": x}, fmt, backend="cupy")[0], reference(path, {"x": x})[0]
    assert rel_l2(got.reshape(ref.shape), ref) < tol
