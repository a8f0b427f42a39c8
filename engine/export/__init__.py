"""Exporters: ONNX, PyTorch, a standalone Python project, and the preprocessed model.

Each layer and activation says what it exports to (``onnx_support`` / ``torch_support``: "yes",
"partial: <limits>" or "no") and how (``to_onnx`` / ``to_torch``, ``Activation.to_onnx`` /
``torch_expr``); the exporters here walk a built network and never name a layer type, so a new layer
is exported by writing those methods next to it. ``support`` turns the attributes into the support
table of the documentation and of the layer documentation browser."""
from __future__ import annotations

from engine.export.common import ExportError, ExportResult, Unsupported
from engine.export.onnx_export import OnnxGraph, OnnxOptions, export_onnx
from engine.export.preprocessed import export_preprocessed, preprocessed_model
from engine.export.project_export import ProjectOptions, export_project
from engine.export.support import layer_support_html, support_markdown, support_text
from engine.export.torch_export import TorchModuleWriter, TorchOptions, export_torch

__all__ = [
    "ExportError", "ExportResult", "OnnxGraph", "OnnxOptions", "ProjectOptions", "TorchModuleWriter", "TorchOptions",
    "Unsupported", "export_onnx", "export_preprocessed", "export_project", "export_torch", "layer_support_html",
    "preprocessed_model", "support_markdown", "support_text",
]
