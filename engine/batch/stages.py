"""The stages of a batch run, as plain functions over one chunk of work: decode (files to tensors, grouped
by size), infer (upload, run, download on one network), write (encode every output under a temporary
name, then rename it) and, for videos, assemble the parts of a video into the output video. The local
engine and the Ray engine call exactly these, so they write the same bytes."""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.batch.dataset import Chunk, Unit
from engine.batch.manifest import STATE_DIR, finish, partial_path
from engine.errors import InputError, LayerLabError
from engine.io import ImageOptions, VideoReader, VideoWriter, read_input, tensor_to_image, write_output

SAVE_AS = ("same", "npy", "png", "jpg")


@dataclass(frozen=True)
class Layout:
    """Where and how outputs are written (shared by every stage and engine)."""

    output_dir: str
    output_names: tuple[str, ...]
    save_as: str = "same"

    def output_rel(self, unit: Unit, output: str) -> str:
        """Output file name (relative to the output folder) of ``unit`` for output layer ``output``: the
        input's relative name, with the extension of ``save_as`` (videos stay videos), under a folder named
        after the output layer when the network has several."""
        rel = Path(unit.rel)
        if unit.kind == "video" or self.save_as == "same":
            ext = ".npy" if unit.kind == "npy" else rel.suffix
        else:
            ext = f".{self.save_as}"
        name = rel.with_suffix(ext).as_posix()
        return f"{output}/{name}" if len(self.output_names) > 1 else name

    def parts_dir(self, unit: Unit) -> Path:
        """Folder of a video's finished chunks (8-bit frames per chunk) until the video is assembled."""
        key = hashlib.sha1(unit.rel.encode("utf-8")).hexdigest()[:16]
        return Path(self.output_dir) / STATE_DIR / "parts" / key

    def part_path(self, chunk: Chunk, output: str) -> Path:
        """A video chunk's part, named by its frame range: parts of a run with another batch size never match."""
        end = "end" if chunk.stop is None else f"{chunk.stop:09d}"
        return self.parts_dir(chunk.units[0]) / f"{output}.{chunk.start:09d}-{end}.npy"


@dataclass
class Group:
    """Inputs of one size run together: ``items`` are (input name, frame number or None); ``whole`` marks an
    NPY file of several items run as it is."""

    items: list[tuple[str, int | None]]
    x: Any
    whole: bool = False
    outputs: dict[str, np.ndarray] | None = None


@dataclass
class Work:
    """One chunk on its way through the stages, with what happened to it."""

    chunk: Chunk
    groups: list[Group] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (input name, reason)
    records: list[dict[str, Any]] = field(default_factory=list)  # finished outputs
    parts: list[str] = field(default_factory=list)  # video chunk parts written (output names)
    frames: int = 0  # inputs (stills or video frames) written or stored as parts
    times: dict[str, float] = field(default_factory=dict)

    def add_time(self, stage: str, seconds: float) -> None:
        self.times[stage] = self.times.get(stage, 0.0) + seconds


def _reason(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, LayerLabError) else f"{type(exc).__name__}: {exc}"


def _decode_video(work: Work, opts: ImageOptions) -> list[tuple[tuple[str, int | None], np.ndarray]]:
    c = work.chunk
    unit = c.units[0]
    reader = VideoReader(unit.path, opts)
    frames = []
    try:
        if c.start:
            reader.seek(c.start)
        f = c.start
        while c.stop is None or f < c.stop:
            frame = reader.read()
            if frame is None:
                break
            if f % c.every == 0:
                frames.append(((unit.rel, f), frame))
            f += 1
    finally:
        reader.close()
    if not frames and c.part == 0:
        raise InputError(f"{unit.path}: the video has no frames")
    return frames


def decode(work: Work, opts: ImageOptions, layout: str = "nchw") -> Work:
    """Read the chunk's inputs into tensors grouped by size; an unreadable input becomes a failure."""
    t0 = time.perf_counter()
    decoded: list[tuple[tuple[str, int | None], np.ndarray]] = []
    if work.chunk.is_video:
        try:
            decoded = _decode_video(work, opts)
        except Exception as exc:
            work.failures.append((work.chunk.units[0].rel, _reason(exc)))
    else:
        for unit in work.chunk.units:
            try:
                decoded.append(((unit.rel, None), read_input(unit.path, opts, layout)))
            except Exception as exc:
                work.failures.append((unit.rel, _reason(exc)))
    by_size: dict[tuple[int, ...], list[tuple[tuple[str, int | None], np.ndarray]]] = {}
    for item, x in decoded:
        if x.shape[0] != 1:
            work.groups.append(Group([item], x, whole=True))
        else:
            by_size.setdefault(x.shape, []).append((item, x))
    for members in by_size.values():
        x = members[0][1] if len(members) == 1 else np.concatenate([m[1] for m in members])
        work.groups.append(Group([m[0] for m in members], x))
    work.add_time("decode", time.perf_counter() - t0)
    return work


def infer(work: Work, net: Any, input_name: str, output_names: tuple[str, ...]) -> Work:
    """Run every group of the chunk on ``net``: upload, inference, download (timed separately). A group the
    network refuses (wrong channel count, too small) fails all its items with the network's message."""
    net.backend.activate()  # this thread's uploads go to the network's own stream, ordered with its kernels
    for g in work.groups:
        try:
            t0 = time.perf_counter()
            net.set_input(input_name, g.x)
            t1 = time.perf_counter()
            net.run()
            net.backend.synchronize()
            t2 = time.perf_counter()
            g.outputs = {n: net.output(n) for n in output_names}
            t3 = time.perf_counter()
        except Exception as exc:
            reason = _reason(exc)
            work.failures += [(item[0], reason) for item in g.items]
        else:
            work.add_time("upload", t1 - t0)
            work.add_time("infer", t2 - t1)
            work.add_time("download", t3 - t2)
        g.x = None  # the inputs are not needed any more (and need not travel to the writers)
    return work


def _write_atomic(target: Path, tensor: np.ndarray, root: Path) -> dict[str, Any]:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(target)
    try:
        write_output(tmp, tensor)
        return finish(tmp, target, root)
    finally:
        tmp.unlink(missing_ok=True)


def _save_part(target: Path, frames: np.ndarray) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(target)
    try:
        np.save(tmp, frames)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write(work: Work, layout: Layout) -> Work:
    """Encode the chunk's outputs: each still output under a temporary name, renamed when complete, with
    its manifest record; a video chunk's frames as a part of its video (assembled by :func:`assemble_video`)."""
    t0 = time.perf_counter()
    root = Path(layout.output_dir)
    done = [g for g in work.groups if g.outputs is not None]
    if work.chunk.is_video:
        unit = work.chunk.units[0]
        items = [item for g in done for item in g.items]
        if items:
            try:
                for name in layout.output_names:
                    frames = [tensor_to_image(g.outputs[name], i) for g in done for i in range(len(g.items))]
                    if len({f.shape for f in frames}) > 1:
                        raise InputError(f"{unit.path}: frames of different sizes cannot form one video")
                    _save_part(layout.part_path(work.chunk, name), np.stack(frames))
                    work.parts.append(name)
                work.frames += len(items)
            except Exception as exc:
                work.failures.append((unit.rel, _reason(exc)))
                work.parts.clear()
    else:
        units = {u.rel: u for u in work.chunk.units}
        for g in done:
            for i, (rel, _frame) in enumerate(g.items):
                try:
                    recs = []
                    for name in layout.output_names:
                        y = g.outputs[name] if g.whole else g.outputs[name][i:i + 1]
                        rec = _write_atomic(root / layout.output_rel(units[rel], name), y, root)
                        recs.append({"input": rel, **rec})
                except Exception as exc:
                    work.failures.append((rel, _reason(exc)))
                else:
                    work.records += recs
                    work.frames += 1
            g.outputs = None
    work.add_time("encode", time.perf_counter() - t0)
    return work


def assemble_video(chunks: list[Chunk], fps: float, layout: Layout) -> list[dict[str, Any]]:
    """Join the parts of a video's finished ``chunks`` (in order) into its output video(s), written under a
    temporary name and renamed; the parts are removed. Returns the manifest records."""
    unit = chunks[0].units[0]
    root = Path(layout.output_dir)
    records = []
    for name in layout.output_names:
        target = root / layout.output_rel(unit, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = partial_path(target)
        try:
            writer = VideoWriter(tmp, fps)
            try:
                for chunk in chunks:
                    path = layout.part_path(chunk, name)
                    if not path.is_file():
                        continue  # a chunk past the real end of the video (the header overestimated it)
                    for frame in np.load(path):
                        writer.write_image(frame)
            finally:
                writer.close()
            records.append({"input": unit.rel, **finish(tmp, target, root)})
        finally:
            tmp.unlink(missing_ok=True)
    shutil.rmtree(layout.parts_dir(unit), ignore_errors=True)
    return records
