"""The layers and parameters added for ONNX import document themselves: every parameter of these layers is
named in bold in its documentation (the docs browser shows it), with its default where it has a meaning of
its own (padding_end -1, nearest_mode, cubic_coeff_a)."""
from __future__ import annotations

import pytest

from engine.plugins import default_registry

REGISTRY = default_registry()
LAYERS = ["prelu", "group_normalization", "element_wise", "convolution", "deconvolution", "conv_bn", "pooling",
          "resize"]


@pytest.mark.parametrize("name", LAYERS)
def test_every_parameter_is_documented(name):
    desc = REGISTRY.find_layer(name)
    assert desc is not None and desc.summary and "\n" not in desc.summary
    for p in desc.params:
        assert f"<b>{p.name}</b>" in desc.documentation, f"{name}: parameter {p.name} undocumented"
        assert p.doc, f"{name}.{p.name} has no short description"


@pytest.mark.parametrize("name", ["convolution", "deconvolution", "conv_bn", "pooling"])
def test_padding_end_default_means_same_as_padding(name):
    desc = REGISTRY.find_layer(name)
    p = desc.param("padding_end")
    assert p.spatial and p.default_text == "1x1x-1x-1" and p.min == -1
    assert "same as padding" in desc.documentation
    assert p.parse("-1x2").h == -1 and p.parse("0").w == 0
    with pytest.raises(ValueError, match="each at least -1"):
        p.parse("-2x0")


def test_resize_defaults_are_documented():
    doc = REGISTRY.find_layer("resize").documentation
    for text in ("round_prefer_floor</code> (default", "default -0.75", "-0.5", "pytorch_half_pixel", "asymmetric"):
        assert text in doc
