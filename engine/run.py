"""The one run path: from a model and its run settings (a ``RunSpec``) to a running network, its inputs, timed
iterations and the report.

Every front door is a thin caller of these functions: the ``layerlab`` command line (infer, profile, drift,
export), the designer's run worker and analysis session, the exporters and the generated standalone project
(which carries a copy of the engine). None of them builds a backend, a weights source, an input layer's image
options or a Network itself:

* ``open_network(model, spec, registry)``: the backend (``open_backend``), the tensor format (``tensor_format``:
  the one rule for ``auto``), the weights (``open_weights``) and the Network;
* ``load_inputs(network, spec)``: images, ``.npy`` tensors and videos (their first frame) for the input layers
  named in the spec, seeded random tensors for the others;
* ``run_timed(network, spec, progress=..., cancelled=...)``: warm-up and timed iterations, per layer when
  ``spec.profiling`` is on;
* ``make_report(network, result, spec, model=...)``: the report document, with the notes every front door adds.

Qt-free; imports no plugin."""
from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from engine import report as rep
from engine.backends import BACKENDS, get_backend
from engine.backends.base import Backend
from engine.errors import InputError, LayerLabError, check_at_least
from engine.format_conversion import chosen_layouts, fused_note
from engine.formats import (
    AUTO,
    DEFAULT_FORMATS,
    FormatSettings,
    LayerFormat,
    LayerFormatError,
    normalize_format,
    parse_network_format,
    tensor_format,
)
from engine.io import ImageOptions, VideoReader, image_to_tensor, kind_of, read_input
from engine.log import get_logger
from engine.model import Model
from engine.network import Network, random_input
from engine.profiling import Cancelled, ProfileResult, Warming, WarmupLayers, layer_costs, profile
from engine.registry import Registry
from engine.weights import RandomWeights, WeightsSource
from engine.weights import open_weights as open_weights_path

log = get_logger(__name__)
LAYOUTS = ("nchw", "nhwc")


class RunSpecError(LayerLabError):
    """A run setting is invalid (the message names it, the value and what is allowed)."""


@dataclass(frozen=True)
class RunSpec:
    """How to run a model: what ``app.run_config`` reads from a model's network settings and what the command
    line's flags say. Qt-free and immutable; ``check()`` validates it.

    ``format``: ``auto`` (the backend's default, ``DEFAULT_FORMATS``) or e.g. ``fp16 nhwc``. ``weights``: a weights
    folder or a ``.safetensors`` file, None for seeded random weights (or an import's own, ``open_weights``). ``inputs``: (input
    layer, file) pairs; a None layer name means the network's only input layer. ``fusing``: ``on``, ``off`` or a
    rules file. ``profiling``: time every layer (else whole iterations only). ``plugins``: extra plugin folders.
    ``device``: the ordinal of the GPU the CuPy backend runs on (None: GPU 0); asking for one on the NumPy backend,
    or one this machine does not have, is an error. ``tf32``: fp32
    convolutions on the GPU may use TF32 tensor cores (off by default: fp32 means float32 arithmetic, the
    precision users check accuracy with; on, fp32 runs 2-4x faster, as PyTorch's default does).
    ``layer_formats``: (layer, format) pairs over the model's own per-layer formats, e.g. ``(("conv3", "fp32"),)``
    (``engine.formats``: a precision, a layout or both; ``default`` removes the model's own setting)."""

    backend: str = AUTO
    format: str = AUTO
    iterations: int = 10
    warmup: int = 1
    weights: str | None = None
    seed: int = 0
    inputs: tuple[tuple[str | None, str], ...] = ()
    input_layout: str = "nchw"
    fusing: str = "on"
    profiling: bool = True
    plugins: tuple[str, ...] = ()
    device: int | None = None
    tf32: bool = False
    layer_formats: tuple[tuple[str, str], ...] = ()

    def check(self) -> RunSpec:
        """Raise RunSpecError naming the first invalid setting; returns the spec."""
        self.checked_formats()
        return self

    def checked_formats(self) -> FormatSettings:
        """``check()``, and the format settings it read (parsed once: what the run path passes on)."""
        if (self.backend or AUTO).lower() not in BACKENDS:
            raise RunSpecError(f"unknown backend {self.backend!r}: expected one of {', '.join(BACKENDS)}")
        network = parse_network_format(self.format)
        check_at_least("iterations", self.iterations, 1, RunSpecError)
        check_at_least("warm-up iterations", self.warmup, 0, RunSpecError)
        check_at_least("seed", self.seed, 0, RunSpecError)
        if self.input_layout not in LAYOUTS:
            raise RunSpecError(f"input layout {self.input_layout!r} is not allowed (expected nchw or nhwc)")
        if not self.fusing:
            raise RunSpecError("fusing rules: expected on, off or a rules file")
        layers: list[tuple[str, LayerFormat]] = []
        for name, text in self.layer_formats:
            try:
                layers.append((name, LayerFormat.parse(text, f"layer {name}: format")))
            except LayerFormatError as exc:
                raise RunSpecError(str(exc)) from None
        if self.device is not None:
            if isinstance(self.device, bool) or not isinstance(self.device, int) or self.device < 0:
                raise RunSpecError(f"device {self.device!r}: expected a GPU ordinal, 0 or more")
            if (self.backend or AUTO).lower() == "numpy":
                raise RunSpecError(f"device {self.device}: the numpy backend runs on the CPU; a device chooses the GPU "
                                   "of the cupy backend")
        return FormatSettings(network, tuple(layers))

    def with_inputs(self, pairs: Iterable[tuple[str | None, str]]) -> RunSpec:
        """A copy with these (input layer, file) pairs."""
        return replace(self, inputs=tuple(pairs))


# ---- settings -----------------------------------------------------------------------------------------------
def open_registry(spec: RunSpec) -> Registry:
    """The built-in and installed plugins plus those of ``spec.plugins`` (failures are in ``registry.failures``)."""
    from engine.plugins import load_plugins  # noqa: PLC0415

    return load_plugins(list(spec.plugins))


def open_backend(spec: RunSpec, notice: TextIO | None = None, always_notice: bool = False) -> Backend:
    """The backend of ``spec``: ``auto`` is CuPy when a CUDA GPU is usable, else NumPy with a one-line notice on
    ``notice`` (once per machine unless ``always_notice``); asking for CuPy where it is unusable is an error. The
    CuPy backend runs on GPU ``spec.device`` (out of range: an error naming the GPUs there are)."""
    spec.check()
    return _backend(spec, notice, always_notice)


def _backend(spec: RunSpec, notice: TextIO | None, always_notice: bool) -> Backend:
    return get_backend(spec.backend, notice=notice, defer_compile=True, device=spec.device,
                       always_notice=always_notice)


def model_weights(model: Model) -> str | None:
    """The weights a model names itself: its ``weights`` setting (a folder or a ``.safetensors`` file; relative to
    the model file), None when it has none."""
    setting = model.settings.get("weights", "").strip()
    if not setting:
        return None
    path = Path(setting).expanduser()
    folder = Path(model.path).resolve().parent if model.path else (Path(model.folder) if model.folder else None)
    if not path.is_absolute() and folder is not None:
        path = folder / path
    return str(path)


def stored_weights(model: Model) -> WeightsSource | None:
    """The weights ``model`` brings: those its ``weights`` setting names where they exist, else an import's
    in-memory weights; None when it brings none (a run uses random weights). The type check compares their
    shapes with what the layers need."""
    own = model_weights(model)
    if own is not None:
        try:
            return open_weights_path(own)
        except LayerLabError:  # missing or unreadable: the run says so
            return None
    return model.weights_source


def with_model_weights(spec: RunSpec, model: Model) -> RunSpec:
    """``spec``, or when it names no weights, a copy naming the model's own (``model_weights``): what the command
    line runs a model with when no ``--weights`` is given."""
    if spec.weights:
        return spec
    own = model_weights(model)
    return replace(spec, weights=own) if own else spec


def open_weights(spec: RunSpec, model: Model | None = None) -> WeightsSource:
    """The weights of a run: ``spec.weights`` (a weights folder or a ``.safetensors`` file), else the weights an
    import brought with ``model`` (its in-memory ``weights_source``), else seeded random weights (``spec.seed``).

    The one place that chooses a weights source for a run; ``engine.weights.open_weights`` reads the path."""
    spec.check()
    return _weights(spec, model)


def _weights(spec: RunSpec, model: Model | None) -> WeightsSource:
    if spec.weights:
        return open_weights_path(spec.weights)
    if model is not None and model.weights_source is not None:
        return model.weights_source
    return RandomWeights(spec.seed)


def open_network(model: Model, spec: RunSpec, registry: Registry | None = None, *, backend: Backend | None = None,
                 weights: WeightsSource | None = None, notice: TextIO | None = None, always_notice: bool = False,
                 reuse_buffers: bool = True,
                 protected: set[str] | frozenset[str] = frozenset(), graph_capture: bool = True) -> Network:
    """The Network of ``model`` run as ``spec`` says: its backend (or ``backend``), tensor format, weights (or
    ``weights``, an already open source) and fusing rules. ``registry`` defaults to ``open_registry(spec)``;
    ``notice`` receives the one-line backend notice (``always_notice``: even where it was given before on this
    machine); the other options go to the Network."""
    formats = spec.checked_formats()  # the one reading of the format settings
    backend = backend or _backend(spec, notice, always_notice)
    return Network(model, registry if registry is not None else open_registry(spec), backend,
                   formats.for_backend(backend.name), weights=weights or _weights(spec, model), seed=spec.seed,
                   reuse_buffers=reuse_buffers, fusing=spec.fusing, protected=protected, graph_capture=graph_capture,
                   tf32=spec.tf32, layer_formats=dict(spec.layer_formats))


def format_notes(net: Network) -> list[str]:
    """One line per layer in another format than the network's (the layers that hold their tensors in logical
    order by their type's choice, without a setting, in one line) and one per inserted format conversion."""
    chosen = chosen_layouts(net)
    notes = [f"layer {name} runs in {fmt} (network {net.fmt})" for name, fmt in net.pinned.items()
             if name not in chosen]
    if chosen:
        notes.append(f"{len(chosen)} layer(s) hold their tensors in logical order (token layers and the layers "
                     f"between them: matrix products, layer normalization, attention), the others channels-last")
    return notes + [f"format conversion {conv}: {src} {a} -> {b}{fused_note(net, conv)}"
                    for conv, src, a, b in net.conversions]


#: fusions listed one per line in the notes; the rest are counted by rule (a ResNet of hundreds of blocks made
#: hundreds of lines on the command line and in every report)
FUSING_NOTES_LISTED = 10


def fusing_notes(net: Network) -> list[str]:
    """One line per fusion the fusing rules made (``fusing rule R: inner + outer -> fused``), the first
    FUSING_NOTES_LISTED of them, then one line counting the others by rule."""
    applied = net.fused.applied if net.fused is not None else []
    lines = [f"fusing rule {rule}: {inner} + {outer} -> {fused}"
             for rule, inner, outer, fused in applied[:FUSING_NOTES_LISTED]]
    rest = collections.Counter(rule for rule, *_ in applied[FUSING_NOTES_LISTED:])
    if rest:
        counts = ", ".join(f"{n} by {rule}" for rule, n in rest.items())
        lines.append(f"and {sum(rest.values())} more fusion(s): {counts} (layerlab export preprocessed writes the "
                     "fused model)")
    return lines


# ---- inputs -------------------------------------------------------------------------------------------------
def parse_named(values: Sequence[str] | None) -> list[tuple[str | None, str]]:
    """``NAME=PATH`` -> (NAME, PATH); a bare ``PATH`` (or one whose prefix is not a layer name) -> (None, PATH)."""
    from engine.descriptors import is_identifier  # noqa: PLC0415

    out: list[tuple[str | None, str]] = []
    for value in values or []:
        name, sep, path = value.partition("=")
        out.append((name, path) if sep and is_identifier(name) else (None, value))
    return out


def resolve_names(pairs: Iterable[tuple[str | None, str]], names: Sequence[str], what: str) -> list[tuple[str, str]]:
    """Name every (layer, path) pair: None stands for the only ``what`` layer (input or output); unknown names and
    a missing name among several layers are errors naming the layers."""
    resolved = []
    for name, path in pairs:
        if name is None:
            if len(names) != 1:
                raise InputError(f"the network has {len(names)} {what} layers ({', '.join(names)}): "
                                 f"use --{what} NAME=PATH")
            name = names[0]
        if name not in names:
            raise InputError(f"no {what} layer named {name!r} (the network has: {', '.join(names) or 'none'})")
        resolved.append((name, path))
    return resolved


def image_options(net: Network, name: str) -> ImageOptions:
    """How images become tensors for input layer ``name``: its scale, shift, channel padding and tiling."""
    p = net.layer(name).p
    return ImageOptions(p["scale"], p["shift"], p["min_channels"], p["tiling"],
                        shift_first=p.get("order") == "shift_scale", use_alpha=p.get("use_alpha", True))


class VideoInput:
    """An input layer's video: frames read on demand (``read``), the current frame number kept, and whether a
    viewer is playing it."""

    def __init__(self, path: str | os.PathLike[str], opts: ImageOptions) -> None:
        self.reader = VideoReader(path, opts, prefetch=True)
        self.path = str(path)
        self.frame = -1
        self.playing = False

    def read(self, frame: int | None = None) -> np.ndarray | None:
        """Frame ``frame`` (default the next) as a 1xCxHxW tensor, or None past the end."""
        img = self.read_image(frame)
        return None if img is None else image_to_tensor(img, self.reader.opts)

    def read_image(self, frame: int | None = None) -> np.ndarray | None:
        """Frame ``frame`` (default the next) as decoded, H x W x 3 uint8 RGB (the next one is decoded in the
        background meanwhile), or None past the end."""
        if frame is not None and frame != self.frame + 1:
            self.reader.seek(frame)
            self.frame = frame - 1
        img = self.reader.read_image()
        if img is not None:
            self.frame += 1
        return img

    def to_network(self, net: Network, name: str, img: np.ndarray) -> None:
        """Give input layer ``name`` the decoded frame ``img`` with the input's image options: uploaded as 8 bits
        and made into the input's tensor on the network's device (``Network.set_input_images``)."""
        net.set_input_images(name, [img], self.reader.opts)

    def close(self) -> None:
        self.reader.close()


def open_input(net: Network, name: str, path: str, layout: str = "nchw") -> tuple[np.ndarray, VideoInput | None]:
    """Read the file of input layer ``name``: an image or ``.npy`` tensor (the array, fp32 NCHW), or a video
    (its first frame, and the open video positioned after it). Errors name the layer and the file."""
    if name not in net.input_names:
        raise InputError(f"the network has no input layer {name!r} (inputs: {', '.join(net.input_names) or 'none'})")
    try:
        if kind_of(path) != "video":
            rank = len(net.layer(name).default_dims())  # type: ignore[attr-defined]
            return read_input(path, image_options(net, name), layout, rank), None
        video = VideoInput(path, image_options(net, name))
    except LayerLabError as exc:
        raise InputError(f"input layer {name}: {exc}") from None
    frame = video.read()
    if frame is None:
        video.close()
        raise InputError(f"input layer {name}: {path}: the video has no frames")
    return frame, video


@dataclass
class Inputs:
    """What ``read_inputs`` gave every input layer: its tensor (fp32 NCHW; a video's current frame), where it came
    from (``(kind, path)``: kind ``image``, ``npy``, ``video`` or ``random``), and the open videos (close them)."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    videos: dict[str, VideoInput] = field(default_factory=dict)

    def close(self) -> None:
        """Close the open videos."""
        for video in self.videos.values():
            video.close()
        self.videos.clear()


def read_inputs(net: Network, spec: RunSpec) -> Inputs:
    """The tensors of every input layer of ``net``: the spec's files, and for the layers without one the seeded
    random tensor of their dimensions (``spec.seed``). The network is not changed."""
    files = dict(resolve_names(spec.inputs, net.input_names, "input"))
    out = Inputs()
    try:
        for name in net.input_names:
            path = files.get(name)
            if path:
                out.arrays[name], video = open_input(net, name, path, spec.input_layout)
                out.sources[name] = (kind_of(path), path)
                if video is not None:
                    out.videos[name] = video
            else:
                out.arrays[name] = random_input(net.layer(name).default_dims(), spec.seed,  # type: ignore[attr-defined]
                                              f"input layer {name}: its random input")
                out.sources[name] = ("random", "")
    except BaseException:
        out.close()
        raise
    return out


def load_inputs(net: Network, spec: RunSpec) -> Inputs:
    """``read_inputs`` and give the tensors to the network; returns them (close their videos when done)."""
    inputs = read_inputs(net, spec)
    for name, array in inputs.arrays.items():
        net.set_input(name, array)
    return inputs


# ---- timed runs ---------------------------------------------------------------------------------------------
def time_iteration(net: Network) -> float:
    """One whole inference from the inputs on, timed with the backend's timer (ms)."""
    backend = net.backend
    for name in net.input_names:
        net.mark_affected(name)
    backend.synchronize()
    timer = backend.timer()
    timer.start()
    net.run()
    timer.stop()
    backend.synchronize()
    return timer.elapsed_ms()


def run_timed(net: Network, spec: RunSpec, progress: Callable[[int, int], None] | None = None,
              cancelled: Callable[[], bool] | None = None, warming: Warming | None = None) -> ProfileResult:
    """``spec.warmup`` untimed, then ``spec.iterations`` timed inferences. With ``spec.profiling`` every layer is
    timed (``engine.profiling.profile``), else whole iterations only (no per-layer synchronisation). ``progress(i,
    n)`` follows each timed iteration. ``cancelled()`` is polled before every layer (a True answer raises
    ``Cancelled`` within one layer's time), except where the network replays a captured CUDA graph (a layer hook
    would stop the replay): there it is polled before every iteration. ``warming(done, total, layer)`` follows the
    untimed runs before the timed ones layer by layer on the CPU (``engine.profiling.Warming``): the first run loads
    or compiles the kernels, which takes long the first time."""
    spec.check()
    log.info("running %s: %d warm-up and %d timed iteration(s), %s", net.model_name, spec.warmup, spec.iterations,
             "every layer timed" if spec.profiling else "whole iterations timed")
    if spec.profiling:
        return profile(net, spec.iterations, spec.warmup, progress=progress, should_cancel=cancelled, warming=warming)

    def check(*_: Any) -> None:
        if cancelled is not None and cancelled():
            raise Cancelled("the run was cancelled")

    per_layer_check = cancelled is not None and not net.graph_capture
    if per_layer_check:
        net.hooks.before_layer.append(check)
    times = []
    untimed = WarmupLayers(net, 1 + spec.warmup, warming, check) if net.backend.device_kind != "gpu" else None
    try:
        check()
        net.run()  # plans shapes, weights and memory
        for i in range(spec.warmup + spec.iterations):
            check()
            if i == spec.warmup and untimed is not None:
                untimed.remove()
            ms = time_iteration(net)
            if i >= spec.warmup:
                times.append(ms)
                if progress is not None:
                    progress(i - spec.warmup + 1, spec.iterations)
    finally:
        if untimed is not None:
            untimed.remove()
        if per_layer_check:
            net.hooks.before_layer.remove(check)
    return ProfileResult(layer_costs(net), times, net.peak_memory_bytes, None)


# ---- reports ------------------------------------------------------------------------------------------------
def run_notes(net: Network, per_layer: bool) -> list[str]:
    """The report's notes on how the run was timed and what it executed."""
    notes = [] if per_layer else ["per-layer profiling was off: whole iterations timed, layer times not measured"]
    if net.backend.name == "numpy" and net.fmt.precision.value == "fp16":
        notes.append("fp16 on the NumPy backend: float16 storage, float32 arithmetic rounded to float16")
    return notes + rep.execution_notes(net, per_layer=per_layer)


def make_report(net: Network, result: ProfileResult, spec: RunSpec, *, model: Model, model_path: str | None,
                notes: Sequence[str] = ()) -> dict[str, Any]:
    """The report document of a timed run (schema in ``engine.report``): ``notes`` first, then the fusions made
    and ``run_notes``."""
    backend = net.backend
    doc = rep.build_report(result, model_name=model.name, model_version=model.version, model_path=model_path,
                           backend=backend.name, device=backend.device_name, fmt=str(net.fmt),
                           iterations=spec.iterations, warmup=spec.warmup, seed=spec.seed,
                           fusing=bool(net.fused and net.fused.applied),
                           graph_capture=net.graph_status.startswith("captured"),
                           notes=[*notes, *format_notes(net), *fusing_notes(net), *run_notes(net, spec.profiling)])
    doc["run"]["profiling"] = spec.profiling
    return doc


__all__ = ["AUTO", "DEFAULT_FORMATS", "Inputs", "RunSpec", "RunSpecError", "VideoInput", "format_notes", "fusing_notes",
           "image_options", "load_inputs", "make_report", "model_weights", "normalize_format", "open_backend",
           "open_input", "open_network", "open_registry", "open_weights", "parse_named", "read_inputs",
           "resolve_names", "run_notes", "run_timed", "tensor_format", "time_iteration", "with_model_weights"]
