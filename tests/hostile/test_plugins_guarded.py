"""Class 3: plugins cannot take the application down. Whatever a plugin raises while importing or registering
(SystemExit and KeyboardInterrupt included), it is reported as failed with the reason and the others load; what
it registers is validated at registration, and a bad descriptor is refused naming the plugin and the field."""
from __future__ import annotations

import textwrap

import pytest

from tests.hostile.conftest import SMALL, inp, out

HEADER = '''
from engine.descriptors import InputDesc, InputKind, LayerDesc, ParamDesc, ActivationDesc, CoefDesc
from engine.layer import Layer, Activation
from engine.registry import PluginMeta
from engine.tensor import Dims
PLUGIN = PluginMeta("evil", "1.0", "someone", "a hostile plugin")
'''

LAYER = '''
class L(Layer):
    desc = {desc}
    def output_dims(self, inputs):
        return inputs[0]
    def forward(self, inputs, out):
        out[...] = inputs[0]
def register(r):
    r.layer(L)
'''

AT_IMPORT = {
    "sys_exit": "import sys\nsys.exit(0)",
    "sys_exit_code": "raise SystemExit(3)",
    "keyboard_interrupt": "raise KeyboardInterrupt",
    "syntax_error": "def (:",
    "import_error": "import no_such_module_xyz",
    "recursion": "def f(): return f()\nf()",
    "huge_message": "raise RuntimeError('x' * 100000)",
    "no_plugin_meta": "del PLUGIN\ndef register(r): pass",
    "no_register": "",
}

IN_REGISTER = {
    "sys_exit": "import sys\n    sys.exit(0)",
    "keyboard_interrupt": "raise KeyboardInterrupt",
    "not_a_class": "r.layer(42)",
    "no_desc": "r.layer(type('X', (Layer,), {}))",
    "rule_not_text": "r.fusing_rule(42)",
}

BAD_DESCRIPTORS = {
    "no_name": ('LayerDesc("", "No name", "s", inputs=(InputDesc("x"),))', "name"),
    "name_not_identifier": ('LayerDesc("bad name!", "B", "s", inputs=(InputDesc("x"),))', "name"),
    "uint_default_abc": ('LayerDesc("lay", "L", "s", inputs=(InputDesc("x"),), '
                         'params=(ParamDesc("count", "uint", "abc"),))', "parameter 'count': default 'abc'"),
    "float_default_text": ('LayerDesc("lay", "L", "s", inputs=(InputDesc("x"),), '
                           'params=(ParamDesc("f", "float", "nan"),))', "parameter 'f'"),
    "bool_default_text": ('LayerDesc("lay", "L", "s", inputs=(InputDesc("x"),), '
                          'params=(ParamDesc("b", "bool", "maybe"),))', "parameter 'b'"),
    "params_not_paramdesc": ('LayerDesc("lay", "L", "s", inputs=(InputDesc("x"),), params=("p",))', "params"),
    "duplicate_param": ('LayerDesc("lay", "L", "s", inputs=(InputDesc("x"),), '
                        'params=(ParamDesc("p", "uint", 1), ParamDesc("p", "uint", 2)))', "declared twice"),
    "inputs_not_inputdesc": ('LayerDesc("lay", "L", "s", inputs=("x",))', "inputs"),
    "infinite_not_last": ('LayerDesc("lay", "L", "s", inputs=(InputDesc("x", InputKind.PRIMARY_INFINITE), '
                          'InputDesc("y")))', "inputs: input 0"),
    "summary_not_text": ('LayerDesc("lay", "L", None, inputs=(InputDesc("x"),))', "summary"),
    "no_formats": ('LayerDesc("lay", "L", "s", inputs=(InputDesc("x"),), formats=())', "formats"),
    "name_5000_chars": ('LayerDesc("x" * 5000 + "!", "L", "s", inputs=(InputDesc("x"),))', "name"),
}


def _plugins(case, name: str, code: str) -> None:
    case.write(f"plugins/{name}.py", code)


def _other_layers_still_load(res) -> None:
    assert "convolution" in res.out and "standard" in res.out


@pytest.mark.parametrize("what", list(AT_IMPORT))
def test_plugin_failing_at_import_is_reported_and_the_others_load(case, what):
    _plugins(case, "evil", HEADER + AT_IMPORT[what] + "\n")
    res = case.expect(0, None, "layers", "--plugins", "plugins")
    line = next(ln for ln in res.out.splitlines() if ln.startswith("FAILED"))
    assert "evil.py" in line and len(line) < 1000
    _other_layers_still_load(res)
    case.model("m.lnet", SMALL)
    res = case.expect(0, None, "infer", "m.lnet", "-n", "1", "--plugins", "plugins")
    assert "evil.py failed to load" in res.err


@pytest.mark.parametrize("what", list(IN_REGISTER))
def test_plugin_failing_in_register_is_reported_and_the_others_load(case, what):
    _plugins(case, "evil", HEADER + "def register(r):\n    " + IN_REGISTER[what] + "\n")
    res = case.expect(0, None, "layers", "--plugins", "plugins")
    assert any(ln.startswith("FAILED plugin") and "evil" in ln for ln in res.out.splitlines())
    _other_layers_still_load(res)


@pytest.mark.parametrize("what", list(BAD_DESCRIPTORS))
def test_bad_descriptor_is_refused_naming_the_plugin_and_the_field(case, what):
    desc, field = BAD_DESCRIPTORS[what]
    _plugins(case, "evil", HEADER + LAYER.format(desc=desc))
    res = case.expect(0, None, "layers", "--plugins", "plugins")
    line = next(ln for ln in res.out.splitlines() if ln.startswith("FAILED"))
    assert "plugin evil:" in line and field in line and len(line) < 1000, line
    _other_layers_still_load(res)


def test_a_good_plugin_beside_a_bad_one_still_loads(case):
    _plugins(case, "evil", HEADER + "import sys\nsys.exit(1)\n")
    _plugins(case, "good", HEADER.replace('"evil"', '"good"') + LAYER.format(
        desc='LayerDesc("passthrough", "P", "passes its input", inputs=(InputDesc("x"),), '
             'params=(ParamDesc("n", "uint", 3),))'))
    res = case.expect(0, None, "layers", "--plugins", "plugins")
    assert "passthrough" in res.out and "FAILED" in res.out


def test_bad_activation_descriptor_is_refused(case):
    code = HEADER + textwrap.dedent('''
        class A(Activation):
            desc = ActivationDesc("bad act", "A", "s", coefficients=(CoefDesc("k", float("inf")),))
            elementwise = True
        def register(r):
            r.activation(A)
    ''')
    _plugins(case, "evil", code)
    res = case.expect(0, None, "layers", "--plugins", "plugins")
    line = next(ln for ln in res.out.splitlines() if ln.startswith("FAILED"))
    assert "plugin evil: activation" in line and "name" in line


RUNTIME_FAILURE = '''
class L(Layer):
    desc = LayerDesc("fragile", "Fragile", "fails when it runs", inputs=(InputDesc("x"),))
    def output_dims(self, inputs):
        {shape}
        return inputs[0]
    def forward(self, inputs, out):
        {forward}
        out[...] = inputs[0]
def register(r):
    r.layer(L)
'''


@pytest.mark.parametrize("where", ["forward", "output_dims"])
def test_a_plugin_layer_failing_while_it_runs_is_a_user_error_naming_the_layer(case, where):
    """An exception inside a third-party layer's code (not LayerLab's) is exit status 2 naming the layer, its type
    and its module, not an internal error."""
    bad, ok = "1 / 0", "pass"
    _plugins(case, "fragile", HEADER + RUNTIME_FAILURE.format(shape=bad if where == "output_dims" else ok,
                                                              forward=bad if where == "forward" else ok))
    layers = "\n".join([inp(), '<layer name="f1" type="fragile"><input index="0" source="input"/></layer>', out("f1")])
    case.model("m.lnet", layers)
    res = case.expect(2, ["f1", "fragile", "ZeroDivisionError"], "infer", "m.lnet", "-n", "1", "-b", "numpy",
                      "--plugins", "plugins")
    assert "plugin module" in res.error_lines[0]
