"""The export support table comes from the plugins: every layer and activation declares a valid value
that matches what it implements, and the documentation shows the current table."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.export.support import BEGIN, END, is_valid_support, layer_support_html, support_markdown, support_text
from engine.layer import Activation, Layer
from engine.plugins import default_registry

REGISTRY = default_registry()
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", REGISTRY.layer_names)
def test_layer_support_matches_its_methods(name):
    cls = REGISTRY.layer_class(name)
    for attr, method in (("onnx_support", "to_onnx"), ("torch_support", "to_torch")):
        value = getattr(cls, attr)
        assert is_valid_support(value), f"{name}.{attr} = {value!r}"
        overridden = getattr(cls, method) is not getattr(Layer, method)
        assert overridden == (value != "no"), f"{name}: {attr} is {value!r} but {method} is {'' if overridden else 'not '}written"


@pytest.mark.parametrize("name", REGISTRY.activation_names)
def test_activation_support_matches_its_methods(name):
    cls = REGISTRY.activation_class(name)
    for attr, method in (("onnx_support", "to_onnx"), ("torch_support", "torch_expr")):
        value = getattr(cls, attr)
        assert is_valid_support(value)
        overridden = getattr(cls, method).__func__ is not getattr(Activation, method).__func__
        assert overridden == (value != "no"), f"{name}: {attr} is {value!r}"


def test_table_and_documentation_text():
    table = support_markdown(REGISTRY)
    assert table.startswith(BEGIN) and table.endswith(END)
    assert "| `convolution` | standard | yes | partial: weights and bias from secondary inputs are not exported |" in table
    assert "| `relu` | yes | yes |" in table
    assert support_text(REGISTRY, "padding") == "ONNX: yes; PyTorch: yes"
    assert support_text(REGISTRY, "gelu", "activation") == "ONNX: yes; PyTorch: yes"
    page = layer_support_html(REGISTRY, "batch_normalization")
    assert page.startswith("<h3>Export</h3>") and "<b>PyTorch</b>: partial: statistics from secondary inputs" in page
    assert layer_support_html(REGISTRY, "no_such_layer") == ""
    assert not is_valid_support("partial:") and not is_valid_support("maybe")
