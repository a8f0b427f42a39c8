"""Weights of a fused network, read from the weights of the layers the fused ones replaced."""
from __future__ import annotations

import numpy as np

from engine.fusing.errors import FusingRuleError
from engine.fusing.rewriting import FusedModel
from engine.layer import Layer
from engine.registry import Registry
from engine.weights import WeightsSource


class MappedWeights(WeightsSource):
    """Weights of a fused network, read from ``base`` under the source layers' names.

    A fused layer's weight found in ``fused.weight_map`` is asked from ``base`` as the source layer's
    weight (a stand-in layer of the source's type and name, so seeded random weights and weights folders
    give exactly the values the unfused network loads); other weights are asked as they are."""

    def __init__(self, base: WeightsSource, fused: FusedModel, registry: Registry) -> None:
        self.base = base
        self.weight_map = dict(fused.weight_map)
        self.sources = fused.sources
        self.registry = registry
        self._layers: dict[str, Layer] = {}

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        target = self.weight_map.get((layer.name, weight))
        if target is None:
            return self.base.get(layer, weight, shape)
        src, src_weight = target
        return self.base.get(self._source_layer(src, layer), src_weight, shape)

    def _source_layer(self, name: str, like: Layer) -> Layer:
        key = f"{name}|{like.fmt}"
        if key not in self._layers:
            spec = self.sources[name]
            cls = self.registry.layer_class(spec.type)
            if cls is None:
                raise FusingRuleError(f"weights of fused layer {like.name}: source layer {name} has unknown type {spec.type!r}")
            values, _ = cls.desc.parse_params(name, spec.params)
            self._layers[key] = cls(name, values, None, like.fmt, like.backend)
        return self._layers[key]
