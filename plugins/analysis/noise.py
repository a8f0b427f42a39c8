"""noise: add Gaussian or uniform noise, or salt-and-pepper, to a tensor (reproducible from a seed)."""
from __future__ import annotations

from typing import Any

import numpy as np

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.tensor import Dims
from plugins.analysis._options import OptionsLayer, OptionSpec

KINDS = ("gaussian", "uniform", "salt_and_pepper")


def noise_field(kind: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """The host random field behind the noise, float32 in logical NCHW shape.

    gaussian: standard normal values; uniform: values in [-1, 1); salt_and_pepper: values in [0, 1)
    compared with the amplitude. Drawn from ``numpy.random.default_rng(seed)``, so every backend and
    format sees the same pattern."""
    rng = np.random.default_rng(seed)
    if kind == "gaussian":
        return rng.standard_normal(shape, dtype=np.float32)
    if kind == "uniform":
        return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    return rng.random(shape, dtype=np.float32)


def add_noise(xp: Any, x: Any, field: Any, kind: str, amplitude: float) -> Any:
    """Noisy ``x``: ``x + amplitude * field`` (gaussian, uniform), or for salt_and_pepper each value
    becomes 0 where ``field < amplitude / 2``, 1 where ``amplitude / 2 <= field < amplitude``."""
    if kind != "salt_and_pepper":
        return x + amplitude * field
    y = xp.where(field < amplitude / 2, xp.zeros((), dtype=x.dtype), x)
    return xp.where((field >= amplitude / 2) & (field < amplitude), xp.ones((), dtype=x.dtype), y)


DESC = LayerDesc(
    name="noise",
    display_name="Noise",
    summary="Adds Gaussian, uniform or salt-and-pepper noise (seeded, reproducible).",
    categories=(Category.ANALYSIS,),
    documentation=(
        "<p>Injects noise to test how a network (a denoiser, a classifier) copes with it. The noise "
        "pattern depends only on the <b>seed</b>, the kind and the tensor size, so it is the same on every "
        "backend and every run. All parameters are <b>runtime options</b>, changed live during analysis.</p>"
        "<ul><li><b>input</b> (primary): any tensor, images in 0..1.</li>"
        "<li><b>kind</b>: <code>gaussian</code> (adds amplitude times a standard normal value), "
        "<code>uniform</code> (adds a value uniform in [-amplitude, amplitude)) or "
        "<code>salt_and_pepper</code> (a fraction <i>amplitude</i> of the values is replaced, half by 0 "
        "and half by 1). Default gaussian.</li>"
        "<li><b>amplitude</b>: standard deviation, half-range or fraction, 0 to 1, default 0.1.</li>"
        "<li><b>seed</b>: integer 0 to 2147483647, default 0.</li>"
        "<li><b>clip</b>: clip the result to 0..1 (images), default false.</li></ul>"
    ),
    inputs=(InputDesc("input", doc="tensor to make noisy"),),
    params=(
        ParamDesc("kind", "enum", "gaussian", "noise distribution", enum_values=KINDS, main=True),
        ParamDesc("amplitude", "float", 0.1, "standard deviation, half-range or fraction replaced", min=0.0, max=1.0,
                  main=True),
        ParamDesc("seed", "uint", 0, "random seed of the noise pattern", max=2**31 - 1),
        ParamDesc("clip", "bool", False, "clip the noisy values to 0..1"),
    ),
)


class Noise(OptionsLayer):
    desc = DESC
    OPTIONS = (
        OptionSpec("kind", "Noise kind"),
        OptionSpec("amplitude", "Amplitude", step=0.01, extras={"slider": True}),
        OptionSpec("seed", "Seed"),
        OptionSpec("clip", "Clip to 0..1"),
    )
    _field: Any = None

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        assert inputs[0] is not None
        return inputs[0]

    def _prepare(self, dims: tuple[int, ...]) -> None:
        """Upload the random field now, not inside ``forward`` (which a captured GPU graph replays)."""
        host = noise_field(self.p["kind"], tuple(dims), self.p["seed"])
        self._field = self.backend.to_device(host.astype(self.cdtype))

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        self._prepare(output)

    def option_changed(self, name: str, old: Any) -> bool:
        if name in ("kind", "seed"):
            self._field = None
            if self.out_dims is not None:
                self._prepare(self.out_dims)
        return False

    def forward(self, inputs: list[Any], out: Any) -> None:
        if self._field is None:
            self._prepare(self.fmt.dims_of(out))
        y = add_noise(self.xp, self.nchw(inputs[0]), self._field, self.p["kind"], self.p["amplitude"])
        if self.p["clip"]:
            y = self.xp.clip(y, 0, 1)
        self.store(out, self.activate(y))


LAYER = Noise
