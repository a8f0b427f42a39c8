"""The documentation site is whole and current: its generated tables match the code, the README names the two
commands CI runs, the examples it shows load, and ``mkdocs build --strict`` passes (a broken link, a missing anchor or
a page left out of the navigation fails it). ``python -m engine.doc_tables --write`` rewrites the tables."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.doc_tables import SECTIONS, stale_sections

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_generated_tables_are_current(registry):
    assert stale_sections(registry) == [], "docs are stale: run python -m engine.doc_tables --write"


def test_every_generated_table_has_its_page():
    for section in SECTIONS:
        text = (DOCS / section.page).read_text(encoding="utf-8")
        assert section.begin.split(" (")[0] in text and section.end in text, section.page


def test_readme_names_the_two_commands_and_ci_runs_the_test_one():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    sample_cmd = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/layerlab"
    test_cmd = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/python -m pytest -q"
    assert sample_cmd in text and test_cmd in text and test_cmd in ci
    assert "resources/samples/denoiser.lnet" in text


def test_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_template_example_loads_and_runs(registry):
    """The template definition and instance shown on the Templates page load and expand as the page says."""
    from engine.modelfile import loads
    from engine.network import Network

    text = (DOCS / "templates.md").read_text(encoding="utf-8")
    example = text.split("```xml\n")[1].split("```")[0]
    definition, instance = example.split("...\n")
    model = loads('<network name="n"><layers><layer name="inp" type="input"/>'
                  '<layer name="conv0" type="convolution"><param name="num_output_channels" value="16"/>'
                  f'<input index="0" source="inp"/></layer>{instance}</layers><templates>{definition}</templates>'
                  '</network>', "docs/templates.md", registry)
    net = Network(model, registry)
    assert net.order == ["inp", "conv0", "block1__c1", "block1__add1"]
    assert net.model.layers["block1__add1"].params == {"operation": "max"}
    assert net.output("block1").shape == (1, 16, 64, 64)


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d",
                           str(site)], capture_output=True, text=True, env=env, timeout=300)


def test_site_builds_strict(tmp_path):
    result = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "design" / "architecture" / "index.html").is_file()


@pytest.mark.parametrize(("page", "problem"), [
    ("[gone](missing.md)", "missing.md"),
    ("[gone](other.md#no-such-heading)", "no-such-heading"),
])
def test_strict_build_fails_on_a_broken_link(tmp_path, page, problem):
    """The repository's validation settings, on a two-page site with one broken link: the build fails naming it."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Home\n\n{page}\n", encoding="utf-8")
    (docs / "other.md").write_text("# Other\n\n## A heading\n", encoding="utf-8")
    config.update(docs_dir=str(docs), nav=[{"Home": "index.md"}, {"Other": "other.md"}])
    config["markdown_extensions"] = [e for e in config["markdown_extensions"] if "snippets" not in str(e)]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and problem in result.stdout + result.stderr


def test_strict_build_fails_on_a_page_left_out_of_the_navigation(tmp_path):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n", encoding="utf-8")
    (docs / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    config.update(docs_dir=str(docs), nav=[{"Home": "index.md"}])
    config["markdown_extensions"] = [e for e in config["markdown_extensions"] if "snippets" not in str(e)]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and "orphan.md" in result.stdout + result.stderr
