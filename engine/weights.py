"""Weights sources.

A weights folder holds one ``.npy`` file per layer weight, named ``<layer>_<weight>.npy``
(``conv1_weights.npy``, ``conv1_bias.npy``), stored float32 (float16 is accepted) in the layer's
logical shape: convolution weights are (C_out, C_in / groups, K_h, K_w), biases (C_out,).
Without a folder, weights are seeded random values, the same for the same seed, layer and weight."""
from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np

from engine.errors import WeightsError
from engine.layer import Layer


class WeightsSource:
    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError


class RandomWeights(WeightsSource):
    """Deterministic random weights: the same seed, layer name and weight name give the same values."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        rng = np.random.default_rng([self.seed, zlib.crc32(layer.name.encode()), zlib.crc32(weight.encode())])
        return np.asarray(layer.init_weight(weight, shape, rng), dtype=np.float32)


class WeightsFolder(WeightsSource):
    """One ``<layer>_<weight>.npy`` per weight; every tensor's shape is checked."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise WeightsError(f"weights folder {self.folder} does not exist")

    @staticmethod
    def file_name(layer: str, weight: str) -> str:
        return f"{layer}_{weight}.npy"

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        path = self.folder / self.file_name(layer.name, weight)
        if not path.is_file():
            raise WeightsError(f"layer {layer.name}: weight {weight!r} missing: expected {path} with shape {tuple(shape)}")
        try:
            arr = np.load(path, allow_pickle=False)
        except Exception as exc:
            raise WeightsError(f"layer {layer.name}: weight {weight!r}: cannot read {path}: {exc}") from None
        if tuple(arr.shape) != tuple(shape):
            raise WeightsError(
                f"layer {layer.name}: weight {weight!r} in {path.name} has shape {tuple(arr.shape)}, expected {tuple(shape)}"
            )
        if arr.dtype.kind != "f":
            raise WeightsError(f"layer {layer.name}: weight {weight!r} in {path.name} has dtype {arr.dtype}, expected float32")
        if not np.all(np.isfinite(arr)):
            raise WeightsError(f"layer {layer.name}: weight {weight!r} in {path.name} contains NaN or infinite values")
        return arr.astype(np.float32, copy=False)


def save_weights(folder: str | os.PathLike[str], weights: dict[str, dict[str, np.ndarray]]) -> None:
    """Write ``{layer: {weight: array}}`` as a weights folder."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    for layer, ws in weights.items():
        for w, arr in ws.items():
            np.save(root / WeightsFolder.file_name(layer, w), np.asarray(arr, dtype=np.float32))


def open_weights(path: str | os.PathLike[str]) -> WeightsSource:
    """The weights source at ``path``: a folder of ``NAME_WEIGHT.npy`` files (the one place that chooses a
    source from a path; ``engine.run.open_weights`` and network layers call it)."""
    p = Path(path)
    if p.is_file():
        raise WeightsError(f"weights {p}: a single weights file is not supported yet; give a folder of "
                           "NAME_WEIGHT.npy files")
    return WeightsFolder(p)
