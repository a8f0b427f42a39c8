"""The candidate table and selector of backend operations (engine/backends/selection.py), and where the CUDA C of
the CuPy backend lives (package data, never Python strings). CPU only: no GPU or CuPy needed."""
from __future__ import annotations

from pathlib import Path

import tomllib

from engine.backends.selection import Candidate, Launched, OperationTable, Selector

ROOT = Path(__file__).resolve().parents[2]


def _table(selector, log, declines=()):
    def row(name):
        def launch(problem, prepared):
            log.append(name)
            return None if name in declines else Launched(name)
        return Candidate(name, lambda p: p != "none", launch)
    return OperationTable("op", [row("ours"), row("library"), row("rewrite")], selector)


def test_choice_is_timed_once_and_a_second_process_reads_it_from_disk(tmp_path):
    path = tmp_path / "choices.json"
    times = {"ours": 2.0, "library": 1.0, "rewrite": 3.0}
    timed: list[str] = []
    log: list[str] = []
    done = _table(Selector(path, "gpu-a"), log).run("p", ("k", 1), lambda c: None,
                                                     lambda c, prep: timed.append(c.name) or times[c.name])
    assert done == Launched("library") and sorted(timed) == ["library", "ours", "rewrite"]
    again = _table(Selector(path, "gpu-a"), log).run("p", ("k", 1), lambda c: None,
                                                      lambda c, prep: timed.append("again") or 0.0)
    assert again.candidate == "library" and "again" not in timed  # remembered on disk: not timed again
    other = _table(Selector(path, "gpu-b"), log).run("p", ("k", 1), lambda c: None, None)
    assert other.candidate == "ours"  # another device's file is ignored; untimed, the first row wins


def test_untimed_runs_take_the_first_row_and_a_declining_row_falls_through(tmp_path):
    log: list[str] = []
    table = _table(Selector(None, "x"), log, declines=("ours",))
    assert table.run("p", "k", lambda c: None, None) == Launched("library")
    assert log == ["ours", "library"]
    assert table.run("none", "k", lambda c: None, None) is None  # no row applies: the caller falls back


def test_two_selectors_on_one_file_keep_each_others_choices(tmp_path):
    path = tmp_path / "choices.json"
    first, second = Selector(path, "gpu"), Selector(path, "gpu")
    first.choose("op", "a", ["x", "y"], lambda n: {"x": 1.0, "y": 2.0}[n], "x")
    second.choose("op", "b", ["x", "y"], lambda n: {"x": 2.0, "y": 1.0}[n], "x")
    third = Selector(path, "gpu")
    assert (third.known("op", "a"), third.known("op", "b")) == ("x", "y")


def test_cuda_c_lives_in_package_data_not_in_python():
    kernels = ROOT / "engine" / "backends" / "cuda" / "kernels"
    sources = sorted(p.name for p in kernels.iterdir() if p.suffix in (".cu", ".cuh"))
    assert "wgmma.cuh" in sources and "conv64.cu" in sources
    for name in ("conv64.cu", "patch64.cu", "out64.cu"):
        assert '#include "wgmma.cuh"' in (kernels / name).read_text()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {"kernels/*.cu", "kernels/*.cuh"} <= set(data["engine.backends.cuda"])
    holding = [str(p.relative_to(ROOT)) for p in (ROOT / "engine").rglob("*.py") if "__global__" in p.read_text()]
    assert holding == []
