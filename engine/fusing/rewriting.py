"""Applying fusing rules to a model: matching, the checks that keep a fusion exact, and the rewrite."""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from engine.descriptors import InputKind, LayerDesc, activation_text
from engine.formats import LayerFormat
from engine.fusing.conditions import Node
from engine.fusing.syntax import FusingRule, LayerPattern, parse_condition
from engine.graph import execution_order
from engine.model import LayerSpec, Model
from engine.registry import Registry
from engine.tensor import TensorFormat


@dataclass
class FusedModel:
    """The result of ``apply_rules``.

    ``applied``: (rule name, inner layer, outer layer, fused layer) for each fusion, in order.
    ``weight_map``: (fused layer, weight) -> (source layer, source weight), the source being a layer of
    the input model; ``MappedWeights`` reads weights through it.
    ``sources``: copies of the input model's layers that ``weight_map`` refers to.
    ``merged``: each layer that no longer exists -> the layer that now computes it.
    ``skipped``: (rule name, inner, outer, reason) for matches whose conditions held but that were not
    fused (the intermediate output is needed elsewhere, or the replacement cannot represent them)."""

    model: Model
    applied: list[tuple[str, str, str, str]] = field(default_factory=list)
    weight_map: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    sources: dict[str, LayerSpec] = field(default_factory=dict)
    merged: dict[str, str] = field(default_factory=dict)
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)


class _Refused(Exception):
    """A match that cannot be fused; the message says why."""


def apply_rules(model: Model, registry: Registry, fmt: TensorFormat, rules: list[FusingRule],
                protected: AbstractSet[str] = frozenset()) -> FusedModel:
    """Apply the rules that apply to ``fmt`` until none matches; returns a new model (``model`` is unchanged).
    A layer with its own format (``LayerSpec.format``) is matched against the rules of that format, and two
    layers of different formats never fuse.

    Order: passes over the rules in list order; for each rule, candidate outer layers in execution order
    (a layer fused in a pass can take part in a later match of the same pass). Passes repeat until one
    fuses nothing, so chains fuse whatever their length (conv_bn followed by a conv_bn_pool rule...).

    A match is the outer layer and the layer linked to its input 0, both of the pattern's types and
    meeting their conditions. Where the outer layer's inputs commute (its descriptor's ``inputs_commute``
    holds: a sum, a product), the inner layer may sit at any of its data inputs (input 0 tried first); the
    match is then fused as if the two inputs were swapped, so ``sum(x, conv(x))`` becomes ``conv_sum(x, x)``
    with the residual at input 1 as for ``sum(conv(x), x)``. It is never fused when the inner layer's output
    is needed elsewhere: it has another reader (or another link to the outer layer), it is permanent, it is a
    network input or read by an output layer, or its name is in ``protected`` (breakpoints, inspected layers).

    The fused layer, named after the outer layer (keeping its position and permanent flag):
    * parameters: each parameter of the replacement takes the value of the same-named parameter of the
      inner layer, else of the outer layer; a prefixed name ``p_x`` (``bn_epsilon``, ``pool_stride``)
      not found in either takes parameter ``x`` of the outer layer, else of the inner layer. Parameters
      left at their default stay unset unless the defaults differ. A parameter of a source layer that the
      replacement has no name for must be at its default, otherwise the match is not fused.
    * weights: resolved by the same naming rule (``bias`` from the convolution, ``bn_bias`` from the
      batch normalization's ``bias``); every weight of both source layers must be covered. Weights of the
      replacement that come from neither are read under the fused layer's own name.
    * activation: the one of the outer layer, else of the inner layer; when both have one the match is
      not fused (a layer has one activation), unless the replacement holds a second one
      (``LayerDesc.inner_activation``, a parameter): the inner layer's activation then goes there. Where the
      replacement applies it is its own business: the rule's conditions must only match where that gives the
      chain's result.
    * inputs: the inner layer's inputs at the same indices, and the outer layer's other data inputs
      (1, 2, ...; its input 0 is the inner layer) at theirs, so ``concatenation(upsample(x), skip)``
      becomes ``upscale_concat(x, skip)``; a secondary input of either layer that replaces a weight moves
      to the replacement's input replacing the corresponding weight. The match is not fused when the
      replacement has no data input at such an index, when two inputs land on one index, or when a
      mandatory input of the replacement would stay unconnected.

    A one-layer pattern replaces a layer by another type with the same rules, exact names only; each
    one-layer rule replaces a given layer once at most (so rules that undo each other cannot loop).

    Raises FusingRuleError when a condition names a parameter its layer type lacks or tests a
    non-boolean value as a condition (``check_rule`` finds these before any model is seen)."""
    fuser = _Fuser(model, registry, fmt, protected)
    present = {fuser.fmt_of(spec) for spec in model.layers.values()}
    active = [r for r in rules if any(r.applies_to(f) for f in present)]
    changed = True
    while changed:
        changed = False
        for rule in active:
            changed |= fuser.pass_over(rule)
    result = fuser.result
    result.skipped = list(fuser.skipped.values())
    return result


class _Fuser:
    def __init__(self, model: Model, registry: Registry, fmt: TensorFormat, protected: AbstractSet[str]) -> None:
        self.original = model
        self.model = model.copy()
        self.registry = registry
        self.fmt = fmt
        self.protected = frozenset(protected)
        self.result = FusedModel(self.model)
        self.fused_names: set[str] = set()
        self.replaced_once: set[tuple[str, str]] = set()
        self.skipped: dict[tuple[str, str, str], tuple[str, str, str, str]] = {}
        self.commute_conditions: dict[str, Node] = {}

    def fmt_of(self, spec: LayerSpec) -> TensorFormat:
        """The layer's own format (``LayerSpec.format``, set by the preprocessor's formats pass), else the network's."""
        return LayerFormat.parse(spec.format).over(self.fmt) if spec.format else self.fmt

    def pass_over(self, rule: FusingRule) -> bool:
        outer_desc = self.registry.find_layer(rule.outer.type)
        inner_desc = self.registry.find_layer(rule.inner.type) if rule.inner else None
        if outer_desc is None or (rule.inner is not None and inner_desc is None):
            return False
        changed = False
        for name in execution_order(self.model):
            spec = self.model.layers.get(name)
            if spec is None or self.registry.find_layer(spec.type) is not outer_desc:
                continue
            if not rule.applies_to(self.fmt_of(spec)) or not rule.outer.holds(spec, outer_desc, rule.label,
                                                                               self._act(spec)):
                continue
            if rule.inner is None:
                if (rule.text, name) in self.replaced_once:
                    continue
                changed |= self._try(rule, None, spec)
                continue
            for at in self._inner_slots(spec, outer_desc):
                src = spec.inputs[at] if at < len(spec.inputs) else None
                inner = self.model.layers.get(src) if src else None
                if inner is None or self.registry.find_layer(inner.type) is not inner_desc:
                    continue
                if self.fmt_of(inner) != self.fmt_of(spec):  # layers of different formats never fuse
                    continue
                if not rule.inner.holds(inner, inner_desc, rule.label, self._act(inner)):  # type: ignore[arg-type]
                    continue
                if self._try(rule, inner, _with_input_first(spec, at)):
                    changed = True
                    break
        return changed

    def _try(self, rule: FusingRule, inner: LayerSpec | None, outer: LayerSpec) -> bool:
        """Fuse one match, or record why not; True when it fused."""
        key = (rule.name, inner.name if inner else "", outer.name)
        try:
            self.fuse(rule, inner, outer)
        except _Refused as why:
            self.skipped[key] = (*key, str(why))
            return False
        self.skipped.pop(key, None)
        return True

    def _inner_slots(self, spec: LayerSpec, desc: LayerDesc) -> list[int]:
        """The outer layer's inputs where a pattern's inner layer may sit: input 0, and every other data input
        when the layer's inputs commute (its descriptor's ``inputs_commute`` holds: a sum, a product)."""
        if not desc.inputs_commute or len(spec.inputs) < 2:
            return [0]
        cond = self.commute_conditions.get(desc.name)
        if cond is None:
            cond = self.commute_conditions[desc.name] = parse_condition(
                desc.inputs_commute, f"{desc.name} inputs_commute")
        label = f"layer type {desc.name}'s inputs_commute"
        if not LayerPattern(desc.name, cond, 1).holds(spec, desc, label, self._act(spec)):
            return [0]
        return [0, *(i for i in range(1, len(spec.inputs))
                     if (d := desc.input_desc(i)) is not None and not d.weight)]

    def _act(self, spec: LayerSpec) -> str:
        desc = self.registry.find_activation(spec.activation) if spec.activation not in ("", "none") else None
        return desc.name if desc else (spec.activation or "none")

    # ---- one fusion ------------------------------------------------------------------------------
    def _desc(self, spec: LayerSpec) -> LayerDesc:
        desc = self.registry.find_layer(spec.type)
        assert desc is not None
        return desc

    def _check_inner_free(self, inner: LayerSpec, outer: LayerSpec) -> None:
        links = self.model.readers(inner.name)
        own = [(r, i) for r, i in links if r == outer.name]  # one link from the outer layer is the match
        others = [f"{r}:{i}" for r, i in links if r != outer.name] + [f"{r}:{i}" for r, i in own[1:]]
        if others:
            raise _Refused(f"the output of {inner.name} is also read by {', '.join(others)}")
        if inner.permanent:
            raise _Refused(f"{inner.name} is permanent")
        if inner.name in self.protected:
            raise _Refused(f"{inner.name} is protected (breakpoint or inspected)")
        if getattr(self.registry.layer_class(inner.type), "is_network_input", False):
            raise _Refused(f"{inner.name} is a network input")
        if getattr(self.registry.layer_class(outer.type), "is_network_output", False):
            raise _Refused(f"{inner.name} is a network output (read by output layer {outer.name})")

    def fuse(self, rule: FusingRule, inner: LayerSpec | None, outer: LayerSpec) -> None:
        rep = self.registry.find_layer(rule.replacement)
        if rep is None:
            raise _Refused(f"replacement layer type {rule.replacement!r} is not loaded")
        fmt = self.fmt_of(outer)
        if fmt not in rep.formats:
            raise _Refused(f"{rep.name} does not support tensor format {fmt}")
        if inner is not None:
            self._check_inner_free(inner, outer)
        elif rep is self._desc(outer):
            raise _Refused(f"{outer.name} already is a {rep.name}")
        roles = ([inner] if inner is not None else []) + [outer]
        descs = [self._desc(s) for s in roles]
        params = self._params(rep, roles, descs)
        weights = _resolve(list(rep.weights), [set(d.weights) for d in descs])
        for k, (s, d) in enumerate(zip(roles, descs)):
            missing = sorted(set(d.weights) - {w for kk, w in weights.values() if kk == k})
            if missing:
                raise _Refused(f"{rep.name} has no weight for {d.name} {s.name}'s {', '.join(missing)}")
        inputs = self._inputs(rep, roles, descs, weights, has_inner=inner is not None)
        acts = [s for s in reversed(roles) if s.activation and s.activation != "none"]
        if inner is not None and rep.inner_activation and inner.activation not in ("", "none"):
            params[rep.inner_activation] = activation_text(self._act(inner), inner.act_coefs)
            acts = [outer] if outer.activation not in ("", "none") else []
        if len(acts) > 1:
            raise _Refused(f"both {inner.name} and {outer.name} have an activation")  # type: ignore[union-attr]
        act = acts[0] if acts else None
        fused = LayerSpec(outer.name, rep.name, params, act.activation if act else "none",
                          dict(act.act_coefs) if act else {}, inputs, outer.position, outer.permanent,
                          note=outer.note, format=outer.format)
        self._record_weights(rule, rep, roles, weights)
        self.model.layers = {n: (fused if n == outer.name else s) for n, s in self.model.layers.items()
                             if inner is None or n != inner.name}
        if inner is not None:
            self.result.merged[inner.name] = outer.name
            for k, v in self.result.merged.items():
                if v == inner.name:
                    self.result.merged[k] = outer.name
            self.fused_names.discard(inner.name)
        else:
            self.replaced_once.add((rule.text, outer.name))
        self.fused_names.add(outer.name)
        self.result.applied.append((rule.name, inner.name if inner else "", outer.name, outer.name))

    def _params(self, rep: LayerDesc, roles: list[LayerSpec], descs: list[LayerDesc]) -> dict[str, str]:
        texts = [{c: v for k, v in s.params.items() if (c := d.canonical_param_name(k))} for s, d in zip(roles, descs)]
        mapping = _resolve([p.name for p in rep.params], [{p.name for p in d.params} for d in descs])
        out: dict[str, str] = {}
        for name, (k, src) in mapping.items():
            fpd, spd = rep.param(name), descs[k].param(src)
            text = texts[k].get(src)
            if text is None:
                if spd.default_text == fpd.default_text:
                    continue
                text = spd.default_text
            try:
                fpd.parse(text)
            except ValueError as exc:
                raise _Refused(f"{rep.name} parameter {name} cannot take {descs[k].name} {roles[k].name}'s "
                               f"{src}: {exc}") from None
            out[name] = text
        for k, (s, d) in enumerate(zip(roles, descs)):
            covered = {src for kk, src in mapping.values() if kk == k}
            for pname, text in texts[k].items():
                if pname in covered:
                    continue
                pd = d.param(pname)
                try:
                    at_default = pd.parse(text) == pd.default
                except ValueError:
                    at_default = False
                if not at_default:
                    raise _Refused(f"{rep.name} has no parameter for {d.name} {s.name}'s {pname} = {text!r}")
        return out

    def _inputs(self, rep: LayerDesc, roles: list[LayerSpec], descs: list[LayerDesc],
                weights: dict[str, tuple[int, str]], has_inner: bool) -> list[str | None]:
        by_source = {v: fw for fw, v in weights.items()}
        placed: dict[int, tuple[str, str]] = {}  # slot -> (source layer, which input of which layer it was)
        outer_k = len(roles) - 1
        for k, (s, d) in enumerate(zip(roles, descs)):
            for i, src in enumerate(s.inputs):
                if src is None or (has_inner and k == outer_k and i == 0):
                    continue
                idesc = d.input_desc(i)
                what = f"{d.name} {s.name}'s input {i} ({idesc.name if idesc else i})"
                if idesc is not None and idesc.weight:
                    fw = by_source.get((k, idesc.weight))
                    slot = next((j for j, inp in enumerate(rep.inputs) if fw is not None and inp.weight == fw), None)
                else:  # a data input keeps its index (the outer layer's input 0 is the inner layer)
                    rdesc = rep.input_desc(i)
                    slot = i if rdesc is not None and not rdesc.weight else None
                if slot is None:
                    raise _Refused(f"{rep.name} has no input for {what}")
                if slot in placed:
                    raise _Refused(f"{rep.name} input {slot} cannot take both {placed[slot][1]} and {what}")
                placed[slot] = (src, what)
        for j, inp in enumerate(rep.inputs):
            if inp.kind is InputKind.PRIMARY and j not in placed:
                who = " or ".join(f"{d.name} {s.name}" for s, d in zip(roles, descs))
                raise _Refused(f"{rep.name} needs input {j} ({inp.name}), and no input of {who} goes there")
        inputs: list[str | None] = [None] * (max(placed) + 1 if placed else 0)
        for slot, (src, _) in placed.items():
            inputs[slot] = src
        return inputs

    def _record_weights(self, rule: FusingRule, rep: LayerDesc, roles: list[LayerSpec],
                        weights: dict[str, tuple[int, str]]) -> None:
        wm = self.result.weight_map
        new: dict[tuple[str, str], tuple[str, str]] = {}
        for fw, (k, sw) in weights.items():
            src = roles[k].name
            if (src, sw) in wm:
                new[(roles[-1].name, fw)] = wm[(src, sw)]
            elif src not in self.fused_names:
                new[(roles[-1].name, fw)] = (src, sw)
        gone = {s.name for s in roles}
        for key in [key for key in wm if key[0] in gone]:
            del wm[key]
        wm.update(new)
        for layer, _ in new.values():
            self.result.sources.setdefault(layer, copy.deepcopy(self.original.layers[layer]))


def _with_input_first(spec: LayerSpec, at: int) -> LayerSpec:
    """``spec`` with its inputs 0 and ``at`` swapped (a copy; itself when ``at`` is 0): the outer layer of a match
    whose inner layer sits at input ``at`` of a layer whose inputs commute, seen as if it sat at input 0."""
    if at == 0:
        return spec
    inputs = list(spec.inputs)
    inputs[0], inputs[at] = inputs[at], inputs[0]
    return dataclasses.replace(spec, inputs=inputs)


def _resolve(names: list[str], sources: list[set[str]]) -> dict[str, tuple[int, str]]:
    """Where each replacement name comes from: (source index, source name); sources are [inner, outer]
    (or [outer]). Exact names: inner first. Prefixed names ``p_x`` (two-layer patterns only): ``x`` of
    the outer first."""
    out: dict[str, tuple[int, str]] = {}
    for n in names:
        k = next((k for k, s in enumerate(sources) if n in s), None)
        if k is not None:
            out[n] = (k, n)
            continue
        if "_" in n and len(sources) > 1:
            rest = n.split("_", 1)[1]
            k = next((k for k in reversed(range(len(sources))) if rest in sources[k]), None)
            if k is not None:
                out[n] = (k, rest)
    return out
