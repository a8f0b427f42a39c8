"""The network's per-layer tensor formats and the format conversions it inserts between layers of different
formats (the settings themselves, their words and parsing are ``engine.formats``).

* ``layer_formats`` decides every layer's format: the network's, overlaid by the layer's setting; a layer whose
  type does not implement that format runs in the nearest one it implements (same precision first).
* ``insert_conversions`` puts a ``format_conversion`` layer on every link between layers of different formats
  (one per source and destination format, shared by the readers). Where the neighbour is an input layer (whose
  staging copy on the device converts anyway) or an output layer, that layer takes the other format instead. A
  conversion is a single device copy (cast and transpose in one element-wise kernel on the GPU), planned in the
  buffer pool and captured in the CUDA graph like any layer.
* ``fused_conversions`` picks the conversions the network fuses into a neighbouring layer instead of running them
  (a precision change in one layout, where the layer says it can, ``Layer.fuses_conversion``): a conversion to
  fp16 into its producer, which writes its result rounded to fp16 straight into the buffer its readers read (the
  one rounding the conversion does); a conversion to fp32 into its readers, which read the fp16 buffer and widen
  it as they read (exact). The conversion layer stays in the network (and in its reports), computing nothing: its
  output is the shared buffer. Fused and unfused give identical values.

Qt-free; imports no plugin."""
from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.errors import GraphError
from engine.formats import LayerFormat, LayerFormatError, canonical, nearest_supported
from engine.graph import execution_order
from engine.layer import Layer
from engine.model import LayerSpec, Model
from engine.tensor import FORMATS, Dims, Layout, Precision, TensorFormat, from_nchw_view, nchw_view

#: the layer type of an inserted conversion (an engine layer: every registry knows it, no palette shows it)
CONVERSION_TYPE = "format_conversion"


def apply_overrides(model: Model, overrides: Mapping[str, str]) -> Model:
    """A copy of ``model`` with the layer format settings ``overrides`` (name -> text) on top of its own. A name
    may be a template instance (every layer it expands to takes the setting). Unknown names are errors."""
    if not overrides:
        return model
    out = model.copy()
    for name, text in overrides.items():
        if name not in out.layers:
            known = ", ".join(list(out.layers)[:12]) + (" ..." if len(out.layers) > 12 else "")
            raise LayerFormatError(f"--layer-format {name}={text}: network {model.name} has no layer {name!r} "
                                   f"(layers: {known})")
        out.layers[name].format = canonical(text, f"layer {name}: format")
    return out


def layer_formats(model: Model, registry: Any, network: TensorFormat,
                  inherited: Mapping[str, str] | None = None, compute: TensorFormat | None = None) -> dict[str, TensorFormat]:
    """Every layer's format: the network's overlaid by the layer's setting (or by ``inherited[name]``, the
    setting of the template instance it came from), moved to a format its type implements. A layer without a
    setting computes in ``compute`` when given (the backend's layout for the network's format), and a partial
    setting keeps the rest of ``compute``: "fp32" in an fp16 NCHW network computing channels-last is fp32 NHWC.

    Where the layers compute channels-last, a layer without a setting holds its rank-4 tensors as its type asks
    (``Layer.layout_for``, :func:`automatic_layouts`): token layers (a matrix product along the last axis) in logical
    order, so a transformer's N x H x W x C features are not transposed in memory by every layer that reads them.

    Input and output layers compute nothing, so without a setting of their own they take the format that saves a
    conversion: an output layer the format of the layer it outputs, an input layer whose readers all run in one
    format that format (the conversion is then fused into staging the input on the device)."""
    out: dict[str, TensorFormat] = {}

    def role(name: str) -> int:
        cls = registry.layer_class(model.layers[name].type)
        return 1 if getattr(cls, "is_network_input", False) else 2 if getattr(cls, "is_network_output", False) else 0

    readers: dict[str, list[str]] = {n: [] for n in model.layers}
    for name, spec in model.layers.items():
        for src in spec.inputs:
            if src in readers:
                readers[src].append(name)
    settings = {n: spec.format or (inherited or {}).get(n, "") for n, spec in model.layers.items()}
    base = compute or network
    layouts = automatic_layouts(model, registry, readers, settings) if base.layout is Layout.NHWC else {}
    for name in sorted(model.layers, key=role):  # inputs after their readers, outputs after their sources
        spec = model.layers[name]
        text = settings[name]
        cls = registry.layer_class(spec.type)
        if not text and role(name) == 2 and spec.inputs and spec.inputs[0] in out:
            out[name] = out[spec.inputs[0]]  # an output layer computes nothing: no conversion for it
            continue
        # a partial setting ("fp32", "nhwc") keeps the other part of the format the layers compute in
        wanted = LayerFormat.parse(text, f"layer {name}: format").over(base)
        if name in layouts:
            wanted = TensorFormat(wanted.precision, layouts[name])
        out[name] = nearest_supported(wanted, cls.desc.formats) if cls is not None else wanted
        theirs = {out[r] for r in readers[name] if r in out}
        if not text and role(name) == 1 and len(theirs) == 1 and cls is not None and theirs <= set(cls.desc.formats):
            out[name] = theirs.pop()  # an input staged straight in its readers' format: the upload converts
    return out


def automatic_layouts(model: Model, registry: Any, readers: Mapping[str, Sequence[str]],
                      settings: Mapping[str, str]) -> dict[str, Layout]:
    """The layers (without a format setting, not inputs or outputs) that hold their tensors in logical order in a
    network computing channels-last: those whose type asks for it (``Layer.layout_for`` "logical"), and the
    "follow" layers (element-wise, views, joins) that read one (directly or through other follow layers), and those
    reading no computing layer (a constant, a view of the input) that are read only by such layers. A network
    without token layers gets none: its layers run channels-last as before."""
    roles: dict[str, str] = {}
    for name, spec in model.layers.items():
        cls = registry.layer_class(spec.type)
        if settings[name] or cls is None or getattr(cls, "is_network_input", False) \
                or getattr(cls, "is_network_output", False):
            continue
        roles[name] = cls.layout_for(spec.params)
    if "logical" not in roles.values():
        return {}
    decided = {n: (Layout.NCHW if r == "logical" else Layout.NHWC) for n, r in roles.items() if r != "follow"}
    try:
        order = execution_order(model)
    except GraphError:  # a loop (the type checker reports it): the model's order
        order = list(model.layers)

    # layers reading no computing layer (a constant) follow their readers: they are not waited for
    sources = {n for n, r in roles.items() if r == "follow" and not any(s in roles for s in model.layers[n].inputs)}

    def from_producers(name: str) -> Layout | None:
        producers = [s for s in model.layers[name].inputs if s in roles and s not in sources]
        if not producers or not all(s in decided for s in producers):
            return None
        return Layout.NCHW if any(decided[s] is Layout.NCHW for s in producers) else Layout.NHWC  # logical spreads

    for name in order:  # producers first: a follow layer takes the layout of what it reads
        if roles.get(name) == "follow" and (lay := from_producers(name)) is not None:
            decided[name] = lay
    for name in reversed(order):  # readers first: what reads no computing layer (a constant) follows its readers
        if roles.get(name) == "follow" and name not in decided:
            theirs = {decided[r] for r in readers[name] if r in decided}
            decided[name] = from_producers(name) or (theirs.pop() if len(theirs) == 1 else Layout.NHWC)
    return {n: lay for n, lay in decided.items() if lay is Layout.NCHW}


@dataclass
class Conversions:
    """What ``insert_conversions`` did: ``formats`` (every layer of the new model, conversions included),
    ``inserted`` ((conversion name, source layer, source format, destination format), in order) and
    ``pinned`` (layers running in another format than the network's, with that format)."""

    formats: dict[str, TensorFormat] = field(default_factory=dict)
    inserted: list[tuple[str, str, TensorFormat, TensorFormat]] = field(default_factory=list)
    pinned: dict[str, TensorFormat] = field(default_factory=dict)


def conversion_name(taken: Collection[str], source: str, dst: TensorFormat) -> str:
    """A name not in ``taken`` for the conversion of ``source``'s output to ``dst``: ``source__to_fp32_nhwc``."""
    base = f"{source}__to_{dst.precision.value}_{dst.layout.value}"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def insert_conversions(model: Model, formats: Mapping[str, TensorFormat], network: TensorFormat) -> tuple[Model, Conversions]:
    """A copy of ``model`` where every link from a layer to a reader of another format goes through a
    ``format_conversion`` layer (one per source and destination format); ``model`` itself when none is needed.
    Every layer of the result carries its full format in ``LayerSpec.format``."""
    info = Conversions(dict(formats), [], {n: f for n, f in formats.items() if f != network})
    needed = [(s, formats[s], formats[r]) for r, spec in model.layers.items() for s in spec.inputs
              if s is not None and s in formats and formats[s] != formats[r] and spec.type != CONVERSION_TYPE]
    if not needed and not info.pinned:
        return model, info
    out = Model(model.name, model.version)
    out.settings, out.fusing_rules = dict(model.settings), copy.deepcopy(model.fusing_rules)
    out.templates, out.custom_layers = dict(model.templates), dict(model.custom_layers)
    made: dict[tuple[str, TensorFormat], str] = {}
    taken = set(model.layers)
    for name, spec in model.layers.items():
        new = copy.deepcopy(spec)
        new.format = f"{formats[name].precision.value} {formats[name].layout.value}"
        if spec.type == CONVERSION_TYPE:  # written by a preprocessed export: it converts what it reads
            src = spec.inputs[0] if spec.inputs else None
            new.params["source"] = str(formats[src]) if src in formats else new.params.get("source", "")
            new.params["target"] = str(formats[name])
            out.layers[name] = new
            continue
        for i, src in enumerate(spec.inputs):
            if src is None or formats[src] == formats[name]:
                continue
            key = (src, formats[name])
            if key not in made:
                cname = conversion_name(taken, src, formats[name])
                taken.add(cname)
                made[key] = cname
                out.layers[cname] = LayerSpec(cname, CONVERSION_TYPE, {"source": str(formats[src]),
                                                                        "target": str(formats[name])},
                                              inputs=[src], position=spec.position,
                                              format=f"{formats[name].precision.value} {formats[name].layout.value}")
                info.formats[cname] = formats[name]
                info.inserted.append((cname, src, formats[src], formats[name]))
            new.inputs[i] = made[key]
        out.layers[name] = new
    return out, info


def fused_conversions(conversions: Iterable[tuple[str, str, TensorFormat, TensorFormat]], layers: Mapping[str, Layer],
                      readers: Mapping[str, Sequence[str]], keep: Collection[str],
                      ) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The inserted conversions (``Conversions.inserted``) the network fuses into a neighbouring layer:
    conversion -> ``("write", (producer,))`` or ``("read", (reader, ...))``. ``layers`` are the built layers,
    ``readers`` every layer's readers, ``keep`` the layers whose own output must stay readable in their own format
    (network outputs, permanent layers, breakpoints): none of them takes a fused write.

    Only precision changes within one layout are fused. A conversion to fp16 is fused into its producer when the
    conversion is its only reader and it can write its result in fp16 (``Layer.fuses_conversion("write")``); a
    conversion to fp32 into its readers when every one of them can read fp16 (``"read"``)."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for conv, src, a, b in conversions:
        if a.layout is not b.layout or a.precision is b.precision or conv in keep:
            continue
        if b.precision is Precision.FP16:  # the producer rounds as it writes
            p = layers[src]
            if (src not in keep and list(readers[src]) == [conv] and p.bypass_input() is None
                    and not getattr(p, "is_network_input", False) and p.fuses_conversion("write")):
                out[conv] = ("write", (src,))
        else:  # the readers widen as they read
            rs = list(dict.fromkeys(readers[conv]))
            if rs and all(layers[r].bypass_input() is None and layers[r].fuses_conversion("read") for r in rs):
                out[conv] = ("read", tuple(rs))
    return out


def chose_layout(net: Any, name: str) -> bool:
    """Whether layer ``name`` of network ``net`` runs in another layout than the network's by its type's choice
    (:func:`automatic_layouts`), not by a setting: pinned, of the network's precision, without a format setting."""
    fmt, source = net.pinned.get(name), net.preprocessed.source.layers
    return fmt is not None and fmt.precision is net.fmt.precision and not (source[name].format if name in source
                                                                           else "")


def chosen_layouts(net: Any) -> set[str]:
    """Every layer of ``net`` for which :func:`chose_layout` holds."""
    return {n for n in net.pinned if chose_layout(net, n)}


def fused_note(net: Any, conv: str) -> str:
    """``, fused into c2 (its write)`` / ``, fused into c3, c4 (their reads)`` for a conversion the network ``net``
    fused (``Network.fused_conversions``), ``''`` for the others: what reports and the overview add to it."""
    kind, into = net.fused_conversions.get(conv, ("", ()))
    if not kind:
        return ""
    how = "its write" if kind == "write" else "its read" if len(into) == 1 else "their reads"
    return f", fused into {', '.join(into)} ({how})"


# ---- the conversion layer ---------------------------------------------------------------------------------
_FORMAT_NAMES = tuple(str(f) for f in FORMATS)

DESC = LayerDesc(
    name=CONVERSION_TYPE,
    display_name="Format conversion",
    summary="Converts a tensor between formats (precision and layout); inserted by the network between layers of "
            "different formats.",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Copies its input into another tensor format: fp32 or fp16, NCHW or NHWC. The network inserts one "
        "between a layer and its readers when they run in different formats (a layer pinned to fp32 in an fp16 "
        "network, or a layer that does not implement the network's format). Values that fit the destination are "
        "copied exactly; fp32 values beyond the fp16 range become infinite, others round to the nearest fp16.</p>"
        "<ul><li><b>source</b>: the input's format.</li><li><b>target</b>: the output's format.</li></ul>"),
    inputs=(InputDesc("input", doc="N x C x H x W tensor in the source format"),),
    params=(ParamDesc("source", "enum", "fp32|nchw", "format of the input", enum_values=_FORMAT_NAMES),
            ParamDesc("target", "enum", "fp16|nchw", "format of the output", enum_values=_FORMAT_NAMES)),
    ranks=ANY_RANK,
)


class FormatConversion(Layer):
    """The network's format conversion: one element-wise device copy (cast and transpose together)."""

    desc = DESC
    fused_activations = frozenset()

    @property
    def source(self) -> TensorFormat:
        return TensorFormat.parse(self.p["source"])

    @property
    def target(self) -> TensorFormat:
        return TensorFormat.parse(self.p["target"])

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        return self.primary(inputs)

    def forward(self, inputs: list[Any], out: Any) -> None:
        x, src = self.primary(inputs), self.source
        if src.layout is self.fmt.layout:
            out[...] = x  # both contiguous in one layout: a plain cast, at memory speed
        else:  # the input seen in the output's memory order: one strided read, one contiguous write
            out[...] = from_nchw_view(nchw_view(x, src), self.fmt)

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        return 0

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        """A Cast to the target precision in a graph whose tensors follow the layers' formats (the fp16 export), an
        Identity for a layout change (ONNX tensors are logical NCHW). In a float32 graph (the fp32 export, or the
        fp16 export's ``fp32_compute``), a conversion to fp16 is the rounding it does: a Cast to FLOAT16 and back."""
        if self.target.precision is self.source.precision:
            return g.node("Identity", [inputs[0]])
        if g.options.fp16_tensors:
            return g.node("Cast", [inputs[0]], to=g.elem_type)
        if self.target.precision is not Precision.FP16:
            return g.node("Identity", [inputs[0]])
        half = g.node("Cast", [inputs[0]], "fp16", to=10)  # TensorProto.FLOAT16
        return g.node("Cast", [half], "fp32", to=1)  # TensorProto.FLOAT

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        """``.float()`` to fp32, ``.to(dtype)`` back to the module's compute dtype (float16 after ``half()``): the
        exported module computes each layer in the precision the network runs it in, and a float32 module (the
        default) in float32 throughout. A layout change is nothing (PyTorch tensors are logical NCHW)."""
        if self.target.precision is self.source.precision:
            return str(inputs[0])
        if self.target.precision is Precision.FP32:
            return f"{inputs[0]}.float()"
        return f"{inputs[0]}.to({t.compute_dtype()})"


#: layers the engine itself provides (every registry finds them by type name; no collection lists them)
ENGINE_LAYERS: dict[str, type[Layer]] = {CONVERSION_TYPE: FormatConversion}

__all__ = ["CONVERSION_TYPE", "ENGINE_LAYERS", "Conversions", "FormatConversion", "apply_overrides",
           "conversion_name", "fused_conversions", "fused_note", "insert_conversions", "layer_formats"]
