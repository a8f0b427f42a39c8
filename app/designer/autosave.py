"""Autosave copies of modified models and their recovery after a crash.

Each running designer writes ``<pid>-<doc>.lnet`` plus a ``.json`` note (original path, title) into the
autosave folder; a clean close removes them. Files whose process is no longer alive are left by a crash."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from engine import modelfile
from engine.model import Model


@dataclass
class Recoverable:
    """An autosave copy left behind by a designer that did not close cleanly."""

    model_file: Path
    original_path: str | None
    title: str

    def discard(self) -> None:
        for p in (self.model_file, self.model_file.with_suffix(".json")):
            p.unlink(missing_ok=True)


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

    def _file(self, doc_id: int) -> Path:
        return self.folder / f"{os.getpid()}-{doc_id}.lnet"

    def write(self, doc_id: int, model: Model, original_path: str | None, title: str) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self._file(doc_id)
        saved_path = model.path
        tmp = target.with_suffix(".tmp")
        tmp.write_text(modelfile.dumps(model), encoding="utf-8")
        os.replace(tmp, target)
        model.path = saved_path
        target.with_suffix(".json").write_text(json.dumps({"path": original_path, "title": title}), encoding="utf-8")
        return target

    def remove(self, doc_id: int) -> None:
        for p in (self._file(doc_id), self._file(doc_id).with_suffix(".json")):
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
            out.append(Recoverable(f, note.get("path"), note.get("title") or f.name))
        return out
