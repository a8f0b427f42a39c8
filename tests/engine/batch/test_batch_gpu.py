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


def test_gpu_images_travel_8_bit_and_match_the_host_conversions(tmp_path, monkeypatch):
    """On the GPU decoded images are uploaded 8-bit and outputs come back as 8-bit images made there; the PNGs
    match a run that converts on the host (within one level: fp16 kernels may differ in the last bit)."""
    import cv2

    from engine.batch import local

    data = make_dataset(tmp_path, images=10, video_frames=4, corrupt=0, npy=1)
    gpu = dataclasses.replace(spec(), backend="cupy", format="fp16 nhwc")
    device = run_batch(gpu, BatchOptions((str(data),), str(tmp_path / "device"), batch_size=4))
    monkeypatch.setattr(local, "_on_gpu", lambda job: False)
    host = run_batch(gpu, BatchOptions((str(data),), str(tmp_path / "host"), batch_size=4))
    assert device["items"] == host["items"] and device["items"]["finished"] == 10 + 1 + 1
    got, ref = outputs_of(tmp_path / "device"), outputs_of(tmp_path / "host")
    assert set(got) == set(ref)
    for name in ref:
        if name.endswith(".png"):
            a = cv2.imread(str(tmp_path / "device" / name)).astype(int)
            b = cv2.imread(str(tmp_path / "host" / name)).astype(int)
            assert a.shape == b.shape and np.abs(a - b).max() <= 1, name
