"""The sample third-party plugin package (examples/layerlab-sample-plugin), installed for a test with pip into a
folder of its own (``pip install --no-deps --no-build-isolation --no-index --target SITE``, from a copy of the
package so no build files land in the repository), and that folder put on sys.path: ``load_plugins()`` finds it
through the ``layerlab.plugins`` entry point pip wrote from the package's own pyproject.toml, as in any environment
it is installed in. The shared virtual environment is left alone. Where pip cannot build it (no setuptools in the
environment), the same ``.dist-info`` (METADATA and entry_points.txt from the pyproject) is written directly."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

PACKAGE = Path(__file__).resolve().parents[1] / "examples" / "layerlab-sample-plugin"


def _pip_install(site: Path, work: Path) -> bool:
    source = work / "layerlab-sample-plugin"
    shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(site), str(source)], capture_output=True, text=True,
                         timeout=300)
    return res.returncode == 0


def _write_dist_info(site: Path) -> None:
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
    shutil.copytree(PACKAGE / "layerlab_sample", site / "layerlab_sample",
                    ignore=shutil.ignore_patterns("__pycache__"))


def install_sample(monkeypatch: pytest.MonkeyPatch, work: Path) -> Path:
    """Install the sample distribution under ``work`` and put it on sys.path for this test; returns the site."""
    site = work / "site"
    site.mkdir(parents=True, exist_ok=True)
    if not _pip_install(site, work):
        _write_dist_info(site)
    monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m == "layerlab_sample" or m.startswith("layerlab_sample.")]:
        monkeypatch.delitem(sys.modules, name)
    return site


@pytest.fixture
def sample_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The sample plugin installed (see the module documentation); returns the site folder."""
    return install_sample(monkeypatch, tmp_path)
