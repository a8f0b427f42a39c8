"""Constant folds of the imported layers that change no value: a per-channel or per-tensor affine layer (a layer
scale, a constant multiply and add) after a convolution without activation becomes part of that convolution's
weights and bias, as batch normalization folds into the convolution before it. ConvNeXt's layer scale after each
block's last 1x1 convolution then costs no pass of its own."""
from __future__ import annotations

import numpy as np

from engine.model import LayerSpec


def _affine_vectors(spec: LayerSpec, weights: dict[str, np.ndarray], k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) of affine layer ``spec`` as float64 vectors of ``k`` values, or None when they are not
    constants the importer holds (a secondary input replacing them)."""
    if len(spec.inputs) > 1 and any(i is not None for i in spec.inputs[1:]):
        return None
    if spec.params.get("mode", "per_tensor") == "per_channel":
        scale, shift = weights.get("scale"), weights.get("shift")
        if scale is None or shift is None or scale.size != k or shift.size != k:
            return None
        return scale.reshape(-1).astype(np.float64), shift.reshape(-1).astype(np.float64)
    try:
        s, t = float(spec.params.get("scale", "1")), float(spec.params.get("shift", "0"))
    except ValueError:
        return None
    return np.full(k, s), np.full(k, t)


def layer_readers(layers: dict[str, LayerSpec]) -> dict[str, list[str]]:
    """Every layer's readers (a layer reading one twice is listed twice), by name; layers nobody reads are absent."""
    readers: dict[str, list[str]] = {}
    for name, spec in layers.items():
        for i in spec.inputs:
            if i is not None:
                readers.setdefault(i, []).append(name)
    return readers


def fold_affine_into_convolutions(layers: dict[str, LayerSpec],
                                  weights: dict[str, dict[str, np.ndarray]]) -> list[tuple[str, str]]:
    """Fold every affine layer whose input is a convolution without activation read by it alone into that
    convolution: weights scaled per output channel, bias ``scale * bias + shift``,
    the affine's activation taken over. Readers of the affine read the convolution. Changes ``layers`` and
    ``weights`` in place; returns the (affine, convolution) pairs folded."""
    readers = layer_readers(layers)
    folded = []
    for name, spec in list(layers.items()):
        src = spec.inputs[0] if spec.type == "affine" and spec.inputs else None
        conv = layers.get(src) if src is not None else None
        if conv is None or conv.type != "convolution" or conv.activation != "none" or readers.get(src) != [name] \
                or "weights" not in weights.get(src, {}):
            continue
        w = weights[src]["weights"]
        vectors = _affine_vectors(spec, weights.get(name, {}), w.shape[0])
        if vectors is None:
            continue
        scale, shift = vectors
        bias = weights[src].get("bias") if conv.params.get("bias", "true").lower() in ("true", "1") else None
        b = np.zeros(w.shape[0]) if bias is None else bias.reshape(-1).astype(np.float64)
        weights[src] = {"weights": (w.astype(np.float64) * scale.reshape(-1, 1, 1, 1)).astype(w.dtype),
                        "bias": (scale * b + shift).astype(np.float32)}
        conv.params = conv.params | {"bias": "true"}
        conv.activation, conv.act_coefs = spec.activation, dict(spec.act_coefs)
        for reader in readers.get(name, []):
            layers[reader].inputs = [src if i == name else i for i in layers[reader].inputs]
            readers.setdefault(src, []).append(reader)
        del layers[name]
        weights.pop(name, None)
        folded.append((name, src))
    return folded
