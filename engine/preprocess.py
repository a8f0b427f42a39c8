"""The preprocessor: the model a network builds, made from the model a user designed.

``preprocess`` runs a list of passes over a private copy of the model, in order:

1. ``networks``: every network layer replaced by the layers of the model it references (``engine.netlayers``),
   named ``<layer>__<inner>``, their weights read through its own weights source;
2. ``templates``: every template instance replaced by its layers (``engine.templates.expand``), named
   ``<instance>__<layer>``, so fusing rules apply across instance boundaries;
3. ``fusing``: the fusing rules that apply to the tensor format (``engine.fusing.apply_rules``).

Each pass is a function ``(result, options) -> None`` that replaces ``result.model`` and records what it
did on the result, so a later step (custom layers resolved, per-layer format conversions inserted) is one
more function in ``PASSES``. The network (``engine.network.Network``) and the preprocessed-model export
(``engine.export.preprocessed``) both call ``preprocess``; neither runs the steps itself.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

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
    ``'off'``, a rules file or a list of parsed rules) and the layers fusing must keep (breakpoints)."""

    registry: Registry
    fmt: TensorFormat = FP32_NCHW
    fusing: str | Sequence[FusingRule] = "on"
    protected: AbstractSet[str] = frozenset()


@dataclass
class PreprocessResult:
    """The preprocessed model and what each pass did.

    ``model``: the model to build (the input model itself when no pass changed anything).
    ``source``: the model given to ``preprocess`` (unchanged).
    ``expansion``: what network-layer and template expansion did, as one (None when the model has neither).
    ``networks``: what network-layer expansion did (None without network layers; its ``weights`` route them).
    ``fused``: what the fusing rules did (None when no rule was to be applied).
    ``passes``: the names of the passes that ran, in order.
    ``warnings``: notes a pass leaves for the user (none of today's passes leaves any)."""

    model: Model
    source: Model
    expansion: Expansion | None = None
    networks: NetworkExpansion | None = None
    fused: FusedModel | None = None
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


#: The passes ``preprocess`` runs, in order: (name, function).
PASSES: tuple[tuple[str, Pass], ...] = (
    ("networks", expand_networks_pass),
    ("templates", expand_templates_pass),
    ("fusing", fusing_pass),
)


def preprocess(model: Model, registry: Registry, fmt: TensorFormat = FP32_NCHW, fusing: str | Sequence[Any] = "on",
               protected: AbstractSet[str] = frozenset(),
               passes: Sequence[tuple[str, Pass]] = PASSES) -> PreprocessResult:
    """Run the preprocessor's passes on ``model`` (unchanged) for tensor format ``fmt``.

    Raises what the passes raise: NetworkLayerError for a network layer that cannot be expanded,
    TemplateError for an instance that cannot be expanded, FusingRuleError
    for a rule that cannot be read or used."""
    result = PreprocessResult(model, model)
    options = PreprocessOptions(registry, fmt, fusing, frozenset(protected))
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
