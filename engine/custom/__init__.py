"""Custom layers written in the designer (no plugin): a definition (description, shape script, Python and
CUDA code) stored in the model file, a safe shape-script evaluator, a launch-line parser, the layer that
runs them, and the consent that code needs before it runs. CuPy appears only in
``engine.backends.cuda.custom``."""
from __future__ import annotations

from engine.custom.consent import CONSENT, ConsentError, consent_message
from engine.custom.definition import (
    CudaVariant,
    CustomInput,
    CustomLayerDef,
    CustomParam,
    DefinitionError,
    custom_name,
    custom_type,
    parse_definition,
)
from engine.custom.scope import custom_descs, definitions, scoped, set_definition, used_definitions

__all__ = [
    "CONSENT", "ConsentError", "CudaVariant", "CustomInput", "CustomLayerDef", "CustomParam", "DefinitionError",
    "consent_message", "custom_descs", "custom_name", "custom_type", "definitions", "parse_definition", "scoped",
    "set_definition", "used_definitions",
]
