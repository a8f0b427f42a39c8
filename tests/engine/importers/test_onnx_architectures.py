"""Real CNN architectures written in PyTorch, exported with both torch.onnx exporters, imported and compared
with onnxruntime: fp32 NCHW within 1e-4 relative L2, fp16 NHWC within 1e-2, on NumPy (and CuPy on a GPU)."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.importers.onnx import import_onnx
from engine.typecheck import ERROR, check
from tests.engine.importers.architectures import (
    ARCHITECTURES,
    DYNAMO_EXPORTS,
    STACK_TRACE,
    dynamo_export,
    export,
    without_stack_traces,
)
from tests.engine.importers.helpers import REGISTRY, reference, rel_l2, run

EXPORTERS = ("torchscript", "dynamo")
CASES = [(name, exporter) for exporter in EXPORTERS for name in ARCHITECTURES]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[Path, np.ndarray, np.ndarray]]:
    """(architecture, exporter) -> (ONNX path, input, onnxruntime output): exported on first use by the TorchScript
    exporter, the dynamo exporter's stored files (``architectures.DYNAMO_EXPORTS``)."""
    root = tmp_path_factory.mktemp("architectures")
    cache: dict[tuple[str, str], tuple[Path, np.ndarray, np.ndarray]] = {}

    class Lazy(dict):
        def __missing__(self, key: tuple[str, str]) -> tuple[Path, np.ndarray, np.ndarray]:
            name, exporter = key
            if exporter == "dynamo":  # stored (architectures.DYNAMO_EXPORTS)
                path, x = dynamo_export(name)
                x = x.numpy()
            else:
                path = root / f"{name}_{exporter}.onnx"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    x = export(name, str(path)).numpy()
            self[key] = (path, x, reference(path, {"input": x})[0])
            return self[key]
    return Lazy(cache)


@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_architecture_matches_onnxruntime(exported, name: str, exporter: str) -> None:
    path, x, ref = exported[(name, exporter)]
    result = import_onnx(path, registry=REGISTRY)
    assert not result.refused and "placeholder" not in {s.type for s in result.model.layers.values()}
    assert [d for d in check(result.model, REGISTRY) if d.severity == ERROR] == []
    fp32 = run(result, {"input": x}, "fp32 nchw")[0]
    assert rel_l2(fp32.reshape(ref.shape), ref) < 1e-4
    fp16 = run(result, {"input": x}, "fp16 nhwc")[0]
    assert rel_l2(fp16.reshape(ref.shape), ref) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "exporter"), CASES)
def test_architecture_matches_onnxruntime_on_gpu(exported, name: str, exporter: str) -> None:
    path, x, ref = exported[(name, exporter)]
    result = import_onnx(path, registry=REGISTRY)
    for fmt, tol in (("fp32 nchw", 1e-4), ("fp16 nhwc", 1e-2)):
        got = run(result, {"input": x}, fmt, backend="cupy")[0]
        assert rel_l2(got.reshape(ref.shape), ref) < tol


def test_structure_of_imported_architectures(exported) -> None:
    """What the mapping made of them: pixel shuffle as depth_to_space, squeeze-excitation as pooling + 1x1
    convolutions + sigmoid + broadcast product, ReLU6 as clamp, the classifier as fully_connected, PReLU as
    prelu (per channel) and leaky_relu (shared slope), bilinear upsampling as resize, nearest as upsample."""
    def layers(name: str) -> list[tuple[str, str]]:
        r = import_onnx(exported[(name, "torchscript")][0], registry=REGISTRY)
        return [(s.type, s.activation) for s in r.model.layers.values()]

    assert ("depth_to_space", "sigmoid") in layers("espcn")
    eff = layers("efficientnet_block")
    assert ("pooling", "none") in eff and ("convolution", "sigmoid") in eff and ("element_wise", "none") in eff
    assert ("convolution", "silu") in eff
    mob = layers("mobilenet_v2")
    assert ("convolution", "clamp") in mob and ("fully_connected", "none") in mob
    prelu = layers("prelu_net")
    assert ("prelu", "none") in prelu and ("convolution", "leaky_relu") in prelu and ("upsample", "none") in prelu
    assert ("resize", "none") in layers("unet")
    assert ("resize", "softmax") in layers("segmentation_head")
    assert ("element_wise", "none") in layers("dncnn")


def _pinned_torch() -> str:
    """The torch version the ``dev`` extra pins (``torch==X``)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    extras = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text(encoding="utf-8"))
    return next(d.split("==", 1)[1] for d in extras["project"]["optional-dependencies"]["dev"] if d.startswith("torch=="))


def test_the_stored_dynamo_exports_are_what_the_pinned_exporter_writes(tmp_path) -> None:
    """One stored file per architecture (and its weights file), each written by the pinned torch; where that torch is
    the one installed, the smallest exported again here gives the same graph (less the exporter's stack traces, which
    name the source files' paths on the machine that exported it) and the same weights, byte for byte."""
    import onnx
    import torch

    pinned = _pinned_torch()
    assert sorted(p.name for p in DYNAMO_EXPORTS.iterdir()) == sorted(
        f"{name}.onnx{end}" for name in ARCHITECTURES for end in ("", ".data"))
    for name in ARCHITECTURES:
        model = onnx.load(str(DYNAMO_EXPORTS / f"{name}.onnx"), load_external_data=False)
        assert model.producer_name == "pytorch" and model.producer_version.split("+")[0] == pinned, \
            f"{name}: written by torch {model.producer_version}, not the pinned {pinned}; run " \
            "python -m tests.engine.importers.architectures with the pinned torch"
    if torch.__version__.split("+")[0] != pinned:
        pytest.skip(f"torch {torch.__version__} is installed, not the pinned {pinned}: no export to compare with")
    name = min(ARCHITECTURES, key=lambda n: (DYNAMO_EXPORTS / f"{n}.onnx.data").stat().st_size)
    fresh = tmp_path / f"{name}.onnx"  # the same file name: the weights file's name is written into the model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = export(name, str(fresh), dynamo=True)
    assert torch.equal(x, dynamo_export(name)[1])
    assert STACK_TRACE in str(onnx.load(str(fresh), load_external_data=False))  # what the stored files leave out
    assert without_stack_traces(fresh) == (DYNAMO_EXPORTS / f"{name}.onnx").read_bytes()
    assert (tmp_path / f"{name}.onnx.data").read_bytes() == (DYNAMO_EXPORTS / f"{name}.onnx.data").read_bytes()


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_imported_architecture_exports_back_to_onnx_and_pytorch(exported, name: str, tmp_path) -> None:
    """Imported, then exported by LayerLab to ONNX and to a PyTorch module (its imported weights): both give
    the original network's outputs."""
    import importlib.util
    import sys

    import torch

    from engine.export import OnnxOptions, TorchOptions, export_onnx, export_torch

    path, x, ref = exported[(name, "torchscript")]
    result = import_onnx(path, registry=REGISTRY)
    out_name = result.output_layers["output"]
    back = tmp_path / "back.onnx"
    export_onnx(result.model, REGISTRY, back, OnnxOptions(), result.weights_source(), fusing="off")
    got = reference(back, {result.input_layers["input"]: x})
    assert rel_l2(got[0].reshape(ref.shape), ref) < 1e-4
    done = export_torch(result.model, REGISTRY, tmp_path / "torch", TorchOptions(), result.weights_source(), fusing="off")
    spec = importlib.util.spec_from_file_location(f"imported_{name}_{abs(hash(str(tmp_path)))}", done.path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cls = next(getattr(module, n) for n in dir(module) if isinstance(getattr(module, n), type)
               and issubclass(getattr(module, n), torch.nn.Module) and hasattr(getattr(module, n), "from_weights"))
    with torch.no_grad():
        y = cls.from_weights()(torch.from_numpy(x))
    y = y if isinstance(y, torch.Tensor) else y[list(result.output_layers.values()).index(out_name)]
    assert rel_l2(y.numpy().reshape(ref.shape), ref) < 1e-4


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_every_activation_folds_into_its_convolution(exported, exporter: str) -> None:
    """GELU (erf and tanh forms), Softplus with its threshold (dynamo), Mish, Hardswish... each decomposed
    by the exporter is recognised and joins the convolution before it."""
    r = import_onnx(exported[("activation_zoo", exporter)][0], registry=REGISTRY)
    acts = [s.activation for s in r.model.layers.values() if s.type == "convolution"]
    assert acts == ["none", "gelu", "gelu_tanh", "hardswish", "mish", "elu", "softplus", "hard_sigmoid", "silu",
                    "leaky_relu", "clamp", "selu", "celu", "tanh"]


class _ShapeGraphs(__import__("torch").nn.Module):
    """Sizes read at run time (``x.size(0)``, ``x.shape``): the exporters write Shape -> Gather -> Concat ->
    Reshape sub-graphs; a hand-written pixel shuffle (view, permute, reshape)."""

    def __init__(self) -> None:
        import torch

        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(2 * 12 * 12, 5)

    def forward(self, x):  # noqa: ANN001, ANN201
        y = self.conv(x)
        n, c, h, w = y.shape
        y = y.view(n, c // 4, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3).reshape(n, c // 4, h * 2, w * 2)
        return self.fc(y.reshape(y.size(0), -1))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_shape_sub_graphs_are_folded_and_pixel_shuffle_recognised(tmp_path, exporter: str) -> None:
    import onnx
    import torch

    torch.manual_seed(0)
    x = torch.rand(1, 3, 6, 6)
    path = tmp_path / "shapes.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_ShapeGraphs().eval(), (x,), str(path), input_names=["input"], output_names=["output"],
                          dynamo=exporter == "dynamo", dynamic_axes=None if exporter == "dynamo" else
                          {"input": {0: "n", 2: "h", 3: "w"}})
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert "Reshape" in ops and "Transpose" in ops
    result = import_onnx(path, registry=REGISTRY, input_shapes={"input": (1, 3, 6, 6)})
    assert [s.type for s in result.model.layers.values()] == ["input", "convolution", "depth_to_space",
                                                              "fully_connected", "output"]
    ref = reference(path, {"input": x.numpy()})[0]
    assert rel_l2(run(result, {"input": x.numpy()})[0].reshape(ref.shape), ref) < 1e-4


#: torchvision's networks of window attention and fused MBConv blocks, exported as a user does (random weights,
#: batch-norm statistics calibrated as the model zoo does, TorchScript exporter, opset 17, 224 x 224)
TORCHVISION_NETWORKS = ("swin_t", "maxvit_t", "efficientnet_v2_s")


@pytest.fixture(scope="module")
def torchvision_exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, np.ndarray, np.ndarray, Any]]:
    """name -> (ONNX path, input, onnxruntime output, the PyTorch module), exported on first use. Skipped where
    torchvision is not installed (the `bench` extra: `pip install -e '.[bench]'`; the `dev` extra leaves it out)."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("torchvision is not installed (pip install -e '.[bench]')")
    import torch

    from tests.bench.bench_zoo import ZooNet, build_torch

    root = tmp_path_factory.mktemp("torchvision")

    class Lazy(dict):
        def __missing__(self, name: str) -> tuple[Path, np.ndarray, np.ndarray, Any]:
            module = build_torch(ZooNet(name, 224, False))
            x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(3))
            path = root / f"{name}.onnx"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, (x,), str(path), opset_version=17, input_names=["input"],
                                  output_names=["output"], dynamo=False)
            self[name] = (path, x.numpy(), reference(path, {"input": x.numpy()})[0], module)
            return self[name]
    return Lazy()


@pytest.mark.slow
@pytest.mark.parametrize("name", TORCHVISION_NETWORKS)
def test_torchvision_network_imports_and_matches_onnxruntime(torchvision_exported, name: str) -> None:
    path, x, ref, _ = torchvision_exported[name]
    result = import_onnx(path, registry=REGISTRY)
    assert not result.refused and "placeholder" not in {s.type for s in result.model.layers.values()}
    if name != "efficientnet_v2_s":  # every window attention is one attention layer
        assert "attention" in {s.type for s in result.model.layers.values()}
    assert rel_l2(run(result, {"input": x}, "fp32 nchw")[0].reshape(ref.shape), ref) < 1e-4


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", TORCHVISION_NETWORKS)
def test_torchvision_network_on_gpu_fp32_and_fp16(torchvision_exported, name: str) -> None:
    """CuPy fp32 within 1e-4 of onnxruntime; fp16 within twice PyTorch's own fp16 error (its fp16 run against the same
    reference)."""
    import copy

    import torch

    path, x, ref, module = torchvision_exported[name]
    result = import_onnx(path, registry=REGISTRY)
    fp32 = run(result, {"input": x}, "fp32 nchw", backend="cupy")[0]
    assert rel_l2(fp32.reshape(ref.shape), ref) < 1e-4
    device = "cuda" if torch.cuda.is_available() else "cpu"
    half = copy.deepcopy(module).half().to(device).eval()
    with torch.no_grad():
        theirs = half(torch.from_numpy(x).half().to(device)).float().cpu().numpy()
    torch_error = rel_l2(theirs.reshape(ref.shape), ref)
    fp16 = run(result, {"input": x}, "fp16 nhwc", backend="cupy")[0]
    assert rel_l2(fp16.reshape(ref.shape), ref) <= 2 * torch_error
