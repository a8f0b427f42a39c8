"""The error of the fusing rule language."""
from __future__ import annotations

from engine.errors import LayerLabError


class FusingRuleError(LayerLabError):
    """A fusing rule cannot be read or used: names the rule (and its file and line), the column and
    what was expected."""
