"""Classes 1 and 4 for ``layerlab batch``: its outputs, manifest and summary land only under the folders the user
named, written whole; destinations of the wrong kind are refused before anything runs, with one line and exit
status 2."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.hostile.conftest import SMALL


@pytest.fixture
def dataset(case):
    case.model("m.lnet", SMALL)
    (case.dir / "ins").mkdir()
    for i in range(2):
        np.save(case.dir / "ins" / f"x{i}.npy", np.random.default_rng(i).random((1, 3, 16, 16), dtype=np.float32))
    return case


def _batch(*extra: str) -> list[str]:
    return ["batch", "m.lnet", "--inputs", "ins", "-b", "numpy", *extra]


def test_outputs_and_summary_only_where_asked(dataset):
    dataset.expect(0, None, *_batch("--output-dir", "out", "--summary", "s.json"))
    assert sorted(p.name for p in dataset.dir.iterdir()) == ["ins", "m.lnet", "out", "s.json"]
    assert sorted(p.name for p in (dataset.dir / "out").glob("*.npy")) == ["x0.npy", "x1.npy"]
    assert not [p for p in (dataset.dir / "out").rglob("*") if ".partial-" in p.name or ".tmp" in p.name]
    assert json.loads((dataset.dir / "s.json").read_text())["items"]["finished"] == 2


@pytest.mark.parametrize("summary,culprit", [("folder", "is a folder"), ("afile/s.json", "is a file")])
def test_a_summary_that_cannot_be_written_is_refused_before_the_run(dataset, summary, culprit):
    (dataset.dir / "folder").mkdir()
    (dataset.dir / "afile").write_text("x")
    dataset.expect(2, [summary, culprit], *_batch("--output-dir", "out", "--summary", summary))
    assert not (dataset.dir / "out").exists()  # nothing ran


def test_an_output_folder_that_is_a_file_is_refused(dataset):
    (dataset.dir / "out.npy").write_text("x")
    dataset.expect(2, ["out.npy", "is a file"], *_batch("--output-dir", "out.npy"))
    assert (dataset.dir / "out.npy").read_text() == "x"


@pytest.mark.parametrize("flag,value", [("--seed", "-1"), ("--batch-size", "0"), ("--every", "-2"),
                                        ("--workers", "0")])
def test_bad_numbers(dataset, flag, value):
    dataset.expect(2, [flag, value], *_batch("--output-dir", "out", flag, value))
    assert not (dataset.dir / "out").exists()
