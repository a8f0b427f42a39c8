"""The layer categories the palette groups layers by (``LayerDesc.categories``), as constants.

A plugin may use a category of its own (any text); these are the ones LayerLab's collections use, so a
misspelling is a NameError instead of a palette group of its own."""
from __future__ import annotations

from typing import Final


class Category:
    """Names of the layer categories (palette groups)."""

    ACTIVATION: Final = "Activation"
    ANALYSIS: Final = "Analysis"
    ARITHMETIC: Final = "Arithmetic"
    COLOR: Final = "Color"
    CONVOLUTION: Final = "Convolution"
    INPUT_OUTPUT: Final = "Input/Output"
    MERGE: Final = "Merge"
    NORMALIZATION: Final = "Normalization"
    POOLING: Final = "Pooling"
    RESAMPLING: Final = "Resampling"
    STATISTICS: Final = "Statistics"
    TENSOR: Final = "Tensor"
    #: the model's own templates (engine.templates)
    TEMPLATES: Final = "Templates"
    #: where the palette lists a layer without a category
    OTHER: Final = "Other"
