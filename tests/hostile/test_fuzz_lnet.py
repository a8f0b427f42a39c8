"""Fuzzing ``layerlab check`` with Hypothesis on the sample model file mutated (bytes flipped, truncated, lines
removed or duplicated, names replaced), in this process: exit status 0, 1 or 2 only, within the time limit,
nothing written outside the case's folder. Derandomized; failures once found live in tests/hostile/corpus/."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.inprocess import layerlab, tree

EXAMPLES = 200
BASE = (Path(__file__).parents[2] / "resources" / "samples" / "denoiser.lnet").read_text(encoding="utf-8")
NAMES = ["conv1", "input", "", "a" * 300, "../x", "é", "&amp;", "<", "1abc", "output"]


def check_case(text: str, timeout: float = 30.0) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        case = root / "case"
        case.mkdir()
        (case / "m.lnet").write_bytes(text.encode("utf-8", "surrogateescape"))
        before = tree(root)
        res = layerlab(["check", case / "m.lnet"], timeout)
        assert res.rc in (0, 1, 2), (res.rc, res.err)
        assert "internal error" not in res.err, res.err
        assert tree(root) == before  # check writes nothing
        return res.rc


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_fuzz_lnet(data):
    text = BASE
    for _ in range(data.draw(st.integers(1, 3), "mutations")):
        kind = data.draw(st.sampled_from(["flip", "truncate", "remove_line", "duplicate_line", "rename"]), "kind")
        lines = text.splitlines(keepends=True)
        if kind == "flip" and text:
            raw = bytearray(text.encode("utf-8", "surrogateescape"))
            i = data.draw(st.integers(0, len(raw) - 1), "at")
            raw[i] ^= 1 << data.draw(st.integers(0, 7), "bit")
            text = raw.decode("utf-8", "surrogateescape")
        elif kind == "truncate":
            text = text[: data.draw(st.integers(0, len(text)), "length")]
        elif kind in ("remove_line", "duplicate_line") and lines:
            i = data.draw(st.integers(0, len(lines) - 1), "line")
            lines[i:i + 1] = [] if kind == "remove_line" else [lines[i], lines[i]]
            text = "".join(lines)
        elif kind == "rename":
            old = data.draw(st.sampled_from(["conv1", "input", "output", "convolution", "relu"]), "old")
            text = text.replace(old, data.draw(st.sampled_from(NAMES), "new"))
    check_case(text)
