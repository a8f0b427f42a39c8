"""The manifest of a batch run: one JSON line per finished output (its name, size and SHA-256), appended
and synced as each output lands, so an interrupted run can be resumed. A torn last line (the process was
killed while writing it) is ignored when read and never glued to the next record."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text, new_file_mode

MANIFEST_NAME = "layerlab-manifest.jsonl"
SUMMARY_NAME = "layerlab-summary.json"
STATE_DIR = ".layerlab-batch"  # run settings and video parts, inside the output folder
PARTIAL_MARK = ".partial-"  # temporary outputs: '.NAME.partial-XXXX.EXT', renamed when complete


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def partial_path(target: Path) -> Path:
    """A unique temporary name beside ``target`` with the same extension (writers choose the format by it), with
    the permissions of a new file (``mkstemp`` makes it 0o600, which the output would keep once renamed)."""
    fd, name = tempfile.mkstemp(prefix=f".{target.stem}{PARTIAL_MARK}", suffix=target.suffix, dir=target.parent)
    os.fchmod(fd, new_file_mode())
    os.close(fd)
    return Path(name)


def finish(partial: Path, target: Path, root: Path) -> dict[str, Any]:
    """Rename a complete temporary output to its final name; returns its manifest record."""
    os.replace(partial, target)
    return {"output": target.relative_to(root).as_posix(), "size": target.stat().st_size, "sha256": sha256_of(target)}


def write_json_atomic(path: Path, doc: Any, what: str = "JSON file") -> None:
    """Write JSON atomically (``engine.atomic``: a temporary file beside ``path``, synced, renamed over it);
    errors (OutputError) name ``path``."""
    atomic_write_text(path, json.dumps(doc, indent=2) + "\n", what)


def remove_partials(root: Path) -> int:
    """Delete temporary outputs left by an interrupted run under ``root``; returns how many."""
    n = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            if name.startswith(".") and PARTIAL_MARK in name:
                (Path(dirpath) / name).unlink(missing_ok=True)
                n += 1
    return n


class Manifest:
    """Finished outputs of the run in ``folder`` by output name (relative to the folder)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.path = self.folder / MANIFEST_NAME
        self.records: dict[str, dict[str, Any]] = {}
        self._torn = False
        if self.path.is_file():
            text = self.path.read_text(encoding="utf-8", errors="replace")
            self._torn = bool(text) and not text.endswith("\n")
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn line from a killed run: its output is redone
                if isinstance(rec, dict) and isinstance(rec.get("output"), str):
                    self.records[rec["output"]] = rec

    def finished(self, output: str) -> bool:
        """True when ``output`` is recorded and the file is there with the recorded size."""
        rec = self.records.get(output)
        if rec is None:
            return False
        p = self.folder / output
        return p.is_file() and p.stat().st_size == rec.get("size")

    def append(self, records: list[dict[str, Any]]) -> None:
        """Record finished outputs durably (one line each, flushed and synced)."""
        if not records:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            if self._torn:
                f.write("\n")
                self._torn = False
            for rec in records:
                f.write(json.dumps(rec, sort_keys=True) + "\n")
                self.records[rec["output"]] = rec
            f.flush()
            os.fsync(f.fileno())

    def reset(self) -> None:
        """Forget every record (``--overwrite``)."""
        self.records.clear()
        self._torn = False
        self.path.unlink(missing_ok=True)
