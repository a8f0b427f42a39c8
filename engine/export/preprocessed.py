"""The preprocessed model: the design after the preprocessor (templates expanded, fusing rules applied),
saved as a ``.lnet`` that loads and runs with the same results, with a weights folder for its layers
(a fused layer's weights are those it took from the layers it replaced)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.atomic import check_output_file, check_output_folder, refuse_overwrite, staged_folder
from engine.export.common import ExportResult, build_network, host_weights
from engine.model import Model
from engine.modelfile import save
from engine.preprocess import preprocess
from engine.registry import Registry
from engine.tensor import FP32_NCHW, TensorFormat
from engine.weights import WeightsSource, save_weights


def preprocessed_model(model: Model, registry: Registry, fmt: TensorFormat = FP32_NCHW,
                       fusing: str | list[Any] = "on") -> Model:
    """The model as the network builds it for ``fmt`` (``engine.preprocess``: template instances expanded
    into their layers ``<instance>__<layer>``, then fusing rules applied), as a model of its own: no
    templates or fusing rules left to apply, the network setting ``fusing`` off."""
    return _standalone(preprocess(model, registry, fmt, fusing).model)


def _standalone(built: Model) -> Model:
    out = built.copy()
    out.fusing_rules = []
    out.templates = {}
    out.settings["fusing"] = "off"
    out.clear_undo()
    return out


def export_preprocessed(model: Model, registry: Registry, path: str | Path, fmt: TensorFormat = FP32_NCHW,
                        fusing: str | list[Any] = "on", weights: WeightsSource | None = None, seed: int = 0,
                        write_weights: bool = True) -> ExportResult:
    """Write the preprocessed model to ``path`` and, with ``write_weights``, its weights to the folder
    ``<stem>_weights`` next to it (named in the model's ``weights`` setting, so the designer uses it;
    give it to ``layerlab infer --weights``)."""
    out = Path(path)
    check_output_file(out, "preprocessed model")
    folder = out.with_name(f"{out.stem}_weights")
    refuse_overwrite(out, [model.path])
    if write_weights:
        check_output_folder(folder, "weights folder")
    result = preprocess(model, registry, fmt, fusing)
    pre = _standalone(result.model)
    if result.conversions is not None and result.conversions.inserted:  # formats and conversions written out
        for spec in pre.layers.values():
            spec.format = spec.format or f"{fmt.precision.value} {fmt.layout.value}"
    files = [out]
    warnings: list[str] = []
    if write_weights:
        net = build_network(model, registry, weights, seed, fusing, fmt)  # host weights are fp32 in any format
        arrays = {n: host_weights(net, n) for n in net.order}
        pre.settings["weights"] = folder.name
        with staged_folder(folder, "weights folder") as stage:  # replaces the folder only once it is complete
            save_weights(stage, {n: ws for n, ws in arrays.items() if ws})
            save(pre, out)
        files += sorted(folder.glob("*.npy"))
    else:
        save(pre, out)
    expanded = result.expansion.model if result.expansion is not None else model
    conversions = len(result.conversions.inserted) if result.conversions is not None else 0
    removed = len(expanded.layers) - len(pre.layers) + conversions
    instances = result.expanded_instances
    summary = (f"wrote {out} ({len(pre.layers)} layers, "
               + (f"{instances} template instance(s) expanded, " if instances else "")
               + f"{removed} fewer after fusing"
               + (f", {conversions} format conversion(s) inserted" if conversions else "") + ")"
               + (f" and its weights folder {out.stem}_weights" if write_weights else ""))
    return ExportResult("preprocessed", out, files, warnings, summary)

