"""Every ONNX backend node test: each is imported and run on NumPy and compared with the test's expected outputs
(rtol 1e-3, atol 1e-5, as onnx's backend tests), or is refused for exactly the operator and reason listed in
node_refusals.py (a test feeding NaN or infinities is refused by the input). None may disagree; the number that agree
is held to a lower bound."""
from __future__ import annotations

import numpy as np
import pytest

from engine.backends import get_backend
from engine.errors import InputError
from engine.importers.onnx import OnnxImportError
from engine.network import Network
from engine.tensor import TensorFormat
from tests.engine.importers.helpers import REGISTRY
from tests.engine.importers.node_cases import (
    AGREE_AT_LEAST,
    CATEGORIES,
    DOCS,
    category,
    frozen,
    import_case,
    is_3d_pooling,
    node_cases,
    refusal_table,
    refused_operator,
)
from tests.engine.importers.node_refusals import REFUSED

#: the node tests are checked in this many groups (every CHUNKS-th test by name), so that workers share them
CHUNKS = 48


def _finite_feeds(case) -> bool:
    return all(v.dtype.kind != "f" or np.isfinite(v).all() for v in frozen(case)[1].values())


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_node_tests_agree_or_are_refused_for_their_reason(chunk: int, tmp_path) -> None:
    for name in sorted(node_cases())[chunk::CHUNKS]:
        case = node_cases()[name]
        if name in REFUSED:
            with pytest.raises(OnnxImportError) as info:
                import_case(case, tmp_path)
            message = str(info.value)
            assert (refused_operator(message), category(message)) == REFUSED[name], name
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
            np.testing.assert_allclose(out[layer].reshape(want.shape), want, rtol=1e-3, atol=1e-5, err_msg=name)


def _counts() -> tuple[int, int, int]:
    """(node tests, tests that agree, tests refused by LayerLab's input check for NaN or infinities)."""
    cases = node_cases()
    imported = [c for n, c in cases.items() if n not in REFUSED]
    nan = sum(1 for c in imported if not _finite_feeds(c))
    return len(cases), len(imported) - nan, nan


def test_refusal_list_is_current_and_categorised() -> None:
    assert set(REFUSED) <= set(node_cases())
    assert {why for _, why in REFUSED.values()} <= set(CATEGORIES)
    _, agree, _ = _counts()
    assert agree >= AGREE_AT_LEAST  # what the importer passes today; a regression shows here and in the tests above


def test_every_3d_pooling_test_is_refused_so_its_uncomputed_reference_is_never_read() -> None:
    """node_cases leaves the expected outputs of 3-D pooling tests uncomputed (NaN): each must be refused, so that
    an importer that one day takes 3-D pooling makes this fail rather than compare against NaN."""
    pooling = {name for name, case in node_cases().items() if is_3d_pooling(case)}
    assert not pooling - set(REFUSED)
    for name in ("test_maxpool_3d_default", "test_averagepool_3d_default", "test_lppool_3d_default"):
        assert name in pooling and np.isnan(frozen(node_cases()[name])[2][0]).all(), name
    two_d = node_cases()["test_maxpool_2d_default"]
    assert np.isfinite(frozen(two_d)[2][0]).all()  # 2-D references are onnx's own


def test_docs_state_the_node_test_counts_and_the_refusals_by_operator() -> None:
    text = DOCS.read_text(encoding="utf-8")
    total, agree, nan = _counts()
    assert f"— {total} —" in text
    assert f"{agree} agree with the" in text and f"{nan} feed NaN" in text and f"the {len(REFUSED)} refused" in text
    assert refusal_table(REFUSED) in text  # python -m tests.engine.importers.node_cases rewrites it
