"""Import rules of DESIGN.md, enforced by scanning the source (not by convention)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_ENGINE = ("PySide6", "PyQt5", "PyQt6", "shiboken6", "NodeGraphQt", "pyqtgraph", "app", "canvas", "plugins")
QT = ("PySide6", "PyQt5", "PyQt6", "shiboken6", "NodeGraphQt", "pyqtgraph")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, mod in imported_modules(path):
            if mod.split(".")[0] in forbidden:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    return bad


def test_engine_imports_no_qt_app_canvas_or_plugins():
    assert violations("engine", FORBIDDEN_IN_ENGINE) == []


def test_plugins_import_no_qt_app_or_canvas_outside_qt_modules():
    bad = [v for v in violations("plugins", QT + ("app", "canvas")) if not v.split(":")[0].endswith("qt.py")]
    assert bad == []


def test_scanner_catches_a_forbidden_import(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("import os\nfrom PySide6 import QtCore\nimportlib.import_module('canvas.view')\n")
    mods = [m for _, m in imported_modules(f)]
    assert "PySide6" in mods and "canvas.view" in mods


def test_cli_and_engine_load_without_qt():
    code = ("import sys, app.cli, engine, engine.network, engine.typecheck, engine.io\n"
            "from app.cli import main\n"
            "main(['layers'])\n"
            f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {QT!r})\n"
            "print('QT:', bad)\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "QT: []" in res.stdout, res.stdout
