"""Descriptors of template instances, and ``find_desc``: the one descriptor lookup of any model layer."""
from __future__ import annotations

import contextvars
import html
from collections.abc import Callable, Mapping
from dataclasses import replace

from engine.descriptors import InputDesc, InputKind, LayerDesc
from engine.errors import LayerLabError, TemplateError
from engine.limits import MAX_TEMPLATE_DEPTH
from engine.model import Model
from engine.registry import Registry
from engine.templates.format import TemplateDef, get_template
from engine.templates.names import CATEGORY, template_name, template_type
from engine.tensor import FORMATS

#: Descriptor lookups of other composite layer types, by type prefix: ``engine.netlayers`` adds ``network:``.
#: Each is called as (model, registry, layer type, stack of what is being described) and returns None when unusable.
COMPOSITE_DESCS: dict[str, Callable[[Model, Registry, str, tuple[str, ...]], LayerDesc | None]] = {}
#: template descriptors already built during the outermost find_desc call (each definition once), by (id of the
#: model, template name): a network layer's own model may have templates of the same names; the model is kept
#: with its descriptor so that its id stays its own meanwhile
_DESC_MEMO: contextvars.ContextVar[dict[tuple[int, str], tuple[Model, LayerDesc]] | None] = contextvars.ContextVar(
    "template_descs", default=None)


def find_desc(model: Model, registry: Registry, layer_type: str, _stack: tuple[str, ...] = ()) -> LayerDesc | None:
    """The descriptor of a model layer's type: a plugin layer's, or a template instance's (None when unknown,
    or when the template is broken: ``check_template`` says why)."""
    name = template_name(layer_type)
    if name is None:
        for prefix, describe in COMPOSITE_DESCS.items():
            if layer_type.startswith(prefix):
                return describe(model, registry, layer_type, _stack)
        return registry.find_layer(layer_type)
    if name not in model.templates or name in _stack or len(_stack) >= MAX_TEMPLATE_DEPTH:
        return None
    memo = _DESC_MEMO.get()
    token = _DESC_MEMO.set({}) if memo is None else None
    try:
        memo = _DESC_MEMO.get()
        assert memo is not None
        key = (id(model), name)
        if key in memo:  # a descriptor built without error does not depend on the stack
            return memo[key][1]
        try:
            desc = template_desc(name, model, registry, _stack)
        except LayerLabError:
            return None
        memo[key] = (model, desc)
        return desc
    finally:
        if token is not None:
            _DESC_MEMO.reset(token)


def template_desc(name: str, model: Model, registry: Registry, _stack: tuple[str, ...] = ()) -> LayerDesc:
    """A LayerDesc for instances of template ``name``: its inputs (the first primary, the others secondary),
    its exposed parameters typed like the inner ones (default: the definition's value), the formats every
    inner layer supports, and documentation listing its layers."""
    defn = get_template(model, name)
    stack = (*_stack, name)
    descs: dict[str, LayerDesc | None] = {}
    for n, spec in defn.layers.items():
        nested = template_name(spec.type)
        if nested is not None and nested in stack:
            raise TemplateError(name, f"layer {n}: the template instantiates itself ({' -> '.join((*stack, nested))})")
        descs[n] = find_desc(model, registry, spec.type, stack)
    params = []
    for e in defn.exposed:
        inner = descs.get(e.layer)
        if inner is None:
            continue
        try:
            p = inner.param(e.param)
        except KeyError:
            continue
        spec = defn.layers[e.layer]
        text = next((spec.params[k] for k in (p.name, *p.legacy_names) if k in spec.params), None)
        try:
            default = p.parse(text) if text is not None else p.default
        except ValueError:
            default = p.default
        doc = f"{p.name} of layer {e.layer} ({inner.display_name})" + (f": {p.doc}" if p.doc else "")
        params.append(replace(p, name=e.key, default=default, doc=doc, main=True,
                              legacy_names=tuple(f"{e.layer}.{k}" for k in (*p.legacy_names, e.param) if k != p.name)))
    formats = None
    for d in descs.values():
        if d is not None:
            formats = [f for f in (formats if formats is not None else d.formats) if f in d.formats]
    inputs = tuple(InputDesc(n, InputKind.PRIMARY if i == 0 else InputKind.SECONDARY,
                             f"template input ${n}, read by {', '.join(readers_of(defn, '$' + n)) or 'no layer'}")
                   for i, n in enumerate(defn.inputs))
    types = sorted({s.type for s in defn.layers.values()})
    summary = f"Template of {len(defn.layers)} layer(s) ({', '.join(types)}); output from {defn.output}."
    return LayerDesc(
        name=template_type(name), display_name=name, summary=summary, categories=(CATEGORY,),
        documentation=_documentation(defn, descs), inputs=inputs, params=tuple(params),
        formats=tuple(formats) if formats is not None else FORMATS,
        collection=f"network {model.name}")


def template_descs(model: Model, registry: Registry) -> list[LayerDesc]:
    """Descriptors of the model's usable templates (for the palette and the documentation)."""
    return [d for d in (find_desc(model, registry, template_type(n)) for n in model.templates) if d is not None]


def readers_of(defn: TemplateDef, source: str) -> list[str]:
    return [f"{n}:{i}" for n, s in defn.layers.items() for i, src in enumerate(s.inputs) if src == source]


def _documentation(defn: TemplateDef, descs: Mapping[str, LayerDesc | None]) -> str:
    rows = []
    for n, spec in defn.layers.items():
        d = descs.get(n)
        kind = html.escape(d.display_name if d else spec.type)
        links = ", ".join(html.escape(s) if s else "—" for s in spec.inputs) or "—"
        act = f" + {html.escape(spec.activation)}" if spec.activation != "none" else ""
        mark = " <i>(output)</i>" if n == defn.output else ""
        rows.append(f"<tr><td><b>{html.escape(n)}</b>{mark}</td><td>{kind}{act}</td><td>{links}</td></tr>")
    exposed = ", ".join(f"<code>{html.escape(e.key)}</code>" for e in defn.exposed) or "<i>none</i>"
    return ("<p>A template: a group of layers of this network used as one layer. The preprocessor replaces "
            "each instance by these layers, named <code>&lt;instance&gt;__&lt;layer&gt;</code>.</p>"
            "<table border=1 cellspacing=0 cellpadding=4><tr><th>Layer</th><th>Type</th><th>Reads</th></tr>"
            + "".join(rows) + f"</table><p>Exposed parameters: {exposed}</p>")
