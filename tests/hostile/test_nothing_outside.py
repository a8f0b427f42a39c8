"""Class 1: nothing outside the target, nothing lost. Reports, exports and outputs are written only where the
user asked; an export never replaces its source; outputs are written atomically; a failed export leaves
nothing behind."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from tests.hostile.conftest import SMALL, conv, inp, out


@pytest.mark.parametrize("name", ["../escaped_by_name", "a/b", "/tmp/abs", "..", "na\u0000me", "", "n\u00e4me"])
def test_network_name_cannot_steer_a_path(case, name):
    safe = name.replace("\u0000", "&#0;") if "\u0000" in name else name
    case.model("m.lnet", SMALL, network=f'name="{safe}" version="1"')
    culprit = "m.lnet" if "\u0000" in name else ["m.lnet:2", "network name"]
    case.expect(2, culprit, "profile", "m.lnet", "-n", "1", "--warmup", "0")
    assert sorted(p.name for p in case.dir.iterdir()) == ["m.lnet"]


def test_long_network_name_gives_a_short_report_name(case):
    case.model("m.lnet", SMALL, network=f'name="{"x" * 5000}" version="1"')
    case.expect(0, None, "profile", "m.lnet", "-n", "1", "--warmup", "0")
    names = sorted(p.name for p in case.dir.iterdir() if p.suffix == ".json")
    assert len(names) == 1 and len(names[0]) <= 120


def test_profile_report_is_named_after_the_network_in_the_working_folder(case):
    case.model("m.lnet", SMALL, network='name="net_1" version="1"')
    case.expect(0, None, "profile", "m.lnet", "-n", "1", "--warmup", "0")
    assert {"net_1_report.json", "net_1_report.html"} <= {p.name for p in case.dir.iterdir()}


@pytest.mark.parametrize("spelling", ["m.lnet", "./m.lnet", "sub/../m.lnet", "link.lnet"])
def test_export_preprocessed_never_overwrites_its_source(case, spelling):
    src = case.model("m.lnet", SMALL)
    (case.dir / "sub").mkdir()
    (case.dir / "link.lnet").symlink_to("m.lnet")
    before = src.read_bytes()
    case.expect(2, [str(Path(spelling)), "source model"], "export", "preprocessed", "m.lnet", "-o", spelling)
    assert src.read_bytes() == before
    assert not (case.dir / "m_weights").exists() and not (case.dir / "link_weights").exists()


@pytest.mark.parametrize("kind,output", [("onnx", "m.lnet"), ("torch", "m.lnet"), ("project", "m.lnet")])
def test_other_exports_refuse_the_source_as_output(case, kind, output):
    src = case.model("m.lnet", SMALL)
    before = src.read_bytes()
    extra = ["--builder", "build"] if kind == "project" else []
    case.expect(2, ["m.lnet"], "export", kind, "m.lnet", "-o", output, *extra)
    assert src.read_bytes() == before


def test_failed_export_leaves_nothing_half_written(case):
    case.model("m.lnet", SMALL)
    (case.dir / "out.lnet").mkdir()  # the output path is a folder: refused before anything is written
    case.expect(2, ["out.lnet", "folder"], "export", "preprocessed", "m.lnet", "-o", "out.lnet")
    assert sorted(p.name for p in case.dir.iterdir()) == ["m.lnet", "out.lnet"]
    assert not any((case.dir / "out.lnet").iterdir())


def test_failed_export_with_bad_weights_leaves_nothing(case):
    case.model("m.lnet", SMALL)
    w = case.dir / "w"
    w.mkdir()
    np.save(w / "c1_weights.npy", np.zeros((2, 2), np.float32))  # wrong shape
    case.expect(2, ["c1", "weights"], "export", "preprocessed", "m.lnet", "-o", "out.lnet", "--weights", "w")
    assert sorted(p.name for p in case.dir.iterdir()) == ["m.lnet", "w"]


def test_npy_and_image_outputs_replace_the_target_atomically(case):
    case.model("m.lnet", SMALL)
    old_npy = case.write("y.npy", b"old")
    old_png = case.write("y.png", b"old")
    inode_npy, inode_png = old_npy.stat().st_ino, old_png.stat().st_ino
    case.expect(0, None, "infer", "m.lnet", "-n", "1", "-o", "output=y.npy")
    case.expect(0, None, "infer", "m.lnet", "-n", "1", "-o", "output=y.png")
    assert np.load(case.dir / "y.npy").shape == (1, 4, 16, 16)
    assert (case.dir / "y.npy").stat().st_ino != inode_npy  # renamed over, not rewritten in place
    assert (case.dir / "y.png").stat().st_ino != inode_png
    assert not [p for p in case.dir.iterdir() if ".tmp" in p.name]


def test_output_into_a_new_folder_under_the_case(case):
    case.model("m.lnet", SMALL)
    case.expect(0, None, "infer", "m.lnet", "-n", "1", "--output-dir", "a/b/c")
    assert (case.dir / "a" / "b" / "c" / "output.npy").is_file()


def test_output_through_a_symlink_updates_its_target(case):
    case.model("m.lnet", SMALL)
    target = case.write("real.npy", b"old")
    (case.dir / "link.npy").symlink_to("real.npy")
    case.expect(0, None, "infer", "m.lnet", "-n", "1", "-o", "output=link.npy")
    assert (case.dir / "link.npy").is_symlink()
    assert np.load(target).shape == (1, 4, 16, 16)


def test_read_only_output_is_refused(case):
    case.model("m.lnet", SMALL)
    ro = case.write("ro.npy", b"keep")
    os.chmod(ro, 0o444)
    case.expect(2, ["ro.npy", "read-only"], "infer", "m.lnet", "-n", "1", "-o", "output=ro.npy")
    assert ro.read_bytes() == b"keep"


def test_torch_export_in_a_case_folder_writes_only_there(case):
    case.model("m.lnet", "\n".join([inp(), conv("c1", "input"), out("c1")]), network='name="net" version="1"')
    case.expect(0, None, "export", "torch", "m.lnet", "-o", "t")
    assert sorted(p.name for p in (case.dir / "t").iterdir()) == ["net.py", "net_weights.npz"]


def test_video_output_is_written_aside_and_moved_in_when_complete(case):
    import cv2

    case.model("m.lnet", "\n".join([inp(dims="1x3x16x16"), out("input")]))
    writer = cv2.VideoWriter(str(case.dir / "in.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 5, (16, 16))
    for i in range(3):
        writer.write(np.full((16, 16, 3), 60 * i, np.uint8))
    writer.release()
    old = case.write("out.avi", b"old")
    inode = old.stat().st_ino
    res = case.expect(0, None, "infer", "m.lnet", "-i", "in.avi", "-o", "output=out.avi")
    assert "3 frames" in res.out
    assert (case.dir / "out.avi").stat().st_ino != inode and (case.dir / "out.avi").stat().st_size > 100
    assert not [p for p in case.dir.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize("target,culprit", [("folder", "is a folder"), ("afile/d.json", "is a file")])
def test_drift_json_that_cannot_be_written_is_refused_before_the_runs(case, target, culprit):
    case.model("m.lnet", SMALL)
    (case.dir / "folder").mkdir()
    (case.dir / "afile").write_text("x")
    case.expect(2, [target, culprit], "drift", "m.lnet", "--json", target)
    assert (case.dir / "afile").read_text() == "x"
