"""Replays every file of tests/hostile/corpus/ (cases the fuzzers once found failing) through the same checks
as the fuzzers: ``*.onnx`` through ``layerlab import``, ``*.lnet`` through ``layerlab check``."""
from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "corpus"


@pytest.mark.parametrize("path", sorted([*CORPUS.glob("*.onnx"), *CORPUS.glob("*.lnet")]), ids=lambda p: p.name)
def test_corpus(path):
    if path.suffix == ".onnx":
        from tests.hostile.test_fuzz_onnx import import_case

        import_case(path.read_bytes())
    else:
        from tests.hostile.test_fuzz_lnet import check_case

        check_case(path.read_text(encoding="utf-8", errors="surrogateescape"))
