"""The ONNX backend node tests for every operator the importer maps: each is imported and run on NumPy and
compared with the test's expected outputs (rtol 1e-3, atol 1e-5, as onnx's backend tests), or is refused
for exactly the reason listed in node_refusals.py (a test feeding NaN or infinities is refused by the input)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends import get_backend
from engine.errors import InputError
from engine.importers.onnx import OnnxImportError
from engine.importers.onnx.mapping import operator_table
from engine.network import Network
from engine.tensor import TensorFormat
from tests.engine.importers.helpers import REGISTRY
from tests.engine.importers.node_cases import CATEGORIES, category, import_case, node_cases, ops_of
from tests.engine.importers.node_refusals import REFUSED


@pytest.mark.parametrize("op", sorted(operator_table()))
def test_node_tests_of_operator(op: str, tmp_path) -> None:
    cases = [c for c in node_cases().values() if op in ops_of(c)]
    for case in cases:
        if case.name in REFUSED:
            with pytest.raises(OnnxImportError) as info:
                import_case(case, tmp_path)
            assert category(str(info.value)) == REFUSED[case.name], case.name
            continue
        result, feeds, expected = import_case(case, tmp_path)
        net = Network(result.model, REGISTRY, get_backend("numpy"), TensorFormat.parse("fp32 nchw"),
                      weights=result.weights_source())
        feed = {result.input_layers[k]: np.asarray(v, np.float32) for k, v in feeds.items()}
        if not all(np.isfinite(v).all() for v in feed.values()):  # LayerLab's inputs refuse NaN and infinities
            with pytest.raises(InputError, match="NaN or infinite"):
                net.infer(feed)
            continue
        out = net.infer(feed)
        for layer, want in zip(result.output_layers.values(), expected):
            np.testing.assert_allclose(out[layer].reshape(want.shape), want, rtol=1e-3, atol=1e-5, err_msg=case.name)


def test_refusal_list_is_current_and_categorised() -> None:
    cases = node_cases()
    assert set(REFUSED) <= set(cases)
    assert set(REFUSED.values()) <= set(CATEGORIES)
    passing = len(cases) - len(REFUSED)
    assert passing >= 80  # what the importer passes today; a regression shows here and in the per-op tests


def test_docs_state_the_node_test_counts() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "onnx-import.md").read_text(encoding="utf-8")
    section = text
    cases = node_cases()
    assert f"— {len(cases)} —" in section
    assert f"run: {len(cases) - len(REFUSED)} match" in section and f"the {len(REFUSED)} refused" in section
