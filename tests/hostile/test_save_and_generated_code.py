"""Class 1 (continued): saving a model keeps nothing stale and loses nothing; generated code (PyTorch module,
standalone project, pyproject.toml) quotes model text properly, so every generated file compiles and the TOML
parses, whatever the network's version says."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engine import modelfile
from engine.errors import LayerLabError
from engine.model import Model
from tests.hostile.conftest import conv, inp, out


def _model(name: str = "m", version: str = "1.0") -> Model:
    m = Model(name, version)
    m.add_layer("input", "input", params={"dimensions": "1x3x8x8"})
    m.add_layer("convolution", "c1", params={"num_output_channels": "4"}, inputs=["input"])
    m.add_layer("output", "output", inputs=["c1"])
    return m


def test_stray_temporary_files_of_killed_saves_are_cleaned_by_the_next_save(tmp_path):
    path = tmp_path / "m.lnet"
    modelfile.save(_model(), path)
    for i in range(9):  # what killed saves leave: temporary names of processes that are gone
        (tmp_path / f".m.lnet.{i}abc.tmp").write_text("partial")
        (tmp_path / f".m.lnet.99999999-{i:08x}.tmp.lnet").write_text("partial")
    (tmp_path / ".other.lnet.1.tmp").write_text("not ours")
    modelfile.save(_model(version="2"), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.lnet.1.tmp", "m.lnet"]
    assert modelfile.load(path).version == "2"


def test_saving_through_a_symlink_updates_the_file_it_points_to(tmp_path):
    real = tmp_path / "real.lnet"
    modelfile.save(_model(version="1"), real)
    link = tmp_path / "link.lnet"
    link.symlink_to(real)
    modelfile.save(_model(version="2"), link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert modelfile.load(real).version == "2"


def test_a_read_only_model_file_is_not_replaced(tmp_path):
    path = tmp_path / "m.lnet"
    modelfile.save(_model(version="1"), path)
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP)
    with pytest.raises(LayerLabError, match=r"m\.lnet: the file is read-only"):
        modelfile.save(_model(version="2"), path)
    assert modelfile.load(path).version == "1"


def test_a_save_error_names_the_model_file_not_the_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "m.lnet"

    def full(*_a, **_k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(LayerLabError) as err:
        modelfile.save(_model(), path)
    assert str(err.value).startswith(f"{path}: cannot write the model file: No space left on device")
    assert ".tmp" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_the_folder_is_synced_after_the_rename(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync
    replaced: list[bool] = []
    real_replace = os.replace

    def fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        if synced[-1] == "folder":
            assert replaced, "the folder was synced before the rename"
        real_fsync(fd)

    def replace(a, b):
        replaced.append(True)
        real_replace(a, b)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    modelfile.save(_model(), tmp_path / "m.lnet")
    assert synced == ["file", "folder"]


HOSTILE_VERSIONS = ['1.0"""', "\\N", "'", '"', "a\nb", "}{", "%(prog)s", "\\", "é\u2028x", "0" * 3000]


@pytest.mark.parametrize("version", HOSTILE_VERSIONS, ids=range(len(HOSTILE_VERSIONS)))
def test_torch_and_project_exports_compile_with_a_hostile_version(case, version):
    from xml.sax.saxutils import quoteattr

    case.model("m.lnet", "\n".join([inp(), conv("c1", "input"), out("c1")]),
               network=f'name="net" version={quoteattr(version)}')
    case.expect(0, None, "export", "torch", "m.lnet", "-o", "t")
    case.expect(0, None, "export", "project", "m.lnet", "-o", "p", "--builder", "build")
    files = [*(case.dir / "t").glob("*.py"), *[f for f in (case.dir / "p" / "net").glob("*.py")]]
    assert len(files) >= 4
    for f in files:
        compile(f.read_text(encoding="utf-8"), str(f), "exec")
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    doc = tomllib.loads((case.dir / "p" / "pyproject.toml").read_text(encoding="utf-8"))
    assert doc["project"]["name"] == "net"
    ns: dict = {}
    exec(compile((case.dir / "t" / "net.py").read_text(encoding="utf-8").split("from pathlib")[0], "doc", "exec"), ns)
    assert repr(version)[1:-1] in ns["__doc__"] or version in ns["__doc__"]


@pytest.mark.parametrize("flag,value", [("--package", "../evil"), ("--package", "import"), ("--builder", "a b"),
                                        ("--builder", "x;import os"), ("--package", "engine")])
def test_project_export_validates_identifiers(case, flag, value):
    case.model("m.lnet", "\n".join([inp(), conv("c1", "input"), out("c1")]), network='name="net" version="1"')
    args = ["export", "project", "m.lnet", "-o", "p", "--builder", "build", flag, value]
    case.expect(2, value, *args)
    assert not (case.dir / "p").exists() or not any(Path(case.dir / "p").rglob("*.py"))
