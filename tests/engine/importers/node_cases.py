"""The ONNX backend node tests shipped in the onnx package (generated in memory by
``onnx.backend.test.case.node``), every one of them, and why some are refused (by operator and reason).

A node test feeds every operator input as a graph input; LayerLab reads weights, scales, pads, axes...
as constants, so ``frozen`` turns every input but the data ones (the first, and the other float tensors of
the first one's rank for element-wise operators and Concat) into initializers with the test's values.

``python -m tests.engine.importers.node_cases`` rewrites ``node_refusals.py`` and the table of refusals in
docs/onnx-import.md from a run (then review the diff)."""
from __future__ import annotations

import functools
import re
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from engine.importers.onnx import OnnxImportError, import_onnx

DATA_OPS = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "Concat", "Less", "LessOrEqual", "Greater",
            "GreaterOrEqual", "Equal"}
#: why a node test is refused: category -> a piece of the import error that identifies it
CATEGORIES = {
    "input rank is not 1 to 6": "LayerLab inputs have rank 1 to 6",
    "input is not a float tensor": "LayerLab inputs are float tensors",
    "dilated pooling": "dilated pooling",
    "training mode": "training mode",
    "MaxPool Indices output": "the Indices output",
    "reshape that is no flatten": "reshaping",
    "MatMul that is no N x K by K x M product": "only a K x M matrix",
    "Pad with a non-zero constant": "only zero padding",
    "Pad of other axes than H and W": "only H and W of N x C x H x W can be padded",
    "Resize with antialias": "antialias is not supported",
    "Resize keep_aspect_ratio_policy": "keep_aspect_ratio_policy",
    "Resize tf_crop_and_resize": "tf_crop_and_resize",
    "Resize half_pixel_symmetric": "half_pixel_symmetric",
    "Resize align_corners with fractional sizes": "fractional size",
    "Resize mode the resize layer lacks": "the resize layer has no",
    "asymmetric padding the layer lacks": "has no parameter padding_end",
    "ceil mode the pooling layer lacks": "has no parameter ceil_mode",
    "element_wise operation missing": "the element_wise layer has no",
    "layer missing from the collections": "the loaded collections have no",
    "activation missing from the collections": "activation",
    "input size left symbolic": "has a symbolic size on axis",
    "model the ONNX checker refuses": "the model breaks ONNX's rules",
    "output the import does not compute": "is not computed by any imported node",
    "cast to a type LayerLab does not compute in": "LayerLab computes in float",
    "1-D or 3-D operator": "only 2-D (H and W) operators",
    "1-D or 3-D convolution": "only 2-D convolutions",
    "2-D transposed convolution only": "only 2-D transposed convolutions",
    "Split of another axis than the channels": "only splitting channels",
    "Concat of another axis than the channels": "only concatenation of channels",
    "Slice of the batch or of a tensor of another rank": "(only C, H and W)",
    "operator of N x C x H x W tensors given another rank": "LayerLab tensors are N x C x H x W",
    "LayerNormalization statistics outputs": "the mean and inverse deviation outputs are read",
    "Pow with a tensor exponent": "(only one value)",
    "ReduceSum that is an identity": "noop_with_empty_axes",
    "Gemm with a transposed batch": "transA=1",
    "Gemm bias not one per output": "is not one value per output",
    "Clip with min above max": "is greater than max",
    "constant of a type LayerLab does not read": "LayerLab reads tensors of",
    "constant holding infinities or NaN": "holds infinities or NaN",
    "boolean or integer result of tensors computed at run time": "gives boolean or integer tensors",
    "constant that cannot be a tensor": "cannot be a tensor",
    "constants the reference evaluator cannot fold": "could not be folded",
    "operator of another domain": "is not the standard ONNX one",
    "control flow": "control flow (",
    "model of no standard opset": "imports no standard ONNX opset",
    "operator without a LayerLab layer": "': no LayerLab equivalent",
    "Einsum that is no product of two operands": "only two operands written with letters",
    "tensor of rank 0": "has rank 0",
}
#: the node test module holds at least this many tests that import and agree with the expected outputs (a lower
#: bound: more is progress, fewer is a regression)
AGREE_AT_LEAST = 663


#: pooling operators whose 3-D expected outputs are not computed (``node_cases``)
POOL_OPS = {"MaxPool", "AveragePool", "LpPool"}


def is_3d_pooling(case: Any) -> bool:
    """A node test of a pooling operator over three spatial axes (a rank-5 input)."""
    graph = case.model.graph
    return bool(ops_of(case) & POOL_OPS) and len(graph.input[0].type.tensor_type.shape.dim) == 5


@functools.cache
def node_cases() -> dict[str, Any]:
    """Node test name -> TestCase, for every node test onnx ships.

    onnx computes the expected outputs of its 3-D pooling tests (MaxPool, AveragePool, LpPool over rank-5
    inputs) with a Python loop over every output point: 13 of the 16 seconds that generating every test takes.
    LayerLab refuses 3-D pooling, so those outputs are never compared; they are NaN here instead (any comparison
    with them fails), and the node test module checks that every such test is refused."""
    from onnx.backend.test.case.node import collect_testcases  # noqa: PLC0415 - slow (generates every test)
    from onnx.reference.ops import op_pool_common  # noqa: PLC0415

    reference = op_pool_common.pool

    def pool(padded: np.ndarray, x_shape: Any, kernel: Any, strides: Any, out_shape: Any, *args: Any,
             **kwargs: Any) -> np.ndarray:
        if len(x_shape) == 5:
            return np.full([x_shape[0], x_shape[1], *out_shape], np.nan, dtype=padded.dtype)
        return reference(padded, x_shape, kernel, strides, out_shape, *args, **kwargs)

    op_pool_common.pool = pool  # the test generators import it when collect_testcases imports them
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cases = collect_testcases(None)
    finally:
        op_pool_common.pool = reference
    return {c.name: c for c in sorted(cases, key=lambda c: c.name) if c.kind == "node"}


def ops_of(case: Any) -> set[str]:
    return {n.op_type for n in case.model.graph.node} - {"Constant"}


def frozen(case: Any) -> tuple[Any, dict[str, np.ndarray], list[np.ndarray]]:
    """The test's model with its parameter inputs as initializers, the data inputs and the expected outputs."""
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    data_only = ops_of(case) <= DATA_OPS
    keep, feeds = [], {}
    first = _array(inputs[0]) if inputs else None
    for k, (vi, val) in enumerate(zip(list(m.graph.input), inputs)):
        arr = _array(val)
        if k == 0 or arr.dtype.kind not in "fiub" or \
                (data_only and arr.dtype.kind == "f" and first is not None and arr.ndim == first.ndim):
            keep.append(vi)
            feeds[vi.name] = arr
        else:
            m.graph.initializer.append(onnx.numpy_helper.from_array(arr, vi.name))
    del m.graph.input[:]
    m.graph.input.extend(keep)
    return m, feeds, [_array(o) for o in outputs]


def _array(value: Any) -> np.ndarray:
    """A node test's value as an array (some tests store theirs as TensorProto; a sequence or an optional is held as
    an object array, which the import refuses as an input)."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    try:
        return np.asarray(value)
    except ValueError:  # a sequence of tensors of different shapes
        held = np.empty(1, dtype=object)
        held[0] = value
        return held


def category(message: str) -> str:
    """The refusal category of an import error message."""
    for name, piece in CATEGORIES.items():
        if piece in message:
            return name
    return f"other: {message}"


def refused_operator(message: str) -> str:
    """The operator of the first refused node an import error message names ("(model)" where the model as a whole
    is refused: its inputs, opset, control flow...)."""
    found = re.search(r"\n(\w+) \(\d+\): ", message)
    return found.group(1) if found else "(model)"


def refusal_table(refused: dict[str, tuple[str, str]]) -> str:
    """Markdown table of the refused node tests by operator (most first): how many, and why (tests per reason)."""
    by_op: dict[str, dict[str, int]] = {}
    for op, why in refused.values():
        reasons = by_op.setdefault(op, {})
        reasons[why] = reasons.get(why, 0) + 1
    rows = sorted(by_op.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    lines = [TABLE_BEGIN, "", "| operator | node tests refused | why (node tests) |", "|---|---|---|"]
    for op, reasons in rows:
        why = "; ".join(f"{r} ({n})" for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"| `{op}` | {sum(reasons.values())} | {why} |" if op != "(model)" else
                     f"| the model as a whole | {sum(reasons.values())} | {why} |")
    return "\n".join([*lines, "", TABLE_END])


TABLE_BEGIN = "<!-- node-tests:begin (generated by python -m tests.engine.importers.node_cases) -->"
TABLE_END = "<!-- node-tests:end -->"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "onnx-import.md"


def import_case(case: Any, folder: Path) -> Any:
    model, feeds, outputs = frozen(case)
    path = folder / f"{case.name}.onnx"
    onnx.save(model, str(path))
    return import_onnx(path), feeds, outputs


def _write() -> None:  # pragma: no cover - a maintenance tool
    refused: dict[str, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in sorted(node_cases().items()):
            try:
                import_case(case, Path(tmp))
            except OnnxImportError as exc:
                refused[name] = (refused_operator(str(exc)), category(str(exc)))
    target = Path(__file__).with_name("node_refusals.py")
    lines = ['"""ONNX node tests the importer refuses: test -> (the operator of the first refused node, the reason) (written',
             'by python -m tests.engine.importers.node_cases; the node test module checks that exactly these are refused,',
             'for exactly this reason)."""', "# ruff: noqa: E501 - one test a line", "REFUSED = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(refused.items())]
    lines.append("}")
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    text = DOCS.read_text(encoding="utf-8")
    if TABLE_BEGIN in text and TABLE_END in text:
        text = text[: text.index(TABLE_BEGIN)] + refusal_table(refused) + text[text.index(TABLE_END) + len(TABLE_END):]
        DOCS.write_text(text, encoding="utf-8")
    print(f"{len(node_cases())} node tests, {len(refused)} refused: wrote {target} and the table in {DOCS}",
          file=sys.stderr)


if __name__ == "__main__":
    _write()
