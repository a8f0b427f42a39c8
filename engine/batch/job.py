"""A batch run's plan and bookkeeping, shared by every engine: the files found, what the manifest says is
finished, the chunks left to do, and, as chunks come back from an engine, the manifest, the assembled
videos, the failures, the progress and the summary."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.batch.dataset import Chunk, Unit, discover, plan_chunks, size_key
from engine.batch.manifest import STATE_DIR, SUMMARY_NAME, Manifest, remove_partials, write_json_atomic
from engine.batch.runner import NetworkIO, NetworkSpec, network_io, with_model_weights
from engine.batch.stages import SAVE_AS, Layout, Plan, Work, assemble_video
from engine.errors import InputError, LayerLabError, check_at_least
from engine.io import PNG_LEVEL, VideoReader, check_png_level


class SettingsChangedError(LayerLabError):
    """The output folder holds a run made with other settings (resuming would mix two runs' outputs)."""


@dataclass(frozen=True)
class BatchOptions:
    """What to run over and how (the network itself is a :class:`NetworkSpec`)."""

    inputs: tuple[str, ...]
    output_dir: str
    batch_size: int = 8
    every: int = 1
    save_as: str = "same"
    overwrite: bool = False
    input_layout: str = "nchw"
    workers: int = 1
    png_compression: int = PNG_LEVEL  # zlib level of PNG outputs: 0 (stored, fastest) to 9


@dataclass(frozen=True)
class ItemEvent:
    """One input finished ('done'), failed ('failed', with the reason) or found finished ('skipped')."""

    input: str
    status: str
    detail: str = ""


@dataclass
class Progress:
    """Where a run stands, passed to the progress callback after every chunk."""

    done: int  # inputs (stills and video frames) finished in this run
    total: int  # inputs expected in this run (video frames estimated from their headers)
    failed: int
    skipped: int
    elapsed_s: float
    events: list[ItemEvent] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0


def _fingerprint(spec: NetworkSpec, options: BatchOptions) -> dict[str, Any]:
    """What decides the bytes of the outputs; a resumed run must match it."""
    weights = None
    if spec.weights:
        source = Path(spec.weights)
        paths = [source] if source.is_file() else source.glob("*.npy")  # a .safetensors file, or a folder of .npy
        files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in paths)
        weights = hashlib.sha256(json.dumps([os.path.abspath(spec.weights), files]).encode()).hexdigest()
    settings = {"model": hashlib.sha256(spec.model_text.encode("utf-8")).hexdigest(), "backend": spec.backend,
                "format": spec.format, "weights": weights, "seed": spec.seed, "fusing": spec.fusing,
                "every": options.every, "save_as": options.save_as, "input_layout": options.input_layout}
    if options.png_compression != PNG_LEVEL:  # recorded only when set, so runs made before it existed resume
        settings["png_compression"] = options.png_compression
    return settings


def check_ranks(units: list[Unit], io: NetworkIO) -> None:
    """For an input layer of another rank than 4 (tokens, matrices): InputError naming the first input it cannot take,
    a .npy file of another rank or an image or video, checked before any work from the files' headers. (With a rank-4
    input a file of the wrong shape fails on its own, with its reason, and the rest run.)"""
    import numpy as np  # noqa: PLC0415

    if io.input_rank == 4:
        return
    for u in units:
        if u.kind in ("image", "video") and io.input_rank != 4:
            raise InputError(f"{u.path}: an {u.kind} gives N x C x H x W tensors, but input layer {io.input_name} "
                             f"takes tensors of rank {io.input_rank}: give .npy files of that rank")
        if u.kind != "npy":
            continue
        try:
            shape = np.load(u.path, mmap_mode="r", allow_pickle=False).shape
        except (OSError, ValueError):
            continue  # an unreadable file fails on its own with its reason
        if len(shape) != io.input_rank:
            raise InputError(f"{u.path}: a tensor of rank {len(shape)} ({'x'.join(map(str, shape))}), but input layer "
                             f"{io.input_name} takes tensors of rank {io.input_rank}")


class BatchJob:
    """Plan a run (raises a LayerLabError for bad settings or an unusable output folder) and keep its books."""

    def __init__(self, spec: NetworkSpec, options: BatchOptions) -> None:
        if options.save_as not in SAVE_AS:
            raise InputError(f"--save-as {options.save_as!r}: expected one of {', '.join(SAVE_AS)}")
        check_at_least("--batch-size", options.batch_size, 1)
        check_at_least("--every", options.every, 1)
        check_at_least("--workers", options.workers, 1)
        try:
            check_png_level(options.png_compression)
        except InputError as exc:
            raise InputError(f"--png-compression: {exc}") from None
        spec = with_model_weights(spec)  # a model that names its weights runs with them, as infer runs it
        self.spec, self.options = spec, options
        self.io: NetworkIO = network_io(spec)
        out = Path(options.output_dir)
        if out.exists() and not out.is_dir():
            raise InputError(f"{out}: the output folder is a file")
        self.units = discover(options.inputs, exclude=out)
        check_ranks(self.units, self.io)
        try:
            (out / STATE_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{out}: cannot create the output folder ({exc.strerror})") from None
        self.layout = Layout(str(out.resolve()), self.io.output_names, options.save_as, options.png_compression)
        self.plan = Plan(self.layout, self.io.input_name, self.io.image_options, options.input_layout,
                         input_rank=self.io.input_rank)
        self.manifest = Manifest(out)
        self._check_settings(out / STATE_DIR / "run.json")
        remove_partials(out)
        self.failures: dict[str, str] = {}
        self.events: list[ItemEvent] = []
        self.skipped = 0
        self.fps: dict[str, float] = {}
        counts: dict[str, int] = {}
        pending: list[Unit] = []
        for u in self.units:
            if u.kind == "bad":
                self._fail(u.rel, u.reason)
            elif all(self.manifest.finished(self.layout.output_rel(u, n)) for n in self.io.output_names):
                self.skipped += 1
            else:
                if u.kind == "video" and not self._probe_video(u, counts):
                    continue
                pending.append(u)
        stills = [u for u in pending if u.kind != "video"]
        with ThreadPoolExecutor(8, thread_name_prefix="layerlab-probe") as pool:  # file headers: I/O bound
            sizes = dict(zip((u.rel for u in stills), pool.map(size_key, stills)))
        self.chunks = plan_chunks(pending, options.batch_size, options.every, counts, sizes)
        self.video_chunks: dict[str, list[Chunk]] = {}  # video name -> its chunks, in order
        for c in self.chunks:
            if c.is_video:
                self.video_chunks.setdefault(c.units[0].rel, []).append(c)
        # a video chunk whose parts survived an interrupted run is not run again
        self.todo: list[Chunk] = [c for c in self.chunks if not self._part_done(c)]
        todo = {c.index for c in self.todo}
        self._parts_left: dict[str, set[int]] = {  # video name -> its chunks not finished yet
            rel: {c.part for c in chunks if c.index in todo} for rel, chunks in self.video_chunks.items()}
        self.total = sum(c.expected_frames for c in self.todo)
        self.done = 0
        self.stage_s: dict[str, float] = {}
        self.started = time.perf_counter()
        self.finished_s: float | None = None
        self.cancelled = False

    # ---- planning ------------------------------------------------------------------------------
    def _check_settings(self, path: Path) -> None:
        now = _fingerprint(self.spec, self.options)
        if self.options.overwrite:
            self.manifest.reset()
            shutil.rmtree(path.parent / "parts", ignore_errors=True)
        elif path.is_file() and (self.manifest.records or any((path.parent / "parts").glob("*/*.npy"))):
            try:
                before = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                before = {}
            # a setting recorded only when it differs from its default counts as that default when absent
            defaults = {"png_compression": PNG_LEVEL}
            changed = sorted(k for k in {*now, *defaults}
                             if before.get(k, defaults.get(k)) != now.get(k, defaults.get(k)))
            if changed:
                raise SettingsChangedError(
                    f"{self.options.output_dir}: the output folder holds a run made with other settings "
                    f"(changed: {', '.join(changed)}); use --overwrite to start again, or another output folder")
        write_json_atomic(path, now)

    def _probe_video(self, u: Unit, counts: dict[str, int]) -> bool:
        try:
            reader = VideoReader(u.path)
        except LayerLabError as exc:
            self._fail(u.rel, str(exc))
            return False
        try:
            counts[u.rel] = max(0, reader.frame_count)
            self.fps[u.rel] = reader.fps / self.options.every
        finally:
            reader.close()
        return True

    def _part_done(self, c: Chunk) -> bool:
        """A video chunk whose part files survived an interrupted run is not run again."""
        if not c.is_video or self.options.overwrite:
            return False
        return all(self.layout.part_path(c, n).is_file() for n in self.io.output_names)

    # ---- bookkeeping ---------------------------------------------------------------------------
    def _fail(self, name: str, reason: str) -> None:
        if name not in self.failures:
            self.failures[name] = reason
            self.events.append(ItemEvent(name, "failed", reason))

    def handle(self, work: Work) -> None:
        """Take a chunk back from an engine: record its outputs, assemble finished videos, count."""
        for stage, s in work.times.items():
            self.stage_s[stage] = self.stage_s.get(stage, 0.0) + s
        for name, reason in work.failures:
            self._fail(name, reason)
        self.manifest.append(work.records)
        for name in dict.fromkeys(r["input"] for r in work.records):
            self.events.append(ItemEvent(name, "done", ", ".join(r["output"] for r in work.records if r["input"] == name)))
        self.done += work.frames
        c = work.chunk
        if c.is_video:
            left = self._parts_left[c.units[0].rel]
            left.discard(c.part)
            if not left:
                self._assemble(c.units[0])

    def assemble_ready(self) -> None:
        """Assemble the videos whose every part survived an interrupted run (nothing is left to run for them)."""
        for rel, left in self._parts_left.items():
            if not left:
                self._assemble(next(u for u in self.units if u.rel == rel))

    def _assemble(self, unit: Unit) -> None:
        if unit.rel in self.failures:
            return
        t0 = time.perf_counter()
        try:
            recs = assemble_video(self.video_chunks[unit.rel], self.fps.get(unit.rel, 25.0), self.layout)
        except Exception as exc:
            self._fail(unit.rel, str(exc) if isinstance(exc, LayerLabError) else f"{type(exc).__name__}: {exc}")
        else:
            self.manifest.append(recs)
            self.events.append(ItemEvent(unit.rel, "done", ", ".join(r["output"] for r in recs)))
        self.stage_s["assemble"] = self.stage_s.get("assemble", 0.0) + time.perf_counter() - t0

    def progress(self) -> Progress:
        """The current progress; the item events since the previous call go with it."""
        events, self.events = self.events, []
        return Progress(self.done, max(self.total, self.done), len(self.failures), self.skipped,
                        time.perf_counter() - self.started, events)

    def summary(self, engine: str) -> dict[str, Any]:
        """The run's JSON summary: items, failures, throughput and time per stage."""
        wall = (self.finished_s or time.perf_counter()) - self.started
        finished_items = sum(1 for u in self.units if u.kind != "bad" and u.rel not in self.failures and all(
            self.manifest.finished(self.layout.output_rel(u, n)) for n in self.io.output_names))
        return {
            "engine": engine,
            "output_dir": self.layout.output_dir,
            "batch_size": self.options.batch_size,
            "cancelled": self.cancelled,
            "items": {"total": len(self.units), "finished": finished_items, "skipped": self.skipped,
                      "failed": len(self.failures), "frames_this_run": self.done},
            "failures": [{"input": k, "reason": v} for k, v in sorted(self.failures.items())],
            "throughput": {"frames_per_s": round(self.done / wall, 3) if wall > 0 else 0.0, "wall_s": round(wall, 3)},
            "stages_s": {k: round(v, 3) for k, v in sorted(self.stage_s.items())},
        }

    def write_summary(self, engine: str, path: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], Path]:
        """Write the summary (default ``OUTPUT/layerlab-summary.json``); returns it and its path."""
        self.finished_s = self.finished_s or time.perf_counter()
        doc = self.summary(engine)
        target = Path(path) if path else Path(self.layout.output_dir) / SUMMARY_NAME
        write_json_atomic(target, doc, "summary")
        return doc, target


ProgressCallback = Callable[[Progress], None]
