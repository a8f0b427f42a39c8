"""PyTorch export round trips: the generated module runs with torch (CPU) and matches LayerLab for every
exporting layer and activation, the sample model and the reference networks; unsupported layers fail
listing each, or become stubs with a TODO."""
from __future__ import annotations

import ast
import importlib.util
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.export import ExportError, TorchOptions, export_torch  # noqa: E402
from engine.model import Model  # noqa: E402
from engine.plugins import default_registry  # noqa: E402
from engine.tensor import FP32_NCHW, Dims  # noqa: E402
from tests.bench.networks import dncnn, resnet18, unet  # noqa: E402
from tests.engine.export.cases import C, activation_case, layer_cases, run_labnet  # noqa: E402
from tests.harness import assert_close  # noqa: E402

REGISTRY = default_registry()
LAYER_CASES = layer_cases(REGISTRY, "torch_support")
ACTIVATIONS = [a for a in REGISTRY.activation_names if REGISTRY.activation_class(a).torch_support != "no"]


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(f"exported_{name}_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_torch(model: Model, inputs: dict[str, np.ndarray], tmp_path, options: TorchOptions | None = None):
    result = export_torch(model, REGISTRY, tmp_path / "out", options or TorchOptions())
    module = load_module(result.path, model.name)
    cls = getattr(module, next(n for n in dir(module) if n.lower() == model.name.replace("_", "").lower()))
    net = cls.from_weights()
    names = list(inputs)
    with torch.no_grad():
        y = net(*[torch.from_numpy(inputs[n]) for n in names])
    return result, net, y


def check(model: Model, inputs: dict[str, np.ndarray], tmp_path) -> str:
    result, _, y = run_torch(model, inputs, tmp_path)
    want = run_labnet(model, inputs, REGISTRY)
    outs = [y] if isinstance(y, torch.Tensor) else list(y)
    assert len(outs) == len(want)
    for (name, ref), got in zip(want.items(), outs):
        assert_close(got.numpy(), ref, FP32_NCHW, f"{model.name} output {name}")
    return result.path.read_text()


@pytest.mark.parametrize("case", LAYER_CASES, ids=[c.id for c in LAYER_CASES])
def test_layer_round_trip(case, tmp_path):
    source = check(case.model(), case.inputs(), tmp_path)
    ast.parse(source)
    assert "class Harness(nn.Module):" in source


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_round_trip(name, tmp_path):
    case = activation_case(name)
    check(case.model(), case.inputs(), tmp_path)


def test_an_activation_inside_a_layer_is_computed_once(tmp_path):
    case = C("conv_pool", (1, 3, 8, 8), "leaky_sigmoid", num_output_channels=3)
    source = check(case.model(), case.inputs(), tmp_path)
    assert source.count("self.L(") == 1


def test_sample_model_code_is_readable_and_matches(tmp_path):
    from engine.modelfile import load
    from resources import SAMPLES

    model = load(SAMPLES / "denoiser.lnet", REGISTRY)
    x = {"input": np.random.default_rng(2).random((1, 3, 96, 128), dtype=np.float32)}
    source = check(model, x, tmp_path)
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert cls.name == "Denoiser"
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    attrs = [t.attr for n in ast.walk(init) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Attribute)]
    assert attrs == ["conv1", "conv2", "conv3", "residual"]  # one attribute per layer with weights
    forward = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    assigned = [t.id for n in forward.body if isinstance(n, ast.Assign) for t in n.targets]
    assert assigned == ["conv1", "conv2", "conv3", "residual", "denoised", "output"]  # execution order
    assert [a.arg for a in forward.args.args] == ["self", "input"]
    # other sizes and batch sizes run too
    x2 = {"input": np.random.default_rng(3).random((2, 3, 20, 24), dtype=np.float32)}
    _, net, y = run_torch(model, x2, tmp_path / "again")
    assert_close(y.numpy(), run_labnet(model, x2, REGISTRY)["output"], FP32_NCHW, "2x3x20x24")


@pytest.mark.parametrize("build,dims", [
    (dncnn, Dims(1, 3, 16, 16)), (unet, Dims(1, 3, 16, 16)), (resnet18, Dims(1, 3, 32, 32)),
])
def test_reference_networks(build, dims, tmp_path):
    model = build(dims, **({"depth": 3} if build is dncnn else {"widths": (4, 8, 16)} if build is unet else
                           {"classes": 10}))
    x = {"input": np.random.default_rng(4).random(tuple(dims), dtype=np.float32)}
    source = check(model, x, tmp_path)
    if build is not unet:
        assert "nn.BatchNorm2d" in source


def test_multiple_inputs_and_outputs(tmp_path):
    m = Model("two_way")
    m.add_layer("input", "a", params={"dimensions": "1x2x5x5"})
    m.add_layer("input", "b", params={"dimensions": "1x3x5x5"})
    m.add_layer("concatenation", "cat", inputs=["a", "b"])
    m.add_layer("convolution", "conv", params={"num_output_channels": "2"}, inputs=["cat"], activation="tanh")
    m.add_layer("output", "y1", inputs=["conv"])
    m.add_layer("output", "y2", inputs=["cat"])
    rng = np.random.default_rng(5)
    check(m, {"a": rng.random((1, 2, 5, 5), dtype=np.float32), "b": rng.random((1, 3, 5, 5), dtype=np.float32)},
          tmp_path)


def test_reserved_layer_names_are_renamed(tmp_path):
    m = Model("names")
    m.add_layer("input", "input", params={"dimensions": "1x2x4x4"})
    m.add_layer("convolution", "forward", params={"num_output_channels": "2"}, inputs=["input"])
    m.add_layer("convolution", "F", params={"num_output_channels": "2"}, inputs=["forward"], activation="relu")
    m.add_layer("element_wise", "torch", inputs=["input", "F"])  # F has an activation: not fused into a conv_sum
    m.add_layer("output", "self", inputs=["torch"])
    source = check(m, {"input": np.random.default_rng(6).random((1, 2, 4, 4), dtype=np.float32)}, tmp_path)
    assert "self.layer_forward = nn.Conv2d" in source and "self.layer_F = nn.Conv2d" in source


def test_weights_from_an_input_are_refused_by_name(tmp_path):
    case = C("convolution", ((1, 3, 6, 6), (4, 3, 3, 3)), num_output_channels=4, bias="false")
    with pytest.raises(ExportError, match=r"PyTorch.*L \(convolution\): the weights come from input 1"):
        export_torch(case.model(), REGISTRY, tmp_path)


def _unsupported_model() -> Model:
    m = Model("mixed")
    m.add_layer("input", "x", params={"dimensions": "1x2x6x6"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "2"}, inputs=["x"])
    m.add_layer("input", "w", params={"dimensions": "2x2x3x3"})
    m.add_layer("convolution", "c2", params={"num_output_channels": "2"}, inputs=["c1", "w"])
    m.add_layer("output", "y", inputs=["c2"], activation="sine")
    return m


def test_unsupported_layers_fail_listing_each_or_become_stubs(tmp_path, monkeypatch):
    act = REGISTRY.activation_class("sine")
    monkeypatch.setattr(act, "torch_expr", classmethod(lambda cls, x, coefs: (_ for _ in ()).throw(NotImplementedError())))
    with pytest.raises(ExportError) as err:
        export_torch(_unsupported_model(), REGISTRY, tmp_path / "a")
    msg = str(err.value)
    assert "c2 (convolution): the weights come from input 1" in msg and "activation sine of layer y" in msg
    assert "--stubs" in msg
    result = export_torch(_unsupported_model(), REGISTRY, tmp_path / "b", TorchOptions(stubs=True))
    assert len(result.warnings) == 2
    source = result.path.read_text()
    assert "class ConvolutionStub(nn.Module):" in source and "TODO" in source and "def todo_sine(" in source
    module = load_module(result.path, "mixed")
    net = module.Mixed.from_weights()
    with pytest.raises(NotImplementedError, match="TODO: implement the LayerLab layer convolution"):
        net(torch.zeros(1, 2, 6, 6), torch.zeros(2, 2, 3, 3))


def test_export_needs_no_torch(tmp_path):
    import subprocess

    code = ("import sys; sys.modules['torch'] = None\n"
            "from engine.export import export_torch; from engine.plugins import load_plugins\n"
            "from engine.modelfile import load; from resources import SAMPLES\n"
            "reg = load_plugins(); export_torch(load(SAMPLES / 'denoiser.lnet', reg), reg, sys.argv[1])\n")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["denoiser.py", "denoiser_weights.npz"]
