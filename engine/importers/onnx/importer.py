"""``import_onnx``: an ONNX file -> a LayerLab Model, its weights and a record of what happened.

Steps: read and check the file, fix the input sizes, clean the graph up with onnxslim, then walk the
nodes in order: patterns first (``patterns.py``), else the operator's mapping (``mapping.OPS``). A node
that cannot be mapped is refused with its reason; without placeholders the import then fails listing
every refused node, with them each becomes a ``placeholder`` layer. Layers are laid out by engine.layout."""
from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.groups import BOX_SIZE, opening_collapsed, scope_groups
from engine.importers.onnx import patterns
from engine.importers.onnx.channels_last import rewrite_channels_last
from engine.importers.onnx.context import Context, OnnxImportError, Refusal, RefusedNodes, Unsupported, identifier
from engine.importers.onnx.folding import fold_affine_into_convolutions
from engine.importers.onnx.mapping import operator_table
from engine.importers.onnx.ops_attention import absorb_attention_inputs
from engine.importers.onnx.reader import CleanModel, graph_inputs, load_clean
from engine.importers.onnx.slice_joins import fold_slice_joins
from engine.importers.onnx.validate import MAX_NODES, MalformedModel
from engine.importers.onnx.views import fold_linear_views, fold_view_chains, hoist_activations
from engine.layout import estimated_sizes, grouped_drawing, readable_positions
from engine.model import Model
from engine.registry import Registry
from engine.tensor import Dims
from engine.weights import ArrayWeights, WeightsSource, save_safetensors

MAX_NAMED = 5  # nodes named per operator in a refusal message

#: progress(done, total, stage): called while nodes are mapped (stage "mapping") and at each step
Progress = Callable[[int, int, str], None]


@dataclass
class ImportResult:
    """What ``import_onnx`` made: the model, its weights ``{layer: {weight: array}}``, and what happened
    to the ONNX nodes (``mapped``: (op, node, layer); ``folded``: descriptions; ``refused``: the nodes
    without a LayerLab equivalent, placeholders when ``placeholders`` is on) plus notices for the user."""

    model: Model
    weights: dict[str, dict[str, np.ndarray]]
    source: Path
    mapped: list[tuple[str, str, str]] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    placeholders: bool = False
    onnx_nodes: int = 0
    #: ONNX graph input / output name -> the LayerLab input / output layer made for it
    input_layers: dict[str, str] = field(default_factory=dict)
    output_layers: dict[str, str] = field(default_factory=dict)

    def weights_source(self) -> WeightsSource:
        """The imported weights as a weights source (in memory)."""
        return ArrayWeights(self.weights, f"the weights imported from {self.source.name}")

    @property
    def weight_count(self) -> int:
        return sum(len(w) for w in self.weights.values())

    def command_line(self, output: str | os.PathLike[str] | None = None,
                     weights_file: str | os.PathLike[str] | None = None) -> str:
        """The ``layerlab import`` command that makes the same model (quoted for a POSIX shell)."""
        parts = ["layerlab", "import", str(self.source), "-o", str(output or self.source.with_suffix(".lnet"))]
        for name, shape in self.input_shapes.items():
            parts += ["--input-shape", f"{name}={'x'.join(map(str, shape))}"]
        if self.placeholders:
            parts.append("--placeholders")
        if weights_file is not None:
            parts += ["--weights-file", str(weights_file)]
        return " ".join(shlex.quote(p) for p in parts)

    def summary(self) -> str:
        """One line: layers made, nodes folded and refused, weights."""
        n_ph = sum(1 for s in self.model.layers.values() if s.type == "placeholder")
        return (f"{self.onnx_nodes} ONNX nodes -> {len(self.model.layers)} layers ({len(self.folded)} folds"
                f"{f', {n_ph} placeholders' if n_ph else ''}), {self.weight_count} weight tensors "
                f"({sum(a.size for w in self.weights.values() for a in w.values()):,} values)")

    def write(self, lnet: str | os.PathLike[str], weights_file: str | os.PathLike[str] | None = None) -> tuple[Path, Path]:
        """Save the model at ``lnet`` and its weights as one safetensors file (default: next to it, same
        stem), referenced by the model's weights setting. Both are written atomically, the weights first."""
        from engine.modelfile import save  # noqa: PLC0415

        target = Path(lnet)
        wfile = Path(weights_file) if weights_file is not None else target.with_suffix(".safetensors")
        if not target.parent.is_dir():
            raise OnnxImportError(f"{target.parent}: no such folder for the model")
        if not wfile.parent.is_dir():
            raise OnnxImportError(f"{wfile.parent}: no such folder for the weights file")
        try:
            rel = os.path.relpath(wfile.resolve(), target.resolve().parent)
        except ValueError:  # another drive
            rel = str(wfile.resolve())
        self.model.settings["weights"] = rel
        existed = wfile.exists()
        save_safetensors(wfile, self.weights, {"source": self.source.name, "format": "layerlab-weights-1"})
        try:
            save(self.model, target)
        except BaseException:
            if not existed:  # no weights file without its model
                wfile.unlink(missing_ok=True)
            raise
        return target, wfile


def _placeholder(ctx: Context, node: Any) -> bool:
    """Keep ``node`` as placeholder layers (one per output that is read); False when it cannot be kept."""
    from engine.importers.onnx.context import attributes  # noqa: PLC0415

    attrs = {}
    for k, v in attributes(node).items():
        if isinstance(v, np.ndarray):
            if v.size > 4096:
                return False
            v = {"tensor": v.reshape(-1).tolist(), "dtype": v.dtype.name, "shape": list(v.shape)}
        elif not isinstance(v, (int, float, str, list)):
            return False
        attrs[k] = v
    links, kinds, consts, cweights = [], [], [], {}
    for t in node.input:
        if not t:
            kinds.append("")
        elif ctx.is_const(t):
            arr = ctx.consts[t]
            if arr.dtype.kind not in "fiub" or (arr.dtype.kind != "f" and arr.size > 4096):
                return False
            cname = f"const{len(consts)}"
            entry = f"{cname}:{arr.dtype.name}:{'x'.join(map(str, arr.shape))}"
            if arr.dtype.kind == "f":  # float values are weights; integers (axes, pads, shapes) stay exact inline
                cweights[cname] = arr.astype(np.float32)
            else:
                entry += ":" + ",".join(str(int(v)) for v in arr.reshape(-1))
            consts.append(entry)
            kinds.append("c")
        elif t in ctx.sources and not ctx.sources[t].flat:
            links.append(ctx.sources[t].layer)
            kinds.append("t")
        else:
            return False
    outs = [(i, o) for i, o in enumerate(node.output) if o and (ctx.readers(o) or o in ctx.graph_outputs)]
    try:
        dims = {o: ctx.dims(o) for _, o in outs}
    except Unsupported:
        return False
    for i, o in outs:
        params = {"op_type": node.op_type, "domain": node.domain, "attributes": json.dumps(attrs),
                  "onnx_inputs": ",".join(kinds), "constants": ";".join(consts), "output_index": i,
                  "output_dimensions": dims[o]}
        ctx.add("placeholder", params, links, o, cweights or None, suffix=str(i) if len(outs) > 1 else "")
    return True


def _map_nodes(ctx: Context, placeholders: bool, progress: Progress | None) -> list[Refusal]:
    table = operator_table()
    refused: list[Refusal] = []
    dead: set[str] = set()  # tensors of refused nodes: their readers are not reported again
    nodes = list(ctx.graph.node)
    step = max(1, len(nodes) // 100)
    for i, node in enumerate(nodes):
        if progress is not None and i % step == 0:
            progress(i, len(nodes), "mapping")
        if id(node) in ctx.consumed or (node.op_type == "Constant" and node.domain in ("", "ai.onnx")):
            continue
        ctx.node = node
        if any(t in dead for t in node.input if t):  # after a refused node: only say if it is refused itself
            dead.update(node.output)
            if node.domain not in ("", "ai.onnx") or node.op_type not in table:
                refused.append(Refusal(node.op_type, ctx.node_name, "no LayerLab equivalent"))
            continue
        mark = ctx.mark()
        try:
            if node.domain not in ("", "ai.onnx"):
                raise Unsupported(f"operator domain {node.domain!r} is not the standard ONNX one")
            if not patterns.match(ctx):
                mapping = table.get(node.op_type)
                if mapping is None:
                    raise Unsupported("no LayerLab equivalent")
                mapping.fn(ctx)
        except (Unsupported, KeyError, ValueError, IndexError, TypeError, ArithmeticError) as exc:
            reason = str(exc) if isinstance(exc, Unsupported) else \
                f"attributes or inputs not understood ({type(exc).__name__}: {exc})"
            ctx.rollback(mark)  # undo a mapping that failed half-way
            refused.append(Refusal(node.op_type, ctx.node_name, reason))
            if not (placeholders and _placeholder(ctx, node)):
                dead.update(node.output)
            continue
        for name in sorted(ctx.added_layers(mark)):
            ctx.mapped.append((node.op_type, ctx.node_name, name))
    return refused


def _fold_views(ctx: Context) -> None:
    """After mapping: the scale and k transpose of each attention layer's inputs into it
    (``ops_attention.absorb_attention_inputs``), element-wise activations of views onto their producers
    (``views.hoist_activations``), Linear layers on tokens written as reshape + fully_connected + reshape as one
    matmul (``views.fold_linear_views``), joins of slices of one tensor as one gather (``slice_joins``: a roll),
    then chains of reshape and transpose layers as their fewest layers
    (``views.fold_view_chains``), then channels-last regions on N x C x H x W (``channels_last``), recorded as
    folds; the nodes mapped to a removed layer are credited to the layer that now computes them."""
    moved: dict[str, str] = {}
    for layer, gone in absorb_attention_inputs(ctx.layers, ctx._dims, ctx.weights):
        moved.update({name: layer for name in gone})
        ctx.folded.append(f"{', '.join(gone)} -> scale and k of attention {layer}")
    def elementwise(name: str) -> bool:
        cls = ctx.registry.activation_class(name)
        return cls is not None and bool(cls.elementwise)

    for view, layer in hoist_activations(ctx.layers, elementwise):
        ctx.folded.append(f"activation {ctx.layers[layer].activation} of {view} -> layer {layer}")
    for old, layer in fold_linear_views(ctx.layers, ctx._dims, ctx.weights):
        moved.update({name: layer for name in old if name != layer})
        ctx.folded.append(f"reshape + fully_connected + reshape ({', '.join(old)}) -> matmul {layer}")
    for old, layer in fold_slice_joins(ctx.layers, ctx._dims):
        moved.update({name: layer for name in old})
        ctx.folded.append(f"{len(old)} slices joined ({', '.join(old)}) -> gather {layer}")
    folds = fold_view_chains(ctx.layers, ctx._dims, keep=set())
    for old, new in folds:
        last = old[-1]
        for name in new:
            ctx.notes.setdefault(name, ctx.notes.get(last, ""))
            ctx.scopes.setdefault(name, ctx.scopes.get(last, ""))
        moved.update({name: last for name in old if name not in new})
        ctx.folded.append(f"{len(old)} reshape and transpose layers ({', '.join(old)}) -> "
                          f"{' + '.join(ctx.layers[n].type for n in new)}")
    for rw in rewrite_channels_last(ctx.layers, ctx._dims, ctx.weights, elementwise):
        moved = {name: rw.removed.get(layer, layer) for name, layer in moved.items()} | rw.removed
        kinds = sorted({f"{a} -> {b}" for a, b in rw.converted.values()})
        ctx.folded.append(f"channels-last region ({', '.join(rw.region.entries)} ... {', '.join(rw.region.exits)}) on "
                          f"N x C x H x W: {rw.before} layers -> {rw.after}" + (f" ({'; '.join(kinds)})" if kinds else ""))
    for affine, conv in fold_affine_into_convolutions(ctx.layers, ctx.weights):
        moved = {name: conv if layer == affine else layer for name, layer in moved.items()} | {affine: conv}
        ctx._dims.pop(affine, None)
        ctx.folded.append(f"affine {affine} -> the weights and bias of convolution {conv}")
    if moved:
        ctx.mapped[:] = [(op, node, moved.get(layer, layer)) for op, node, layer in ctx.mapped]


class ImporterBug(Exception):
    """The imported layers do not compute the ONNX model's sizes: a mapping is wrong (not the user's doing)."""


def _check_sizes(model: Model, registry: Registry, expected: dict[str, Dims], where: str) -> None:
    """Every imported layer's output size, as LayerLab infers it, must be the one ONNX shape inference gave."""
    from engine.typecheck import ERROR, check, output_shapes  # noqa: PLC0415

    got = output_shapes(model, registry)
    problems = [f"{n}: ONNX {expected[n]}, LayerLab {got[n]}" for n in expected if n in got and got[n] != expected[n]]
    unknown = {n for n in expected if n not in got}
    if unknown:  # the type checker says why LayerLab cannot infer them
        problems += [f"{d.layer}: {d.message}" for d in check(model, registry) if d.severity == ERROR and d.layer in unknown]
    if problems:
        raise ImporterBug(f"{where}: the imported layers do not compute the model's sizes ({'; '.join(problems)}); "
                          "please report this importer bug with the model")


def _malformed_by_checker(proto: Any, where: str) -> None:
    """MalformedModel with the ONNX checker's first complaint about ``proto``, if it has one."""
    import onnx  # noqa: PLC0415

    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as exc:  # noqa: BLE001 - the checker raises ValidationError, shape inference others
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        raise MalformedModel(f"{where}: the model breaks ONNX's rules: {first}") from None


def _refusal_message(where: str, refused: list[Refusal]) -> str:
    """One line per operator (how many nodes, which, why), then the placeholders hint."""
    lines = [f"{op} ({len(group)}): " + "; ".join(str(r) for r in group[:MAX_NAMED])
             + (f"; and {len(group) - MAX_NAMED} more" if len(group) > MAX_NAMED else "")
             for op, group in refusals_by_operator(refused).items()]
    return (f"{where}: {len(refused)} node(s) of {len(lines)} operator(s) have no LayerLab equivalent:\n"
            + "\n".join(lines) + "\nImport with --placeholders to keep them as placeholder layers")


def refusals_by_operator(refused: list[Refusal]) -> dict[str, list[Refusal]]:
    """The refused nodes grouped by operator, the operator with the most nodes first."""
    groups: dict[str, list[Refusal]] = {}
    for r in refused:
        groups.setdefault(r.op, []).append(r)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def import_onnx(path: str | os.PathLike[str], input_shapes: dict[str, tuple[int, ...]] | None = None,
                placeholders: bool = False, progress: Progress | None = None, registry: Registry | None = None,
                clean: bool = True, max_nodes: int = MAX_NODES, layout: bool = True) -> ImportResult:
    """Import the ONNX model at ``path`` (see the module documentation).

    ``input_shapes``: N x C x H x W of inputs whose sizes are symbolic; ``placeholders``: keep unsupported
    nodes as placeholder layers instead of failing; ``progress(done, total, stage)``; ``registry``: the
    layer collections to map to (default: the installed plugins); ``clean``: run onnxslim first; ``max_nodes``:
    the largest graph imported (a larger one is refused before any work); ``layout``: place the layers
    (``engine.layout`` with estimated node sizes; the designer, which measures its nodes, lays out itself).
    Raises OnnxImportError with one message naming every problem. Runs no Qt and may run off the GUI thread."""
    if registry is None:
        from engine.plugins import default_registry  # noqa: PLC0415

        registry = default_registry()
    src = Path(path)
    if progress is not None:
        progress(0, 1, "reading")
    cm: CleanModel = load_clean(src, input_shapes, clean, max_nodes)
    graph = cm.proto.graph
    ctx = Context(graph, cm.opset, registry, cm.consts, cm.shapes, where=str(src))
    inputs, outputs = {}, {}
    for inp in graph_inputs(cm.proto):
        ctx.node = None
        name = inputs[inp.name] = ctx.unique(identifier(inp.name, "input"))
        dims = Dims(*cm.input_shapes[inp.name])
        ctx.add("input", {"dimensions": dims}, [], inp.name, name=name, dims=dims)
        ctx.notes[name] = f"ONNX graph input {inp.name}"
    refused = _map_nodes(ctx, placeholders, progress)
    if refused and not placeholders:
        raise RefusedNodes(_refusal_message(str(src), refused), refused)
    ctx.node = None
    for out in graph.output:
        if out.name not in ctx.sources:
            if not refused:
                raise OnnxImportError(f"{src}: graph output {out.name!r} is not computed by any imported node")
            continue
        name = outputs[out.name] = ctx.unique(identifier(out.name, "output"))
        ctx.add("output", {}, [ctx.sources[out.name].layer], None, name=name)
        ctx.notes[name] = f"ONNX graph output {out.name}"
    _fold_views(ctx)
    if progress is not None and layout:
        progress(len(graph.node), len(graph.node), "layout")
    model = Model(identifier(src.stem, "network"))
    groups = scope_groups(ctx.scopes)
    for name, spec in ctx.layers.items():
        spec.note = ctx.notes.get(name, "")
        spec.group = groups.get(name, "")
        model.layers[name] = spec
    if layout:  # a network that opens with groups collapsed: each such group's layers together, where its box stands
        sizes, collapsed = estimated_sizes(model.layers, registry), opening_collapsed(model.layers)
        positions = (grouped_drawing(model.layers, sizes, collapsed, box=BOX_SIZE).positions if collapsed
                     else readable_positions(model.layers, sizes))
        for name, spec in model.layers.items():
            spec.position = positions.get(name, (0.0, 0.0))
    model.path = None
    try:
        _check_sizes(model, registry, {n: d for n, d in ctx._dims.items() if n in model.layers}, str(src))
    except ImporterBug:
        _malformed_by_checker(cm.proto, str(src))  # a malformed model the checks before mapping let through
        raise
    used = {n for n in model.layers}
    weights = {k: v for k, v in ctx.weights.items() if k in used}
    if progress is not None:
        progress(1, 1, "done")
    return ImportResult(model, weights, src, ctx.mapped, ctx.folded, refused, cm.notices + ctx.notices,
                        {k: v for k, v in cm.input_shapes.items() if input_shapes and k in input_shapes},
                        placeholders, len(graph.node), inputs, outputs)
