"""engine.batch: finding a dataset, cutting it into chunks, the manifest, failures, resuming, the local engine."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from engine.batch import BatchJob, BatchOptions, NetworkSpec, SettingsChangedError, run_batch, run_job
from engine.batch.dataset import discover, plan_chunks
from engine.batch.manifest import MANIFEST_NAME, Manifest, sha256_of
from engine.errors import InputError, LayerLabError
from resources import SAMPLES
from tests.engine.batch.dataset import make_dataset

MODEL = SAMPLES / "denoiser.lnet"


def spec(**kw) -> NetworkSpec:
    return NetworkSpec(MODEL.read_text(encoding="utf-8"), str(MODEL), backend="numpy", **kw)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("batch"), images=24, video_frames=7, corrupt=2, npy=3)


def outputs_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith("layerlab-") and ".layerlab-batch" not in p.parts}


def test_discover_folder_glob_list_and_output_folder_left_out(tmp_path, data):
    units = discover([str(data)])
    rels = [u.rel for u in units]
    assert rels == sorted(rels) and len(rels) == 24 + 1 + 2 + 3
    assert {u.kind for u in units} == {"image", "video", "npy"}
    # a pattern keeps names relative to its fixed part; a list resolves relative to its own folder
    assert [u.rel for u in discover([str(data / "a" / "*.png")])] == [r[2:] for r in rels if r.startswith("a/")]
    lst = data / "list.txt"
    lst.write_text("# two inputs and a missing one\na/img_0001.png\n\ntensors/t_0.npy\nnope.png\n", encoding="utf-8")
    try:
        got = {u.rel: u for u in discover([str(lst)])}
    finally:
        lst.unlink()
    assert set(got) == {"a/img_0001.png", "tensors/t_0.npy", "nope.png"}
    assert got["nope.png"].kind == "bad" and "no such file" in got["nope.png"].reason
    # outputs written inside the dataset folder are not inputs of the next run
    out = data / "out_inside"
    (out / "a").mkdir(parents=True)
    cv2.imwrite(str(out / "a" / "x.png"), np.zeros((4, 4), np.uint8))
    try:
        assert not any(u.rel.startswith("out_inside") for u in discover([str(data)], exclude=out))
    finally:
        (out / "a" / "x.png").unlink()
        (out / "a").rmdir()
        out.rmdir()


def test_discover_errors(tmp_path, data):
    with pytest.raises(InputError, match="no such folder"):
        discover([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no input files found"):
        discover([str(tmp_path / "empty")])
    with pytest.raises(InputError, match="every input lies inside the output folder"):
        discover([str(data / "a")], exclude=data)
    (tmp_path / "img_0003.png").write_bytes((data / "b" / "img_0003.png").read_bytes())
    with pytest.raises(InputError, match="same output name 'img_0003.png'"):
        discover([str(tmp_path / "img_0003.png"), str(data / "b" / "*.png")])
    assert len(discover([str(data / "b" / "img_0003.png"), str(data / "b" / "*.png")])) == 8  # the same file twice


def test_chunks_group_stills_by_size_then_name_and_cut_videos_by_frames():
    from engine.batch.dataset import Unit

    stills = [Unit(f"/d/{i}.png", f"{i}.png", "image") for i in range(7)]
    video = Unit("/d/v.avi", "v.avi", "video")
    sizes = {u.rel: ("image", 32, 24, "RGB") if i % 2 else ("image", 20, 16, "RGB") for i, u in enumerate(stills)}
    chunks = plan_chunks([*stills[:3], video, *stills[3:]], batch_size=2, every=3, frame_count={"v.avi": 14},
                         sizes=sizes)
    assert [[u.rel for u in c.units] for c in chunks if not c.is_video] == [
        ["0.png", "2.png"], ["4.png", "6.png"], ["1.png", "3.png"], ["5.png"]]
    odd = plan_chunks(stills, batch_size=3, sizes=sizes)  # a chunk never mixes two sizes
    assert [[u.rel for u in c.units] for c in odd] == [["0.png", "2.png", "4.png"], ["6.png"], ["1.png", "3.png", "5.png"]]
    no_sizes = plan_chunks(stills, batch_size=3)
    assert [[u.rel for u in c.units] for c in no_sizes] == [["0.png", "1.png", "2.png"], ["3.png", "4.png", "5.png"],
                                                          ["6.png"]]
    vids = [c for c in chunks if c.is_video]
    assert [(c.start, c.stop, c.part, c.last) for c in vids] == [(0, 6, 0, False), (6, 12, 1, False), (12, None, 2, True)]
    assert [c.expected_frames for c in vids] == [2, 2, 1]  # frames 0, 3 | 6, 9 | 12
    assert [c.index for c in chunks] == list(range(len(chunks)))
    with pytest.raises(InputError, match="at least 1"):
        plan_chunks(stills, 0)


def test_sizes_come_from_file_headers_so_batches_are_full(tmp_path, data):
    from engine.batch.dataset import size_key

    units = discover([str(data)])
    keys = {u.rel: size_key(u) for u in units}
    assert keys["a/img_0001.png"] == ("image", 20, 16, "RGB") and keys["b/img_0000.png"] == ("image", 32, 24, "RGB")
    assert keys["tensors/t_0.npy"] == ("npy", 1, 3, 24, 32) and keys["broken_0.png"] == ()
    job = BatchJob(spec(), BatchOptions((str(data),), str(tmp_path / "out"), batch_size=4))
    stills = [c for c in job.todo if not c.is_video]
    assert all(len({keys[u.rel] for u in c.units}) == 1 for c in stills)
    assert sorted(len(c.units) for c in stills) == [2, 3, 4, 4, 4, 4, 4, 4]  # broken, NPY, then 12 + 12 images


def test_local_run_writes_every_output_with_manifest_and_summary(tmp_path, data):
    events = []
    summary = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "out"), batch_size=4),
                        progress=lambda p: events.extend(p.events))
    out = tmp_path / "out"
    files = outputs_of(out)
    assert set(files) == {u.rel for u in discover([str(data)]) if not u.rel.startswith("broken")}
    assert summary["items"] == {"total": 30, "finished": 28, "skipped": 0, "failed": 2, "frames_this_run": 24 + 7 + 3}
    assert [f["input"] for f in summary["failures"]] == ["broken_0.png", "broken_1.png"]
    assert all("cannot decode the image" in f["reason"] for f in summary["failures"])
    assert {"decode", "upload", "infer", "download", "encode", "assemble"} <= set(summary["stages_s"])
    assert summary["throughput"]["frames_per_s"] > 0
    assert json.loads((out / "layerlab-summary.json").read_text()) == summary
    lines = [json.loads(x) for x in (out / MANIFEST_NAME).read_text().splitlines()]
    assert sorted(r["output"] for r in lines) == sorted(files)
    for r in lines:
        assert r["size"] == len(files[r["output"]]) and r["sha256"] == sha256_of(out / r["output"])
    assert {e.input for e in events if e.status == "done"} == set(files)
    assert {e.input for e in events if e.status == "failed"} == {"broken_0.png", "broken_1.png"}
    # the video keeps its frames and size; NPY stays NPY; images stay images of the input's size
    cap = cv2.VideoCapture(str(out / "clips" / "clip.avi"))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 7 and int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)) == 32
    cap.release()
    assert np.load(out / "tensors" / "t_0.npy").shape == (1, 3, 24, 32)
    assert cv2.imread(str(out / "a" / "img_0001.png")).shape == (16, 20, 3)
    assert not list((out / ".layerlab-batch" / "parts").glob("*/*"))  # video parts are removed once assembled


def test_second_run_skips_finished_outputs_and_redoes_damaged_ones(tmp_path, data):
    opts = BatchOptions((str(data),), str(tmp_path / "out"), batch_size=4)
    run_batch(spec(), opts)
    before = outputs_of(tmp_path / "out")
    victim = tmp_path / "out" / "a" / "img_0001.png"
    victim.write_bytes(b"truncated")  # a size that differs from the manifest's: redone
    (tmp_path / "out" / "b" / "img_0003.png").unlink()  # missing: redone
    job = BatchJob(spec(), opts)
    assert job.skipped == 28 - 2
    assert sorted(u.rel for c in job.todo for u in c.units) == ["a/img_0001.png", "b/img_0003.png", "broken_0.png",
                                                                 "broken_1.png"]
    summary = run_job(job)
    assert summary["items"]["skipped"] == 26 and summary["items"]["finished"] == 28
    assert outputs_of(tmp_path / "out") == before
    assert len(Manifest(tmp_path / "out").records) == 28


def test_failures_are_reported_and_the_rest_finish(tmp_path):
    data = make_dataset(tmp_path, images=6, video_frames=0, corrupt=1, npy=0)
    cv2.imwrite(str(data / "gray.png"), np.full((24, 32), 100, np.uint8))  # one channel: the network wants 3
    np.save(data / "flat.npy", np.zeros((5, 5), np.float32))  # not an image tensor
    (data / "clips" / "bad.avi").write_bytes(b"not a video")
    summary = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "out"), batch_size=3))
    reasons = {f["input"]: f["reason"] for f in summary["failures"]}
    assert set(reasons) == {"broken_0.png", "gray.png", "flat.npy", "clips/bad.avi"}
    assert "layer conv1" in reasons["gray.png"] and "(16, 3, 3, 3)" in reasons["gray.png"]
    assert "expected 4-D" in reasons["flat.npy"]
    assert "cannot open the video" in reasons["clips/bad.avi"]
    assert summary["items"]["finished"] == 6 and len(outputs_of(tmp_path / "out")) == 6


def test_changed_settings_refuse_to_resume_unless_overwrite(tmp_path, data):
    out = str(tmp_path / "out")
    run_batch(spec(), BatchOptions((str(data / "a"),), out, batch_size=8))
    with pytest.raises(SettingsChangedError, match="changed: seed"):
        BatchJob(spec(seed=3), BatchOptions((str(data / "a"),), out))
    summary = run_batch(spec(seed=3), BatchOptions((str(data / "a"),), out, overwrite=True))
    assert summary["items"]["skipped"] == 0 and summary["items"]["finished"] == 16


def test_png_compression_changes_the_bytes_not_the_pixels_and_is_part_of_the_settings(tmp_path, data):
    """--png-compression 0 writes the pixels of the default level in larger files; a run made with the default
    records no level (runs made before the option existed still resume) and one made with another level refuses to
    resume with a different one."""
    default, stored = tmp_path / "default", tmp_path / "stored"
    run_batch(spec(), BatchOptions((str(data / "a"),), str(default), batch_size=8, save_as="png"))
    run_batch(spec(), BatchOptions((str(data / "a"),), str(stored), batch_size=8, save_as="png", png_compression=0))
    a, b = outputs_of(default), outputs_of(stored)
    assert a.keys() == b.keys() and len(a) == 16
    for name in a:
        pa, pb = (cv2.imdecode(np.frombuffer(x[name], np.uint8), cv2.IMREAD_UNCHANGED) for x in (a, b))
        np.testing.assert_array_equal(pa, pb)
    assert a != b and sum(map(len, b.values())) > sum(map(len, a.values()))
    settings = [json.loads((f / ".layerlab-batch" / "run.json").read_text()) for f in (default, stored)]
    assert "png_compression" not in json.dumps(settings[0]) and '"png_compression": 0' in json.dumps(settings[1])
    with pytest.raises(SettingsChangedError, match="png_compression"):
        BatchJob(spec(), BatchOptions((str(data / "a"),), str(stored), save_as="png", png_compression=1))


def test_bad_options_and_a_network_with_two_inputs(tmp_path, data):
    for kw, msg in (({"batch_size": 0}, "batch-size"), ({"every": 0}, "every"), ({"save_as": "gif"}, "save-as"),
                    ({"workers": 0}, "workers"), ({"png_compression": 10}, "png-compression")):
        with pytest.raises(InputError, match=msg):
            BatchJob(spec(), BatchOptions((str(data),), str(tmp_path / "o"), **kw))
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        BatchJob(spec(), BatchOptions((str(data),), str(tmp_path / "file")))
    text = MODEL.read_text(encoding="utf-8").replace(
        '<layer name="output" type="output"',
        '<layer name="input2" type="input"><param name="dimensions" value="1x3x8x8" /></layer>\n'
        '    <layer name="output" type="output"')
    with pytest.raises(InputError, match="2 input layers"):
        BatchJob(NetworkSpec(text, backend="numpy"), BatchOptions((str(data),), str(tmp_path / "o")))


def test_every_k_keeps_every_kth_frame(tmp_path, data):
    summary = run_batch(spec(), BatchOptions((str(data / "clips"),), str(tmp_path / "out"), batch_size=2, every=3))
    assert summary["items"]["frames_this_run"] == 3  # frames 0, 3, 6 of 7
    cap = cv2.VideoCapture(str(tmp_path / "out" / "clip.avi"))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 3
    assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(10.0 / 3, rel=1e-3)
    cap.release()


def test_cancel_stops_feeding_and_keeps_the_books_consistent(tmp_path, data):
    cancel = threading.Event()
    seen = []

    def progress(p):
        seen.append(p.done)
        if p.done >= 4:
            cancel.set()

    summary = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "out"), batch_size=2), progress=progress,
                        cancel=cancel)
    assert summary["cancelled"] and summary["items"]["finished"] < 28
    m = Manifest(tmp_path / "out")
    assert set(m.records) == set(outputs_of(tmp_path / "out"))  # every file written is recorded, and only those
    rest = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "out"), batch_size=2))
    assert rest["items"]["finished"] == 28 and not rest["cancelled"]
    assert rest["items"]["skipped"] == summary["items"]["finished"]


def test_manifest_ignores_a_torn_last_line_and_appends_after_it(tmp_path):
    (tmp_path / "x.npy").write_bytes(b"12345")
    (tmp_path / MANIFEST_NAME).write_text('{"output": "x.npy", "size": 5}\n{"output": "y.n', encoding="utf-8")
    m = Manifest(tmp_path)
    assert set(m.records) == {"x.npy"} and m.finished("x.npy")
    m.append([{"output": "z.npy", "size": 1}])
    assert set(Manifest(tmp_path).records) == {"x.npy", "z.npy"}


def test_worker_processes_write_the_same_outputs(tmp_path, data):
    one = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "one"), batch_size=3))
    two = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "two"), batch_size=3, workers=2))
    assert two["items"] == one["items"]
    assert outputs_of(tmp_path / "two") == outputs_of(tmp_path / "one")


def test_a_network_that_cannot_open_is_an_error_before_anything_runs(tmp_path, data):
    with pytest.raises(LayerLabError, match="weights folder .* does not exist"):
        run_batch(spec(weights=str(tmp_path / "no_weights")), BatchOptions((str(data / "a"),), str(tmp_path / "o")))
    assert not list((tmp_path / "o").glob("a/*"))


def test_a_video_resumes_from_its_finished_parts_of_the_same_batch_size_only(tmp_path, data):
    from engine.batch.runner import open_network_for
    from engine.batch.stages import Work, decode, infer, write

    clips = (str(data / "clips"),)
    fresh = run_batch(spec(), BatchOptions(clips, str(tmp_path / "fresh"), batch_size=2))
    assert fresh["items"]["finished"] == 1
    job = BatchJob(spec(), BatchOptions(clips, str(tmp_path / "out"), batch_size=2))
    assert len(job.todo) == 4  # frames 0-1, 2-3, 4-5, 6
    net = open_network_for(job.spec, notice=None)
    for chunk in job.todo[:2]:  # an interrupted run: two parts written, the video not assembled
        write(infer(decode(Work(chunk), job.plan), net, job.plan), job.plan)
    assert len(list((tmp_path / "out" / ".layerlab-batch" / "parts").glob("*/*.npy"))) == 2
    assert len(BatchJob(spec(), BatchOptions(clips, str(tmp_path / "out"), batch_size=3)).todo) == 3  # no part fits
    resumed = BatchJob(spec(), BatchOptions(clips, str(tmp_path / "out"), batch_size=2))
    assert [c.start for c in resumed.todo] == [4, 6]
    summary = run_job(resumed)
    assert summary["items"]["finished"] == 1 and summary["items"]["frames_this_run"] == 3
    assert outputs_of(tmp_path / "out") == outputs_of(tmp_path / "fresh")
    assert not list((tmp_path / "out" / ".layerlab-batch" / "parts").glob("*/*"))


def test_an_npy_file_of_several_items_runs_as_it_is(tmp_path):
    from engine.batch.runner import open_network_for

    (tmp_path / "in").mkdir()
    x = np.random.default_rng(5).random((3, 3, 8, 12), dtype=np.float32)
    np.save(tmp_path / "in" / "stack.npy", x)
    np.save(tmp_path / "in" / "one.npy", x[:1])
    summary = run_batch(spec(), BatchOptions((str(tmp_path / "in"),), str(tmp_path / "out"), batch_size=4))
    assert summary["items"]["finished"] == 2
    net = open_network_for(spec(), notice=None)
    net.set_input("input", x)
    net.run()
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "stack.npy"), net.output("output"))
    assert np.load(tmp_path / "out" / "one.npy").shape == (1, 3, 8, 12)


def test_two_lanes_in_one_process_write_the_same_outputs(tmp_path, data, monkeypatch):
    """The pipeline with two networks in this process (as on one GPU with CuPy), here on NumPy."""
    from engine.batch import local

    one = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "one"), batch_size=2))
    opened = []

    def two_lanes(job):
        opened.extend(local._ThreadLane(job.spec, graph_capture=False) for _ in range(2))
        return opened[-2:]

    monkeypatch.setattr(local, "_lanes", two_lanes)
    two = run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "two"), batch_size=2))
    assert len(opened) == 2 and two["items"] == one["items"]
    assert outputs_of(tmp_path / "two") == outputs_of(tmp_path / "one")


@pytest.mark.timeout(120)
def test_a_bug_in_a_stage_or_the_progress_callback_stops_the_run_with_its_error(tmp_path, data, monkeypatch):
    from engine.batch import stages

    def broken_progress(p):
        if p.done:
            raise RuntimeError("callback bug")

    with pytest.raises(RuntimeError, match="callback bug"):
        run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "a"), batch_size=2), progress=broken_progress)
    assert set(Manifest(tmp_path / "a").records) == set(outputs_of(tmp_path / "a"))  # the books still match the files

    write_still = stages.write_still

    def broken_write(g, i, unit, plan):
        if unit.rel.endswith("img_0004.png"):
            raise RuntimeError("encoder bug")
        return write_still(g, i, unit, plan)

    monkeypatch.setattr(stages, "write_still", broken_write)
    with pytest.raises(RuntimeError, match="encoder bug"):
        run_batch(spec(), BatchOptions((str(data),), str(tmp_path / "b"), batch_size=2))
    written = outputs_of(tmp_path / "b")
    assert "a/img_0004.png" not in written
    assert set(Manifest(tmp_path / "b").records) == set(written)  # what the other tasks wrote is recorded
