"""Custom layers (a model's own layer code) under the suite's classes: their code never runs without consent, a
shape script cannot ask for unbounded work or memory, and whatever their Python code raises (an exit included)
ends as one line naming the layer, exit status 2."""
from __future__ import annotations

import html

import pytest

from tests.hostile.conftest import inp, out

OK = "def forward(xp, inputs, params):\n    return inputs[0] * 2\n"


def custom_model(case, shape: str = "in.n, in.c, in.h, in.w", python: str = OK) -> None:
    layer = '<layer name="c1" type="custom:dbl"><input index="0" source="input"/></layer>'
    definition = (f'<custom-layers><custom-layer name="dbl" category="Custom"><input name="input" kind="primary"/>'
                  f"<shape>{html.escape(shape)}</shape><python>{html.escape(python)}</python></custom-layer>"
                  "</custom-layers>")
    case.model("m.lnet", "\n".join([inp(), layer, out("c1")]), extra=definition)


def test_no_code_runs_without_consent(case):
    custom_model(case, python="import os\nos.mkdir('ran')\ndef forward(xp, inputs, params):\n    return inputs[0]\n")
    case.expect(2, ["dbl", "--trust-custom-code"], "infer", "m.lnet", "-n", "1")
    assert not (case.dir / "ran").exists()


@pytest.mark.parametrize("shape", ["(" * 5000 + "in.n" + ")" * 5000 + ", in.c, in.h, in.w",
                                   "in.n, in.c, in.h * " + "9" * 5000 + ", in.w"])
def test_absurd_shape_scripts_are_refused(case, shape):
    custom_model(case, shape=shape)
    res = case.expect(2, ["dbl", "shape script"], "infer", "m.lnet", "-n", "1", "--trust-custom-code")
    assert len(res.error_lines[0]) < 300


def test_a_huge_output_is_refused_before_allocating(case):
    custom_model(case, shape="in.n, in.c, in.h * 100000, in.w * 100000")
    case.expect(2, ["c1", "TiB", "more than"], "infer", "m.lnet", "-n", "1", "--trust-custom-code")


@pytest.mark.parametrize("python,culprit", [
    ("def forward(xp, inputs, params):\n    raise SystemExit(0)\n", "SystemExit"),
    ("import sys\nsys.exit(4)\ndef forward(xp, inputs, params):\n    return inputs[0]\n", "SystemExit"),
    ("def forward(xp, inputs, params):\n    raise ValueError('v' * 5000)\n", "ValueError"),
    ("def forward(xp, inputs, params):\n    return 'abc'\n", "shape"),
])
def test_whatever_the_code_raises_is_one_line(case, python, culprit):
    custom_model(case, python=python)
    res = case.expect(2, ["dbl", culprit], "infer", "m.lnet", "-n", "1", "--trust-custom-code")
    assert len(res.error_lines[0]) < 600
