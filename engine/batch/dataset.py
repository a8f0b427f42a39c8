"""Finding a dataset's files (a folder, a glob pattern or a list file) and cutting it into chunks.

A chunk is the unit every batch engine schedules: up to ``batch_size`` still inputs (images, NPY files) of
one size as read from the files' headers (in name order within a size), or ``batch_size`` kept frames of one
video. Inside a chunk, inputs of the same decoded size form one batch; any other size forms its own batch
(nothing is resized). The chunks depend only on
the file list and the options, so every engine runs the very same batches and writes the same outputs."""
from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import InputError, check_at_least
from engine.io import IMAGE_EXTS, VIDEO_EXTS, kind_of

INPUT_EXTS = (*IMAGE_EXTS, *VIDEO_EXTS, ".npy")


@dataclass(frozen=True)
class Unit:
    """One input file: its absolute path, its name relative to the dataset (outputs keep it) and its kind
    ('image', 'video', 'npy', or 'bad' with ``reason`` when it cannot be read at all)."""

    path: str
    rel: str
    kind: str
    reason: str = ""


@dataclass(frozen=True)
class Chunk:
    """Work for one scheduling step. Stills: ``units``. Video: ``units[0]``, frames ``start`` (inclusive) to
    ``stop`` (exclusive; None = to the end) of which each frame whose number is a multiple of ``every`` is kept;
    ``part`` numbers the chunk within its video, ``last`` marks the video's final chunk and ``estimate`` is
    how many frames it should keep (from the video's header)."""

    index: int
    units: tuple[Unit, ...]
    start: int = 0
    stop: int | None = None
    every: int = 1
    part: int = 0
    last: bool = True
    estimate: int = 0

    @property
    def is_video(self) -> bool:
        return len(self.units) == 1 and self.units[0].kind == "video"

    @property
    def expected_frames(self) -> int:
        """Inputs this chunk should produce (frames kept, or still files)."""
        return self.estimate if self.is_video else len(self.units)


def _is_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def _glob_base(pattern: str) -> Path:
    parts = Path(pattern).parts
    base = []
    for part in parts:
        if _is_glob(part):
            break
        base.append(part)
    return Path(*base) if base else Path(".")


def _inside(path: Path, folder: Path | None) -> bool:
    if folder is None:
        return False
    try:
        path.resolve().relative_to(folder)
    except ValueError:
        return False
    return True


def _unit(path: Path, rel: str) -> Unit:
    try:
        kind = kind_of(path)
    except InputError as exc:
        return Unit(str(path), rel, "bad", str(exc))
    if not path.is_file():
        return Unit(str(path), rel, "bad", f"{path}: no such file")
    return Unit(str(path.resolve()), rel, kind)


def _from_folder(folder: Path, exclude: Path | None) -> list[Unit]:
    units = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not _inside(Path(root) / d, exclude))
        for name in sorted(files):
            p = Path(root) / name
            if p.suffix.lower() in INPUT_EXTS and not name.startswith("."):
                units.append(_unit(p, p.relative_to(folder).as_posix()))
    return units


def _from_list(list_file: Path, exclude: Path | None) -> list[Unit]:
    base = list_file.parent
    units = []
    try:
        lines = list_file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{list_file}: cannot read the list of inputs ({exc})") from None
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        p = Path(text).expanduser()
        p = p if p.is_absolute() else base / p
        if _inside(p, exclude):
            continue
        rel = p.relative_to(base).as_posix() if _inside(p, base.resolve()) and not Path(text).is_absolute() else p.name
        units.append(_unit(p, rel))
    return units


def discover(inputs: Sequence[str], exclude: str | os.PathLike[str] | None = None) -> list[Unit]:
    """The input files named by ``inputs``: folders (searched recursively for images, videos and .npy),
    glob patterns, ``.txt`` files listing one path per line (relative to the list's folder; ``#`` comments),
    or single files. Files under ``exclude`` (the output folder) are left out. Output names keep each
    file's path relative to its folder, pattern base or list; two inputs with the same name are an error."""
    excl = Path(exclude).resolve() if exclude is not None else None
    units: list[Unit] = []
    for spec in inputs:
        p = Path(spec).expanduser()
        if p.is_dir():
            units += _from_folder(p, excl)
        elif p.suffix.lower() == ".txt" and p.is_file():
            units += _from_list(p, excl)
        elif _is_glob(spec):
            base = _glob_base(spec)
            for f in sorted(glob.glob(spec, recursive=True)):
                fp = Path(f)
                if fp.is_file() and fp.suffix.lower() in INPUT_EXTS and not _inside(fp, excl):
                    units.append(_unit(fp, fp.relative_to(base).as_posix()))
        elif p.exists():
            units.append(_unit(p, p.name))
        else:
            raise InputError(f"{spec}: no such folder, file, list (.txt) or matching pattern")
    if not units:
        raise InputError(f"no input files found in {', '.join(inputs)} "
                         f"(looked for {', '.join(INPUT_EXTS)})")
    kept = [u for u in units if not _inside(Path(u.path), excl)]
    if not kept:
        raise InputError(f"every input lies inside the output folder {exclude} (whose files are never inputs): "
                         "choose an output folder outside the inputs")
    units = kept
    seen: dict[str, str] = {}
    for u in units:
        if u.rel in seen and seen[u.rel] != u.path:
            raise InputError(f"two inputs would write the same output name {u.rel!r}: {seen[u.rel]} and {u.path}")
        seen[u.rel] = u.path
    unique = {u.rel: u for u in units}
    return sorted(unique.values(), key=lambda u: u.rel)


def size_key(unit: Unit) -> tuple[Any, ...]:
    """What decides a still input's tensor size, read from the file's header without decoding it: an image's
    width, height and mode (Pillow reads only the header), an NPY file's shape. Unreadable files give ().
    Only the batching uses it: inputs are grouped by their real decoded size in any case."""
    try:
        if unit.kind == "npy":
            return ("npy", *np.load(unit.path, mmap_mode="r", allow_pickle=False).shape)
        from PIL import Image  # noqa: PLC0415

        with Image.open(unit.path) as im:
            return ("image", *im.size, im.mode)
    except Exception:  # corrupt, unsupported by Pillow, or no Pillow: the decoder will tell
        return ()


def plan_chunks(units: Iterable[Unit], batch_size: int, every: int = 1,
                frame_count: dict[str, int] | None = None,
                sizes: dict[str, tuple[Any, ...]] | None = None) -> list[Chunk]:
    """Cut ``units`` into chunks (see the module documentation). Still inputs are grouped by ``sizes`` (see
    :func:`size_key`; missing: all alike), ordered by name within a group, and each group is cut into chunks of
    ``batch_size``, so inputs of one size fill whole batches however their names interleave.
    ``frame_count`` gives each video's frame count from its header (unknown or 0: one chunk that reads the
    whole video)."""
    check_at_least("the batch size", batch_size, 1)
    check_at_least("--every", every, 1)
    counts, keys = frame_count or {}, sizes or {}
    units = list(units)
    stills = sorted((u for u in units if u.kind in ("image", "npy")), key=lambda u: (repr(keys.get(u.rel, ())), u.rel))
    chunks: list[Chunk] = []
    for _key, same in groupby(stills, key=lambda u: repr(keys.get(u.rel, ()))):
        group = list(same)
        for s in range(0, len(group), batch_size):
            chunks.append(Chunk(len(chunks), tuple(group[s:s + batch_size])))
    for u in units:
        if u.kind != "video":
            continue
        n = counts.get(u.rel, 0)
        span = batch_size * every
        starts = list(range(0, n, span)) if n > 0 else [0]
        for part, s in enumerate(starts):
            last = part == len(starts) - 1
            stop = None if last else s + span
            estimate = len(range(s, min(s + span, n), every)) if n > 0 else 1
            chunks.append(Chunk(len(chunks), (u,), s, stop, every, part, last, estimate))
    return chunks
