"""One logger tree for the engine and the plugins (engine.log); a plugin's build warnings in the type check."""
from __future__ import annotations

import logging

from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.log import collect, get_logger, level_of, logger_name
from engine.model import Model
from engine.plugins import load_plugins
from engine.preprocess import preprocess
from engine.registry import PluginMeta
from engine.tensor import FORMATS
from engine.typecheck import check
from tests.harness import conv_bn_model


class Noisy(Layer):
    """A plugin layer that warns about a parameter while it is built."""

    desc = LayerDesc(name="noisy", display_name="Noisy", summary="copies its input, warns about odd sizes",
                     categories=("Tensor",), documentation="", inputs=(InputDesc("x"),),
                     params=(ParamDesc("size", "uint", 2),), formats=FORMATS)
    fused_activations = frozenset()

    def validate(self) -> None:
        if self.p["size"] % 2:
            self.log.warning("size %d is odd: it will be rounded up", self.p["size"])

    def output_dims(self, inputs):
        return self.primary(inputs)


def test_names_form_one_tree():
    assert logger_name("engine.network") == "layerlab.engine.network"
    assert logger_name("plugins.standard.convolution") == "layerlab.plugins.standard.convolution"
    assert logger_name("acme_layers.blur") == "layerlab.plugins.acme_layers.blur"
    assert logger_name("app.cli") == "layerlab.app.cli"
    assert get_logger("engine.run").parent.name == "layerlab"
    assert level_of(-1) == logging.ERROR and level_of(0) == logging.WARNING
    assert level_of(1) == logging.INFO and level_of(5) == logging.DEBUG


def test_a_plugin_warning_during_the_build_reaches_the_type_check_on_its_layer():
    reg = load_plugins()
    reg.register_plugin(PluginMeta("noisy", "1.0", "tests", "a warning layer"), lambda r: r.layer(Noisy), "tests")
    m = Model("warned")
    m.add_layer("input", "inp", params={"dimensions": "1x3x8x8"})
    m.add_layer("noisy", "odd", params={"size": "3"}, inputs=["inp"])
    m.add_layer("noisy", "even", params={"size": "4"}, inputs=["odd"])
    m.add_layer("output", "out", inputs=["even"])
    diags = [d for d in check(m, reg) if d.severity == "warning"]
    assert [(d.layer, d.message) for d in diags] == [("odd", "size 3 is odd: it will be rounded up")]
    with collect() as records:
        from engine.network import Network

        Network(m, reg)
    assert [(r.name, getattr(r, "layer", None)) for r in records] == [("layerlab.plugins.tests.engine.test_log", "odd")]


def test_building_and_fusing_log_at_info(registry):
    m = conv_bn_model("1x3x8x8", 4, conv="c")
    with collect(logging.INFO) as records:
        preprocess(m, registry)
    assert any(r.name == "layerlab.engine.preprocess" and "c + bn -> bn" in r.getMessage() for r in records)
    with collect(logging.WARNING) as quiet:
        preprocess(m, registry)
    assert quiet == []


def test_the_command_line_handler_keeps_its_level_when_the_tree_opens(capsys):
    from engine.log import TREE, configure

    old = TREE.level
    try:
        configure(0)
        TREE.setLevel(logging.INFO)  # what the designer's Log dock does
        get_logger("engine.network").info("an info line")
        get_logger("engine.network").warning("a warning line")
        err = capsys.readouterr().err
        assert "a warning line" in err and "an info line" not in err
    finally:
        TREE.setLevel(old)


def test_blocks_keep_their_own_records_nested_from_any_thread_and_leave_the_level_as_it_was():
    """Nested blocks of one level each get the records emitted while they are open (the inner one's end does not take
    the outer one's records away, although both hold equal, empty lists when it ends), a record from another thread
    too; a block of a lower level opens the tree for its span only; after the blocks nothing is collected."""
    import threading

    log = get_logger("engine.blocks_test")
    tree = logging.getLogger("layerlab")
    before = tree.level
    with collect() as outer:
        with collect() as inner:
            pass
        with collect() as second:
            log.warning("one")
            thread = threading.Thread(target=lambda: log.error("from a thread"))
            thread.start()
            thread.join()
        log.warning("two")
        with collect(logging.DEBUG) as detailed:
            log.debug("details")
        assert tree.level == before
    log.warning("after")
    assert [r.getMessage() for r in outer] == ["one", "from a thread", "two"]
    assert inner == [] and [r.getMessage() for r in second] == ["one", "from a thread"]
    assert [r.getMessage() for r in detailed] == ["details"]
