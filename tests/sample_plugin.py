"""The sample third-party plugin package (examples/layerlab-sample-plugin) made visible to importlib.metadata as if
pip had installed it: a ``.dist-info`` folder whose ``entry_points.txt`` is written from the package's own
pyproject.toml, and the package's folder, both put on sys.path. ``load_plugins()`` then finds it through its
``layerlab.plugins`` entry point, exactly as an installed distribution (no LayerLab function is patched)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

PACKAGE = Path(__file__).resolve().parents[1] / "examples" / "layerlab-sample-plugin"


def install_sample(monkeypatch: pytest.MonkeyPatch, site: Path) -> None:
    """Make the sample distribution importable and discoverable from ``site`` for this test."""
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n",
                                   encoding="utf-8")
    lines = []
    for group, eps in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {value}" for name, value in eps.items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(PACKAGE))
    sys.modules.pop("layerlab_sample", None)


@pytest.fixture
def sample_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The sample plugin installed (see the module documentation); returns the site folder."""
    install_sample(monkeypatch, tmp_path / "site")
    return tmp_path / "site"
