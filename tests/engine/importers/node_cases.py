"""The ONNX backend node tests shipped in the onnx package (generated in memory by
``onnx.backend.test.case.node``), for the operators the importer maps, and why some are refused.

A node test feeds every operator input as a graph input; LayerLab reads weights, scales, pads, axes...
as constants, so ``frozen`` turns every input but the data ones (the first, and the other float tensors of
the first one's rank for element-wise operators and Concat) into initializers with the test's values.

``python -m tests.engine.importers.node_cases`` rewrites ``node_refusals.py`` from a run (then review the diff)."""
from __future__ import annotations

import functools
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from engine.importers.onnx import OnnxImportError, import_onnx
from engine.importers.onnx.mapping import operator_table

DATA_OPS = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean", "Concat"}
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
    "Einsum that is no product of two operands": "only two operands written with letters",
    "tensor of rank 0": "has rank 0",
}


@functools.cache
def node_cases() -> dict[str, Any]:
    """Node test name -> TestCase, for the tests whose every operator is in the mapping table."""
    from onnx.backend.test.case.node import collect_testcases  # noqa: PLC0415 - slow (generates every test)

    mapped = set(operator_table())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    out = {}
    for c in cases:
        ops = {n.op_type for n in c.model.graph.node} - {"Constant"}
        if c.kind == "node" and ops and ops <= mapped:
            out[c.name] = c
    return out


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
    """A node test's value as an array (some tests store theirs as TensorProto)."""
    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def category(message: str) -> str:
    """The refusal category of an import error message."""
    for name, piece in CATEGORIES.items():
        if piece in message:
            return name
    return f"other: {message}"


def import_case(case: Any, folder: Path) -> Any:
    model, feeds, outputs = frozen(case)
    path = folder / f"{case.name}.onnx"
    onnx.save(model, str(path))
    return import_onnx(path), feeds, outputs


def _write() -> None:  # pragma: no cover - a maintenance tool
    refused: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, case in sorted(node_cases().items()):
            try:
                import_case(case, Path(tmp))
            except OnnxImportError as exc:
                refused[name] = category(str(exc))
    target = Path(__file__).with_name("node_refusals.py")
    lines = ['"""ONNX node tests the importer refuses, by reason (written by python -m tests.engine.importers.node_cases;',
             'the node test module checks that exactly these are refused, for exactly this reason)."""', "",
             "REFUSED = {"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(refused.items())]
    lines.append("}")
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(node_cases())} node tests, {len(refused)} refused: wrote {target}", file=sys.stderr)


if __name__ == "__main__":
    _write()
