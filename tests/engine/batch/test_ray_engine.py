"""The Ray engine on a local Ray instance started by the test: the same outputs as the local engine, byte for
byte, and attaching to a running instance by its address from the command line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.batch import BatchOptions, run_batch
from tests.engine.batch.dataset import make_dataset
from tests.engine.batch.test_batch import MODEL, outputs_of, spec

ray = pytest.importorskip("ray", reason="the ray engine needs the 'cluster' extra")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ray_instance():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("ray"), images=16, video_frames=6, corrupt=1, npy=2)


def test_ray_engine_writes_the_same_outputs_as_the_local_engine(tmp_path, data, ray_instance):
    """Two inference actors on the instance's two CPUs (a pool holding every CPU had left the decoding and
    writing tasks none: the run hung)."""
    opts = {"batch_size": 3, "every": 1}
    local = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "local"), **opts))
    events = []
    remote = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "ray"), workers=2, **opts), engine="ray",
                       progress=lambda p: events.extend(p.events))
    assert ray.is_initialized()  # an instance the engine did not start is left running
    assert remote["engine"] == "ray" and remote["items"] == local["items"]
    assert [f["input"] for f in remote["failures"]] == [f["input"] for f in local["failures"]] == ["broken_0.png"]
    files = outputs_of(tmp_path / "ray")
    assert len(files) == 16 + 1 + 2 and files == outputs_of(tmp_path / "local")
    assert {e.input for e in events if e.status == "done"} == set(files)
    # resuming on Ray skips what is finished
    again = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "ray"), **opts), engine="ray")
    assert again["items"]["skipped"] == 19 and again["items"]["frames_this_run"] == 0


def test_command_attaches_to_a_running_cluster_by_address(tmp_path, data, ray_instance):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "app.cli", "batch", str(MODEL), "--inputs", str(data / "a"), "--output-dir",
           str(tmp_path / "out"), "--backend", "numpy", "--engine", "ray", "--ray-address", ray_instance,
           "--batch-size", "4"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "out" / "layerlab-summary.json").read_text())
    assert summary["engine"] == "ray" and summary["items"]["finished"] == 10
    assert ray.is_initialized()  # the cluster outlives the command that attached to it
    local = run_batch(spec(), BatchOptions((str(data / "a"),), str(tmp_path / "local"), batch_size=4))
    assert local["items"]["finished"] == 10
    assert outputs_of(tmp_path / "out") == outputs_of(tmp_path / "local")


def test_a_network_that_cannot_open_is_one_error_not_a_failure_per_input(tmp_path, data, ray_instance):
    from engine.errors import LayerLabError

    (tmp_path / "weights").mkdir()
    with pytest.raises(LayerLabError, match="layer conv1: weight 'weights' missing"):
        run_batch(spec(weights=str(tmp_path / "weights")), BatchOptions((str(data / "a"),), str(tmp_path / "out")),
                  engine="ray")
    assert not list((tmp_path / "out").glob("a/*"))


def test_the_actors_leave_the_decoding_and_writing_tasks_a_share_of_the_cpus():
    from engine.batch.ray_engine import TASK_CPUS, actor_cpus

    assert actor_cpus(16, 4) == 1.0  # room enough: a whole CPU each
    for cpus, pool in ((2, 2), (1, 1), (2, 3), (4, 4), (8, 64)):
        share = actor_cpus(cpus, pool)
        assert 0 < share < 1 and share * pool + TASK_CPUS <= cpus, (cpus, pool)
