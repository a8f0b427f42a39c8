"""Ray stays optional: only engine/batch/ray_engine.py imports it, and a local batch run never loads it."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_only_the_ray_engine_imports_ray():
    offenders = []
    for folder in ("engine", "app", "canvas", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n == "ray" or n.startswith("ray.") for n in names):
                    offenders.append(path.relative_to(ROOT).as_posix())
    assert sorted(set(offenders)) == ["engine/batch/ray_engine.py"]


def test_a_local_run_does_not_load_ray(tmp_path):
    code = (
        "import sys, pathlib\n"
        "from tests.engine.batch.dataset import make_dataset\n"
        "from tests.engine.batch.test_batch import spec\n"
        "from engine.batch import BatchOptions, run_batch\n"
        "import app.cli\n"
        f"d = make_dataset(pathlib.Path({str(tmp_path)!r}), images=2, video_frames=0, corrupt=0, npy=0)\n"
        f"run_batch(spec(), BatchOptions((str(d),), {str(tmp_path / 'out')!r}))\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
