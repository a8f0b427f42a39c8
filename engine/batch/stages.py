"""The stages of a batch run as plain functions: read (one task per still input, one per video chunk), group (a
chunk's inputs into batches by tensor size), infer (upload, run, download on one network), write (one task per
input: encode in memory, write under a temporary name, sync, rename, with its manifest record) and, for videos,
assemble the parts of a video into the output video. With a GPU network (``Plan.device_images``) images travel as
decoded, 8-bit: the tensor is made on the device, and outputs written as images become 8-bit images there before
the download (a quarter of the float32 bytes each way); on the CPU the read and write tasks convert. The local
engine runs the read and write tasks of many chunks at once in a thread pool; the Ray engine calls the chunk-level
compositions (:func:`decode`, :func:`write`); both write the same bytes."""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from engine.batch.dataset import Chunk, Unit
from engine.batch.manifest import STATE_DIR, finish, partial_path
from engine.errors import InputError, LayerLabError
from engine.io import (
    IMAGE_EXTS,
    PNG_LEVEL,
    ImageOptions,
    VideoReader,
    VideoWriter,
    decode_image,
    encode_image,
    image_tensor_shape,
    image_to_tensor,
    item_path,
    read_input,
    tensor_to_image,
)

SAVE_AS = ("same", "npy", "png", "jpg")


@dataclass(frozen=True)
class Layout:
    """Where and how outputs are written (shared by every stage and engine)."""

    output_dir: str
    output_names: tuple[str, ...]
    save_as: str = "same"
    png_level: int = PNG_LEVEL  # zlib level of PNG outputs (engine.io.encode_image)

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

    def writes_images(self, unit: Unit) -> bool:
        """True when ``unit``'s outputs are 8-bit images (image files, or frames of a video)."""
        return unit.kind == "video" or Path(self.output_rel(unit, self.output_names[0])).suffix.lower() in IMAGE_EXTS

    def parts_dir(self, unit: Unit) -> Path:
        """Folder of a video's finished chunks (8-bit frames per chunk) until the video is assembled."""
        key = hashlib.sha1(unit.rel.encode("utf-8")).hexdigest()[:16]
        return Path(self.output_dir) / STATE_DIR / "parts" / key

    def part_path(self, chunk: Chunk, output: str) -> Path:
        """A video chunk's part, named by its frame range: parts of a run with another batch size never match."""
        end = "end" if chunk.stop is None else f"{chunk.stop:09d}"
        return self.parts_dir(chunk.units[0]) / f"{output}.{chunk.start:09d}-{end}.npy"


@dataclass(frozen=True)
class Plan:
    """What the stages need besides a network (picklable: every worker gets it): where and how outputs are
    written, the input layer, how images become its tensor, the layout of NPY inputs and the rank the input takes
    (an NPY file of another rank, or an image where the rank is not 4, fails with the reason)."""

    layout: Layout
    input_name: str
    image_options: ImageOptions = ImageOptions()
    input_layout: str = "nchw"
    #: decoded images travel as they are and become tensors on the network's device, and outputs written as
    #: images become 8-bit images there (a GPU: a quarter of the bytes over the bus, no host arithmetic); else
    #: (the CPU) the read and write tasks convert them, in parallel
    device_images: bool = False
    input_rank: int = 4

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.layout.output_names


@dataclass
class Decoded:
    """One input as read from its file: a decoded image (``image``: made into the tensor where the network runs)
    or a tensor; ``data`` is None and ``reason`` says why when it could not be read."""

    item: tuple[str, int | None]
    data: np.ndarray | None = None
    image: bool = False
    reason: str = ""


@dataclass
class Written:
    """What writing one input's outputs (or a video chunk's part) gave: manifest records, frames done, parts
    stored, or the reason it failed."""

    input: str
    records: list[dict[str, Any]] = field(default_factory=list)
    frames: int = 0
    parts: list[str] = field(default_factory=list)
    reason: str = ""
    seconds: float = 0.0


@dataclass
class Group:
    """Inputs of one tensor size run together: ``items`` are (input name, frame number or None). The inputs are
    ``images`` (decoded images of one shape and type, made into the tensor where the network runs) or the
    tensor ``x``; ``whole`` marks an NPY file of several items run as it is. ``as_images``: the outputs are
    wanted as 8-bit images made on the network's device (N x H x W (x C)), else as float32 tensors."""

    items: list[tuple[str, int | None]]
    x: Any = None
    whole: bool = False
    outputs: dict[str, np.ndarray] | None = None
    images: list[np.ndarray] | None = None
    as_images: bool = False


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


# ---- reading ---------------------------------------------------------------------------------------
Read = tuple[list[Decoded], float]  # what one read task gives: its inputs, and the seconds it took


def read_still(unit: Unit, plan: Plan) -> Read:
    """Read one still input: an image as decoded (8- or 16-bit), an NPY file as its tensor."""
    t0 = time.perf_counter()
    item = (unit.rel, None)
    try:
        if unit.kind == "image" and plan.input_rank != 4:
            got = Decoded(item, read_input(unit.path, plan.image_options, plan.input_layout, plan.input_rank))
        elif unit.kind == "image" and plan.device_images:
            got = Decoded(item, decode_image(unit.path), image=True)
        elif unit.kind == "image":
            got = Decoded(item, image_to_tensor(decode_image(unit.path), plan.image_options))
        else:
            got = Decoded(item, read_input(unit.path, plan.image_options, plan.input_layout, plan.input_rank))
    except Exception as exc:
        got = Decoded(item, reason=_reason(exc))
    return [got], time.perf_counter() - t0


def read_video_chunk(chunk: Chunk, plan: Plan) -> Read:
    """Read the frames of a video chunk that it keeps (every ``every``-th), as decoded 8-bit images."""
    t0 = time.perf_counter()
    unit = chunk.units[0]
    frames: list[Decoded] = []
    try:
        reader = VideoReader(unit.path, plan.image_options)
        try:
            if chunk.start:
                reader.seek(chunk.start)
            f = chunk.start
            while chunk.stop is None or f < chunk.stop:
                img = reader.read_image()
                if img is None:
                    break
                if f % chunk.every == 0 and plan.device_images:
                    frames.append(Decoded((unit.rel, f), img, image=True))
                elif f % chunk.every == 0:
                    frames.append(Decoded((unit.rel, f), image_to_tensor(img, plan.image_options)))
                f += 1
        finally:
            reader.close()
        if not frames and chunk.part == 0:
            raise InputError(f"{unit.path}: the video has no frames")
    except Exception as exc:
        frames = [Decoded((unit.rel, None), reason=_reason(exc))]
    return frames, time.perf_counter() - t0


def reads(chunk: Chunk, plan: Plan) -> list[Callable[[], Read]]:
    """The chunk's reading cut into independent tasks (one per still input, one for a video chunk), for any
    thread; :func:`group` takes their results in this order."""
    if chunk.is_video:
        return [partial(read_video_chunk, chunk, plan)]
    return [partial(read_still, unit, plan) for unit in chunk.units]


def group(work: Work, results: Iterable[Read], plan: Plan) -> Work:
    """Put a chunk's inputs (the results of its :func:`reads`, in order) into batches by tensor size; an input
    that could not be read becomes a failure. Decoded images of one shape and type stay images (made into the
    tensor where the network runs); any other mix of one tensor size is converted here."""
    t0 = time.perf_counter()
    units = {u.rel: u for u in work.chunk.units}
    by_size: dict[tuple[int, ...], list[Decoded]] = {}
    for decoded, seconds in results:
        work.add_time("decode", seconds)
        for d in decoded:
            if d.data is None:
                work.failures.append((d.item[0], d.reason))
            elif not d.image and d.data.shape[0] != 1:
                work.groups.append(Group([d.item], d.data, whole=True,
                                         as_images=plan.device_images and plan.layout.writes_images(units[d.item[0]])))
            else:
                size = image_tensor_shape(d.data.shape, plan.image_options) if d.image else d.data.shape
                by_size.setdefault(size, []).append(d)
    for members in by_size.values():
        items = [m.item for m in members]
        as_images = plan.device_images and all(plan.layout.writes_images(units[rel]) for rel, _frame in items)
        if all(m.image for m in members) and len({(m.data.shape, m.data.dtype.str) for m in members}) == 1:
            work.groups.append(Group(items, images=[m.data for m in members], as_images=as_images))
        else:
            x = np.concatenate([image_to_tensor(m.data, plan.image_options) if m.image else m.data for m in members])
            work.groups.append(Group(items, x, as_images=as_images))
    work.add_time("decode", time.perf_counter() - t0)
    return work


def decode(work: Work, plan: Plan) -> Work:
    """Read the chunk's inputs and group them (:func:`reads` then :func:`group`, in this thread)."""
    return group(work, [read() for read in reads(work.chunk, plan)], plan)


# ---- inference -------------------------------------------------------------------------------------
def infer(work: Work, net: Any, plan: Plan) -> Work:
    """Run every group of the chunk on ``net``: upload (decoded images as they are, made into the tensor on the
    device), inference, download (outputs written as images as 8-bit images made on the device), timed
    separately. A group the network refuses (wrong channel count, too small) fails all its items with the
    network's message."""
    net.backend.activate()  # this thread's uploads go to the network's own stream, ordered with its kernels
    for g in work.groups:
        try:
            t0 = time.perf_counter()
            if g.images is not None:
                net.set_input_images(plan.input_name, g.images, plan.image_options)
            else:
                net.set_input(plan.input_name, g.x)
            t1 = time.perf_counter()
            net.run()
            net.backend.synchronize()
            t2 = time.perf_counter()
            g.outputs = {n: net.output_images(n) if g.as_images else net.output(n, pinned=plan.device_images)
                         for n in plan.output_names}
            t3 = time.perf_counter()
        except Exception as exc:
            reason = _reason(exc)
            work.failures += [(item[0], reason) for item in g.items]
        else:
            work.add_time("upload", t1 - t0)
            work.add_time("infer", t2 - t1)
            work.add_time("download", t3 - t2)
        g.x = g.images = None  # the inputs are not needed any more (and need not travel to the writers)
    return work


# ---- writing ---------------------------------------------------------------------------------------
def _file_bytes(target: Path, output: np.ndarray, image: bool, png_level: int = PNG_LEVEL) -> Any:
    """The bytes of an output file: an 8-bit image encoded as the target's type (the encoder ``infer`` uses),
    or a tensor as NPY (what ``np.save`` writes)."""
    if image:
        return encode_image(output, target.suffix, target, png_level)
    buf = io.BytesIO()
    np.save(buf, output)
    return buf.getbuffer()


def _write_file(target: Path, data: Any, root: Path) -> dict[str, Any]:
    """Write ``data`` under a temporary name beside ``target``, sync it, rename it; its manifest record."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(target)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())  # the content is on disk before the name (a record's size is then its content's)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return {"output": target.relative_to(root).as_posix(), "size": memoryview(data).nbytes,
            "sha256": hashlib.sha256(data).hexdigest()}


def _image(g: Group, name: str, i: int) -> np.ndarray:
    """Batch item ``i`` of output ``name`` of ``g`` as an 8-bit image."""
    out = g.outputs[name]  # type: ignore[index]
    return out[i] if g.as_images else tensor_to_image(out, i)


def write_still(g: Group, i: int, unit: Unit, plan: Plan) -> Written:
    """Write item ``i`` of ``g`` (the still input ``unit``): every output encoded in memory, then written under
    a temporary name, synced and renamed, with its manifest record. An NPY input of several items run whole
    gives one NPY file, or one image per item (``name.png``, ``name_1.png``...)."""
    t0 = time.perf_counter()
    root = Path(plan.layout.output_dir)
    done = Written(unit.rel)
    try:
        for name in plan.output_names:
            target = root / plan.layout.output_rel(unit, name)
            image = target.suffix.lower() in IMAGE_EXTS
            if g.whole and image:
                outs = [(item_path(target, k), _image(g, name, k)) for k in range(len(g.outputs[name]))]  # type: ignore[index]
            elif g.whole:
                outs = [(target, g.outputs[name])]  # type: ignore[index]
            else:
                outs = [(target, _image(g, name, i) if image else g.outputs[name][i:i + 1])]  # type: ignore[index]
            for path, out in outs:
                data = _file_bytes(path, out, image, plan.layout.png_level)
                done.records.append({"input": unit.rel, **_write_file(path, data, root)})
        done.frames = 1
    except Exception as exc:
        done.records.clear()
        done.reason = _reason(exc)
    done.seconds = time.perf_counter() - t0
    return done


def _save_part(target: Path, frames: np.ndarray) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_path(target)
    try:
        np.save(tmp, frames)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_video_part(work: Work, plan: Plan) -> Written:
    """Store a video chunk's frames (8-bit, per output) as a part of its video (joined by :func:`assemble_video`)."""
    t0 = time.perf_counter()
    unit = work.chunk.units[0]
    done = Written(unit.rel)
    groups = [g for g in work.groups if g.outputs is not None]
    items = [item for g in groups for item in g.items]
    if items:
        try:
            for name in plan.output_names:
                frames = [_image(g, name, i) for g in groups for i in range(len(g.items))]
                if len({f.shape for f in frames}) > 1:
                    raise InputError(f"{unit.path}: frames of different sizes cannot form one video")
                _save_part(plan.layout.part_path(work.chunk, name), np.stack(frames))
                done.parts.append(name)
            done.frames = len(items)
        except Exception as exc:
            done.reason, done.parts, done.frames = _reason(exc), [], 0
    done.seconds = time.perf_counter() - t0
    return done


def writes(work: Work, plan: Plan) -> list[Callable[[], Written]]:
    """The chunk's writing cut into independent tasks (one per still input, one for a video chunk's part), for
    any thread; :func:`collect` takes their results in this order."""
    if work.chunk.is_video:
        return [partial(write_video_part, work, plan)]
    units = {u.rel: u for u in work.chunk.units}
    return [partial(write_still, g, i, units[rel], plan)
            for g in work.groups if g.outputs is not None for i, (rel, _frame) in enumerate(g.items)]


def collect(work: Work, results: Iterable[Written]) -> Work:
    """Take the results of the chunk's :func:`writes` (in order) into ``work``; the outputs are dropped."""
    for w in results:
        work.add_time("encode", w.seconds)
        if w.reason:
            work.failures.append((w.input, w.reason))
        work.records += w.records
        work.parts += w.parts
        work.frames += w.frames
    for g in work.groups:
        g.outputs = None
    return work


def write(work: Work, plan: Plan) -> Work:
    """Write the chunk's outputs (:func:`writes` then :func:`collect`, in this thread)."""
    return collect(work, [task() for task in writes(work, plan)])


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
