"""The README's generated tables are current (``python -m engine.readme --write README.md`` rewrites them)."""
from __future__ import annotations

from pathlib import Path

from engine.readme import stale_sections

ROOT = Path(__file__).resolve().parents[1]


def test_readme_generated_tables_are_current(registry):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert stale_sections(text, registry) == [], "README is stale: run python -m engine.readme --write README.md"


def test_readme_names_the_two_commands_and_ci_runs_the_test_one():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_cmd = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/python -m pytest -q"
    assert test_cmd in text and test_cmd in ci
    assert "resources/samples/denoiser.lnet" in text


def test_readme_template_example_loads_and_runs(registry):
    """The template definition and instance shown under Templates load and expand as the text says."""
    from engine.modelfile import loads
    from engine.network import Network

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    example = text[text.index("## Templates"):].split("```xml\n")[1].split("```")[0]
    definition, instance = example.split("...\n")
    model = loads('<network name="n"><layers><layer name="inp" type="input"/>'
                  '<layer name="conv0" type="convolution"><param name="num_output_channels" value="16"/>'
                  f'<input index="0" source="inp"/></layer>{instance}</layers><templates>{definition}</templates>'
                  '</network>', "README.md", registry)
    net = Network(model, registry)
    assert net.order == ["inp", "conv0", "block1__c1", "block1__add1"]
    assert net.model.layers["block1__add1"].params == {"operation": "max"}
    assert net.output("block1").shape == (1, 16, 64, 64)
