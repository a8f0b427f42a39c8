"""The local pipeline's throughput design, checked for its outputs and its bounds: 8-bit images made into tensors
on the network's device (the GPU path, run here on NumPy) write the same bytes as the host path; reading and
writing run per input in one pool while the chunks in flight stay bounded; an NPY stack saved as images gives one
file per item, as ``infer`` writes them."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from engine.batch import BatchJob, BatchOptions, run_batch, run_job
from engine.batch.manifest import Manifest
from engine.io import write_output
from tests.engine.batch.dataset import make_dataset
from tests.engine.batch.test_batch import outputs_of, spec


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("pipeline"), images=14, video_frames=5, corrupt=1, npy=2)


@pytest.mark.parametrize("save_as", ["same", "npy"])
def test_the_device_image_path_writes_the_same_bytes_as_the_host_path(tmp_path, data, monkeypatch, save_as):
    from engine.batch import local, stages

    host = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "host"), batch_size=3, save_as=save_as))
    seen = []
    infer = stages.infer

    def watched(work, net, plan):
        seen.append(plan.device_images)
        seen.extend((g.images is not None) == (not g.items[0][0].endswith(".npy")) for g in work.groups)
        return infer(work, net, plan)

    monkeypatch.setattr(local, "_on_gpu", lambda job: True)  # as on a GPU: images travel 8-bit, outputs come back 8-bit
    monkeypatch.setattr(local, "infer", watched)
    device = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "device"), batch_size=3, save_as=save_as))
    assert all(seen) and len(seen) > 10  # every chunk went the device way, images and frames as 8-bit images
    assert device["items"] == host["items"] and device["items"]["finished"] == 14 + 1 + 2
    assert outputs_of(tmp_path / "device") == outputs_of(tmp_path / "host")


def test_chunks_in_flight_stay_bounded_while_writing_is_slow(tmp_path, data, monkeypatch):
    from engine.batch import local, stages

    monkeypatch.setattr(local, "pool_threads", lambda: 2)
    monkeypatch.setattr(local, "IN_FLIGHT_PER_THREAD", 1)
    depth = 2 * 1 + 2  # one lane: max(2 * lanes + 2, ceil(threads * per_thread / batch_size))
    lock = threading.Lock()
    started, finished, most = set(), set(), [0]
    reads, write_still = local.reads, stages.write_still

    def counted_reads(chunk, plan):
        with lock:
            started.add(chunk.index)
            most[0] = max(most[0], len(started - finished))
        return reads(chunk, plan)

    def slow_write(*args):
        time.sleep(0.02)
        return write_still(*args)

    job = BatchJob(spec(), BatchOptions((str(data / "a"),), str(tmp_path / "out"), batch_size=1))
    handle = job.handle

    def counted_handle(work):
        handle(work)
        with lock:
            finished.add(work.chunk.index)

    monkeypatch.setattr(local, "reads", counted_reads)
    monkeypatch.setattr(stages, "write_still", slow_write)
    monkeypatch.setattr(job, "handle", counted_handle)
    summary = run_job(job)
    assert summary["items"]["finished"] == len(job.chunks) == 9 and len(finished) == 9
    assert 2 <= most[0] <= depth  # the feeder ran ahead of the slow writers, but only so far


def test_an_npy_stack_saved_as_images_gives_one_file_per_item_like_infer(tmp_path):
    (tmp_path / "in").mkdir()
    x = np.random.default_rng(8).random((3, 3, 8, 12), dtype=np.float32)
    np.save(tmp_path / "in" / "stack.npy", x)
    summary = run_batch(spec(), BatchOptions((str(tmp_path / "in"),), str(tmp_path / "out"), save_as="png"))
    assert summary["items"]["finished"] == 1
    from engine.batch.runner import open_network_for

    net = open_network_for(spec(), notice=None)
    net.set_input("input", x)
    net.run()
    write_output(tmp_path / "ref" / "stack.png", net.output("output"))
    got = outputs_of(tmp_path / "out")
    assert got == outputs_of(tmp_path / "ref") and set(got) == {"stack.png", "stack_1.png", "stack_2.png"}
    assert set(Manifest(tmp_path / "out").records) == set(got)


def test_opencv_runs_single_threaded_during_a_local_run_and_is_restored(tmp_path, data, monkeypatch):
    """The pool runs one decoding or encoding per thread; OpenCV's own threads are set to one while it does and
    given back afterwards (also when the run fails)."""
    import cv2

    from engine.batch import local

    old = cv2.getNumThreads()
    cv2.setNumThreads(3)
    seen = []
    decode = local.reads

    def watched(chunk, plan):
        seen.append(cv2.getNumThreads())
        return decode(chunk, plan)

    monkeypatch.setattr(local, "reads", watched)
    summary = run_batch(spec(), BatchOptions((str(data / "a"),), str(tmp_path / "out"), batch_size=4))
    assert summary["items"]["finished"] > 0 and seen and set(seen) == {1}
    assert cv2.getNumThreads() == 3

    def broken(chunk, plan):
        raise RuntimeError("a bug in a stage")

    monkeypatch.setattr(local, "reads", broken)
    with pytest.raises(RuntimeError, match="a bug in a stage"):
        run_batch(spec(), BatchOptions((str(data / "a"),), str(tmp_path / "out2"), batch_size=4))
    assert cv2.getNumThreads() == 3
    cv2.setNumThreads(old)
