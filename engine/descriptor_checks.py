"""Checks of what a plugin registers, done at registration: a descriptor that would crash the palette,
`layerlab layers`, the type checker or a run later is refused now, naming the plugin, the layer or activation
and the field at fault."""
from __future__ import annotations

import math
from typing import Any

from engine.descriptors import PARAM_TYPES, ActivationDesc, CoefDesc, InputDesc, InputKind, LayerDesc, ParamDesc, is_identifier
from engine.limits import cut
from engine.tensor import TensorFormat


def _is_str_tuple(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value)


def param_problem(p: Any) -> str | None:
    """What is wrong with one parameter descriptor (None when nothing is)."""
    if not isinstance(p, ParamDesc):
        return f"params: {cut(p)} is not a ParamDesc"
    where = f"params: parameter {cut(p.name)}"
    if not isinstance(p.name, str) or not is_identifier(p.name):
        return f"params: parameter name {cut(p.name)} is not an identifier"
    if p.type not in PARAM_TYPES:
        return f"{where}: type {cut(p.type)} is not one of {', '.join(PARAM_TYPES)}"
    if p.type == "enum" and (not p.enum_values or not _is_str_tuple(p.enum_values)):
        return f"{where}: enum_values must be a non-empty tuple of strings"
    for bound in ("min", "max"):
        v = getattr(p, bound)
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)):
            return f"{where}: {bound} {cut(v)} is not a finite number"
    if not _is_str_tuple(p.legacy_names):
        return f"{where}: legacy_names must be a tuple of strings"
    kinds = {"bool": (bool,), "uint": (int,), "int": (int,), "float": (int, float), "string": (str,), "enum": (str,)}
    if p.type in kinds and (not isinstance(p.default, kinds[p.type])
                            or (isinstance(p.default, bool) and p.type not in ("bool",))):
        if not (isinstance(p.default, str) and p.type != "string"):  # text defaults are parsed below
            return f"{where}: default {cut(p.default)} is not a {p.type} value"
    try:
        if isinstance(p.default, str) and p.type == "bool":
            raise ValueError("a bool default must be True or False")
        p.parse(p.default if isinstance(p.default, str) else p.format(p.default))
    except Exception as exc:  # noqa: BLE001 - any failure means the default is unusable
        return f"{where}: default {cut(p.default)} is not a valid {p.type} ({exc})"
    return None


def layer_desc_problems(desc: Any) -> list[str]:
    """Every problem of a layer descriptor, each naming the field (empty when it is usable)."""
    if not isinstance(desc, LayerDesc):
        return [f"desc: {cut(desc)} is not a LayerDesc"]
    problems = []
    if not isinstance(desc.name, str) or not is_identifier(desc.name):
        problems.append(f"name: {cut(desc.name)} is not an identifier (letters, digits, '_')")
    for f in ("display_name", "summary", "documentation", "collection", "inputs_commute"):
        if not isinstance(getattr(desc, f), str):
            problems.append(f"{f}: {cut(getattr(desc, f))} is not text")
    for f in ("categories", "legacy_names", "weights"):
        if not _is_str_tuple(getattr(desc, f)):
            problems.append(f"{f}: must be a tuple of strings")
    if not isinstance(desc.inputs, (tuple, list)) or not all(isinstance(i, InputDesc) for i in desc.inputs):
        problems.append("inputs: must be a tuple of InputDesc")
    else:
        for k, i in enumerate(desc.inputs):
            if not isinstance(i.kind, InputKind):
                problems.append(f"inputs: input {k} ({cut(i.name)}): kind {cut(i.kind)} is not an InputKind")
            elif i.kind is InputKind.PRIMARY_INFINITE and k != len(desc.inputs) - 1:
                problems.append(f"inputs: input {k} ({cut(i.name)}): only the last input may take any number of links")
    if not isinstance(desc.params, (tuple, list)):
        problems.append("params: must be a tuple of ParamDesc")
    else:
        names: set[str] = set()
        for p in desc.params:
            problem = param_problem(p)
            if problem:
                problems.append(problem)
            elif p.name in names:
                problems.append(f"params: parameter {p.name!r} is declared twice")
            else:
                names.add(p.name)
    if not isinstance(desc.formats, (tuple, list)) or not all(isinstance(f, TensorFormat) for f in desc.formats):
        problems.append("formats: must be a tuple of TensorFormat")
    elif not desc.formats:
        problems.append("formats: supports no tensor format")
    return problems


def activation_desc_problems(desc: Any) -> list[str]:
    """Every problem of an activation descriptor, each naming the field."""
    if not isinstance(desc, ActivationDesc):
        return [f"desc: {cut(desc)} is not an ActivationDesc"]
    problems = []
    if not isinstance(desc.name, str) or not is_identifier(desc.name):
        problems.append(f"name: {cut(desc.name)} is not an identifier (letters, digits, '_')")
    for f in ("display_name", "summary", "documentation"):
        if not isinstance(getattr(desc, f), str):
            problems.append(f"{f}: {cut(getattr(desc, f))} is not text")
    if not _is_str_tuple(desc.legacy_names):
        problems.append("legacy_names: must be a tuple of strings")
    for c in desc.coefficients if isinstance(desc.coefficients, (tuple, list)) else [None]:
        if not isinstance(c, CoefDesc):
            problems.append("coefficients: must be a tuple of CoefDesc")
            break
        if not isinstance(c.name, str) or not is_identifier(c.name):
            problems.append(f"coefficients: name {cut(c.name)} is not an identifier")
        elif not isinstance(c.default, (int, float)) or isinstance(c.default, bool) or not math.isfinite(c.default):
            problems.append(f"coefficients: {c.name}: default {cut(c.default)} is not a finite number")
    return problems
