"""`layerlab batch` end to end: the same outputs as `layerlab infer` item by item, exit statuses, and an
interrupted run (killed at random points) resumed without losing or duplicating anything."""
from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine.batch.manifest import MANIFEST_NAME, sha256_of
from engine.io import read_image
from resources import SAMPLES
from tests.cli_helpers import run_cli as run
from tests.engine.batch.dataset import make_dataset
from tests.engine.batch.test_batch import outputs_of

MODEL = str(SAMPLES / "denoiser.lnet")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("cli_batch"), images=10, video_frames=5, corrupt=1, npy=2)


def infer(capsys, src: Path, dst: Path) -> None:
    code, _, err = run(["infer", MODEL, "-i", str(src), "-o", f"output={dst}", "-n", "1", "--warmup", "0",
                        "-b", "numpy"], capsys)
    assert code == 0, err


def test_outputs_match_infer_item_by_item(tmp_path, data, capsys):
    code, out, err = run(["batch", MODEL, "--inputs", str(data), "--output-dir", str(tmp_path / "b1"),
                          "--batch-size", "1", "-b", "numpy"], capsys)
    assert code == 1 and "1 input(s) failed" in err and "failed: broken_0.png" in out
    code, _, err = run(["batch", MODEL, "--inputs", str(data), "--output-dir", str(tmp_path / "npy4"),
                        "--batch-size", "4", "--save-as", "npy", "-b", "numpy"], capsys)
    assert code == 1
    for src in sorted(data.rglob("*")):
        rel = src.relative_to(data)
        if not src.is_file() or src.name.startswith("broken"):
            continue
        ref = tmp_path / "infer" / rel
        ref.parent.mkdir(parents=True, exist_ok=True)
        infer(capsys, src, ref)
        # batches of one: the very same bytes as infer (images, NPY and the video)
        assert (tmp_path / "b1" / rel).read_bytes() == ref.read_bytes(), rel
        if src.suffix == ".png":  # batches of four, saved as NPY: the same values as infer's NPY output
            ref_npy = ref.with_suffix(".ref.npy")
            infer(capsys, src, ref_npy)
            got = np.load(tmp_path / "npy4" / rel.with_suffix(".npy"))
            np.testing.assert_allclose(got, np.load(ref_npy), rtol=1e-5, atol=1e-6)
            assert got.shape == read_image(src).shape


def test_exit_status_2_for_bad_input(tmp_path, data, capsys):
    base = ["batch", MODEL, "--inputs", str(data / "a"), "--output-dir", str(tmp_path / "o"), "-b", "numpy"]
    onnx_file = tmp_path / "m.onnx"
    onnx_file.write_bytes(b"not read: batch runs take .lnet models")
    cases = [
        (["batch", str(tmp_path / "nope.lnet"), "--inputs", str(data), "--output-dir", str(tmp_path / "o")],
         "no such model file"),
        (["batch", MODEL, "--inputs", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "o")], "no such folder"),
        ([*base, "--batch-size", "0"], "--batch-size must be at least 1"),
        ([*base, "--every", "-2"], "--every must be at least 1"),
        ([*base, "--ray-address", "auto"], "--ray-address needs --engine ray"),
        ([*base, "--weights", str(tmp_path / "nowhere")], "no such weights folder"),
        (["batch", str(onnx_file), "--inputs", str(data), "--output-dir", str(tmp_path / "o")], "import it first"),
        (["batch", MODEL, "--output-dir", str(tmp_path / "o")], "--inputs"),
        ([*base, "--png-compression", "10"], "--png-compression: must be from 0 to 9"),
        ([*base, "--png-compression", "fast"], "--png-compression: expected a whole number"),
    ]
    for args, msg in cases:
        code, _, err = run(args, capsys)
        assert code == 2 and msg in err and "Traceback" not in err, (args, err)
    assert run(base, capsys)[0] == 0
    code, _, err = run([*base, "--seed", "5"], capsys)
    assert code == 2 and "changed: seed" in err and "--overwrite" in err
    code, out, _ = run([*base, "--seed", "5", "--overwrite"], capsys)
    assert code == 0 and "6 of 6 inputs finished (0 from before)" in out


def test_png_compression_gives_infer_and_batch_the_same_bytes(tmp_path, data, capsys):
    """--png-compression 0 in both commands: batches of one write what infer writes, byte for byte (stored PNG),
    with the pixels of the default level."""
    src = sorted((data / "a").glob("*.png"))[0]
    code, _, err = run(["infer", MODEL, "-i", str(src), "-o", f"output={tmp_path / 'i0.png'}", "-n", "1",
                        "--warmup", "0", "-b", "numpy", "--png-compression", "0"], capsys)
    assert code == 0, err
    infer(capsys, src, tmp_path / "i1.png")
    code, _, err = run(["batch", MODEL, "--inputs", str(src), "--output-dir", str(tmp_path / "b"), "--batch-size", "1",
                        "-b", "numpy", "--png-compression", "0"], capsys)
    assert code == 0, err
    stored = (tmp_path / "b" / src.name).read_bytes()
    assert stored == (tmp_path / "i0.png").read_bytes() != (tmp_path / "i1.png").read_bytes()
    np.testing.assert_array_equal(read_image(tmp_path / "i0.png"), read_image(tmp_path / "i1.png"))
    code, _, err = run(["infer", MODEL, "-i", str(src), "-o", f"output={tmp_path / 'x.png'}", "-n", "1",
                        "-b", "numpy", "--png-compression", "-1"], capsys)
    assert code == 2 and "--png-compression" in err and "Traceback" not in err


def _manifest(folder: Path) -> list[dict]:
    recs = []
    for line in (folder / MANIFEST_NAME).read_text(encoding="utf-8").splitlines():
        try:
            recs.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line torn by the kill
    return recs


def test_killed_at_random_points_then_resumed_loses_and_duplicates_nothing(tmp_path, capsys):
    """The uninterrupted and the final resuming run in this process; the interrupted ones as real processes."""
    data = make_dataset(tmp_path, images=40, video_frames=12, corrupt=1, npy=3)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def args(out: Path) -> list[str]:
        return ["batch", MODEL, "--inputs", str(data), "--output-dir", str(out), "--batch-size", "1", "-b", "numpy"]

    def command(out: Path) -> list[str]:
        return [sys.executable, "-m", "app.cli", *args(out)]

    code, _, err = run(args(tmp_path / "ref"), capsys)
    assert code == 1 and "1 input(s) failed" in err
    assert "batch: " in err  # plain progress lines when not on a terminal
    expected = outputs_of(tmp_path / "ref")
    assert len(expected) == 40 + 1 + 3

    out = tmp_path / "out"
    rng = random.Random(22)
    kills = 0
    for sig in (signal.SIGKILL, signal.SIGKILL, signal.SIGINT, signal.SIGKILL):
        done = len(_manifest(out)) if (out / MANIFEST_NAME).exists() else 0
        target = done + rng.randint(1, 8)
        proc = subprocess.Popen(command(out), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if (out / MANIFEST_NAME).exists() and len(_manifest(out)) >= target:
                time.sleep(rng.random() * 0.05)
                proc.send_signal(sig)
                kills += 1
                break
            time.sleep(0.005)
        _, err = proc.communicate(timeout=120)
        if sig == signal.SIGINT and proc.returncode == 130:
            assert "interrupted" in err.decode()
    assert kills >= 3
    code, _, err = run(args(out), capsys)
    assert code == 1, err[-2000:]
    summary = json.loads((out / "layerlab-summary.json").read_text())
    assert summary["items"]["finished"] == 44 and summary["items"]["skipped"] > 0
    got = outputs_of(out)
    assert got == expected  # nothing lost, nothing extra, every byte as in the uninterrupted run
    recs = _manifest(out)
    names = [r["output"] for r in recs]
    assert sorted(set(names)) == sorted(expected)
    assert len(names) == len(set(names))  # no output recorded twice
    for r in recs:
        assert r["size"] == len(expected[r["output"]]) and r["sha256"] == sha256_of(out / r["output"])
    assert not [p for p in out.rglob("*") if ".partial-" in p.name]  # no half-written output left


def test_progress_is_a_bar_on_a_terminal_and_plain_lines_otherwise(tmp_path, data, capsys):
    from app.cli.batch import _Bar
    from engine.batch import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term, plain = Terminal(), io.StringIO()
    for stream in (term, plain):
        bar = _Bar(stream)
        for done in (0, 5, 10):
            bar(Progress(done, 10, 1, 0, 2.0))
        bar.close()
    assert "input/s" in term.getvalue() and "failed=1" in term.getvalue() and "10/10" in term.getvalue()
    assert plain.getvalue().splitlines() == ["batch: 0/10 inputs, 1 failed, 0.00 inputs/s",
                                             "batch: 10/10 inputs, 1 failed, 5.00 inputs/s"]
    code, _, _ = run(["batch", MODEL, "--inputs", str(data / "tensors"), "--output-dir", str(tmp_path / "o"),
                      "-b", "numpy", "--summary", str(tmp_path / "s.json")], capsys)
    assert code == 0
    assert json.loads((tmp_path / "s.json").read_text()) == json.loads((tmp_path / "o" / "layerlab-summary.json").read_text())


def test_a_model_that_names_its_weights_runs_with_them_as_infer_does(tmp_path, capsys):
    """The trained sample names its weights (settings): `batch` without --weights uses them, as `infer` does, so
    the outputs are infer's, byte for byte; a changed .safetensors file is a changed setting for a resumed run."""
    import shutil

    from safetensors.numpy import load_file, save_file

    trained = SAMPLES / "denoiser_trained.lnet"
    photo = SAMPLES / "photo_noisy.png"
    (tmp_path / "in").mkdir()
    shutil.copy(photo, tmp_path / "in" / "p.png")
    code, _, err = run(["infer", str(trained), "-i", str(photo), "-o", f"output={tmp_path / 'ref.png'}", "-n", "1",
                        "--warmup", "0", "-b", "numpy"], capsys)
    assert code == 0, err
    code, _, err = run(["batch", str(trained), "--inputs", str(tmp_path / "in"), "--output-dir", str(tmp_path / "b"),
                        "--batch-size", "1", "-b", "numpy"], capsys)
    assert code == 0, err
    assert (tmp_path / "b" / "p.png").read_bytes() == (tmp_path / "ref.png").read_bytes()
    # the same network from an imported-style model: weights in a .safetensors file it names
    model = tmp_path / "m.lnet"
    model.write_text(trained.read_text(encoding="utf-8").replace('value="denoiser_weights"', 'value="m.safetensors"'),
                     encoding="utf-8")
    text = trained.read_text(encoding="utf-8")
    tensors = {}
    for f in sorted((SAMPLES / "denoiser_weights").glob("*.npy")):  # <layer>_<weight>.npy -> "<layer>.<weight>"
        cut = next(i for i, ch in enumerate(f.stem) if ch == "_" and f'name="{f.stem[:i]}"' in text)
        tensors[f"{f.stem[:cut]}.{f.stem[cut + 1:]}"] = np.load(f)
    save_file(tensors, str(tmp_path / "m.safetensors"))
    base = ["batch", str(model), "--inputs", str(tmp_path / "in"), "--output-dir", str(tmp_path / "s"), "--batch-size",
            "1", "-b", "numpy"]
    code, _, err = run(base, capsys)
    assert code == 0, err
    assert (tmp_path / "s" / "p.png").read_bytes() == (tmp_path / "ref.png").read_bytes()
    changed = {k: v * 0.5 for k, v in load_file(str(tmp_path / "m.safetensors")).items()}
    save_file(changed, str(tmp_path / "m.safetensors"))
    code, _, err = run(base, capsys)
    assert code == 2 and "changed: weights" in err
