"""Which fusing rules apply to a model: plugin rules it switches off, and the ``on``/``off``/file choice."""
from __future__ import annotations

from pathlib import Path

from engine.fusing.checking import load_rule
from engine.fusing.errors import FusingRuleError
from engine.fusing.syntax import FusingRule
from engine.model import Model
from engine.registry import Registry

#: model setting listing the plugin rules the model switches off (their texts, one per line)
DISABLED_RULES_SETTING = "fusing_disabled"


def disabled_plugin_rules(model: Model) -> set[str]:
    """Texts of the plugins' fusing rules that ``model`` switches off (its ``fusing_disabled`` setting)."""
    return {t.strip() for t in model.settings.get(DISABLED_RULES_SETTING, "").splitlines() if t.strip()}


def set_plugin_rule_enabled(model: Model, text: str, enabled: bool) -> None:
    """Switch a plugin's fusing rule on or off for ``model`` (kept in its file; one undo step)."""
    off = disabled_plugin_rules(model)
    off = off - {text.strip()} if enabled else off | {text.strip()}
    model.set_setting(DISABLED_RULES_SETTING, "\n".join(sorted(off)) or None)


def rules_from(registry: Registry, model: Model, mode: str) -> list[FusingRule]:
    """The rules to apply: ``'on'``: the registry's enabled rules (less those the model switches off, see
    :func:`disabled_plugin_rules`) then the model's enabled rules;
    ``'off'``: none; anything else is a file with one rule per line (blank lines and ``#`` comments
    ignored). Errors name the plugin, the model rule or the file and line."""
    choice = mode.strip()
    if choice.lower() == "off":
        return []
    if choice.lower() == "on":
        off = disabled_plugin_rules(model)
        rules = [load_rule(r.text, f"plugin {r.collection}", registry) for r in registry.fusing_rules
                 if r.enabled and r.text.strip() not in off]
        rules += [load_rule(r.text, f"network {model.name} fusing rule {i}", registry)
                  for i, r in enumerate(model.fusing_rules, 1) if r.enabled]
        return rules
    path = Path(mode)
    if not path.is_file():
        raise FusingRuleError(f"fusing rules {mode!r}: expected on, off or a rules file, and there is no file {path}")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise FusingRuleError(f"fusing rules file {path}: cannot read it: {exc}") from None
    rules = []
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            rules.append(load_rule(line, f"{path}:{lineno}", registry))
    return rules
