"""Run settings of a model (the designer's Network Settings), read from and written to ``Model.settings``.

Qt-free: the designer, its worker and tests share it. The keys, all optional, stored as text in the
``<settings>`` of the ``.lnet`` file:

=================  =========================================  ==========================================
key                value                                      default
=================  =========================================  ==========================================
``backend``        ``auto`` | ``numpy`` | ``cupy``            ``auto``
``format``         ``auto`` | ``fp16 nhwc`` | ``fp32 nchw`` | ...  ``auto``: fp16 nhwc on cupy, fp32 nhwc on numpy
``iterations``     timed iterations, 1 or more                ``10``
``warmup``         untimed warm-up iterations, 0 or more      ``1``
``seed``           seed of random weights and inputs          ``0``
``weights``        weights folder or .safetensors file        none: seeded random weights
``input.NAME``     image or .npy file for input layer NAME    none: a seeded random tensor
``input_layout``   layout of .npy inputs: ``nchw`` | ``nhwc``  ``nchw``
``profiling``      ``on`` (per-layer timing) | ``off``        ``on``
``fusing``         ``on`` | ``off`` (fusing rules)            ``on``
``tf32``           ``on`` | ``off``: fp32 on the GPU may use  ``off`` (strict float32)
                   TF32 tensor cores
``device``         the GPU of the cupy backend (ordinal)     none: GPU 0
=================  =========================================  ==========================================

Relative paths are relative to the folder of the model file. The settings make an ``engine.run.RunSpec``: the
designer runs them through the same engine functions as ``layerlab``."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.services.commandline import command_line as spec_command_line
from engine.backends import BACKENDS
from engine.errors import LayerLabError
from engine.model import Model
from engine.run import AUTO, RunSpec, normalize_format
from engine.weights import is_weights_path

INPUT_PREFIX = "input."
DEFAULTS: dict[str, str] = {
    "backend": "auto", "format": AUTO, "iterations": "10", "warmup": "1", "seed": "0", "weights": "",
    "input_layout": "nchw", "profiling": "on", "fusing": "on", "tf32": "off",
    "device": "",
}
FORMAT_CHOICES = (AUTO, "fp16 nhwc", "fp16 nchw", "fp32 nhwc", "fp32 nchw")
INPUT_FILE_EXTS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".npy")


class SettingsError(LayerLabError):
    """A network setting of the model is invalid (the message names the key, the value and what is allowed)."""


@dataclass(frozen=True)
class RunConfig(RunSpec):
    """Validated run settings of a model: a RunSpec (paths absolute, resolved against the model's folder) and
    the warnings found reading them (input files of layers that no longer exist)."""

    warnings: tuple[str, ...] = field(default=(), compare=False)


def setting(model: Model, key: str) -> str:
    """The effective value of a setting (its default when the model does not set it)."""
    return model.settings.get(key, DEFAULTS.get(key, ""))


def input_layers(model: Model) -> list[str]:
    return [n for n, spec in model.layers.items() if spec.type == "input"]


def _int(model: Model, key: str, minimum: int) -> int:
    text = setting(model, key).strip()
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"network setting {key}: {text!r} is not a whole number (expected {minimum} or more)") from None
    if value < minimum:
        raise SettingsError(f"network setting {key}: {value} is too small (expected {minimum} or more)")
    return value


def _on_off(model: Model, key: str) -> bool:
    text = setting(model, key).strip().lower()
    if text not in ("on", "off"):
        raise SettingsError(f"network setting {key}: {text!r} is not allowed (expected on or off)")
    return text == "on"


def _path(model_dir: Path | None, text: str) -> Path:
    p = Path(text).expanduser()
    if not p.is_absolute() and model_dir is not None:
        p = model_dir / p
    return p.resolve()


def from_model(model: Model, model_path: str | None = None) -> RunConfig:
    """Read and validate the run settings of ``model`` (``model_path`` resolves relative paths).

    Raises SettingsError naming the first bad setting; missing files are errors too."""
    backend = setting(model, "backend").strip().lower()
    if backend not in BACKENDS:
        raise SettingsError(f"network setting backend: {backend!r} is not a backend (expected {', '.join(BACKENDS)})")
    try:
        fmt = normalize_format(setting(model, "format"))
    except LayerLabError as exc:
        raise SettingsError(f"network setting format: {exc}") from None
    layout = setting(model, "input_layout").strip().lower()
    if layout not in ("nchw", "nhwc"):
        raise SettingsError(f"network setting input_layout: {layout!r} is not allowed (expected nchw or nhwc)")
    model_dir = Path(model_path).resolve().parent if model_path else None
    weights = None
    if setting(model, "weights").strip():
        w = _path(model_dir, setting(model, "weights").strip())
        if not w.exists():
            raise SettingsError(f"network setting weights: the weights folder or file {w} does not exist")
        if not is_weights_path(w):
            raise SettingsError(f"network setting weights: {w} is neither a weights folder nor a .safetensors file")
        weights = str(w)
    names = input_layers(model)
    inputs, warnings = [], []
    for key in sorted(model.settings):
        if not key.startswith(INPUT_PREFIX) or not model.settings[key].strip():
            continue
        layer = key[len(INPUT_PREFIX):]
        if layer not in names:
            warnings.append(f"network setting {key}: there is no input layer {layer!r} any more; the file is not used")
            continue
        p = _path(model_dir, model.settings[key].strip())
        if p.suffix.lower() not in INPUT_FILE_EXTS:
            raise SettingsError(f"input file for input layer {layer}: {p.name} is not an image or a .npy tensor "
                                f"(expected one of {', '.join(INPUT_FILE_EXTS)})")
        if not p.is_file():
            raise SettingsError(f"input file for input layer {layer}: {p} does not exist")
        inputs.append((layer, str(p)))
    return RunConfig(backend=backend, format=fmt,
                     iterations=_int(model, "iterations", 1), warmup=_int(model, "warmup", 0), seed=_int(model, "seed", 0),
                     weights=weights, inputs=tuple(inputs), input_layout=layout, profiling=_on_off(model, "profiling"),
                     fusing="on" if _on_off(model, "fusing") else "off", tf32=_on_off(model, "tf32"),
                     device=_int(model, "device", 0) if setting(model, "device").strip() else None,
                     warnings=tuple(warnings))


def command_line(config: RunConfig, model_file: str, report: str | None = None) -> str:
    """The exact command that reproduces a designer run: ``layerlab profile ...`` (``layerlab infer ...``
    when profiling is off, which times whole iterations only and writes no report)."""
    return spec_command_line(config, model_file, report)
