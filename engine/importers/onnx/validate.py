"""Structural checks of an ONNX graph before anything else reads it, so that a malformed file fails with one
message naming what is wrong instead of an error deep inside a library: the node count against the import's
limit, initializers and constant tensors (element type, dims, data length), nodes against their operator's
schema (attribute types, required attributes, input and output counts), tensors read but never produced or
produced twice, and cycles. Nodes out of order are put in order. Every check is one pass over the graph."""
from __future__ import annotations

import heapq
import math
from typing import Any

from engine.importers.onnx.context import OnnxImportError

#: the largest graph imported unless the caller raises it (``layerlab import --max-nodes``): the import's time and
#: memory grow with the graph, and a model of more nodes is more likely a mistake or a hostile file than a network
MAX_NODES = 100_000

#: element types LayerLab can read the values of (weights and constant inputs); the others are refused by name
READABLE = {"FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "BOOL", "FLOAT16", "DOUBLE", "UINT32",
            "UINT64", "BFLOAT16"}
#: TensorProto's typed field that holds each element type's values when ``raw_data`` is not used
_FIELD = {"FLOAT": "float_data", "INT64": "int64_data", "DOUBLE": "double_data", "UINT32": "uint64_data",
          "UINT64": "uint64_data", "STRING": "string_data"}


class MalformedModel(OnnxImportError):
    """An ONNX file that breaks the format's own rules (not merely something LayerLab does not support)."""


def _type_name(data_type: int) -> str:
    import onnx  # noqa: PLC0415

    try:
        return onnx.TensorProto.DataType.Name(data_type)
    except ValueError:
        return f"an unknown element type ({data_type})"


def check_tensor(t: Any, what: str, where: str) -> None:
    """A TensorProto whose element type LayerLab reads and whose data holds exactly the values its dims claim."""
    import onnx  # noqa: PLC0415

    kind = _type_name(t.data_type)
    if kind not in READABLE:
        raise MalformedModel(f"{where}: {what} has element type {kind}; LayerLab reads tensors of "
                             f"{', '.join(sorted(READABLE))}")
    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims):
        raise MalformedModel(f"{where}: {what} has negative dims {dims}")
    count = math.prod(dims)
    shape = "x".join(map(str, dims)) or "a scalar"
    if t.data_location == onnx.TensorProto.EXTERNAL and not t.HasField("raw_data"):
        raise MalformedModel(f"{where}: {what} ({shape}) is stored in external data that was not read")
    if t.HasField("raw_data"):
        size = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        if len(t.raw_data) != count * size:
            raise MalformedModel(f"{where}: {what} claims {shape} = {count:,} values ({count * size:,} bytes) but "
                                 f"holds {len(t.raw_data):,} bytes")
        return
    held = len(getattr(t, _FIELD.get(kind, "int32_data")))
    if held != count:
        raise MalformedModel(f"{where}: {what} claims {shape} = {count:,} values but holds {held:,}")


def _check_text(node: Any, index: int, where: str) -> None:
    """Names and types that are text (protobuf hands over strings that are not valid UTF-8 as bytes)."""
    for what, value in (("operator", node.op_type), ("domain", node.domain), ("name", node.name),
                        *(("input", t) for t in node.input), *(("output", t) for t in node.output),
                        *(("attribute name", a.name) for a in node.attribute)):
        if not isinstance(value, str):
            raise MalformedModel(f"{where}: node #{index} has an {what} that is not valid UTF-8 text ({value[:40]!r})")


def _check_node(node: Any, index: int, opset: int, where: str) -> None:
    import onnx  # noqa: PLC0415

    _check_text(node, index, where)
    label = f"{node.op_type} node {node.name or f'#{index}'!r}"
    for a in node.attribute:
        if a.type == onnx.AttributeProto.TENSOR:
            check_tensor(a.t, f"attribute {a.name!r} of {label}", where)
    if node.domain not in ("", "ai.onnx"):
        return
    if node.op_type == "Constant" and len(node.attribute) != 1:
        raise MalformedModel(f"{where}: {label} has {len(node.attribute)} attributes; a Constant holds exactly one "
                             "value")
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except (onnx.defs.SchemaError, TypeError):
        return  # not an ONNX operator (of this opset): the mapping refuses it by name
    seen = set()
    for a in node.attribute:
        if a.type not in onnx.AttributeProto.AttributeType.values() or a.type == onnx.AttributeProto.UNDEFINED:
            raise MalformedModel(f"{where}: attribute {a.name!r} of {label} has no valid type ({a.type})")
        if a.name in seen:
            raise MalformedModel(f"{where}: {label} has attribute {a.name!r} twice")
        seen.add(a.name)
        spec = schema.attributes.get(a.name)
        if spec is None:
            raise MalformedModel(f"{where}: {label} has attribute {a.name!r}, which the ONNX {node.op_type} operator "
                                 f"does not define (it takes {', '.join(sorted(schema.attributes)) or 'none'})")
        if a.type != spec.type:
            given = onnx.AttributeProto.AttributeType.Name(a.type) if a.type in \
                onnx.AttributeProto.AttributeType.values() else f"type {a.type}"
            raise MalformedModel(f"{where}: attribute {a.name!r} of {label} is {given}; ONNX defines it as "
                                 f"{spec.type.name}")
    missing = [n for n, spec in schema.attributes.items() if spec.required and n not in seen]
    if missing:
        raise MalformedModel(f"{where}: {label} lacks the required attribute(s) {', '.join(missing)}")
    given_inputs = len(node.input)
    if given_inputs < schema.min_input or given_inputs > schema.max_input:
        raise MalformedModel(f"{where}: {label} has {given_inputs} input(s); ONNX {node.op_type} takes "
                             f"{schema.min_input}" + (f" to {schema.max_input}" if schema.max_input < 2**31 - 1
                                                      else " or more"))
    if len(node.output) < schema.min_output or len(node.output) > schema.max_output:
        raise MalformedModel(f"{where}: {label} has {len(node.output)} output(s); ONNX {node.op_type} gives "
                             f"{schema.min_output} to {schema.max_output}")


def validate(proto: Any, opset: int, where: str, max_nodes: int = MAX_NODES) -> None:
    """Raise :class:`MalformedModel` (or OnnxImportError for the node limit) for the first problem found in
    ``proto``'s main graph; put its nodes in an order where each comes after the nodes it reads."""
    graph = proto.graph
    nodes = list(graph.node)
    if len(nodes) > max_nodes:
        raise OnnxImportError(f"{where}: the model has {len(nodes):,} nodes, more than the import's limit of "
                              f"{max_nodes:,} (raise it with --max-nodes)")
    producer: dict[str, str] = {}
    for i in graph.input:
        producer[i.name] = f"graph input {i.name!r}"
    for t in [*graph.input, *graph.output, *graph.initializer]:
        if not isinstance(t.name, str):
            raise MalformedModel(f"{where}: a graph input, output or initializer has a name that is not valid UTF-8 "
                                 f"text ({t.name[:40]!r})")
    for t in graph.initializer:
        if t.name in producer and not producer[t.name].startswith("graph input"):
            raise MalformedModel(f"{where}: initializer {t.name!r} is defined twice")
        producer[t.name] = f"initializer {t.name!r}"
        check_tensor(t, f"initializer {t.name!r}", where)
    made_by: dict[str, int] = {}
    for k, n in enumerate(nodes):
        _check_node(n, k, opset, where)
        for o in n.output:
            if not o:
                continue
            if o in producer:
                raise MalformedModel(f"{where}: tensor {o!r} is produced twice ({producer[o]} and {n.op_type} node "
                                     f"{n.name or f'#{k}'!r})")
            producer[o] = f"{n.op_type} node {n.name or f'#{k}'!r}"
            made_by[o] = k
    for k, n in enumerate(nodes):
        for t in n.input:
            if t and t not in producer:
                raise MalformedModel(f"{where}: {n.op_type} node {n.name or f'#{k}'!r} reads tensor {t!r}, which no "
                                     f"graph input, initializer or node produces")
    if all(made_by.get(t, -1) < k for k, n in enumerate(nodes) for t in n.input if t):
        return  # already in order (as ONNX requires)
    _put_in_order(graph, nodes, made_by, where)


def _put_in_order(graph: Any, nodes: list[Any], made_by: dict[str, int], where: str) -> None:
    """Reorder ``graph``'s nodes so that each comes after those it reads, keeping the file's order where it can
    (Kahn's algorithm, the lowest index first); MalformedModel when the graph has a cycle."""
    readers: list[list[int]] = [[] for _ in nodes]
    waiting = [0] * len(nodes)
    for k, n in enumerate(nodes):
        for t in dict.fromkeys(n.input):
            if t in made_by:
                readers[made_by[t]].append(k)
                waiting[k] += 1
    ready = [k for k in range(len(nodes)) if waiting[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for r in readers[k]:
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, r)
    if len(order) < len(nodes):
        stuck = [k for k in range(len(nodes)) if waiting[k]]
        first = nodes[stuck[0]]
        raise MalformedModel(f"{where}: the graph has a cycle: {len(stuck)} node(s), from {first.op_type} node "
                             f"{first.name or f'#{stuck[0]}'!r} on, wait for each other's outputs")
    copies = []
    for k in order:
        c = type(nodes[k])()
        c.CopyFrom(nodes[k])
        copies.append(c)
    del graph.node[:]
    graph.node.extend(copies)
