"""The preprocessor: the model a network builds, made from the model a user designed.

``preprocess`` runs a list of passes over a private copy of the model, in order:

1. ``overrides``: the run's per-layer format settings (``--layer-format``) put over the model's own;
2. ``networks``: every network layer replaced by the layers of the model it references (``engine.netlayers``),
   named ``<layer>__<inner>``, their weights read through its own weights source;
3. ``templates``: every template instance replaced by its layers (``engine.templates.expand``), named
   ``<instance>__<layer>``, so fusing rules apply across instance boundaries;
4. ``formats``: every layer's format decided (``engine.format_conversion.layer_formats``: the network's, the layer's own
   setting, or the nearest format its type implements) and written on the layers that differ from the network;
5. ``fusing``: the fusing rules, matched per layer format (``engine.fusing.apply_rules``);
6. ``conversions``: a ``format_conversion`` layer on every link between layers of different formats
   (``engine.format_conversion.insert_conversions``).

Each pass is a function ``(result, options) -> None`` that replaces ``result.model`` and records what it
did on the result, so a later step (custom layers resolved, per-layer format conversions inserted) is one
more function in ``PASSES``. The network (``engine.network.Network``) and the preprocessed-model export
(``engine.export.preprocessed``) both call ``preprocess``; neither runs the steps itself.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from engine.format_conversion import Conversions, apply_overrides, insert_conversions, layer_formats
from engine.fusing import FusedModel, FusingRule, MappedWeights, apply_rules, rules_from
from engine.log import get_logger
from engine.model import Model
from engine.netlayers import NetworkExpansion, expand_networks, has_network_layers, merge, routed_weights
from engine.registry import Registry
from engine.templates import Expansion, expand, has_instances
from engine.tensor import FP32_NCHW, TensorFormat
from engine.weights import WeightsSource

log = get_logger(__name__)


@dataclass(frozen=True)
class PreprocessOptions:
    """What the passes need besides the model: the plugins, the tensor format, the fusing choice (``'on'``,
    ``'off'``, a rules file or a list of parsed rules), the layers fusing must keep (breakpoints) and the run's
    per-layer format settings (layer or template instance name -> ``fp32``, ``nhwc``, ``fp32 nchw``...)."""

    registry: Registry
    fmt: TensorFormat = FP32_NCHW
    fusing: str | Sequence[FusingRule] = "on"
    protected: AbstractSet[str] = frozenset()
    layer_formats: Mapping[str, str] = field(default_factory=dict)
    #: the format layers without a setting compute in (the backend's choice for ``fmt``); None: ``fmt``
    compute: TensorFormat | None = None


@dataclass
class PreprocessResult:
    """The preprocessed model and what each pass did.

    ``model``: the model to build (the input model itself when no pass changed anything).
    ``source``: the model given to ``preprocess`` (unchanged).
    ``expansion``: what network-layer and template expansion did, as one (None when the model has neither).
    ``networks``: what network-layer expansion did (None without network layers; its ``weights`` route them).
    ``fused``: what the fusing rules did (None when no rule was to be applied).
    ``conversions``: every layer's format, the conversions inserted and the layers in another format than the
    network's (None before the conversions pass).
    ``passes``: the names of the passes that ran, in order.
    ``warnings``: notes a pass leaves for the user (none of today's passes leaves any)."""

    model: Model
    source: Model
    expansion: Expansion | None = None
    networks: NetworkExpansion | None = None
    fused: FusedModel | None = None
    conversions: Conversions | None = None
    passes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def fusions(self) -> list[tuple[str, str, str, str]]:
        """(rule name, inner layer, outer layer, fused layer) for each fusion made, in order."""
        return list(self.fused.applied) if self.fused is not None else []

    @property
    def expanded_instances(self) -> int:
        """How many template instances (top level) were replaced by their layers."""
        if self.expansion is None:
            return 0
        return sum(1 for n in self.source.layers if n not in self.expansion.model.layers)

    def weights(self, base: WeightsSource, registry: Registry) -> WeightsSource:
        """The weights source of the preprocessed model: ``base`` read through the fusions' weight map (a
        fused layer's weights are those of the layers it replaced), or ``base`` itself without fusions. Layers of
        network layers with their own weights are read there (``engine.netlayers.routed_weights``)."""
        base = routed_weights(base, self.networks)
        if self.fused is not None and self.fused.applied:
            return MappedWeights(base, self.fused, registry)
        return base


Pass = Callable[[PreprocessResult, PreprocessOptions], None]


def overrides_pass(result: PreprocessResult, options: PreprocessOptions) -> None:
    """Put the run's per-layer format settings over the model's own (an unknown layer name is an error)."""
    result.model = apply_overrides(result.model, options.layer_formats)


def expand_networks_pass(result: PreprocessResult, options: PreprocessOptions) -> None:
    """Replace every network layer by the referenced model's layers (nothing to do without network layers)."""
    if has_network_layers(result.model):
        result.networks = expand_networks(result.model, options.registry)
        result.expansion = result.networks
        result.model = result.networks.model


def expand_templates_pass(result: PreprocessResult, options: PreprocessOptions) -> None:
    """Replace every template instance by its layers (nothing to do without instances), then the network layers
    that were inside templates."""
    if has_instances(result.model):
        templates = expand(result.model, options.registry)
        result.expansion = templates if result.expansion is None else merge(result.expansion, templates)
        result.model = templates.model
        if has_network_layers(result.model):  # network layers the templates held
            held = expand_networks(result.model, options.registry)
            result.expansion = merge(result.expansion, held)
            result.model = held.model
            if result.networks is None:
                result.networks = held
            else:
                result.networks.weights.update(held.weights)
                result.networks.files.update(held.files)


def fusing_pass(result: PreprocessResult, options: PreprocessOptions) -> None:
    """Apply the chosen fusing rules that apply to the tensor format (the model is kept when none fuses)."""
    fusing = options.fusing
    rules = rules_from(options.registry, result.model, fusing) if isinstance(fusing, str) else list(fusing)
    if not rules:
        return
    result.fused = apply_rules(result.model, options.registry, options.fmt, rules, protected=set(options.protected))
    if result.fused.applied:
        result.model = result.fused.model


def formats_pass(result: PreprocessResult, options: PreprocessOptions) -> None:
    """Decide every layer's format and write it (in full) on the layers whose format is not the network's; a
    layer expanded from a template instance takes the instance's setting unless it has its own."""
    model = result.model
    instance_formats = {n: s.format for n, s in result.source.layers.items() if s.format}
    instance_formats.update(options.layer_formats)
    inherited = {n: instance_formats[n.split("__", 1)[0]] for n in model.layers
                 if "__" in n and n.split("__", 1)[0] in instance_formats}
    formats = layer_formats(model, options.registry, options.fmt, inherited, compute=options.compute)
    wanted = {n: ("" if f == options.fmt else f"{f.precision.value} {f.layout.value}") for n, f in formats.items()}
    if any(model.layers[n].format != text for n, text in wanted.items()):
        model = model.copy() if model is result.source else model
        for n, text in wanted.items():
            model.layers[n].format = text
        result.model = model


def conversions_pass(result: PreprocessResult, options: PreprocessOptions) -> None:
    """Insert a format conversion on every link between layers of different formats."""
    formats = {n: (TensorFormat.parse(s.format) if s.format else options.fmt) for n, s in result.model.layers.items()}
    result.model, result.conversions = insert_conversions(result.model, formats, options.fmt)


#: The passes ``preprocess`` runs, in order: (name, function).
PASSES: tuple[tuple[str, Pass], ...] = (
    ("overrides", overrides_pass),
    ("networks", expand_networks_pass),
    ("templates", expand_templates_pass),
    ("formats", formats_pass),
    ("fusing", fusing_pass),
    ("conversions", conversions_pass),
)


def preprocess(model: Model, registry: Registry, fmt: TensorFormat = FP32_NCHW, fusing: str | Sequence[Any] = "on",
               protected: AbstractSet[str] = frozenset(), passes: Sequence[tuple[str, Pass]] = PASSES,
               layer_formats: Mapping[str, str] | None = None, compute: TensorFormat | None = None) -> PreprocessResult:
    """Run the preprocessor's passes on ``model`` (unchanged) for tensor format ``fmt``, with the run's per-layer
    format settings ``layer_formats`` over the model's own; layers without a setting compute in ``compute``
    (default ``fmt``: a backend may prefer another layout, ``Backend.compute_format``).

    Raises what the passes raise: NetworkLayerError for a network layer that cannot be expanded,
    TemplateError for an instance that cannot be expanded, FusingRuleError for a rule that cannot be read or used,
    LayerFormatError for a format setting that cannot be read or names no layer."""
    result = PreprocessResult(model, model)
    options = PreprocessOptions(registry, fmt, fusing, frozenset(protected), dict(layer_formats or {}),
                                None if compute == fmt else compute)
    for name, run in passes:
        run(result, options)
        result.passes.append(name)
    if result.networks is not None:
        for layer, path in result.networks.files.items():
            log.info("network layer %s: expanded %s", layer, path)
    for rule, inner, outer, fused in result.fusions:
        log.info("fusing rule %s: %s + %s -> %s", rule, inner, outer, fused)
    for note in result.warnings:
        log.warning("%s", note)
    return result
