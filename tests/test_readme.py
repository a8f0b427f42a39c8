"""The README's catalogue of layers and activations is the generated one (regenerate with
``python -m engine.catalog`` and paste between the markers)."""
from __future__ import annotations

from pathlib import Path

from engine.catalog import BEGIN, END, markdown

ROOT = Path(__file__).resolve().parents[1]


def test_readme_catalog_is_current(registry):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "README lacks the catalogue markers"
    current = text[text.index(BEGIN): text.index(END) + len(END)]
    assert current == markdown(registry), "README catalogue is stale: run python -m engine.catalog"


def test_readme_names_the_two_commands_and_ci_runs_the_test_one():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_cmd = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/python -m pytest -q"
    assert test_cmd in text and test_cmd in ci
    assert "resources/samples/denoiser.lnet" in text
