"""Weights sources.

Two formats hold a network's weights: a folder of ``.npy`` files and a single safetensors file
(``open_weights`` picks by what the path is). A weights folder holds one ``.npy`` file per layer weight,
named ``<layer>_<weight>.npy`` (``conv1_weights.npy``, ``conv1_bias.npy``), stored float32 (float16 is accepted) in the layer's
logical shape: convolution weights are (C_out, C_in / groups, K_h, K_w), biases (C_out,).
A safetensors file (pickle-free, memory-mapped when read) holds one tensor per weight named
``<layer>.<weight>`` (``conv1.weights``), same dtypes and shapes.
Without either, weights are seeded random values, the same for the same seed, layer and weight."""
from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np

from engine.errors import WeightsError
from engine.layer import Layer


class WeightsSource:
    """Where a network's weights come from: ``get`` returns one weight, checked against ``shape``."""

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError

    def stored(self, layer: str, weight: str) -> tuple[tuple[int, ...], str] | None:
        """The shape a stored weight has and where it is (read without loading it), None where nothing is
        stored for it: what the type check compares with the shape the layer needs."""
        return None


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
        from engine.io import load_npy  # noqa: PLC0415

        try:
            arr = load_npy(path, WeightsError, "weight")
        except WeightsError as exc:
            raise WeightsError(f"layer {layer.name}: weight {weight!r}: {exc}") from None
        return _checked(arr, layer, weight, shape, path.name)

    def stored(self, layer: str, weight: str) -> tuple[tuple[int, ...], str] | None:
        path = self.folder / self.file_name(layer, weight)
        try:
            return tuple(np.load(path, mmap_mode="r", allow_pickle=False).shape), path.name  # the header only
        except (OSError, ValueError):
            return None


def _checked(arr: np.ndarray, layer: Layer, weight: str, shape: tuple[int, ...], where: str) -> np.ndarray:
    """``arr`` as float32 after checking its shape, dtype and values (errors name ``where`` it came from)."""
    if tuple(arr.shape) != tuple(shape):
        raise WeightsError(
            f"layer {layer.name}: weight {weight!r} in {where} has shape {tuple(arr.shape)}, expected {tuple(shape)}"
        )
    if arr.dtype.kind != "f":
        raise WeightsError(f"layer {layer.name}: weight {weight!r} in {where} has dtype {arr.dtype}, expected float32")
    if not np.all(np.isfinite(arr)):
        raise WeightsError(f"layer {layer.name}: weight {weight!r} in {where} contains NaN or infinite values")
    return arr.astype(np.float32, copy=False)


class SafetensorsWeights(WeightsSource):
    """A single safetensors file holding ``<layer>.<weight>`` tensors, memory-mapped (safetensors' NumPy API)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from safetensors import SafetensorError, safe_open  # noqa: PLC0415 - only this source needs it

        self.path = Path(path)
        if not self.path.is_file():
            raise WeightsError(f"weights file {self.path} does not exist")
        try:
            self._file = safe_open(str(self.path), framework="numpy")
            self._keys = set(self._file.keys())
        except (SafetensorError, OSError, ValueError) as exc:
            raise WeightsError(f"weights file {self.path} is not a readable safetensors file: {exc}") from None

    @staticmethod
    def key(layer: str, weight: str) -> str:
        return f"{layer}.{weight}"

    def keys(self) -> set[str]:
        """Every tensor name in the file."""
        return set(self._keys)

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        key = self.key(layer.name, weight)
        if key not in self._keys:
            raise WeightsError(f"layer {layer.name}: weight {weight!r} missing: expected tensor {key!r} with shape "
                               f"{tuple(shape)} in {self.path}")
        return _checked(self._file.get_tensor(key), layer, weight, shape, self.path.name)

    def stored(self, layer: str, weight: str) -> tuple[tuple[int, ...], str] | None:
        key = self.key(layer, weight)
        if key not in self._keys:
            return None
        return tuple(self._file.get_slice(key).get_shape()), f"{self.path.name} ({key})"


class ArrayWeights(WeightsSource):
    """Weights held in memory as ``{layer: {weight: array}}`` (an imported model before it is saved)."""

    def __init__(self, arrays: dict[str, dict[str, np.ndarray]], origin: str = "memory") -> None:
        self.arrays = arrays
        self.origin = origin

    def get(self, layer: Layer, weight: str, shape: tuple[int, ...]) -> np.ndarray:
        arr = self.arrays.get(layer.name, {}).get(weight)
        if arr is None:
            raise WeightsError(f"layer {layer.name}: weight {weight!r} missing in {self.origin} (expected shape "
                               f"{tuple(shape)})")
        return _checked(np.asarray(arr), layer, weight, shape, self.origin)

    def stored(self, layer: str, weight: str) -> tuple[tuple[int, ...], str] | None:
        arr = self.arrays.get(layer, {}).get(weight)
        return None if arr is None else (tuple(np.shape(arr)), self.origin)


def open_weights(path: str | os.PathLike[str]) -> WeightsSource:
    """The weights source at ``path``: a ``.safetensors`` file or a folder of ``.npy`` files."""
    p = Path(path)
    if p.is_file() or p.suffix.lower() == ".safetensors":
        return SafetensorsWeights(p)
    return WeightsFolder(p)


def is_weights_path(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is something ``open_weights`` can read (an existing folder or safetensors file)."""
    p = Path(path)
    return p.is_dir() or (p.is_file() and p.suffix.lower() == ".safetensors")


def save_weights(folder: str | os.PathLike[str], weights: dict[str, dict[str, np.ndarray]]) -> None:
    """Write ``{layer: {weight: array}}`` as a weights folder."""
    from engine.atomic import atomic_write, make_folder  # noqa: PLC0415

    root = make_folder(folder, "weights folder")
    for layer, ws in weights.items():
        for w, arr in ws.items():
            data = np.asarray(arr, dtype=np.float32)
            atomic_write(root / WeightsFolder.file_name(layer, w), lambda tmp, data=data: np.save(tmp, data), "weight file")


def save_safetensors(path: str | os.PathLike[str], weights: dict[str, dict[str, np.ndarray]],
                     metadata: dict[str, str] | None = None) -> None:
    """Write ``{layer: {weight: array}}`` as one safetensors file (float32), atomically (``engine.atomic``)."""
    from safetensors.numpy import save_file  # noqa: PLC0415

    from engine.atomic import atomic_write  # noqa: PLC0415

    tensors = {SafetensorsWeights.key(layer, w): np.ascontiguousarray(arr, dtype=np.float32)
               for layer, ws in weights.items() for w, arr in ws.items()}
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata), "weights file")
