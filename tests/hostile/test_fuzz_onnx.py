"""Fuzzing ``layerlab import`` with Hypothesis: a valid ONNX model mutated (bytes flipped, the file truncated,
attributes of the wrong type, dims changed, nodes removed or duplicated, names replaced), imported in this
process. Every case must end with exit status 0 or 2 (never 3, never an uncaught exception), within its time
limit, writing nothing outside its folder. Derandomized: the same examples on every run. A case that once failed
is kept in tests/hostile/corpus/ (test_corpus.py replays them)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.inprocess import layerlab, tree
from tests.hostile.onnx_models import small_net

EXAMPLES = 200
BASE = small_net().SerializeToString()
NAMES = ["x", "y", "w1", "b1", "c1", "r1", "p1", "", "missing", "../evil", "c2" * 40, "é", "x\x00y"]


def _mutate_proto(data: st.DataObject) -> bytes:
    m = onnx.ModelProto()
    m.ParseFromString(BASE)
    g = m.graph
    for _ in range(data.draw(st.integers(1, 3), "mutations")):
        kind = data.draw(st.sampled_from(["attr_type", "attr_value", "dims", "remove", "duplicate", "rename",
                                          "raw_data", "data_type", "opset"]), "kind")
        node = g.node[data.draw(st.integers(0, len(g.node) - 1), "node")] if len(g.node) else None
        init = g.initializer[data.draw(st.integers(0, len(g.initializer) - 1), "init")] if len(g.initializer) else None
        if kind == "attr_type" and node is not None and node.attribute:
            a = node.attribute[data.draw(st.integers(0, len(node.attribute) - 1), "attr")]
            a.type = data.draw(st.integers(0, 16), "type")
        elif kind == "attr_value" and node is not None and node.attribute:
            a = node.attribute[data.draw(st.integers(0, len(node.attribute) - 1), "attr")]
            values = data.draw(st.lists(st.integers(-2**40, 2**40), max_size=6), "ints")
            del a.ints[:]
            a.ints.extend(values)
            a.i = data.draw(st.integers(-2**40, 2**40), "int")
        elif kind == "dims" and init is not None:
            dims = data.draw(st.lists(st.integers(-3, 10**6), max_size=6), "dims")
            del init.dims[:]
            init.dims.extend(dims)
        elif kind == "remove" and node is not None:
            g.node.remove(node)
        elif kind == "duplicate" and node is not None:
            g.node.insert(data.draw(st.integers(0, len(g.node)), "at"), node)
        elif kind == "rename" and node is not None:
            where = data.draw(st.sampled_from(["input", "output", "name"]), "where")
            name = data.draw(st.sampled_from(NAMES), "name")
            if where == "name":
                node.name = name
            elif getattr(node, where):
                getattr(node, where)[data.draw(st.integers(0, len(getattr(node, where)) - 1), "i")] = name
        elif kind == "raw_data" and init is not None:
            init.raw_data = init.raw_data[: data.draw(st.integers(0, len(init.raw_data)), "cut")]
        elif kind == "data_type" and init is not None:
            init.data_type = data.draw(st.integers(0, 30), "data_type")
        elif kind == "opset":
            m.opset_import[0].version = data.draw(st.integers(-1, 40), "version")
    return m.SerializeToString()


def _mutate_bytes(data: st.DataObject) -> bytes:
    raw = bytearray(BASE)
    if data.draw(st.booleans(), "truncate"):
        return bytes(raw[: data.draw(st.integers(0, len(raw) - 1), "length")])
    for _ in range(data.draw(st.integers(1, 8), "flips")):
        i = data.draw(st.integers(0, len(raw) - 1), "at")
        raw[i] ^= 1 << data.draw(st.integers(0, 7), "bit")
    return bytes(raw)


def import_case(content: bytes, timeout: float = 30.0) -> int:
    """Import ``content`` as an ONNX file in a folder of its own; asserts the guarantees, returns the status."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        case = root / "case"
        case.mkdir()
        (case / "m.onnx").write_bytes(content)
        before = tree(root)
        res = layerlab(["import", case / "m.onnx", "-o", case / "m.lnet", "--no-clean", "--max-nodes", "1000"],
                       timeout)
        assert res.rc in (0, 2), (res.rc, res.err)
        if res.rc == 2:
            errors = [line for line in res.err.splitlines() if line.startswith("layerlab: error:")]
            assert len(errors) == 1 and "internal error" not in res.err, res.err
        outside = {p: v for p, v in tree(root).items() if not p.startswith("case")}
        assert outside == {p: v for p, v in before.items() if not p.startswith("case")}
        return res.rc


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_fuzz_onnx_structure(data):
    import_case(_mutate_proto(data))


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_fuzz_onnx_bytes(data):
    import_case(_mutate_bytes(data))


def test_the_unmutated_model_imports():
    """The fuzzers' starting point is valid: mutations are what fails."""
    assert import_case(BASE) == 0
