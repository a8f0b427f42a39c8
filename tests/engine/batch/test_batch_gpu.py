"""The local batch engine on the GPU (CuPy): two networks sharing the GPU write the same outputs as one, and
the outputs agree with the NumPy backend to fp16 precision. Skipped without a usable CUDA GPU."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from engine.batch import BatchOptions, run_batch
from tests.engine.batch.dataset import make_dataset
from tests.engine.batch.test_batch import outputs_of, spec

pytestmark = pytest.mark.gpu


def test_two_gpu_lanes_match_one_and_numpy(tmp_path, monkeypatch):
    from engine.batch import local

    data = make_dataset(tmp_path, images=24, video_frames=6, corrupt=1, npy=2)
    gpu = dataclasses.replace(spec(), backend="cupy", format="fp16 nhwc")
    opts = {"batch_size": 4, "save_as": "npy"}
    two = run_batch(gpu, BatchOptions((str(data),), str(tmp_path / "two"), **opts))
    monkeypatch.setattr(local, "GPU_LANES", 1)
    one = run_batch(gpu, BatchOptions((str(data),), str(tmp_path / "one"), **opts))
    assert two["items"] == one["items"] and two["items"]["finished"] == 24 + 1 + 2
    assert outputs_of(tmp_path / "two") == outputs_of(tmp_path / "one")
    cpu = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "cpu"), **opts))
    assert cpu["items"] == one["items"]
    for name in outputs_of(tmp_path / "cpu"):
        if name.endswith(".npy"):
            got, ref = np.load(tmp_path / "one" / name), np.load(tmp_path / "cpu" / name)
            assert got.shape == ref.shape and np.linalg.norm(got - ref) <= 1e-2 * np.linalg.norm(ref), name
