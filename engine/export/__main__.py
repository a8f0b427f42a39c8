"""``python -m engine.export``: print the export support tables (``python -m engine.readme --write README.md``
rewrites them in the README; a test keeps them current)."""
from __future__ import annotations

from engine.export.support import support_markdown
from engine.plugins import load_plugins

print(support_markdown(load_plugins(entry_point_plugins=False)))
