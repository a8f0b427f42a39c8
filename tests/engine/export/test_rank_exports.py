"""Every exporter with tensors of any rank: a network drawn with rank-3 tokens and a rank-5 output, a ConvNeXt block
and a ShuffleNet v2 unit exported by PyTorch (opset 17) and imported, each exported again to ONNX, to a PyTorch
module and to a standalone project, and each export run (ONNX Runtime, the module, the project's sample) against
LayerLab's own result or the original network's."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import onnx
import pytest
import torch
from torch import nn

from engine.export import OnnxOptions, ProjectOptions, TorchOptions, export_onnx, export_project, export_torch
from engine.importers.onnx import import_onnx
from engine.model import Model
from engine.network import Network
from engine.weights import RandomWeights
from tests.engine.export.test_project_export import REGISTRY, run_sample
from tests.engine.importers.architectures import ConvNeXtBlock
from tests.engine.importers.helpers import reference, rel_l2


def tokens_model() -> Model:
    """Tokens 1x49x96 through layer norm, a linear layer with GELU, softmax, a transpose and a reshape to N x C x H x W,
    a convolution, a reshape to five dimensions (ShuffleNet's groups), a transpose reading and writing other sizes and a
mean over one axis."""
    m = Model("tokens")
    m.add_layer("input", "tokens", params={"dimensions": "1x49x96"})
    m.add_layer("layer_normalization", "norm", inputs=["tokens"])
    m.add_layer("matmul", "fc", params={"num_outputs": "32", "bias": "true"}, inputs=["norm"], activation="gelu")
    m.add_layer("softmax", "attn", params={"axis": "-1"}, inputs=["fc"])
    m.add_layer("transpose", "channels_first", params={"perm": "0,2,1"}, inputs=["attn"])
    m.add_layer("reshape", "image", params={"shape": "0,32,7,7"}, inputs=["channels_first"])
    m.add_layer("convolution", "conv", params={"num_output_channels": "8"}, inputs=["image"])
    m.add_layer("reshape", "groups", params={"shape": "0,2,4,7,7"}, inputs=["conv"])
    m.add_layer("transpose", "shuffle", params={"perm": "0,2,1,3", "input_shape": "1,2,4,49", "shape": "1,4,2,7,7"},
                inputs=["groups"])
    m.add_layer("reduce", "mean", params={"operation": "mean", "axes": "2"}, inputs=["shuffle"])
    m.add_layer("output", "out", inputs=["mean"])
    return m


X = np.random.default_rng(3).standard_normal((1, 49, 96)).astype(np.float32)


@pytest.fixture(scope="module")
def expected() -> np.ndarray:
    got = Network(tokens_model(), REGISTRY, weights=RandomWeights(0)).infer({"tokens": X})["out"]
    assert got.shape == (1, 4, 1, 7, 7)
    return got


def load_module(path, name: str) -> nn.Module:
    """The exported PyTorch module with its weights."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cls = next(v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, nn.Module) and hasattr(v, "from_weights"))
    return cls.from_weights()


@pytest.mark.parametrize("options,tol", [(OnnxOptions(), 1e-5), (OnnxOptions(explicit_sizes=True), 1e-5),
                                         (OnnxOptions(fp16=True), 3e-3)], ids=["symbolic", "explicit", "fp16"])
def test_onnx_export_of_any_rank(options, tol, expected, tmp_path):
    path = tmp_path / "tokens.onnx"
    export_onnx(tokens_model(), REGISTRY, path, options, RandomWeights(0))
    graph = onnx.load(str(path)).graph
    assert [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim] == [1, 49, 96]  # its sizes as they are
    assert len(graph.output[0].type.tensor_type.shape.dim) == 5
    got = reference(path, {"tokens": X.astype(np.float16) if options.fp16 else X})[0]
    assert got.shape == expected.shape and rel_l2(got.astype(np.float32), expected) < tol


def test_torch_export_of_any_rank(expected, tmp_path):
    done = export_torch(tokens_model(), REGISTRY, tmp_path / "torch", TorchOptions(), RandomWeights(0))
    module = load_module(done.path, f"tokens_{abs(hash(str(tmp_path)))}")
    with torch.no_grad():
        got = module(torch.from_numpy(X)).numpy()
    assert got.shape == expected.shape and rel_l2(got, expected) < 1e-5


def test_project_export_of_any_rank_runs_a_rank_3_input(expected, tmp_path):
    export_project(tokens_model(), REGISTRY, tmp_path / "p", ProjectOptions(), RandomWeights(0))
    np.save(tmp_path / "x.npy", X)
    for layout in ("nchw", "nhwc"):  # layouts order rank 4 only: a rank-3 file is read as it is either way
        res = run_sample(tmp_path / "p", "tokens", ["-i", "tokens=x.npy", "--input-layout", layout, "-o", "out=y.npy",
                                                    "-b", "numpy"], tmp_path)
        assert res.returncode == 0, res.stderr + res.stdout
        assert "LEAKED: []" in res.stdout and "output out: 1x4x1x7x7" in res.stdout
        np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-5, atol=1e-6)
    np.save(tmp_path / "x4.npy", X[None])
    res = run_sample(tmp_path / "p", "tokens", ["-i", "tokens=x4.npy", "-o", "out=y.npy", "-b", "numpy"], tmp_path)
    assert res.returncode == 2 and "tensor has shape (1, 1, 49, 96), expected a tensor of rank 3" in res.stderr
    res = run_sample(tmp_path / "p", "tokens", ["-i", "tokens=x.npy", "-o", "out=y.png", "-b", "numpy"], tmp_path)
    assert res.returncode == 2 and "the output is a tensor of rank 5 (1x4x1x7x7)" in res.stderr


class ShuffleUnit(nn.Module):
    """A ShuffleNet v2 unit of stride 1: half the channels through a 1x1 / depthwise 3x3 / 1x1 branch, concatenated
    with the other half, then the channel shuffle (a reshape to five dimensions, a transpose, a reshape back)."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        h = c // 2
        self.branch = nn.Sequential(nn.Conv2d(h, h, 1), nn.BatchNorm2d(h), nn.ReLU(),
                                    nn.Conv2d(h, h, 3, padding=1, groups=h), nn.BatchNorm2d(h),
                                    nn.Conv2d(h, h, 1), nn.BatchNorm2d(h), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        a, b = x.chunk(2, dim=1)
        y = torch.cat((a, self.branch(b)), dim=1)
        n, c, h, w = y.shape
        return y.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


@pytest.fixture(scope="module", params=["convnext_block", "shuffle_unit"])
def imported(request, tmp_path_factory):
    """A block exported by PyTorch (opset 17, TorchScript exporter), imported; with the input and the block's own
    output."""
    torch.manual_seed(0)
    module = (ConvNeXtBlock() if request.param == "convnext_block" else ShuffleUnit()).eval()
    x = torch.rand(1, 3, 14, 12)
    path = tmp_path_factory.mktemp(request.param) / f"{request.param}.onnx"
    torch.onnx.export(module, (x,), str(path), input_names=["input"], output_names=["output"], opset_version=17,
                      dynamo=False)
    with torch.no_grad():
        ref = module(x).numpy()
    result = import_onnx(path, registry=REGISTRY)
    assert {s.type for s in result.model.layers.values()} & {"transpose", "reshape", "layer_normalization"}
    return request.param, result, x.numpy(), ref


def test_imported_block_round_trips_through_every_exporter(imported, tmp_path):
    name, result, x, ref = imported
    inp, out = result.input_layers["input"], result.output_layers["output"]
    export_onnx(result.model, REGISTRY, tmp_path / "back.onnx", OnnxOptions(), result.weights_source())
    assert rel_l2(reference(tmp_path / "back.onnx", {inp: x})[0].reshape(ref.shape), ref) < 1e-5
    done = export_torch(result.model, REGISTRY, tmp_path / "torch", TorchOptions(), result.weights_source())
    with torch.no_grad():
        got = load_module(done.path, f"{name}_{abs(hash(str(tmp_path)))}")(torch.from_numpy(x))
    got = got if isinstance(got, torch.Tensor) else got[0]
    assert rel_l2(got.numpy().reshape(ref.shape), ref) < 1e-5
    export_project(result.model, REGISTRY, tmp_path / "p", ProjectOptions(package="block"), result.weights_source())
    np.save(tmp_path / "x.npy", x)
    res = run_sample(tmp_path / "p", "block", ["-i", f"{inp}=x.npy", "-o", f"{out}=y.npy", "-b", "numpy"], tmp_path)
    assert res.returncode == 0, res.stderr + res.stdout
    assert rel_l2(np.load(tmp_path / "y.npy").reshape(ref.shape), ref) < 1e-5
