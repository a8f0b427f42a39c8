"""ONNX import: ``import_onnx(path, input_shapes=..., placeholders=..., progress=...) -> ImportResult``.

The mapping table (``mapping.operator_table()``) lists every ONNX operator the importer maps, with what
it becomes and the attributes it handles; ``python -m engine.importers.onnx`` prints the documentation's table
from it (``--write docs/onnx-import.md`` rewrites that page's section)."""
from __future__ import annotations

from engine.importers.onnx.context import OnnxImportError, Refusal, RefusedNodes
from engine.importers.onnx.importer import ImportResult, import_onnx, refusals_by_operator
from engine.importers.onnx.reader import MAX_OPSET, parse_input_shape
from engine.importers.onnx.validate import MAX_NODES, MalformedModel

__all__ = ["MAX_NODES", "MAX_OPSET", "ImportResult", "MalformedModel", "OnnxImportError", "Refusal", "RefusedNodes",
           "import_onnx", "parse_input_shape", "refusals_by_operator"]
