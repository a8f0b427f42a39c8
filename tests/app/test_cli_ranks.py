"""`layerlab check` and `layerlab infer` with tensors of any rank: a rank mismatch names the layer that gives the
tensor and the one that refuses it; a rank-3 input runs from a .npy file of its rank; wrong files are one-line errors."""
from __future__ import annotations

import io

import numpy as np
import pytest

from app.cli import main
from engine.descriptors import ranks_text
from engine.model import Model
from engine.modelfile import load, save
from engine.network import Network
from engine.plugins import default_registry
from engine.weights import RandomWeights


def run(args, capsys):
    out = io.StringIO()
    code = main(args, out=out)
    return code, out.getvalue(), capsys.readouterr().err


def tokens_file(tmp_path, consumer: str = "layer_normalization") -> str:
    m = Model("tokens")
    m.add_layer("input", "tokens", params={"dimensions": "1x49x96"})
    m.add_layer(consumer, "layer_norm1", inputs=["tokens"])
    m.add_layer("output", "out", inputs=["layer_norm1"])
    path = tmp_path / "tokens.lnet"
    save(m, path)
    return str(path)


def test_check_names_the_producer_and_the_consumer_of_a_wrong_rank(tmp_path, capsys):
    code, out, _ = run(["check", tokens_file(tmp_path)], capsys)
    assert code == 0 and "0 error(s)" in out
    code, out, _ = run(["check", tokens_file(tmp_path, "batch_normalization")], capsys)
    assert code == 1
    assert ("error: layer_norm1: input 0 (from layer tokens) is a tensor of rank 3 (1x49x96), but batch_normalization "
            "takes tensors of rank 4 (N x C x H x W)") in out
    assert "1 error(s)" in out


def test_ranks_in_words():
    assert ranks_text((4,)) == "tensors of rank 4 (N x C x H x W)"
    assert ranks_text((3, 4, 5, 6)) == "tensors of rank 3 to 6"
    assert ranks_text((2, 4, 5)) == "tensors of rank 2, 4 to 5"
    assert ranks_text(tuple(range(1, 7))) == "tensors of any rank"


def test_infer_reads_a_npy_file_of_the_inputs_rank(tmp_path, capsys):
    model = tokens_file(tmp_path)
    x = np.random.default_rng(0).standard_normal((1, 49, 96)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code, out, err = run(["infer", model, "-i", f"tokens={tmp_path / 'x.npy'}", "-o", f"out={tmp_path / 'y.npy'}",
                          "-b", "numpy"], capsys)
    assert code == 0, err
    y = np.load(tmp_path / "y.npy")
    reg = default_registry()
    ref = Network(load(model, reg), reg, weights=RandomWeights(0)).infer({"tokens": x})["out"]  # infer's seed 0
    assert y.shape == (1, 49, 96)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("given,message", [
    ((49, 96), "tensor has shape (49, 96), expected a tensor of rank 3"),
    ((1, 1, 49, 96), "tensor has shape (1, 1, 49, 96), expected a tensor of rank 3")])
def test_infer_refuses_a_npy_file_of_another_rank(given, message, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros(given, np.float32))
    code, _, err = run(["infer", tokens_file(tmp_path), "-i", f"tokens={tmp_path / 'x.npy'}", "-b", "numpy"], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_infer_refuses_an_image_for_a_rank_3_input_and_a_png_for_a_rank_3_output(tmp_path, capsys):
    from resources import SAMPLES

    code, _, err = run(["infer", tokens_file(tmp_path), "-i", f"tokens={SAMPLES / 'sample.png'}", "-b", "numpy"], capsys)
    assert code == 2 and "the input takes a tensor of rank 3: give a .npy file" in err
    code, _, err = run(["infer", tokens_file(tmp_path), "-o", f"out={tmp_path / 'y.png'}", "-b", "numpy"], capsys)
    assert code == 2 and "the output is a tensor of rank 3 (1x49x96)" in err and "Traceback" not in err


def test_batch_runs_npy_files_of_the_inputs_rank(tmp_path, capsys):
    model = tokens_file(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    xs = [np.random.default_rng(i).standard_normal((1, 49, 96)).astype(np.float32) for i in range(3)]
    for i, x in enumerate(xs):
        np.save(data / f"x{i}.npy", x)
    code, out, err = run(["batch", model, "--inputs", str(data), "--output-dir", str(tmp_path / "out"), "-b", "numpy",
                          "--batch-size", "2", "--workers", "1"], capsys)
    assert code == 0, out + err
    reg = default_registry()
    net = Network(load(model, reg), reg, weights=RandomWeights(0))
    for i, x in enumerate(xs):
        y = np.load(next((tmp_path / "out").rglob(f"x{i}*.npy")))
        np.testing.assert_allclose(y.reshape(1, 49, 96), net.infer({"tokens": x})["out"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("given", [(49, 96), (1, 1, 49, 96), "image"])
def test_batch_refuses_inputs_of_another_rank_before_running(given, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "a.npy", np.zeros((1, 49, 96), np.float32))
    if given == "image":
        from resources import SAMPLES

        (data / "b.png").write_bytes((SAMPLES / "sample.png").read_bytes())
        message = "an image gives N x C x H x W tensors, but input layer tokens takes tensors of rank 3"
    else:
        np.save(data / "b.npy", np.zeros(given, np.float32))
        message = f"a tensor of rank {len(given)} ({'x'.join(map(str, given))}), but input layer tokens takes tensors " \
                  "of rank 3"
    code, _, err = run(["batch", tokens_file(tmp_path), "--inputs", str(data), "--output-dir", str(tmp_path / "out"), "-b",
                           "numpy"], capsys)
    assert code == 2 and message in err and "Traceback" not in err
