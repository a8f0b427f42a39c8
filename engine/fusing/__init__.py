"""Fusing rules: text rules that replace a layer and the layer feeding it by one (fused) layer.

A rule names the tensor formats it applies to, the replacement layer type, and a pattern: the outer
layer (with an optional condition) and, in braces, the inner layer that feeds its input 0 (with its own
optional condition; any of its data inputs where the outer layer's inputs commute, as a sum's do)::

    fp16|nhwc|conv_bn = batch_normalization[act == 'none' || act == 'relu'] {convolution[act == 'none']}

Grammar (EBNF; whitespace between tokens is free, ``#`` starts a comment that runs to the end of the
rule, precision and layout may be written in any case)::

    rule       = precision "|" layout "|" type "=" pattern ;
    precision  = "fp32" | "fp16" | "*" ;
    layout     = "nchw" | "nhwc" | "*" ;
    pattern    = layer [ "{" layer "}" ] ;             (* outer layer { inner layer } *)
    layer      = type [ "[" condition "]" ] ;
    condition  = and { "||" and } ;
    and        = unary { "&&" unary } ;
    unary      = "!" unary | "(" condition ")" | comparison ;
    comparison = operand [ ( "==" | "!=" | "<" | ">" | "<=" | ">=" ) operand ] ;
    operand    = name | string | number | "true" | "false" ;
    type       = name ;                                 (* a layer type; legacy names work *)
    name       = letter_or_underscore { letter_or_underscore | digit } ;
    string     = "'" { any character but "'" or "\\" | "\\'" | "\\\\" } "'" ;
    number     = [ "-" ] digits [ "." digits ] [ ( "e" | "E" ) [ "+" | "-" ] digits ] ;

In a condition, ``act`` is the layer's activation (``'none'`` when it has none) and any other name is
one of the layer's parameters (legacy names work); unset parameters have their default value. A literal
compared with a parameter is read the way the parameter's own values are read, so ``kernel_size == 3``,
``kernel_size == '3x3'`` and ``bias == true`` all work (numbers compare as numbers, whatever the
parameter's range); a literal the parameter cannot take is unequal to it and not ordered. Dimensions
are ordered component-wise: ``a <= b`` when no component of a exceeds b's, ``a < b`` when moreover they
differ (``kernel_size <= 3``: at most 3x3; ``kernel_size < 3``: 1x3 or 2x2 but not 3x3). Values of
different kinds (a number and a string) are unequal and not ordered. A bare operand is a condition only
when it is true/false (a bool parameter such as ``bias``, or a literal). ``&&`` binds tighter than
``||``; ``!`` applies to the comparison or parenthesized condition that follows it.

Applying rules (``apply_rules``) never changes the input model: it returns a new one in which each
match is replaced by one layer of the replacement type, named after the outer layer; the fused layer
reads the inner layer's inputs and the outer layer's other inputs, and every reader of the outer layer
reads it. Parameters and weights of the replacement are taken from the two source layers by name (see
``apply_rules``).

The package is split by job:

* ``engine.fusing.syntax``: tokens, the parsed rule (``FusingRule``) and the parser (``parse_rule``);
* ``engine.fusing.conditions``: the condition syntax tree and what it means on a layer;
* ``engine.fusing.checking``: a rule checked against the loaded plugins (``check_rule``, ``load_rule``);
* ``engine.fusing.rewriting``: applying rules to a model (``apply_rules``, ``FusedModel``);
* ``engine.fusing.weights``: the weights of a fused network (``MappedWeights``);
* ``engine.fusing.settings``: which rules apply to a model (``rules_from``, plugin rules switched off).

The rules a collection offers are registered by it (``registrar.fusing_rule``); the standard collection's
are in ``plugins.standard.fusing_rules``.
"""
from __future__ import annotations

from engine.fusing.checking import check_rule, load_rule
from engine.fusing.conditions import And, Compare, Node, Not, Operand, Or, compare_values
from engine.fusing.errors import FusingRuleError
from engine.fusing.rewriting import FusedModel, apply_rules
from engine.fusing.settings import DISABLED_RULES_SETTING, disabled_plugin_rules, rules_from, set_plugin_rule_enabled
from engine.fusing.syntax import FusingRule, LayerPattern, Token, parse_rule, tokenize
from engine.fusing.weights import MappedWeights

__all__ = [
    "DISABLED_RULES_SETTING", "And", "Compare", "FusedModel", "FusingRule", "FusingRuleError", "LayerPattern",
    "MappedWeights", "Node", "Not", "Operand", "Or", "Token", "apply_rules", "check_rule", "compare_values",
    "disabled_plugin_rules", "load_rule", "parse_rule", "rules_from", "set_plugin_rule_enabled", "tokenize",
]
