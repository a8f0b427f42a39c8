"""Autosave copies of modified models and their recovery after a crash.

Each running designer writes ``<pid>-<doc>.lnet`` plus a ``.json`` note (original path, title) into the
autosave folder, and, for a model whose weights are held in memory (an imported network not saved yet), its weights
as ``<pid>-<doc>.safetensors``. Every file is written atomically (``engine.atomic``): a designer killed while
writing leaves the previous copy, never half a file. A copy is written again only when the model's text (or its
in-memory weights) changed since the last one. A clean close removes them; files whose process is no longer alive
are left by a crash and are offered at the next start (``recoverable``, ``restore``)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine import modelfile
from engine.atomic import atomic_write_text
from engine.model import Model
from engine.registry import Registry
from engine.weights import ArrayWeights, WeightsError, save_safetensors


@dataclass
class Recoverable:
    """An autosave copy left behind by a designer that did not close cleanly."""

    model_file: Path
    original_path: str | None
    title: str
    weights_file: Path | None = None  # the in-memory weights of an imported model, when it had them

    def discard(self) -> None:
        for p in (self.model_file, self.model_file.with_suffix(".json"), self.model_file.with_suffix(".safetensors")):
            p.unlink(missing_ok=True)


def restore(found: Recoverable, registry: Registry) -> Model:
    """The model of an autosave copy as it was when it was written: its document, its original path, and the
    in-memory weights it had (read back into memory, so that discarding the copy loses nothing). Raises
    LayerLabError when the copy cannot be read."""
    model = modelfile.load(found.model_file, registry)
    model.path = found.original_path
    if found.weights_file is not None and found.weights_file.is_file():
        from safetensors import SafetensorError  # noqa: PLC0415 - only a recovery with weights needs it
        from safetensors.numpy import load_file  # noqa: PLC0415

        try:
            tensors = load_file(str(found.weights_file))  # read into memory: the copy may be discarded
        except (SafetensorError, OSError, ValueError) as exc:
            raise WeightsError(f"the recovered weights {found.weights_file} cannot be read: {exc}") from None
        arrays: dict[str, dict[str, np.ndarray]] = {}
        for key in sorted(tensors):
            layer, _, weight = key.partition(".")  # SafetensorsWeights.key: layer names hold no dot
            arrays.setdefault(layer, {})[weight] = tensors[key]
        model.weights_source = ArrayWeights(arrays, origin=f"the weights recovered for {found.title}")
    return model


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


class Autosaver:
    """Writes and removes autosave copies in ``folder``."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._written: dict[int, tuple[str, int | None]] = {}  # doc id -> (model text, id of the weights) on disk

    def _file(self, doc_id: int) -> Path:
        return self.folder / f"{os.getpid()}-{doc_id}.lnet"

    def write(self, doc_id: int, model: Model, original_path: str | None, title: str) -> Path:
        """Write the copy of document ``doc_id`` (only what changed since the last copy). Raises OSError or
        LayerLabError (``engine.atomic.OutputError``) when the folder cannot be written."""
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self._file(doc_id)
        text = modelfile.dumps(model)
        weights = model.weights_source if isinstance(model.weights_source, ArrayWeights) else None
        last_text, last_weights = self._written.get(doc_id, (None, None))
        wfile = target.with_suffix(".safetensors")
        if weights is not None and (id(weights) != last_weights or not wfile.is_file()):
            save_safetensors(wfile, weights.arrays)
        elif weights is None:
            wfile.unlink(missing_ok=True)
        note = json.dumps({"path": original_path, "title": title, "weights": weights is not None})
        atomic_write_text(target.with_suffix(".json"), note, "autosave note")
        if text != last_text or not target.is_file():
            atomic_write_text(target, text, "autosave copy")
        self._written[doc_id] = (text, id(weights) if weights is not None else None)
        return target

    def remove(self, doc_id: int) -> None:
        self._written.pop(doc_id, None)
        f = self._file(doc_id)
        for p in (f, f.with_suffix(".json"), f.with_suffix(".safetensors")):
            p.unlink(missing_ok=True)

    def recoverable(self) -> list[Recoverable]:
        """Autosave copies of designers that are no longer running."""
        out = []
        if not self.folder.is_dir():
            return out
        for f in sorted(self.folder.glob("*.lnet")):
            pid = f.stem.split("-")[0]
            if pid.isdigit() and _alive(int(pid)):
                continue
            try:
                note = json.loads(f.with_suffix(".json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                note = {}
            weights = f.with_suffix(".safetensors")
            out.append(Recoverable(f, note.get("path"), note.get("title") or f.name,
                                   weights if weights.is_file() else None))
        return out
