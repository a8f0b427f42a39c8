"""Class 2: bounded work for small files. Cost follows what the file really describes; absurd sizes are refused
before anything is allocated, naming the layer and the size; no recursion on depths a file controls."""
from __future__ import annotations

import json
import struct
import zlib

import pytest

from tests.hostile.conftest import SMALL, conv, inp, out


def _template(name: str, inner: str) -> str:
    return (f'<template name="{name}"><inputs><input name="x"/></inputs><layers>'
            f'<layer name="a" type="{inner}"><input index="0" source="$x"/></layer>'
            f'<layer name="b" type="{inner}"><input index="0" source="a"/></layer>'
            '</layers><output source="b"/></template>')


def _nested_templates(depth: int) -> str:
    """t0 is a pair of dropouts; t(k) is a pair of t(k-1): 2**depth layers described in a few KB."""
    defs = [_template("t0", "dropout")] + [_template(f"t{k}", f"template:t{k - 1}") for k in range(1, depth)]
    return "<templates>" + "".join(defs) + "</templates>"


def _instance_of(template: str) -> str:
    return "\n".join([inp(dims="1x1x4x4"), f'<layer name="i1" type="template:{template}"><input index="0" '
                      'source="input"/></layer>', out("i1")])


def test_nested_templates_are_checked_once_per_definition(case):
    # depth 16 took 79 s and each level doubled it: depth 40 would never end. Each definition is now checked
    # once, and an expansion to 2**40 layers is refused by counting, not by expanding
    case.model("m.lnet", _instance_of("t39"), extra=_nested_templates(40))
    assert (case.dir / "m.lnet").stat().st_size < 16_000
    case.expect(2, ["network m", "expand to 1099511627778 layers"], "check", "m.lnet", timeout=60)
    case.expect(2, ["network m", "expand to"], "infer", "m.lnet", "-n", "1", timeout=60)


def test_nested_templates_of_a_reasonable_size_check_and_run(case):
    case.model("m.lnet", _instance_of("t9"), extra=_nested_templates(10))  # 1024 layers
    res = case.expect(0, None, "check", "m.lnet", timeout=60)
    assert "0 error(s)" in res.out
    case.expect(0, None, "infer", "m.lnet", "-n", "1", timeout=60)


def test_a_chain_of_thousands_of_nested_templates_is_refused_quickly(case):
    defs = [_template("t0", "dropout")] + [
        f'<template name="t{k}"><inputs><input name="x"/></inputs><layers><layer name="a" type="template:t{k - 1}">'
        f'<input index="0" source="$x"/></layer></layers><output source="a"/></template>' for k in range(1, 3000)]
    layers = "\n".join([inp(dims="1x1x4x4"), '<layer name="i1" type="template:t2999"><input index="0" '
                        'source="input"/></layer>', out("i1")])
    case.model("m.lnet", layers, extra="<templates>" + "".join(defs) + "</templates>")
    case.expect(2, ["m.lnet", "nested more than"], "check", "m.lnet", timeout=60)


@pytest.mark.parametrize("index", ["99999999999", "5000", "1" * 5000, "²", "-1", "0x10"])
def test_absurd_input_index_is_refused(case, index):
    case.model("m.lnet", "\n".join([inp(), f'<layer name="c1" type="concatenation"><input index="{index}" '
                                           'source="input"/></layer>', out("c1")]))
    case.expect(2, ["m.lnet:", "input index"], "infer", "m.lnet", "-n", "1")


@pytest.mark.parametrize("cmd", ["infer", "profile"])
def test_huge_input_is_refused_before_allocating(case, cmd):
    case.model("m.lnet", "\n".join([inp(dims="1x3x100000x100000"), conv("c1", "input"), out("c1")]))
    case.expect(2, ["input", "GiB", "more than"], cmd, "m.lnet", "-n", "1")


def test_huge_kernel_is_refused_naming_the_layer_and_the_size(case):
    layers = "\n".join([inp(dims="1x60000x16x16"), conv("big", "input", channels=60000,
                                                     extra='<param name="kernel_size" value="11"/>'), out("big")])
    case.model("m.lnet", layers)
    res = case.expect(2, ["convolution big", "weight 'weights'", "TiB"], "infer", "m.lnet", "-n", "1")
    assert "MemoryError" not in res.err


def test_check_warns_about_a_network_that_will_not_fit(case):
    case.model("m.lnet", "\n".join([inp(dims="1x3x100000x100000"), conv("c1", "input"), out("c1")]))
    res = case.expect(0, None, "check", "m.lnet")
    assert "warning: input: will not fit in memory" in res.out and "GiB" in res.out


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares width x height gray pixels (its data is a few bytes: a decompression bomb)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b"")


def test_image_decoded_size_is_checked_before_decoding(case):
    case.model("m.lnet", SMALL)
    case.write("bomb.png", _png_header(20000, 20000))
    case.expect(2, ["bomb.png", "20000x20000", "LAYERLAB_MAX_IMAGE_PIXELS"], "infer", "m.lnet", "-i", "input=bomb.png")


def test_the_pixel_limit_is_configurable(case):
    import numpy as np

    case.model("m.lnet", SMALL)
    np.save(case.dir / "x.npy", np.zeros((1, 3, 16, 16), np.float32))
    case.write("small.png", _png_header(64, 64))
    case.expect(2, ["small.png", "64x64", "limit of 100 pixels"], "infer", "m.lnet", "-i", "input=small.png",
                env={"LAYERLAB_MAX_IMAGE_PIXELS": "100"})
    case.expect(2, "LAYERLAB_MAX_IMAGE_PIXELS", "infer", "m.lnet", "-i", "input=small.png",
                env={"LAYERLAB_MAX_IMAGE_PIXELS": "lots"})


def test_cycle_in_a_20000_layer_chain(case):
    n = 20000
    layers = [f'<layer name="d{i}" type="dropout"><input index="0" source="d{(i + 1) % n}"/></layer>' for i in range(n)]
    case.model("m.lnet", "\n".join(layers))
    res = case.expect(1, None, "check", "m.lnet", timeout=90)
    assert "is part of a cycle" in res.out
    case.expect(2, "cycle", "infer", "m.lnet", "-n", "1", timeout=90)


def test_a_20000_layer_chain_without_cycle_checks(case):
    n = 20000
    layers = [inp(dims="1x1x2x2")] + [f'<layer name="d{i}" type="dropout"><input index="0" source="'
                                      f'{"input" if i == 0 else f"d{i - 1}"}"/></layer>' for i in range(n)]
    case.model("m.lnet", "\n".join(layers))
    res = case.expect(0, None, "check", "m.lnet", timeout=120)
    assert "0 error(s)" in res.out


def test_deep_xml_in_custom_layers(case):
    deep = "<a>" * 100_000 + "</a>" * 100_000
    case.model("m.lnet", SMALL, extra=f'<custom-layers><custom-layer name="x">{deep}</custom-layer></custom-layers>')
    case.expect(2, ["m.lnet:", "nested more than"], "check", "m.lnet")


@pytest.mark.parametrize("where", ["model", "file"])
def test_5000_nested_parentheses_in_a_fusing_rule(case, where):
    rule = "fp32|nchw|conv_bn = batch_normalization[" + "(" * 5000 + "act == 'none'" + ")" * 5000 + "] {convolution}"
    if where == "model":
        case.model("m.lnet", SMALL, extra=f"<fusing-rules><rule>{rule}</rule></fusing-rules>")
        case.expect(2, ["fusing rule", "nested more than"], "infer", "m.lnet", "-n", "1")
    else:
        case.model("m.lnet", SMALL)
        case.write("rules.txt", rule + "\n")
        case.expect(2, ["rules.txt:1", "nested more than"], "infer", "m.lnet", "-n", "1", "--fusing-rules", "rules.txt")


def test_5000_negations_in_a_fusing_rule(case):
    rule = "fp32|nchw|conv_bn = batch_normalization[" + "!" * 5000 + "(act == 'none')] {convolution}"
    case.model("m.lnet", SMALL)
    case.write("rules.txt", rule + "\n")
    case.expect(2, ["rules.txt:1", "nested more than"], "infer", "m.lnet", "-n", "1", "--fusing-rules", "rules.txt")


def test_deeply_nested_report_json(case):
    case.write("r.json", "[" * 100_000 + "]" * 100_000)
    case.expect(2, ["r.json", "nested too deeply"], "compare", "r.json")
    case.write("d.json", json.dumps({"schema": "layerlab-report", "version": 1, "model": {"x": [[[[[]]]]]}}))
    case.expect(2, ["d.json", "not a LayerLab report"], "compare", "d.json")


@pytest.mark.parametrize("cmd", ["check", "infer"])
def test_a_long_chain_of_network_files_is_refused_by_depth(case, cmd):
    """Each of 100 small files uses the next as a network layer: the nesting is capped (no deep recursion)."""
    for i in range(100):
        inner = "dropout" if i == 99 else f"network:chain{i + 1}.lnet"
        case.model(f"chain{i}.lnet", "\n".join([inp(dims="1x1x4x4"), f'<layer name="c" type="{inner}"><input '
                                               'index="0" source="input"/></layer>', out("c")]), network=f'name="n{i}"')
    res = case.run(cmd, "chain0.lnet", *(["-n", "1"] if cmd == "infer" else []))
    assert res.rc in (1, 2) and "Traceback" not in res.err
    assert "nested more than 64 levels" in res.err + res.out


def _network_tree(case, depth: int) -> None:
    """tree0.lnet .. tree{depth-1}.lnet: each uses the next twice in a row (the last: two dropouts), so the
    expanded size doubles at every level while every file stays a few hundred bytes."""
    for i in range(depth):
        inner = "dropout" if i == depth - 1 else f"network:tree{i + 1}.lnet"
        layers = "\n".join([inp(dims="1x1x4x4"),
                            f'<layer name="a" type="{inner}"><input index="0" source="input"/></layer>',
                            f'<layer name="b" type="{inner}"><input index="0" source="a"/></layer>', out("b")])
        case.model(f"tree{i}.lnet", layers, network=f'name="n{i}"')


@pytest.mark.parametrize("cmd", ["check", "infer"])
def test_a_tree_of_network_files_doubling_at_every_level_is_refused_at_once(case, cmd):
    # 25 files, each using the next twice: 2**25 layers. Each file used to be read, expanded and checked again
    # for every reference (about 280 s before the layer cap refused it); now each file is expanded once and
    # the size is counted from the files before expanding
    _network_tree(case, 25)
    case.expect(2, ["network n0", "expand to 33554434 layers", "network file tree1.lnet", "16777216"],
                cmd, "tree0.lnet", *(["-n", "1"] if cmd == "infer" else []), timeout=20)


def test_a_tree_of_network_files_of_a_reasonable_size_checks_and_runs(case):
    _network_tree(case, 10)  # 1024 layers, from files each used 2 to 512 times
    res = case.expect(0, None, "check", "tree0.lnet", timeout=60)
    assert "0 error(s)" in res.out
    case.expect(0, None, "infer", "tree0.lnet", "-n", "1", timeout=60)
