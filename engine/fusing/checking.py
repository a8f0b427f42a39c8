"""Checking a fusing rule against the loaded plugins, and reading one rule with both steps (``load_rule``)."""
from __future__ import annotations

from engine.descriptors import LayerDesc, ParamDesc
from engine.fusing.conditions import UNREADABLE, And, Compare, Node, Not, Operand, Or, coerce_literal, no_param_message
from engine.fusing.errors import FusingRuleError
from engine.fusing.syntax import FusingRule, parse_rule
from engine.registry import Registry


def check_rule(rule: FusingRule, registry: Registry) -> list[str]:
    """Problems that make the rule unusable with these plugins (unknown layer types, parameters or
    activations, literals a parameter cannot take, a replacement that supports none of the rule's
    formats). Empty when the rule is fine."""
    problems: list[str] = []
    rep = registry.find_layer(rule.replacement)
    if rep is None:
        problems.append(f"{rule.label}: replacement layer type {rule.replacement!r} is unknown "
                        f"({registry.suggest_layer(rule.replacement)})")
    elif not any(f in rep.formats for f in rule.formats):
        problems.append(f"{rule.label}: {rep.name} supports none of the formats {', '.join(map(str, rule.formats))}")
    for pat in (rule.outer, rule.inner):
        if pat is None:
            continue
        desc = registry.find_layer(pat.type)
        if desc is None:
            problems.append(f"{rule.label}: column {pat.col}: unknown layer type {pat.type!r} "
                            f"({registry.suggest_layer(pat.type)})")
        elif pat.condition is not None:
            _check_node(pat.condition, desc, registry, rule.label, problems, as_condition=True)
    return problems


def _check_node(node: Node, desc: LayerDesc, registry: Registry, label: str, problems: list[str],
                as_condition: bool) -> None:
    if isinstance(node, (And, Or)):
        for item in node.items:
            _check_node(item, desc, registry, label, problems, True)
    elif isinstance(node, Not):
        _check_node(node.item, desc, registry, label, problems, True)
    elif isinstance(node, Operand):
        kind = _check_operand(node, desc, label, problems)
        if as_condition and kind is not None and kind != "bool":
            problems.append(f"{label}: column {node.col}: {node.text} is not true or false; compare it with a value")
    elif isinstance(node, Compare):
        for side, other in ((node.left, node.right), (node.right, node.left)):
            _check_operand(side, desc, label, problems)
            if side.kind == "name" and other.kind != "name":
                if side.value == "act":
                    known = {"none", *registry.activation_names}
                    if other.kind != "string" or (other.value not in known and registry.find_activation(other.value) is None):
                        problems.append(f"{label}: column {other.col}: {other.text} is not an activation "
                                        f"(known: none, {', '.join(registry.activation_names)})")
                elif _param(desc, side.value) is not None and coerce_literal(_param(desc, side.value), other) is UNREADABLE:
                    pd = _param(desc, side.value)
                    problems.append(f"{label}: column {other.col}: {other.text} is not a value of {desc.name} "
                                    f"parameter {pd.name} ({pd.allowed()})")


def _param(desc: LayerDesc, name: str) -> ParamDesc | None:
    try:
        return desc.param(name)
    except KeyError:
        return None


def _check_operand(op: Operand, desc: LayerDesc, label: str, problems: list[str]) -> str | None:
    """The operand's kind ('bool', 'string', ...) or None when unknown; records an unknown name."""
    if op.kind != "name":
        return op.kind
    if op.value == "act":
        return "string"
    pd = _param(desc, op.value)
    if pd is None:
        problems.append(f"{label}: column {op.col}: {no_param_message(desc, op.value)}")
        return None
    return "bool" if pd.type == "bool" else pd.type


def load_rule(text: str, where: str, registry: Registry, name: str | None = None) -> FusingRule:
    """Parse and check one rule; errors start with ``where`` (a plugin, a model rule, ``file:line``)."""
    try:
        rule = parse_rule(text, name)
    except FusingRuleError as exc:
        raise FusingRuleError(f"{where}: {exc}") from None
    problems = check_rule(rule, registry)
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise FusingRuleError(f"{where}: {problems[0]}{more}")
    return rule
