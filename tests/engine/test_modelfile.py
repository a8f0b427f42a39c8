from __future__ import annotations

import os

import pytest

from engine import modelfile
from engine.errors import LayerLabError, ModelFileError
from engine.model import FusingRuleSpec, Model
from resources import SAMPLES


def rich_model() -> Model:
    m = Model("rich_net", "2.5")
    m.add_layer("input", "inp", params={"dimensions": "1x3x32x32", "scale": "2"}, position=(-10.5, 3.25))
    m.add_layer("convolution", "c1", params={"num_output_channels": "8", "kernel_size": "3x5"}, inputs=["inp"],
                activation="leaky_relu", act_coefs={"alpha": "0.2"}, position=(100, 200), permanent=True)
    m.add_layer("element_wise", "e", params={"operation": "max"}, inputs=["c1", None, "inp"])
    m.add_layer("output", "out", inputs=["e"], position=(400, 0))
    m.settings.update({"backend": "numpy", "format": "fp16|nhwc", "weights": "w dir/<&>"})
    m.fusing_rules.append(FusingRuleSpec("fp16|nhwc|conv_bn = batch_normalization {convolution}", False))
    m.templates["block"] = ('<template name="block"><inputs><input name="x" /></inputs><layers>'
                            '<layer name="c" type="convolution" x="0" y="0"><input index="0" source="$x" /></layer>'
                            '</layers><output source="c" /></template>')
    return m


def test_round_trip_keeps_everything(tmp_path, registry):
    m = rich_model()
    path = tmp_path / "rich.lnet"
    modelfile.save(m, path)
    loaded = modelfile.load(path, registry)
    assert loaded == m
    assert loaded.layers["c1"].position == (100.0, 200.0) and loaded.layers["inp"].position == (-10.5, 3.25)
    assert loaded.layers["e"].inputs == ["c1", None, "inp"]
    assert modelfile.dumps(loaded) == path.read_text()  # byte-stable second save
    assert not m.modified


def test_sample_model_loads_and_round_trips(registry):
    m = modelfile.load(SAMPLES / "denoiser.lnet", registry)
    assert modelfile.loads(modelfile.dumps(m), registry=registry) == m


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "m.lnet"
    modelfile.save(rich_model(), path)
    before = path.read_text()
    m2 = rich_model()
    m2.name = "changed"

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(LayerLabError, match="m.lnet: cannot write the model file: disk full"):
        modelfile.save(m2, path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.lnet"]  # no temp file left


@pytest.mark.parametrize("text,line,reason", [
    ('<?xml version="1.0"?>\n<network name="a">\n  <layers>\n    <layer name="x" type="input">\n', 5, "malformed XML"),
    ('<network><layers>\n<layer name="x" type="warp_drive"/></layers></network>', 2, "unknown layer type 'warp_drive'"),
    ('<network><layers>\n\n<layer name="c" type="convolution"><param name="num_output_channels" value="-3"/>'
     '</layer></layers></network>', 3, "parameter num_output_channels: '-3' is not an integer"),
    ('<network><layers><layer name="1c" type="input"/></layers></network>', 1, "not a valid identifier"),
    ('<network><layers><layer name="a" type="input"/>\n<layer name="a" type="input"/></layers></network>', 2,
     "duplicate layer name 'a'"),
    ('<graph/>', 1, "expected <network>"),
    ('<network format-version="99"/>', 1, "format-version '99' is not supported"),
    ('<network><layers><layer name="c" type="convolution"><input index="0" source="ghost"/></layer></layers></network>',
     None, "unknown layer 'ghost'"),
    ('<network><layers><layer name="c" type="convolution"><activation type="swoosh"/></layer></layers></network>',
     1, "unknown activation 'swoosh'"),
])
def test_malformed_files_name_file_line_and_reason(tmp_path, registry, text, line, reason):
    path = tmp_path / "bad.lnet"
    path.write_text(text)
    with pytest.raises(ModelFileError) as info:
        modelfile.load(path, registry)
    err = info.value
    assert err.path == str(path) and reason in err.reason
    if line is not None:
        assert err.line == line and str(err).startswith(f"{path}:{line}: ")


def test_entity_bomb_is_refused(tmp_path, registry):
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
            ' <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n'
            ' <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">\n]>\n'
            '<network name="&lol3;"/>\n')
    path = tmp_path / "bomb.lnet"
    path.write_text(bomb)
    with pytest.raises(ModelFileError, match="entities are not allowed"):
        modelfile.load(path, registry)


def test_external_entity_is_refused(tmp_path, registry):
    path = tmp_path / "ext.lnet"
    path.write_text('<?xml version="1.0"?>\n<!DOCTYPE n [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<network name="&x;"/>')
    with pytest.raises(ModelFileError, match="not allowed"):
        modelfile.load(path, registry)


def test_missing_and_empty_files(tmp_path, registry):
    with pytest.raises(ModelFileError, match="no such file"):
        modelfile.load(tmp_path / "nope.lnet", registry)
    (tmp_path / "empty.lnet").write_text("")
    with pytest.raises(ModelFileError, match="file is empty"):
        modelfile.load(tmp_path / "empty.lnet", registry)


def test_defaults_legacy_names_and_unknown_parameters(tmp_path, registry):
    path = tmp_path / "old.lnet"
    path.write_text('<network><layers><layer name="i" type="input"/>'
                    '<layer name="c" type="convolution"><param name="output_channels" value="5"/>'
                    '<param name="flux" value="1"/><input index="0" source="i"/></layer></layers></network>')
    m = modelfile.load(path, registry)
    assert m.layers["c"].params == {"num_output_channels": "5", "flux": "1"}
    assert any("unknown parameter 'flux'" in w for w in m.load_warnings)
