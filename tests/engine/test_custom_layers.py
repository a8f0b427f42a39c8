"""Custom layers in the engine: definitions and their model-file round trip, descriptors, type checking,
running the Python code (compared with the built-in space_to_depth and a float64 reference, every format),
consent, editing a definition as one undo step, and the exporters."""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine import modelfile
from engine.custom import CONSENT, ConsentError, CustomInput, CustomLayerDef, CustomParam, DefinitionError, custom_descs
from engine.custom.cuda_source import compile_message, kernel_source
from engine.custom.layer import CustomCodeError
from engine.custom.scope import definitions, instances, remove_definition, scoped, set_definition, used_definitions
from engine.descriptors import InputKind
from engine.errors import LayerLabError, ModelFileError
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import FORMATS, FP32_NCHW, Dims, TensorFormat
from engine.typecheck import check, errors, output_shapes
from tests.engine.custom_cases import (
    S2D_CUDA,
    S2D_LAUNCH,
    net_with,
    no_consent,  # noqa: F401 - autouse fixture: no consent before/after each test
    rand,
    run_custom,
    s2d,
    softsign,
)
from tests.harness import FORMAT_IDS, assert_close, ort_run, round_like, run_layer

REG = default_registry()


# ---- definitions and the model file -----------------------------------------------------------------------
def test_definition_xml_round_trips() -> None:
    from engine.custom import CudaVariant, parse_definition

    full = CustomLayerDef("every_field", "Every field", "My category", "Line one.\n\nSecond paragraph <b>&</b>.",
                          (CustomInput("a"), CustomInput("b", "secondary"), CustomInput("rest", "infinite")),
                          (CustomParam("k", "uint", "2", "1", "8", doc="factor"),
                           CustomParam("mode", "enum", "b", values=("a", "b")),
                           CustomParam("size", "dimension", "3x5"), CustomParam("on", "bool", "true"),
                           CustomParam("alpha", "float", "0.25", "-1", "1"), CustomParam("label", "string", "x y")),
                          "in.n, in.c * k, in[1].h + size.h, max(in.w, 1)", "def forward(xp, inputs, params):\n\treturn 1\n",
                          (CudaVariant(TensorFormat.parse("fp16 nhwc"), 'extern "C" __global__ void k() {}\n  \n',
                                       "k<32,4,2!>[1,1,2,1](out, in[1], alpha){64}"),))
    assert parse_definition(full.to_xml()) == full
    assert parse_definition(full.to_xml()).to_xml() == full.to_xml()


def test_model_file_round_trip_is_exact(tmp_path: Path) -> None:
    model = net_with(softsign(cuda=True), params={"alpha": "2"})
    text = modelfile.dumps(model)
    again = modelfile.loads(text, registry=REG)
    assert again == model
    assert modelfile.dumps(again) == text
    path = tmp_path / "m.lnet"
    modelfile.save(again, path)
    assert modelfile.dumps(modelfile.load(path, REG)) == text


def test_a_hand_written_definition_is_kept_verbatim() -> None:
    text = """<network name="n">
  <layers>
    <layer name="input" type="input"><param name="dimensions" value="1x2x4x4"/></layer>
    <layer name="c" type="custom:twice"><input index="0" source="input"/></layer>
  </layers>
  <custom-layers>
    <custom-layer category="Mine" name="twice">
      <shape>in.n,in.c,in.h,in.w</shape>
      <input kind="primary" name="x"/>
      <python>def forward(xp, inputs, params):
    return inputs[0] * 2   # keeps   spaces
</python>
    </custom-layer>
  </custom-layers>
</network>"""
    model = modelfile.loads(text, registry=REG)
    assert 'category="Mine" name="twice"' in model.custom_layers["twice"]
    saved = modelfile.dumps(model)
    assert modelfile.dumps(modelfile.loads(saved, registry=REG)) == saved
    assert "return inputs[0] * 2   # keeps   spaces\n</python>" in saved
    assert definitions(model)["twice"].category == "Mine"


@pytest.mark.parametrize(("definition", "words"), [
    ('<custom-layer name="9x"><shape>1,1,1,1</shape></custom-layer>', "custom layer name '9x' is not valid"),
    ('<custom-layer name="a"><shape>1,1,1,1</shape><input name="x"/><param name="p" type="complex"/></custom-layer>',
     "parameter p: unknown type 'complex'"),
    ('<custom-layer name="a"><shape>1,1,1,1</shape><input name="x" kind="many"/></custom-layer>', "kind 'many'"),
    ('<custom-layer name="a"><shape>1,1,1,1</shape><input name="x" kind="infinite"/><input name="y"/></custom-layer>',
     "only the last input can be infinite"),
    ('<custom-layer name="a"><shape>1,1,1,1</shape><input name="x"/><param name="p" type="uint" default="-1"/></custom-layer>',
     "parameter p: default '-1' is not an integer >= 0"),
    ('<custom-layer name="a"><input name="x"/></custom-layer>', "no <shape> script"),
    ('<custom-layer name="a"><shape>1,1,1,1</shape><input name="x"/><cuda format="fp8"/></custom-layer>', "fp8"),
    ('<custom-layer name="a"><shape>1,1,1,1</shape><input name="x"/><param name="in" type="uint" default="1"/>'
     '</custom-layer>', "parameter name 'in' is not valid"),
])
def test_malformed_definitions_fail_to_load_with_the_line(definition: str, words: str) -> None:
    text = f'<network name="n">\n<layers/>\n<custom-layers>\n{definition}\n</custom-layers>\n</network>'
    with pytest.raises(ModelFileError) as info:
        modelfile.loads(text, "bad.lnet")
    assert info.value.line == 4 and words in str(info.value), info.value


def test_duplicate_definitions_are_refused() -> None:
    d = s2d().to_xml()
    with pytest.raises(ModelFileError, match="duplicate custom layer name 's2d'"):
        modelfile.loads(f'<network name="n"><custom-layers>{d}{d}</custom-layers></network>', "dup.lnet")


def test_problems_are_listed_without_running_anything() -> None:
    from engine.custom import CudaVariant

    assert s2d().problems() == []
    bad = CustomLayerDef("bad", shape="in.n, in.c *, in.h, in.w", python="def forward(xp, inputs, params)\n    pass\n",
                         cuda=(CudaVariant(FP32_NCHW, "void other() {}", "k<16>(out, nope)"),
                               CudaVariant(TensorFormat.parse("fp16"), "k_a", "k_a<64,64>(out)")))
    fields = dict(bad.problems())
    assert fields["shape"] == "shape script: column 13: expected a number, a name or '(', found ','"
    assert fields["python"].startswith("Python code, line 1:")
    assert "unknown name 'nope'" in fields["cuda fp32|nchw"]
    assert "4096 threads" in fields["cuda fp16|nchw"]
    assert dict(CustomLayerDef("empty").problems())["code"].startswith("at least one implementation")
    assert "define forward(xp, inputs, params)" in dict(CustomLayerDef("nofn", python="x = 1").problems())["python"]
    missing = CustomLayerDef("k", cuda=(CudaVariant(FP32_NCHW, "void x() {}", "k_other<16>(out)"),))
    assert "kernel 'k_other' does not appear" in dict(missing.problems())["cuda fp32|nchw"]


def test_descriptor_is_like_any_layer() -> None:
    d = softsign().descriptor()
    assert (d.name, d.display_name, d.categories, d.formats) == ("custom:softsign", "Scaled softsign",
                                                                 ("Activations (custom)",), FORMATS)
    assert d.summary == "alpha * x / (1 + |x|), elementwise."
    assert d.param("alpha").default == 1.5 and d.param("alpha").max == 10
    assert "in.n, in.c, in.h, in.w" in d.documentation and "Python code" in d.documentation
    assert s2d().descriptor().categories == ("Custom",)
    kinds = CustomLayerDef("m", inputs=(CustomInput("a"), CustomInput("b", "secondary"), CustomInput("c", "infinite")),
                           python="def forward(xp, inputs, params):\n    return inputs[0]\n").descriptor()
    assert [i.kind for i in kinds.inputs] == [InputKind.PRIMARY, InputKind.SECONDARY, InputKind.PRIMARY_INFINITE]
    model = net_with(s2d())
    assert [x.name for x in custom_descs(model)] == ["custom:s2d"]
    assert scoped(model, REG).find_layer("custom:s2d").display_name == "Space to depth (custom)"
    assert scoped(model, REG).find_layer("convolution") is REG.find_layer("convolution")


def test_runs_in_says_which_formats_each_backend_runs() -> None:
    assert s2d().runs_in() == {"numpy": list(FORMATS), "cupy": list(FORMATS)}
    from engine.custom import CudaVariant

    gpu_only = s2d(python=False, cuda=(CudaVariant(FP32_NCHW, S2D_CUDA, S2D_LAUNCH),))
    assert gpu_only.runs_in() == {"numpy": [], "cupy": [FP32_NCHW]}
    assert "CPU (NumPy): nothing" in gpu_only.runs_in_text() and "fp32|nchw: CUDA kernel" in gpu_only.runs_in_text()


# ---- type checking -----------------------------------------------------------------------------------
def test_type_check_evaluates_the_script_on_the_real_sizes() -> None:
    assert check(net_with(s2d(), "1x3x8x12"), REG) == []
    assert output_shapes(net_with(s2d(), "1x3x8x12"), REG)["custom"] == Dims(1, 12, 4, 6)
    diags = errors(check(net_with(s2d(), "1x3x7x12"), REG))
    assert [(d.layer, d.message) for d in diags] == [
        ("custom", "shape script: column 17: size h = 3.5 is not a whole number (use // or ceil/floor to round)")]


@pytest.mark.parametrize(("shape", "words"), [
    ("in.n, in.c, in.h", "4 sizes"),
    ("in.n, in.c * beta, in.h, in.w", "unknown name 'beta'"),
    ("in.n, in.c / (k - 2), in.h, in.w", "division by zero"),
    ("in.n, in.c - 3, in.h, in.w", "c = 0 must be at least 1"),
    ("in.n, in[1].c, in.h, in.w", "in[1]: the layer has 1 input(s)"),
])
def test_script_problems_are_reported_on_the_layer(shape: str, words: str) -> None:
    d = CustomLayerDef("scripted", params=(CustomParam("k", "uint", "2"),), shape=shape,
                       python="def forward(xp, inputs, params):\n    return inputs[0]\n")
    diags = errors(check(net_with(d), REG))
    assert len(diags) == 1 and diags[0].layer == "custom" and words in diags[0].message, diags


def test_unknown_custom_layer_and_wrong_links_are_reported() -> None:
    model = net_with(s2d())
    model.add_layer("custom:nope", "ghost", inputs=["input"])
    model.add_layer("input", "in2")
    model.connect("in2", "custom", 1)
    msgs = {d.layer: d.message for d in errors(check(model, REG))}
    assert "no custom layer named 'nope'" in msgs["ghost"] and "its custom layers: s2d" in msgs["ghost"]
    assert "beyond the 1 it takes" in msgs["custom"]


def test_opening_and_checking_never_runs_the_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    d = CustomLayerDef("sneaky", python=f"open({str(marker)!r}, 'w').write('x')\n"
                                        "def forward(xp, inputs, params):\n    return inputs[0]\n")
    model = modelfile.loads(modelfile.dumps(net_with(d)), registry=REG)
    assert check(model, REG) == []
    net = Network(model, REG)
    assert net.dims("custom") == Dims(1, 3, 8, 12)
    with pytest.raises(ConsentError, match=r"custom layer code \(sneaky\).*--trust-custom-code"):
        net.run()
    assert not marker.exists()
    CONSENT.grant(used_definitions(model))
    net.run()
    assert marker.exists()


def test_consent_is_per_definition_content() -> None:
    CONSENT.grant([softsign()])
    changed = replace(softsign(), python=softsign().python.replace("1 +", "1.0 +"))
    with pytest.raises(ConsentError, match="softsign"):
        run_custom(changed, rand(1, 2, 3, 3), FP32_NCHW, consent=False)
    run_custom(softsign(), rand(1, 2, 3, 3), FP32_NCHW, consent=False)


# ---- running the Python code ---------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_seed_example_matches_the_builtin_space_to_depth(fmt: TensorFormat) -> None:
    x = rand(2, 3, 8, 12)
    got, net = run_custom(s2d(), x, fmt)
    builtin, _, _ = run_layer("space_to_depth", {"block_size": 2, "mode": "DCR"}, [x], fmt)
    assert got.shape == (2, 12, 4, 6)
    np.testing.assert_array_equal(got, builtin)
    (ref,) = ort_run([__import__("onnx").helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)],
                     {"x": round_like(x, fmt)}, {})
    assert_close(got, ref, fmt, "custom s2d vs onnxruntime SpaceToDepth")
    assert net.last_executed == ["input", "custom", "output"]


@pytest.mark.parametrize("fmt", FORMATS, ids=FORMAT_IDS)
def test_activation_like_layer_in_every_format(fmt: TensorFormat) -> None:
    x = rand(2, 5, 7, 9, seed=1)
    got, _ = run_custom(softsign(), x, fmt, params={"alpha": "0.75"})
    xr = round_like(x, fmt).astype(np.float64)
    assert_close(got, 0.75 * xr / (1 + np.abs(xr)), fmt, f"softsign {fmt}")


def test_a_custom_layer_takes_an_activation_and_reshapes() -> None:
    model = net_with(softsign(), "1x2x4x4")
    model.set_activation("custom", "relu")
    CONSENT.grant([softsign()])
    net = Network(model, REG)
    for h, w in ((4, 4), (6, 10)):
        x = rand(1, 2, h, w, seed=h)
        y = net.infer({"input": x})["output"]
        assert_close(y, np.maximum(1.5 * x / (1 + np.abs(x)), 0), FP32_NCHW)
    assert net.layer("custom").reshape_count == 2


def test_errors_in_the_python_code_name_the_line() -> None:
    d = CustomLayerDef("oops", python="def forward(xp, inputs, params):\n    x = inputs[0]\n    return x.nope()\n")
    with pytest.raises(CustomCodeError, match=r"oops: the Python code failed at line 3 \(return x.nope\(\)\) while running "
                                              "forward: AttributeError"):
        run_custom(d, rand(1, 1, 2, 2), FP32_NCHW)
    top = CustomLayerDef("top", python="import os\nx = 1 / 0\ndef forward(xp, inputs, params):\n    return inputs[0]\n")
    with pytest.raises(CustomCodeError, match="failed at line 2 .*defining forward: ZeroDivisionError"):
        run_custom(top, rand(1, 1, 2, 2), FP32_NCHW)


def test_a_wrong_result_shape_is_an_error() -> None:
    d = CustomLayerDef("flat", python="def forward(xp, inputs, params):\n    return inputs[0].reshape(-1)\n")
    with pytest.raises(CustomCodeError, match=r"forward returned shape \(6,\), the shape script gives \(1, 1, 2, 3\)"):
        run_custom(d, rand(1, 1, 2, 3), FP32_NCHW)


def test_a_gpu_only_layer_says_so_on_the_cpu() -> None:
    from engine.custom import CudaVariant

    d = s2d(python=False, cuda=(CudaVariant(FP32_NCHW, S2D_CUDA, S2D_LAUNCH),))
    assert check(net_with(d), REG) == []
    with pytest.raises(LayerLabError, match="no implementation for the CPU: CPU \\(NumPy\\): nothing"):
        run_custom(d, rand(1, 1, 4, 4), FP32_NCHW)


def test_secondary_and_infinite_inputs_reach_the_code() -> None:
    code = ("def forward(xp, inputs, params):\n"
            "    total = sum(x for x in inputs[2:])\n"
            "    return inputs[0] + (0 if inputs[1] is None else inputs[1]) + total\n")
    d = CustomLayerDef("adder", inputs=(CustomInput("a"), CustomInput("b", "secondary"), CustomInput("more", "infinite")),
                       shape="in.n, in.c, in.h, in.w", python=code)
    model = net_with(d, "1x2x3x3")
    for name in ("x1", "x2"):
        model.add_layer("input", name, {"dimensions": "1x2x3x3"})
    model.connect("x1", "custom", 2)
    model.connect("x2", "custom", 3)
    CONSENT.grant([d])
    net = Network(model, REG)
    xs = {n: rand(1, 2, 3, 3, seed=i) for i, n in enumerate(("input", "x1", "x2"))}
    y = net.infer(xs)["output"]
    np.testing.assert_allclose(y, xs["input"] + xs["x1"] + xs["x2"], rtol=1e-6)


# ---- editing a definition ---------------------------------------------------------------------------
def test_editing_a_definition_updates_instances_as_one_undo_step() -> None:
    model = net_with(softsign(), params={"alpha": "3"})
    model.add_layer("custom:softsign", "second", {"alpha": "4"}, inputs=["input"])
    model.clear_undo()
    events = []
    model.events.connect(lambda ev: events.append(type(ev).__name__))
    changed = replace(softsign(), params=(CustomParam("beta", "float", "2"),), display_name="Softsign v2",
                      python=softsign().python.replace('params["alpha"]', 'params["beta"]'))
    set_definition(model, changed, old_name="softsign")
    assert model.undo_text() == "Edit custom layer softsign"
    assert definitions(model)["softsign"] == changed
    assert model.layers["custom"].params == {} and model.layers["second"].params == {}
    assert "CustomLayerChanged" in events
    assert scoped(model, REG).find_layer("custom:softsign").display_name == "Softsign v2"
    model.undo()
    assert definitions(model)["softsign"] == softsign()
    assert model.layers["custom"].params == {"alpha": "3"} and model.layers["second"].params == {"alpha": "4"}
    assert not model.can_undo()
    model.redo()
    assert definitions(model)["softsign"] == changed and model.layers["second"].params == {}


def test_adding_renaming_and_deleting_definitions() -> None:
    model = net_with(s2d())
    with pytest.raises(DefinitionError, match="already exists"):
        set_definition(model, s2d())
    with pytest.raises(DefinitionError, match="cannot be renamed"):
        set_definition(model, s2d(name="s2d_b"), old_name="s2d")
    set_definition(model, softsign())
    assert list(model.custom_layers) == ["s2d", "softsign"]
    with pytest.raises(LayerLabError, match="still used by custom"):
        remove_definition(model, "s2d")
    remove_definition(model, "softsign")
    assert list(model.custom_layers) == ["s2d"] and instances(model, "s2d") == ["custom"]
    model.undo()
    assert list(model.custom_layers) == ["s2d", "softsign"]


# ---- exports -------------------------------------------------------------------------------------------
def test_onnx_export_writes_a_custom_domain_node(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from engine.export import OnnxOptions, export_onnx

    model = net_with(softsign(), params={"alpha": "0.5"})
    result = export_onnx(model, REG, tmp_path / "m.onnx", OnnxOptions())
    proto = onnx.load(str(result.path))
    (node,) = [n for n in proto.graph.node if n.domain]
    assert (node.domain, node.op_type) == ("layerlab.custom", "softsign")
    assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute} == {"alpha": pytest.approx(0.5)}
    assert ("layerlab.custom", 1) in [(o.domain, o.version) for o in proto.opset_import]
    assert result.warnings == []  # a custom layer is written on purpose, not as a placeholder


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"exported_{name}_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_torch_export_runs_the_python_code(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from engine.export import TorchOptions, export_torch

    model = net_with(s2d(), "1x2x4x6")
    result = export_torch(model, REG, tmp_path, TorchOptions())
    source = result.path.read_text()
    assert "class CustomS2d(nn.Module)" in source and "TODO" in source
    module = _load(result.path, "s2d")
    net = module.CustomNet.from_weights()
    x = rand(1, 2, 4, 6)
    y = net(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(y, run_layer("space_to_depth", {"block_size": 2}, [x], FP32_NCHW)[0])


def test_torch_export_stubs_a_layer_without_python_code(tmp_path: Path) -> None:
    from engine.custom import CudaVariant
    from engine.export import ExportError, TorchOptions, export_torch

    model = net_with(s2d(python=False, cuda=(CudaVariant(FP32_NCHW, S2D_CUDA, S2D_LAUNCH),)))
    with pytest.raises(ExportError, match=r"custom \(custom:s2d\): custom layer without Python code"):
        export_torch(model, REG, tmp_path, TorchOptions())
    result = export_torch(model, REG, tmp_path, TorchOptions(stubs=True))
    assert "class CustomS2dStub(nn.Module)" in result.path.read_text() and "TODO" in result.path.read_text()


def test_project_export_carries_the_definitions(tmp_path: Path) -> None:
    from engine.export import ProjectOptions, export_project

    model = net_with(s2d(), "1x2x4x6")
    # an activation brings its collection along (a project of a network without one misses the collection the
    # standard fusing rules refer to: a problem of project export itself, not of custom layers)
    model.set_activation("custom", "relu")
    export_project(model, REG, tmp_path / "proj", ProjectOptions(package="s2dnet", sample=False, pyproject=False))
    network_py = (tmp_path / "proj" / "s2dnet" / "network.py").read_text()
    assert "m.custom_layers['s2d'] = " in network_py and "CONSENT.grant" in network_py
    assert (tmp_path / "proj" / "s2dnet" / "_vendor" / "engine" / "custom" / "script.py").exists()
    import subprocess

    code = ("import numpy as np, s2dnet\n"
            "net = s2dnet.build_network(backend='numpy')\n"
            "x = np.arange(48, dtype=np.float32).reshape(1, 2, 4, 6)\n"
            "print(net.infer({'input': x})['output'].reshape(-1)[:6].tolist())\n"
            "import engine; print(engine.__file__)\n")
    import defusedxml  # a declared dependency of the project: found where this interpreter has it

    deps = str(Path(defusedxml.__file__).resolve().parents[1])
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "proj"), deps]), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    x = np.arange(48, dtype=np.float32).reshape(1, 2, 4, 6)
    expected = run_layer("space_to_depth", {"block_size": 2}, [x], FP32_NCHW)[0].reshape(-1)[:6].tolist()
    values, engine_file = done.stdout.strip().splitlines()
    assert values == str(expected)
    assert Path(engine_file).is_relative_to(tmp_path / "proj" / "s2dnet" / "_vendor")  # the project's own engine


# ---- CUDA sources (text only: the GPU tests compile them) ------------------------------------------------
def test_kernel_source_keeps_the_users_line_numbers() -> None:
    src = kernel_source("s2d", TensorFormat.parse("fp16 nhwc"), "line one\nline two")
    assert src.startswith("#include <cuda_fp16.h>\n#line 1 \"s2d_fp16_nhwc.cu\"\nline one")
    assert "cuda_fp16" not in kernel_source("s2d", FP32_NCHW, "x")


def test_compile_errors_name_the_line_of_the_users_code() -> None:
    code = 'extern "C" __global__ void k(float* out)\n{\n    out[0] = y;\n}\n'
    log = ("/tmp/tmpab12/s2d_fp32_nchw.cu(3): error: identifier \"y\" is undefined\n"
           "/tmp/tmpab12/s2d_fp32_nchw.cu(1): warning #177-D: something unused\n\n"
           "1 error detected in the compilation of \"s2d_fp32_nchw.cu\".\n")
    msg = compile_message("s2d", FP32_NCHW, code, log)
    assert msg == ("custom layer s2d: the CUDA kernel for fp32|nchw does not compile:\n"
                   "line 3: identifier \"y\" is undefined\n    3 | out[0] = y;")
    assert "the compiler gave no reason" in compile_message("s2d", FP32_NCHW, code, "")


def test_docs_custom_layer_example_loads_and_runs() -> None:
    """The definition shown on the Custom layers page loads, type-checks and runs as the text says."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "custom-layers.md").read_text(encoding="utf-8")
    section = text
    example = section.split("```xml\n")[1].split("```")[0]
    model = modelfile.loads('<network name="n"><layers><layer name="input" type="input">'
                            '<param name="dimensions" value="1x2x4x6"/></layer><layer name="c" type="custom:s2d">'
                            f'<input index="0" source="input"/></layer></layers>{example}</network>', "custom-layers.md", REG)
    assert check(model, REG) == []
    d = definitions(model)["s2d"]
    assert section.split("```\n")[1].strip() == d.shape
    CONSENT.grant([d])
    x = rand(1, 2, 4, 6)
    np.testing.assert_array_equal(Network(model, REG).infer({"input": x})["c"],
                                  run_layer("space_to_depth", {"block_size": 2}, [x], FP32_NCHW)[0])
    launch = section.split("```\n")[3].strip()
    from engine.custom.launch import parse_launch

    spec = parse_launch(launch)
    assert (spec.kernel, spec.block, spec.fixed) == ("k_custom", (16, 16, 8), (False, False, True))


def test_a_definition_that_cannot_run_is_reported_on_its_instances_before_running() -> None:
    broken = CustomLayerDef("broken", python="def forward(xp, inputs, params):\n    return (\n")
    model = net_with(broken)
    model.add_layer("custom:broken", "unlinked")  # reported even with its input unconnected
    msgs = {d.layer: d.message for d in errors(check(model, REG))}
    assert msgs["custom"].startswith("Python code, line 2:") and msgs["unlinked"].startswith("Python code, line 2:")
    nothing = CustomLayerDef("nothing")
    assert [d.message for d in errors(check(net_with(nothing), REG))] == [
        "at least one implementation is needed: Python code (CPU) or a CUDA kernel (GPU)"]
