"""Reading an ONNX file for import: checks that give one clear message (corrupt file, missing external data,
opset newer than supported, control flow, non-float or non-4-D inputs), input sizes fixed (symbolic ones
from the caller or defaults), the graph cleaned up by onnxslim (constant folding, shape sub-graphs,
Identity/Dropout elimination), then static shapes of every tensor."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.importers.onnx.context import OnnxImportError
from engine.importers.onnx.validate import MAX_NODES, validate
from engine.tensor import MAX_RANK, MIN_RANK

#: newest default-domain opset the mapping table was written and tested against (the ONNX node tests of
#: onnx 1.23); an older installed onnx lowers it to what it knows
MAX_OPSET = 28
CONTROL_FLOW = ("If", "Loop", "Scan", "SequenceMap")
DEFAULT_BATCH, DEFAULT_SIZE = 1, 224
#: fusions of onnxslim that would hide layers of the user's network (batch normalization folded into the
#: convolution, scales into weights); the importer keeps those layers as they are
KEPT_APART = ["FusionConvBN", "FusionConvTransposeBN", "FusionConvMul", "FusionConvTransposeMul", "FusionGemmMul"]
#: onnxslim passes left out: weight tying (sharing equal initializers) compares every pair of constants, which
#: takes seconds on a 1,000-node model and changes nothing LayerLab keeps (each layer has its own weights)
SKIPPED = ["weight_tying"]
#: graphs of more nodes than this say so in a notice when they skip onnxslim (see :func:`needs_clean`)
SLIM_NODES = 1_000
#: operators that onnxslim folds, removes or fuses wherever they are (shape computations, casts, reshapes,
#: MatMul+Add, Pad+Conv, GELU's and layer normalization's pieces). Identity and Dropout are not listed (the
#: importer folds them itself), nor Flatten, Gemm and Concat (onnxslim changes them only in the cases
#: :func:`needs_clean` looks for: constant inputs, a concatenation of a concatenation; the importer folds a
#: Concat of one input)
SLIM_WORK = {"Shape", "Size", "ConstantOfShape", "Cast", "CastLike", "Reshape", "Squeeze", "Unsqueeze", "Gather",
             "GatherElements", "Slice", "Split", "Transpose", "Expand", "Range", "Tile", "Pad", "MatMul", "Erf",
             "Where", "Equal", "ReduceSum", "ReduceMean", "Pow", "Sqrt", "Neg"}


@dataclass
class CleanModel:
    """The cleaned-up model, its default-domain opset, the static shape of every tensor, the constants
    and notices for the user."""

    proto: Any
    opset: int
    shapes: dict[str, tuple[int, ...]]
    consts: dict[str, np.ndarray]
    notices: list[str] = field(default_factory=list)
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)


def _onnx() -> Any:
    try:
        import onnx  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - a main dependency
        raise OnnxImportError("importing ONNX models needs the onnx package (pip install onnx)") from exc
    return onnx


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=NxCxHxW`` -> (NAME, (N, C, H, W))."""
    name, sep, dims = text.partition("=")
    parts = dims.lower().replace("×", "x").split("x")
    if not sep or not name or len(parts) != 4 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise OnnxImportError(f"--input-shape {text!r}: expected NAME=NxCxHxW with positive sizes, e.g. input=1x3x224x224")
    return name, tuple(int(p) for p in parts)


def read(path: str | os.PathLike[str]) -> Any:
    """The ModelProto of ``path`` with its external data loaded; OnnxImportError for anything unreadable."""
    onnx = _onnx()
    p = Path(path)
    if not p.is_file():
        raise OnnxImportError(f"{p}: no such ONNX file")
    try:
        proto = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError, others for truncated files
        raise OnnxImportError(f"{p}: not a readable ONNX model ({type(exc).__name__}: {str(exc) or 'corrupt file'})") from None
    if not proto.graph.node and not proto.graph.output:
        raise OnnxImportError(f"{p}: not a readable ONNX model (no graph)")
    from onnx.external_data_helper import uses_external_data  # noqa: PLC0415

    for t in proto.graph.initializer:
        if uses_external_data(t):
            location = next((e.value for e in t.external_data if e.key == "location"), "")
            data = p.parent / location
            if not location or not data.is_file():
                raise OnnxImportError(f"{p}: initializer {t.name!r} is stored in the external data file "
                                      f"{location or '(unnamed)'}, which does not exist next to the model")
    try:
        onnx.load_external_data_for_model(proto, str(p.parent))
    except Exception as exc:  # noqa: BLE001
        raise OnnxImportError(f"{p}: cannot read the external data: {exc}") from None
    return proto


def check(proto: Any, where: str) -> int:
    """The model's default-domain opset after the checks that refuse the whole model."""
    onnx = _onnx()
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise OnnxImportError(f"{where}: the model imports no standard ONNX opset")
    newest = min(MAX_OPSET, onnx.defs.onnx_opset_version())
    if opset > newest:
        raise OnnxImportError(f"{where}: opset {opset} is newer than this importer supports (at most {newest}); "
                              "export the model with an older opset")
    flow = sorted({n.op_type for n in proto.graph.node if n.op_type in CONTROL_FLOW})
    if flow:
        raise OnnxImportError(f"{where}: control flow ({', '.join(flow)}) is not supported: LayerLab networks are "
                              "fixed graphs of layers")
    if proto.functions:
        used = {(f.domain, f.name) for f in proto.functions} & {(n.domain, n.op_type) for n in proto.graph.node}
        if used:
            try:
                proto = onnx.inliner.inline_local_functions(proto)
            except Exception as exc:  # noqa: BLE001
                raise OnnxImportError(f"{where}: cannot inline the model's local functions: {exc}") from None
    return opset


NHWC_TO_NCHW = [0, 3, 1, 2]


def nhwc_inputs(proto: Any) -> set[str]:
    """Inputs read only by a Transpose to N x C x H x W (how tf2onnx writes TensorFlow's N x H x W x C inputs)."""
    readers: dict[str, list[Any]] = {}
    for n in proto.graph.node:
        for t in n.input:
            readers.setdefault(t, []).append(n)
    out = set()
    for inp in graph_inputs(proto):
        r = readers.get(inp.name, [])
        if r and all(n.op_type == "Transpose" and [a.ints for a in n.attribute if a.name == "perm"] == [NHWC_TO_NCHW]
                     for n in r):
            out.add(inp.name)
    return out


def graph_inputs(proto: Any) -> list[Any]:
    inits = {t.name for t in proto.graph.initializer}
    return [i for i in proto.graph.input if i.name not in inits]


def fix_input_shapes(proto: Any, given: dict[str, tuple[int, ...]], where: str) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    """Set every input's sizes (symbolic ones from ``given`` or defaults); returns the sizes and notices.

    Inputs are float tensors of rank 1 to 6; rank 4 reads N x C x H x W (symbolic N, H, W take defaults), any
    other rank takes a default only for a symbolic first (batch) axis. Refuses other inputs, and names in
    ``given`` that are no input."""
    onnx = _onnx()
    floats = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.DOUBLE: "float64"}
    inputs = graph_inputs(proto)
    names = [i.name for i in inputs]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise OnnxImportError(f"--input-shape names {', '.join(unknown)}, but the model's inputs are {', '.join(names)}")
    shapes, notices, defaulted = {}, [], []
    nhwc = nhwc_inputs(proto)
    for inp in inputs:
        tt = inp.type.tensor_type
        if not inp.type.HasField("tensor_type") or tt.elem_type not in floats:
            kind = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name if inp.type.HasField("tensor_type") and \
                tt.elem_type else "not a tensor"
            raise OnnxImportError(f"{where}: input {inp.name!r} is {kind}; LayerLab inputs are float tensors "
                                  "(N x C x H x W images or feature maps, or tensors of rank 1 to 6)")
        dims = list(tt.shape.dim) if tt.HasField("shape") else []
        if inp.name in given:
            shape = tuple(given[inp.name])  # N x C x H x W for rank 4; written to the model in its own axis order
            if dims and len(dims) != len(shape):
                raise OnnxImportError(f"--input-shape {inp.name}={'x'.join(map(str, shape))}: the model's input "
                                      f"has rank {len(dims)}, the shape given has rank {len(shape)}")
            order = NHWC_TO_NCHW if inp.name in nhwc else list(range(len(shape)))  # ONNX axis of each size
            fixed = "x".join(str(x.dim_value) if x.HasField("dim_value") else "?" for x in dims)
            for d, v in zip(dims, [shape[order.index(k)] for k in range(len(shape))] if dims else []):
                if d.HasField("dim_value") and d.dim_value != v:
                    raise OnnxImportError(f"--input-shape {inp.name}={'x'.join(map(str, shape))}: the model fixes "
                                          f"that input to {fixed}")
        else:
            if not MIN_RANK <= len(dims) <= MAX_RANK:
                raise OnnxImportError(f"{where}: input {inp.name!r} has rank "
                                      f"{len(dims) if tt.HasField('shape') else 'unknown'}; "
                                      f"LayerLab inputs have rank {MIN_RANK} to {MAX_RANK}" +
                                      ("" if tt.HasField("shape") else f" (give it with --input-shape {inp.name}=NxCxHxW)"))
            order = NHWC_TO_NCHW if inp.name in nhwc else list(range(len(dims)))
            image = len(dims) == 4
            shape = []
            for axis in order:
                d = dims[axis]
                if d.HasField("dim_value") and d.dim_value > 0:
                    shape.append(int(d.dim_value))
                elif axis == 0 or (image and axis != order[1]):
                    shape.append(DEFAULT_BATCH if axis == 0 else DEFAULT_SIZE)
                    defaulted.append(inp.name)
                else:
                    what = "channel count" if image else f"size on axis {axis}"
                    hint = "NxCxHxW" if image else "x".join(["S"] * len(dims))
                    raise OnnxImportError(f"{where}: input {inp.name!r} has a symbolic {what}; give it with "
                                          f"--input-shape {inp.name}={hint}")
            shape = tuple(shape)
        tt.ClearField("shape")
        for axis in range(len(shape)):
            tt.shape.dim.add().dim_value = int(shape[order.index(axis)])
        shapes[inp.name] = tuple(int(v) for v in shape)
    for name in dict.fromkeys(defaulted):
        image = len(shapes[name]) == 4
        notices.append(f"input {name} has symbolic sizes: imported as {'x'.join(map(str, shapes[name]))} "
                       f"(N={DEFAULT_BATCH}{f', H=W={DEFAULT_SIZE}' if image else ''} by default; use "
                       f"--input-shape {name}={'NxCxHxW' if image else 'x'.join(['S'] * len(shapes[name]))})")
    for name in sorted(nhwc):
        notices.append(f"input {name} is N x H x W x C in the ONNX model, read only through a Transpose to "
                       "N x C x H x W: the LayerLab input takes N x C x H x W (the Transpose is folded)")
    return shapes, notices


def simplify(proto: Any) -> tuple[Any, str | None]:
    """The model after onnxslim's clean-up, or the model as it was and a notice when onnxslim fails."""
    try:
        import onnxslim  # noqa: PLC0415
    except ImportError:
        return proto, "graph clean-up skipped: onnxslim is not installed (pip install onnxslim)"
    import logging  # noqa: PLC0415

    logging.getLogger("onnxslim").setLevel(logging.ERROR)
    try:
        return onnxslim.slim(proto, skip_fusion_patterns=KEPT_APART, skip_optimizations=SKIPPED), None
    except Exception as exc:  # noqa: BLE001 - a simplifier failure must not stop the import
        return proto, f"graph clean-up (onnxslim) failed, the graph is imported as it is: {type(exc).__name__}: {exc}"


#: initializers of more elements than this are left out of the copy shape inference reads (as inputs of their shape)
SHAPE_ONLY = 64


def _without_weights(proto: Any) -> Any:
    """The model with its large initializers given as graph inputs of their type and shape: what shape inference
    needs (small constants, read by shape computations, stay), without serializing the weights (about 1.5 s for
    resnet50's 100 MB)."""
    onnx = _onnx()
    light = onnx.ModelProto()
    light.ir_version = proto.ir_version
    light.opset_import.extend(proto.opset_import)
    light.functions.extend(proto.functions)
    g, lg = proto.graph, light.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    declared = {i.name for i in g.input}
    for t in g.initializer:
        if math.prod(t.dims) <= SHAPE_ONLY:
            lg.initializer.append(t)
        elif t.name not in declared:
            lg.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return light


def _static_shapes(proto: Any) -> dict[str, tuple[int, ...]]:
    onnx = _onnx()
    try:
        inferred = onnx.shape_inference.infer_shapes(_without_weights(proto), data_prop=True)
    except Exception:  # noqa: BLE001 - fall back to what the model carries
        inferred = proto
    shapes: dict[str, tuple[int, ...]] = {}
    g = inferred.graph
    weights = {t.name for t in proto.graph.initializer} - {i.name for i in proto.graph.input}
    for vi in (*g.input, *g.value_info, *g.output):
        tt = vi.type.tensor_type
        if vi.name in weights:  # (given as inputs to shape inference only)
            continue
        if vi.type.HasField("tensor_type") and tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    return shapes


def constants(proto: Any) -> dict[str, np.ndarray]:
    """Initializers and Constant node outputs as arrays of their own (writable: the CPU kernels compiled ahead of the
    first run take writable weights; read-only views of the model's bytes would each compile a variant of their own)."""
    onnx = _onnx()
    out = {t.name: onnx.numpy_helper.to_array(t).copy() for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            a = n.attribute[0]
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, onnx.TensorProto):
                out[n.output[0]] = onnx.numpy_helper.to_array(v).copy()
            elif a.name in ("value_float", "value_int"):
                out[n.output[0]] = np.asarray(v, dtype=np.float32 if a.name == "value_float" else np.int64)
            elif a.name in ("value_floats", "value_ints"):
                out[n.output[0]] = np.asarray(v, dtype=np.float32 if a.name == "value_floats" else np.int64)
    return out


def drop_identities(proto: Any) -> int:
    """Remove the Identity nodes (PyTorch's exporter passes shared weights and module outputs through them): their
    readers read the Identity's input instead; one that writes a graph output stays. Returns how many went (what
    onnxslim would do for them, in one linear pass)."""
    outputs = {o.name for o in proto.graph.output}
    same = {n.output[0]: n.input[0] for n in proto.graph.node
            if n.op_type == "Identity" and n.domain in ("", "ai.onnx") and n.input and n.input[0]
            and n.output[0] not in outputs}
    if not same:
        return 0
    for name in list(same):  # an Identity of an Identity: to the first input
        seen = {name}
        while same[name] in same and same[name] not in seen:
            seen.add(same[name])
            same[name] = same[same[name]]
    kept = [n for n in proto.graph.node if not (n.op_type == "Identity" and n.output[0] in same)]
    for n in kept:
        for i, t in enumerate(n.input):
            if t in same:
                n.input[i] = same[t]
    del proto.graph.node[:]
    proto.graph.node.extend(kept)
    return len(same)


def needs_clean(proto: Any) -> bool:
    """True when onnxslim has work in the graph: a node it folds, removes, merges or fuses (one pass, by
    operator, by constant inputs and by what reads each tensor). onnxslim takes seconds (about 6 s on densenet121,
    1.9 s of it importing sympy) and its time grows faster than the graph, while the networks PyTorch exports
    are already clean but for Identity nodes, which the importer folds itself: such graphs skip it."""
    consts = {t.name for t in proto.graph.initializer}
    consts.update(o for n in proto.graph.node if n.op_type == "Constant" for o in n.output)
    read = {t for n in proto.graph.node for t in n.input if t} | {o.name for o in proto.graph.output}
    producer = {o: n.op_type for n in proto.graph.node for o in n.output if o}
    seen = set()
    for n in proto.graph.node:
        if n.op_type == "Constant":
            continue
        if n.op_type in SLIM_WORK or n.domain not in ("", "ai.onnx"):
            return True
        inputs = [t for t in n.input if t]
        if inputs and all(t in consts for t in inputs):  # folded to a constant
            return True
        if n.op_type in ("Add", "Sub", "Mul", "Div") and any(t in consts for t in inputs):  # fused into a producer
            return True
        if n.op_type == "Concat" and any(producer.get(t) == "Concat" for t in inputs):
            return True  # merged with the concatenation it reads
        if not any(o in read for o in n.output if o):  # nothing reads it: removed
            return True
        key = (n.op_type, tuple(n.input), tuple(a.SerializeToString() for a in n.attribute))
        if key in seen:  # a repeated computation, merged
            return True
        seen.add(key)
    return False


def load_clean(path: str | os.PathLike[str], input_shapes: dict[str, tuple[int, ...]] | None = None,
               clean: bool = True, max_nodes: int = MAX_NODES) -> CleanModel:
    """Read, check, fix the input sizes, clean up (``clean``) and infer every tensor's static shape. Models of more
    than ``max_nodes`` nodes are refused before any of that work."""
    where = str(path)
    proto = read(path)
    opset = check(proto, where)
    validate(proto, opset, where, max_nodes)
    shapes_in, notices = fix_input_shapes(proto, dict(input_shapes or {}), where)
    notices += [f"input {i.name} is float16 in the ONNX model; LayerLab inputs are float32 (run with --format fp16 "
                "for float16 rounding)" for i in graph_inputs(proto)
                if i.type.tensor_type.elem_type == _onnx().TensorProto.FLOAT16]
    if clean:
        drop_identities(proto)
    if clean and not needs_clean(proto):
        if len(proto.graph.node) > SLIM_NODES:
            notices.append(f"graph clean-up (onnxslim) skipped: {len(proto.graph.node):,} nodes and nothing to fold")
    elif clean:
        proto, notice = simplify(proto)
        if notice:
            notices.append(notice)
    opset = check(proto, where)
    if proto.functions:
        proto = _onnx().inliner.inline_local_functions(proto)
    shapes = _static_shapes(proto)
    for out in proto.graph.output:  # what onnxslim's clean-up gives a graph output declared without a shape
        tt = out.type.tensor_type
        if out.type.HasField("tensor_type") and not tt.HasField("shape") and out.name in shapes:
            for size in shapes[out.name]:
                tt.shape.dim.add().dim_value = size
    return CleanModel(proto, opset, shapes, constants(proto), notices, shapes_in)
