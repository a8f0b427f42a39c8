"""Running the ``layerlab`` command line in the test process (its entry point, no subprocess)."""
from __future__ import annotations

import io

import pytest

from app.cli import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``layerlab ARGS``: its exit status, what it wrote to its output, and what it wrote to stderr."""
    out = io.StringIO()
    code = main(args, out=out)
    return code, out.getvalue(), capsys.readouterr().err
