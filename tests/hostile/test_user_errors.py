"""Class 4: every user error is exit status 2 with one clear line naming the culprit; exit status 3 (a bug) is
never reached; long values are cut in messages."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from tests.hostile.conftest import SMALL, conv, inp, out


@pytest.mark.parametrize("setup,args,culprit", [
    ("dir:out.npy", ["-o", "output=out.npy"], ["out.npy", "folder"]),
    ("dir:out.png", ["-o", "output=out.png"], ["out.png", "folder"]),
    ("file:odir", ["--output-dir", "odir"], ["odir", "is a file"]),
    ("file:f", ["-o", "output=f/sub/x.npy"], ["f/sub/x.npy", "is a file, not a folder"]),
    ("", ["-o", "output=/proc/no_such/x.npy"], ["/proc/no_such/x.npy"]),
    ("", ["-o", "output=x.txt"], ["x.txt", "unsupported output file type"]),
    ("fifo:p.npy", ["-o", "output=p.npy"], ["p.npy", "not a regular file"]),
    ("", ["-o", "output=x.npy", "-o", "ghost=y.npy"], ["ghost"]),
])
def test_outputs_that_cannot_be_written(case, setup, args, culprit):
    case.model("m.lnet", SMALL)
    kind, _, name = setup.partition(":")
    if kind == "dir":
        (case.dir / name).mkdir()
    elif kind == "file":
        case.write(name, "x")
    elif kind == "fifo":
        os.mkfifo(case.dir / name)
    case.expect(2, culprit, "infer", "m.lnet", "-n", "1", *args)


@pytest.mark.parametrize("kind,setup,output,culprit", [
    ("onnx", "dir", "out.onnx", "folder"),
    ("preprocessed", "dir", "out.lnet", "folder"),
    ("torch", "file", "tdir", "is a file"),
    ("project", "file", "pdir", "is a file"),
    ("onnx", "parentfile", "f/out.onnx", "is a file, not a folder"),
    ("torch", "", "/proc/no_such/t", "/proc/no_such"),
])
def test_export_destinations_of_the_wrong_kind(case, kind, setup, output, culprit):
    case.model("m.lnet", "\n".join([inp(), conv("c1", "input"), out("c1")]))
    if setup == "dir":
        (case.dir / output).mkdir()
    elif setup == "file":
        case.write(output, "x")
    elif setup == "parentfile":
        case.write("f", "x")
    extra = ["--builder", "build"] if kind == "project" else []
    case.expect(2, [output.split("/")[0] if setup == "parentfile" else output, culprit],
                "export", kind, "m.lnet", "-o", output, *extra)


@pytest.mark.parametrize("network,culprit", [
    ('format-version="²" name="m"', "format-version '²'"),
    ('format-version="١" name="m"', "format-version"),
    ('format-version="' + "9" * 5000 + '" name="m"', "characters)"),
    ('format-version="-1" name="m"', "format-version '-1'"),
])
def test_bad_format_versions(case, network, culprit):
    case.write("m.lnet", f"<network {network}>\n<layers>{SMALL}</layers></network>")
    res = case.expect(2, ["m.lnet:1", culprit], "check", "m.lnet")
    assert len(res.err) < 1000


def test_5000_digit_number_in_a_fusing_rule(case):
    case.model("m.lnet", SMALL)
    case.write("rules.txt", "fp32|nchw|conv_bn = batch_normalization[epsilon > " + "9" * 5000 + "] {convolution}\n")
    case.expect(2, ["rules.txt:1", "too long"], "infer", "m.lnet", "-n", "1", "--fusing-rules", "rules.txt")


@pytest.mark.parametrize("value", ["9" * 5000, "x" * 5000, "1e999999", "٣", "-" + "9" * 30])
def test_huge_parameter_values_are_cut_in_the_message(case, value):
    case.model("m.lnet", "\n".join([inp(), f'<layer name="c1" type="convolution"><param name="num_output_channels" '
                                           f'value="{value}"/><input index="0" source="input"/></layer>', out("c1")]))
    res = case.expect(2, ["m.lnet:", "num_output_channels"], "infer", "m.lnet", "-n", "1")
    assert len(res.error_lines[0]) < 300


@pytest.mark.parametrize("cmd", [["infer"], ["profile"], ["export", "preprocessed"]])
def test_negative_seed(case, cmd):
    case.model("m.lnet", SMALL)
    extra = ["-o", "o.lnet"] if cmd[0] == "export" else ["-n", "1"]
    case.expect(2, ["--seed", "-5"], *cmd, "m.lnet", "--seed", "-5", *extra)


def test_infer_refuses_a_link_on_an_input_the_layer_does_not_take(case):
    layers = "\n".join([inp(), '<layer name="c1" type="dropout"><input index="0" source="input"/>'
                               '<input index="3" source="input"/></layer>', out("c1")])
    case.model("m.lnet", layers)
    res = case.expect(1, None, "check", "m.lnet")
    assert "beyond" in res.out
    case.expect(2, ["dropout c1", "input 3"], "infer", "m.lnet", "-n", "1")


def test_a_model_with_no_layers_does_not_run(case):
    case.model("m.lnet", "")
    case.expect(2, ["network m", "no layers"], "infer", "m.lnet", "-n", "1")
    case.expect(2, ["network m", "no layers"], "profile", "m.lnet", "-n", "1")


def test_a_link_to_a_missing_layer_gives_the_line(case):
    layers = "\n".join([inp(), conv("c1", "input"), conv("c2", "ghost"), out("c2")])
    case.model("m.lnet", layers)
    case.expect(2, ["m.lnet:6:", "layer c2", "'ghost'"], "check", "m.lnet")


def test_a_link_to_a_missing_layer_with_a_5000_character_name(case):
    layers = "\n".join([inp(), conv("c1", "x" * 5000), out("c1")])
    case.model("m.lnet", layers)
    res = case.expect(2, ["m.lnet:", "characters)"], "check", "m.lnet")
    assert len(res.error_lines[0]) < 300


def test_pickled_npy_input_is_refused_saying_pickles_are_never_loaded(case):
    case.model("m.lnet", SMALL)
    np.save(case.dir / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    case.write("raw.npy", pickle.dumps({"evil": True}))
    for name in ("obj.npy", "raw.npy"):
        res = case.expect(2, [name, "never loads pickled files"], "infer", "m.lnet", "-i", f"input={name}")
        assert "allow_pickle" not in res.err


def test_pickled_weights_are_refused_saying_pickles_are_never_loaded(case):
    case.model("m.lnet", SMALL)
    (case.dir / "w").mkdir()
    np.save(case.dir / "w" / "c1_weights.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    res = case.expect(2, ["c1_weights.npy", "never loads pickled files"], "infer", "m.lnet", "-w", "w")
    assert "allow_pickle" not in res.err


@pytest.mark.parametrize("content,culprit", [
    (b"", "empty"),
    (b"\x00\xff\xfe garbage", "malformed XML"),
    (b'<?xml version="1.0"?><!DOCTYPE n [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]><network>&b;</network>',
     "entities are not allowed"),
    (b'<!DOCTYPE n [<!ENTITY x SYSTEM "file:///etc/passwd">]><network name="&x;"/>', "entities are not allowed"),
    (b"<graph/>", "expected <network>"),
    (b'<network name="m"><layers><layer name="a" type="input"/><layer name="a" type="input"/></layers></network>',
     "duplicate layer name"),
    ('<network name="m"><layers><layer name="ä" type="input"/></layers></network>'.encode(), "not a valid identifier"),
])
def test_broken_model_files(case, content, culprit):
    case.write("m.lnet", content)
    case.expect(2, ["m.lnet", culprit], "check", "m.lnet")


@pytest.mark.parametrize("args,culprit", [
    (["infer", "missing.lnet"], "missing.lnet"),
    (["infer", "."], "."),
    (["compare", "missing.json"], "missing.json"),
    (["compare", "."], "is a folder"),
    (["infer", "m.lnet", "-i", "input=nope.png"], "nope.png"),
    (["infer", "m.lnet", "-i", "input=m.lnet"], "unsupported input file type"),
    (["infer", "m.lnet", "-w", "nowhere"], "nowhere"),
    (["infer", "m.lnet", "--fusing-rules", "nofile"], "nofile"),
    (["infer", "m.lnet", "-n", "0"], "--iterations"),
    (["infer", "m.lnet", "-f", "fp8", "nchw"], "fp8"),
    (["infer", "m.lnet", "-b", "tpu"], "tpu"),
])
def test_bad_arguments(case, args, culprit):
    case.model("m.lnet", SMALL)
    case.expect(2, culprit, *args)


@pytest.mark.parametrize("content,culprit", [
    (b"not json", "not valid JSON"),
    (b'{"schema": "layerlab-report"}', "not a LayerLab report"),
    (b"[]", "not a LayerLab report"),
    (b'{"schema": "layerlab-report", "version": ' + b"9" * 5000 + b"}", "not a LayerLab report"),
    (b"\xff\xfe\x00", "not valid JSON"),
    (b'{"schema":"layerlab-report","version":1,"model":{},"run":{},"network":{"avg_ms":1},"layers":[]}', "model.name"),
    (b'{"schema":"layerlab-report","version":1,"model":{"name":"x"},"run":{"backend":"numpy","format":"f",'
     b'"device":"d"},"network":{"avg_ms":1},"layers":[{"name":"a","type":"b","time_ms":{"mean":"x"},"flops":1}]}',
     "layers[0].time_ms.mean"),
])
def test_broken_reports(case, content, culprit):
    case.write("r.json", content)
    res = case.expect(2, ["r.json", culprit], "compare", "r.json")
    assert len(res.error_lines[0]) < 400


def test_compare_base_out_of_range(case):
    case.write("r.json", b'{"schema":"layerlab-report","version":1,"model":{"name":"x"},"run":{"backend":"numpy",'
                         b'"format":"f","device":"d"},"network":{"avg_ms":1},"layers":[{"name":"a","type":"b",'
                         b'"time_ms":{"mean":1},"flops":1}]}')
    case.expect(0, None, "compare", "r.json")
    case.expect(2, ["base report 5"], "compare", "r.json", "--base", "5")


@pytest.mark.parametrize("args,culprit", [
    (["--threshold", "-1"], "--threshold"),
    (["--candidate", "fp8"], "fp8"),
    (["-i", "input=nope.png"], "nope.png"),
])
def test_drift_bad_arguments(case, args, culprit):
    case.model("m.lnet", SMALL)
    case.expect(2, culprit, "drift", "m.lnet", *args)


def test_corrupt_image_input(case):
    case.model("m.lnet", SMALL)
    case.write("bad.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 50)
    case.expect(2, ["bad.png", "cannot decode"], "infer", "m.lnet", "-i", "input=bad.png")


@pytest.mark.parametrize("layer,culprit", [
    (f'<layer name="c1" type="{"t" * 5000}"><input index="0" source="input"/></layer>', "unknown layer type"),
    (f'<layer name="c1" type="template:{"t" * 5000}"><input index="0" source="input"/></layer>', "unknown layer type"),
    ('<layer name="c1" type="dropout"><activation type="' + "a" * 5000 + '"/><input index="0" source="input"/></layer>',
     "unknown activation"),
    ('<layer name="c1" type="dropout"><activation type="relu"><coef name="alpha" value="1"/></activation>'
     '<input index="0" source="input"/></layer>', "coefficient"),
    ('<layer name="' + "n" * 5000 + '!" type="dropout"/>', "not a valid identifier"),
])
def test_long_names_are_cut_in_messages(case, layer, culprit):
    case.model("m.lnet", "\n".join([inp(), layer]))
    res = case.expect(2, ["m.lnet:", culprit], "check", "m.lnet")
    assert len(res.error_lines[0]) < 600


def test_npy_header_declaring_more_data_than_the_file_holds(case):
    case.model("m.lnet", SMALL)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 100000, 100000), }"
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    case.write("huge.npy", b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 64)
    res = case.expect(2, ["huge.npy", "declares 120000000000 bytes"], "infer", "m.lnet", "-i", "input=huge.npy")
    assert "MemoryError" not in res.err
    (case.dir / "w").mkdir()
    (case.dir / "w" / "c1_weights.npy").write_bytes((case.dir / "huge.npy").read_bytes())
    case.expect(2, ["c1_weights.npy", "more than the file holds"], "infer", "m.lnet", "-w", "w")
