"""Automatic mixed precision: find a small set of layers to pin to fp32 so that every network output of the
candidate run (fp16) stays within a relative error threshold of the fp32 reference, and measure what the mixed
network costs against all-fp16 and all-fp32.

The search (``fix_precision``) is greedy, then prunes:

1. run the candidate with the pins found so far and compare every layer with the reference (relative L2 error,
   ``engine.analysis.layer_drift``); when every network output is within the threshold, stop;
2. otherwise pin the first layer, in execution order, that is over the threshold and not pinned yet, and go to 1;
3. then try removing each pin in the order they were added, keeping the removal when the outputs stay within the
   threshold.

Pins set precision only (``fp32``): a pinned layer keeps the network's layout. The reference is computed once;
every candidate run is a fresh network with fusing rules off (so every layer of the model can be compared and
pinned). Qt-free: the designer's worker and ``layerlab drift --fix`` call it; ``cancelled()`` is polled between
runs and ``progress(fraction, message)`` follows each."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from engine.analysis import DriftResult, LayerDrift, Variant, compare_precision, layer_drift
from engine.errors import LayerLabError
from engine.formats import LayerFormat, canonical
from engine.model import Model
from engine.profiling import Cancelled
from engine.registry import Registry
from engine.run import RunSpec, open_backend, open_network, run_timed, tensor_format
from engine.tensor import Precision
from engine.weights import WeightsSource

Progress = Callable[[float, str], None]


def without_precision_pins(model: Model) -> Model:
    """A copy of ``model`` whose layers keep only the layout part of their own format settings."""
    out = model.copy()
    for spec in out.layers.values():
        if spec.format:
            spec.format = str(LayerFormat(None, LayerFormat.parse(spec.format).layout))
    return out


def precision_pins(model: Model) -> list[str]:
    """The layers of ``model`` whose own format setting pins them to fp32."""
    return [n for n, s in model.layers.items() if s.format and LayerFormat.parse(s.format).precision is Precision.FP32]


def with_pins(model: Model, pins: Iterable[str], precision: str = "fp32") -> Model:
    """A copy of ``model`` with exactly ``pins`` pinned to ``precision`` (other layers' precision settings removed,
    layout settings kept). A pin on an expanded template layer (``inst__conv``) pins its instance ``inst``."""
    out = without_precision_pins(model)
    for name in pins:
        target = _top(out, name)
        if target not in out.layers:
            raise LayerLabError(f"network {model.name} has no layer {name!r} to pin")
        spec = out.layers[target]
        spec.format = canonical(f"{precision} {LayerFormat.parse(spec.format).layout.value}"
                                if LayerFormat.parse(spec.format).layout else precision)
    return out


@dataclass
class Evaluation:
    """One candidate run: its pins, every compared layer's drift (execution order) and the outputs' errors."""

    pins: tuple[str, ...]
    layers: list[LayerDrift]
    outputs: dict[str, float]

    @property
    def max_output_error(self) -> float:
        return max(self.outputs.values(), default=0.0)


@dataclass
class PrecisionFix:
    """What ``fix_precision`` found: the pins (execution order), the runs before (no pins) and after (the pins),
    whether the outputs are within the threshold, and a log line per step."""

    reference: str
    candidate: str
    threshold: float
    pins: list[str]
    before: Evaluation
    after: Evaluation
    satisfied: bool
    evaluations: int
    log: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """Plain-text lines: the pins and the outputs' errors before and after."""
        lines = [f"mixed precision search: {self.candidate} against {self.reference} "
                 f"(threshold {self.threshold:g} on every network output, {self.evaluations} runs)"]
        lines += [f"  {line}" for line in self.log]
        lines.append("layers pinned to fp32: " + (", ".join(self.pins) if self.pins else "none needed"))
        width = max([len(n) for n in self.after.outputs] + [6])
        lines.append(f"{'output':<{width}}  {'before':>11} {'after':>11}")
        for name, err in self.after.outputs.items():
            lines.append(f"{name:<{width}}  {self.before.outputs.get(name, math.nan):>11.3e} {err:>11.3e}")
        if not self.satisfied:
            lines.append("the threshold cannot be met by pinning layers to fp32 (every drifting layer is pinned)")
        return "\n".join(lines)


class _Runner:
    """Runs the candidate with given pins and compares it with the reference (computed once)."""

    def __init__(self, model: Model, registry: Registry, inputs: Mapping[str, np.ndarray], reference: Variant,
                 candidate: Variant, weights: WeightsSource | None, seed: int) -> None:
        self.model = without_precision_pins(model)
        self.registry, self.inputs, self.candidate = registry, dict(inputs), candidate
        self.weights, self.seed = weights, seed
        self.runs = 0
        ref_model = self.model if reference.fmt.precision is Precision.FP32 else model
        self.ref, self.order, self.output_names = self._outputs(ref_model, reference, {})

    def _outputs(self, model: Model, variant: Variant,
                 pins: Mapping[str, str]) -> tuple[dict[str, np.ndarray], list[tuple[str, str]], list[str]]:
        spec = RunSpec(backend=variant.backend, format=str(variant.fmt), seed=self.seed, fusing="off",
                       layer_formats=tuple(pins.items()))
        net = open_network(model, spec, self.registry, weights=self.weights, reuse_buffers=False,
                           graph_capture=False)
        for name, arr in self.inputs.items():
            net.set_input(name, arr)
        with np.errstate(over="ignore", invalid="ignore"):  # overflow is what this looks for
            net.run()
            names = [n for n in net.order if net.model.layers[n].type != "format_conversion"]
            outs = {n: net.output(n) for n in names}
        self.runs += 1
        return outs, [(n, net.layer(n).desc.name) for n in names], list(net.output_names)

    def evaluate(self, pins: Iterable[str]) -> Evaluation:
        pins = tuple(pins)
        cand, _, _ = self._outputs(self.model, self.candidate, {p: "fp32" for p in pins})
        layers = [layer_drift(n, t, self.ref[n], cand[n]) for n, t in self.order if n in cand]
        by_name = {d.name: d for d in layers}
        return Evaluation(pins, layers, {n: by_name[n].rel_error for n in self.output_names if n in by_name})


def fix_precision(model: Model, registry: Registry, inputs: Mapping[str, np.ndarray] | None = None,
                  reference: Variant | str = "numpy:fp32|nchw", candidate: Variant | str = "fp16",
                  weights: WeightsSource | None = None, seed: int = 0, threshold: float = 1e-2,
                  progress: Progress | None = None, cancelled: Callable[[], bool] | None = None) -> PrecisionFix:
    """Find a small set of layers to pin to fp32 (see the module documentation). ``inputs``: host fp32 NCHW
    arrays by input layer (seeded random tensors for the others). Raises Cancelled when ``cancelled()`` says so."""
    ref_v = Variant.parse(reference) if isinstance(reference, str) else reference
    cand_v = Variant.parse(candidate) if isinstance(candidate, str) else candidate
    if not (threshold > 0 and math.isfinite(threshold)):
        raise LayerLabError(f"the threshold must be a positive number, got {threshold}")
    if cand_v.fmt.precision is not Precision.FP16:
        raise LayerLabError(f"the candidate {cand_v} is not fp16: there is nothing to pin to fp32")

    def step(fraction: float, message: str) -> None:
        if cancelled is not None and cancelled():
            raise Cancelled("the search was cancelled")
        if progress is not None:
            progress(min(1.0, fraction), message)

    step(0.0, "running the fp32 reference")
    runner = _Runner(model, registry, inputs or {}, ref_v, cand_v, weights, seed)
    order = [n for n, _ in runner.order]
    log: list[str] = []
    step(0.05, "running all layers in fp16")
    current = before = runner.evaluate(())
    pins: list[str] = []
    while current.max_output_error > threshold:
        over = [d for d in current.layers if d.rel_error > threshold and d.name not in pins]
        if not over:
            break
        first = over[0]
        pins.append(first.name)
        log.append(f"pin {first.name} ({first.type}, relative error {first.rel_error:.3e})")
        step(0.05 + 0.65 * (order.index(first.name) + 1) / len(order), f"pinned {first.name}; running again")
        current = runner.evaluate(pins)
    satisfied = current.max_output_error <= threshold
    if satisfied:
        for k, name in enumerate(list(pins)):
            step(0.7 + 0.3 * k / max(len(pins), 1), f"is {name} needed?")
            trial = [p for p in pins if p != name]
            result = runner.evaluate(trial)
            if result.max_output_error <= threshold:
                pins, current = trial, result
                log.append(f"unpin {name} (not needed: outputs within {result.max_output_error:.3e})")
    step(1.0, "done")
    pins = [n for n in order if n in pins]
    return PrecisionFix(str(ref_v), str(cand_v), threshold, pins, before, current, satisfied, runner.runs, log)


@dataclass(frozen=True)
class VariantTime:
    """The time of one way of running the network (ms per inference, median of the timed iterations)."""

    label: str
    ms: float
    pins: int
    conversions: int
    graph: str = ""  #: the network's CUDA graph status after the timed runs ("off" on the CPU)
    fused: int = 0  #: how many of the conversions the network fused into a neighbouring layer


def time_mixed(model: Model, registry: Registry, pins: Iterable[str], base: RunSpec,
               weights: WeightsSource | None = None, cancelled: Callable[[], bool] | None = None) -> list[VariantTime]:
    """The time of the network with ``pins`` in fp32 and the rest in fp16, of all-fp16 and of all-fp32 (the layout
    of ``base``'s format), each with ``base``'s backend, fusing, iterations and warm-up (whole iterations timed)."""
    pins = list(pins)
    backend = open_backend(base)
    layout = tensor_format(base.format, backend.name).layout.value
    clean = without_precision_pins(model)
    out = []
    for label, precision, layer_pins in (("mixed", "fp16", pins), ("all fp16", "fp16", []), ("all fp32", "fp32", [])):
        spec = replace(base, format=f"{precision} {layout}", profiling=False,
                       layer_formats=tuple((p, "fp32") for p in layer_pins))
        net = open_network(clean, spec, registry, backend=backend, weights=weights)
        with np.errstate(over="ignore", invalid="ignore"):  # all-fp16 may overflow: that is what is measured
            result = run_timed(net, spec, cancelled=cancelled)
        out.append(VariantTime(label, float(np.median(result.network_times_ms)), len(layer_pins),
                               len(net.conversions), net.graph_status, len(net.fused_conversions)))
    return out


@dataclass
class PinReport:
    """``pin_and_compare``'s result: the search, the comparison before (no pins) and after (the pins), and the
    time of the mixed network, all-fp16 and all-fp32."""

    fix: PrecisionFix
    before: DriftResult
    after: DriftResult
    times: list[VariantTime]

    def error_rows(self) -> list[tuple[str, float, float]]:
        """(network output, relative error before, after) for every output."""
        return [(n, self.fix.before.outputs.get(n, math.nan), e) for n, e in self.fix.after.outputs.items()]


def pin_and_compare(model: Model, registry: Registry, inputs: Mapping[str, np.ndarray], candidate: Variant | str,
                    weights: WeightsSource | None = None, seed: int = 0, threshold: float = 1e-2,
                    iterations: int = 5, progress: Progress | None = None,
                    cancelled: Callable[[], bool] | None = None) -> PinReport:
    """The designer's "Pin diverging layers to fp32": the search (90% of ``progress``), then the comparison re-run
    with the pins and both timed (the candidate's backend, ``iterations`` iterations, fusing on)."""
    cand_v = Variant.parse(candidate) if isinstance(candidate, str) else candidate

    def part(lo: float, hi: float) -> Progress | None:
        return None if progress is None else (lambda f, m: progress(lo + (hi - lo) * f, m))

    fix = fix_precision(model, registry, inputs, "numpy:fp32|nchw", cand_v, weights, seed, threshold,
                        part(0.0, 0.8), cancelled)
    kw = {"weights": weights, "seed": seed, "threshold": threshold}
    before = compare_precision(model, registry, dict(inputs), "numpy:fp32|nchw", cand_v, **kw,
                               layer_formats={n: "default" for n in precision_pins(model)})
    after = compare_precision(model, registry, dict(inputs), "numpy:fp32|nchw", cand_v, **kw,
                              layer_formats={**{n: "default" for n in precision_pins(model)},
                                             **{_top(model, p): "fp32" for p in fix.pins}})
    if progress is not None:
        progress(0.85, "timing the mixed, all-fp16 and all-fp32 networks")
    spec = RunSpec(backend=cand_v.backend, format=str(cand_v.fmt), iterations=iterations, warmup=1, seed=seed)
    times = time_mixed(model, registry, fix.pins, spec, weights=weights, cancelled=cancelled)
    if progress is not None:
        progress(1.0, "done")
    return PinReport(fix, before, after, times)


def apply_pins(model: Model, pins: Iterable[str]) -> list[str]:
    """Store ``pins`` as ``model``'s fp32 layers (other precision settings removed, layouts kept) as one undo step;
    returns the model's pins afterwards. Raises LayerLabError while the model is read-only."""
    pins = list(pins)
    wanted = with_pins(model, pins)
    with model.macro(f"Pin {', '.join(pins)} to fp32" if pins else "Remove precision pins"):
        for name in set(precision_pins(model)) | set(precision_pins(wanted)):
            model.set_layer_format(name, str(LayerFormat.parse(wanted.layers[name].format)))
    return precision_pins(model)


def inner_drift_note(result: DriftResult, outputs: Iterable[str]) -> str:
    """Why a comparison can mark a layer over the threshold while the search needs no (further) pin: the search
    asks only that every network output stays within the threshold; an error inside the network may shrink on its
    way to the outputs. Empty when no layer other than the outputs is over the threshold."""
    outputs = set(outputs)
    inner = [d for d in result.layers if d.rel_error > result.threshold and d.name not in outputs]
    if not inner:
        return ""
    first = inner[0]
    more = f" and {len(inner) - 1} more" if len(inner) > 1 else ""
    return (f"{first.name} (relative error {first.rel_error:.2e}){more} inside the network stays over "
            f"{result.threshold:g}, but the error does not reach the outputs: pins are searched only until every "
            "network output is within the threshold")


def _top(model: Model, name: str) -> str:
    """The model layer a network layer name stands for (an expanded template layer's instance)."""
    return name if name in model.layers else name.split("__", 1)[0]


def format_times(times: list[VariantTime]) -> str:
    """Plain-text lines of ``time_mixed``'s result."""
    lines = []
    for t in times:
        extra = f" ({t.pins} pinned, {t.conversions} conversions, {t.fused} fused)" if t.label == "mixed" else ""
        lines.append(f"  {t.label:<9} {t.ms:9.3f} ms{extra}")
    return "\n".join(lines)


__all__ = ["Evaluation", "PinReport", "PrecisionFix", "VariantTime", "apply_pins", "fix_precision", "format_times",
           "inner_drift_note", "pin_and_compare", "precision_pins", "time_mixed", "with_pins", "without_precision_pins"]
