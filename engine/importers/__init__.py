"""Importers: models of other tools turned into LayerLab models, one package per source format
(``engine.importers.onnx``). ``load_model_any`` is the one place front doors load a model file of any
supported kind."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.model import Model
    from engine.registry import Registry

#: file suffixes an importer reads (lower case), and the importer's name
IMPORTABLE = {".onnx": "onnx"}


def is_importable(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` names a file format an importer reads (by its suffix)."""
    return Path(path).suffix.lower() in IMPORTABLE


def load_model_any(path: str | os.PathLike[str], registry: Registry, **options: object) -> tuple[Model, object | None]:
    """Load a ``.lnet`` model file, or import an ``.onnx`` model in memory.

    Returns the model and, for an import, the weights source holding the imported weights (None for a
    ``.lnet``, whose weights come from its settings or the command line). ``options`` go to the importer
    (``input_shapes``, ``placeholders``). The import's notices become the model's load warnings."""
    if is_importable(path):
        from engine.importers.onnx import import_onnx  # noqa: PLC0415 - onnx is imported only when needed

        result = import_onnx(path, registry=registry, **options)  # type: ignore[arg-type]
        result.model.load_warnings = [*result.notices, *(f"placeholder for {r}" for r in result.refused)]
        return result.model, result.weights_source()
    from engine.modelfile import load  # noqa: PLC0415

    return load(path, registry), None
