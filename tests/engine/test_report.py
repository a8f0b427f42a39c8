from __future__ import annotations

import io
import json

import pytest

from app.cli import main
from engine import report as rep
from engine.errors import LayerLabError
from engine.modelfile import load
from engine.network import Network
from engine.profiling import Cancelled, profile
from resources import SAMPLES

MODEL = str(SAMPLES / "denoiser.lnet")


@pytest.fixture(scope="module")
def sample_report(registry):
    model = load(MODEL, registry)
    net = Network(model, registry)
    result = profile(net, iterations=3, warmup=1)
    doc = rep.build_report(result, model_name=model.name, model_version=model.version, model_path=MODEL,
                           backend="numpy", device="cpu", fmt="fp32|nchw", iterations=3, warmup=1)
    return net, doc


def test_report_matches_the_network(sample_report):
    net, doc = sample_report
    assert [x["name"] for x in doc["layers"]] == net.order
    assert [x["type"] for x in doc["layers"]] == ["input", "convolution", "convolution", "convolution", "convolution",
                                                  "element_wise", "output"]
    assert [x["output_dims"] for x in doc["layers"]] == [str(net.dims(n)) for n in net.order]
    conv1 = doc["layers"][1]
    # 2 * N*Cout*H*W * Cin*Kh*Kw multiply-adds + bias + relu per output value
    assert conv1["flops"] == 2 * 16 * 96 * 128 * 3 * 9 + 2 * 16 * 96 * 128
    assert conv1["output_bytes"] == 16 * 96 * 128 * 4
    assert conv1["bytes_read"] == (3 * 96 * 128 + 16 * 3 * 9 + 16) * 4
    assert all(x["time_ms"]["min"] > 0 for x in doc["layers"] if not x["bypass"])
    assert doc["layers"][-1]["bypass"] and doc["layers"][-1]["flops"] == 0
    n = doc["network"]
    assert n["sum_layers_ms"] <= n["avg_ms"] * 1.05 and n["sum_layers_ms"] >= 0.5 * n["avg_ms"]
    assert abs(sum(x["share"] for x in doc["layers"]) - 1) < 1e-9
    assert n["peak_memory_bytes"] == net.peak_memory_bytes > 0


def test_json_round_trip_and_html(sample_report, tmp_path):
    _, doc = sample_report
    j, h = rep.report_paths(tmp_path / "r")
    rep.write_json(doc, j)
    rep.write_html(doc, h)
    assert rep.load(j) == json.loads(json.dumps(doc))
    page = h.read_text()
    assert "<table id='layers' class='sortable'>" in page and "<td>conv2</td>" in page and "<svg" in page
    assert "http://" not in page and "https://" not in page  # self-contained


def test_invalid_reports(tmp_path):
    (tmp_path / "a.json").write_text("{")
    with pytest.raises(LayerLabError, match="not valid JSON"):
        rep.load(tmp_path / "a.json")
    (tmp_path / "b.json").write_text('{"schema": "other"}')
    with pytest.raises(LayerLabError, match="not a LayerLab report"):
        rep.load(tmp_path / "b.json")
    (tmp_path / "c.json").write_text('{"schema": "layerlab-report", "version": 1, "model": {}, "run": {}}')
    with pytest.raises(LayerLabError, match="missing network"):
        rep.load(tmp_path / "c.json")


def test_compare_with_itself_is_zero_and_missing_layers_are_kept(sample_report):
    _, doc = sample_report
    c = rep.compare([doc, doc])
    assert all(c.diff(vals, 1) == 0 for _, _, vals in c.rows)
    other = json.loads(json.dumps(doc))
    other["layers"] = [x for x in other["layers"] if x["name"] != "conv2"]
    other["layers"].append(dict(doc["layers"][1], name="conv9"))
    c = rep.compare([doc, other], base=1)
    rows = {(n, t): v for n, t, v in c.rows}
    assert rows[("conv2", "convolution")][1] is None and rows[("conv9", "convolution")][0] is None
    text = rep.comparison_text(c)
    assert "missing" in text and "conv9" in text
    assert "missing" in rep.comparison_html(c)
    with pytest.raises(LayerLabError, match="base report 5 does not exist"):
        rep.compare([doc], base=5)


def test_tables_and_charts_keep_the_end_of_long_names_that_share_a_start(sample_report):
    _, doc = sample_report
    deep = json.loads(json.dumps(doc))
    for i, x in enumerate(deep["layers"]):  # an imported network: every name starts with the same module path
        x["name"] = f"features_denseblock3_denselayer{i}_conv2_{x['name']}"
    names = [x["name"] for x in deep["layers"]]
    text, table = rep.comparison_text(rep.compare([deep, deep])), rep.layer_table(deep)
    for name in names:
        shown = name if len(name) <= rep.NAME_COLUMN else "\u2026" + name[-(rep.NAME_COLUMN - 1):]
        assert shown in text and shown in table
    assert len({line.split()[0] for line in table.splitlines()[2:]}) == len(names)  # told apart
    page = rep.to_html(deep)
    assert all(f"<title>{name}</title>" in page for name in names)  # the chart's full names on hover
    assert "denselayer2_conv2_conv2</text>" in page  # and their ends written


def test_cancel_stops_within_a_layer(registry):
    net = Network(load(MODEL, registry), registry)
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > 3
    with pytest.raises(Cancelled):
        profile(net, iterations=5, warmup=0, should_cancel=cancel)
    assert not net.hooks.before_layer and not net.hooks.after_layer  # hooks removed


def test_profile_and_compare_cli(tmp_path, capsys):
    out = io.StringIO()
    assert main(["profile", MODEL, "-n", "2", "-b", "numpy", "--report", str(tmp_path / "a")], out=out) == 0
    text = out.getvalue()
    assert "average" in text and "conv1" in text and (tmp_path / "a.html").is_file()
    lines = [line for line in text.splitlines() if line.startswith("conv")]
    means = [float(line.split()[3]) for line in lines]
    assert means == sorted(means, reverse=True)  # sorted by time
    assert "iteration 2/2" in capsys.readouterr().err  # plain progress lines when not a terminal
    out = io.StringIO()
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"), "--html", str(tmp_path / "c.html")],
                out=out) == 0
    assert "+0.0000" in out.getvalue() and (tmp_path / "c.html").is_file()
    assert main(["compare", str(tmp_path / "none.json")], out=io.StringIO()) == 2
