"""The preprocessed model: fusing rules applied, saved as .lnet with a weights folder, loads and runs with
the same results as the original."""
from __future__ import annotations

import numpy as np

from engine.export import export_preprocessed, preprocessed_model
from engine.modelfile import load
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import Dims, TensorFormat
from engine.weights import RandomWeights, WeightsFolder
from tests.bench.networks import dncnn, resnet18

REGISTRY = default_registry()


def test_preprocessed_model_runs_like_the_original(tmp_path):
    model = dncnn(Dims(1, 3, 12, 12), depth=3)
    result = export_preprocessed(model, REGISTRY, tmp_path / "pre.lnet", weights=RandomWeights(3), seed=3)
    pre = load(tmp_path / "pre.lnet", REGISTRY)
    types = [s.type for s in pre.layers.values()]
    # the three batch normalizations folded, and the residual sum with the last convolution (at its input 1)
    assert types.count("conv_bn") == 3 and "batch_normalization" not in types and types.count("conv_sum") == 1
    assert len(pre.layers) == len(model.layers) - 4 and "4 fewer" in result.summary
    assert pre.fusing_rules == [] and pre.settings["fusing"] == "off" and pre.settings["weights"] == "pre_weights"
    x = {"input": np.random.default_rng(0).random((1, 3, 12, 12), dtype=np.float32)}
    want = Network(model, REGISTRY, weights=RandomWeights(3)).infer(x)["output"]
    folder = WeightsFolder(tmp_path / "pre_weights")
    for fusing in ("off", "on"):  # nothing is left to fuse
        got = Network(pre, REGISTRY, weights=folder, fusing=fusing).infer(x)["output"]
        np.testing.assert_array_equal(got, want)
    assert (tmp_path / "pre_weights" / "bn1_bn_variance.npy").is_file()


def test_fusing_off_and_other_formats(tmp_path):
    model = resnet18(Dims(1, 3, 16, 16), classes=4)
    assert preprocessed_model(model, REGISTRY, fusing="off").layers.keys() == model.layers.keys()
    fp16 = preprocessed_model(model, REGISTRY, TensorFormat.parse("fp16 nhwc"))
    assert any(s.type == "conv_bn" for s in fp16.layers.values())
    export_preprocessed(model, REGISTRY, tmp_path / "r.lnet", TensorFormat.parse("fp16 nhwc"), write_weights=False)
    assert not (tmp_path / "r_weights").exists()
    assert "weights" not in load(tmp_path / "r.lnet", REGISTRY).settings
