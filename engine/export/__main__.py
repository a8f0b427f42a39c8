"""``python -m engine.export``: print the export support tables (``python -m engine.doc_tables --write``
rewrites them in the documentation; a test keeps them current)."""
from __future__ import annotations

from engine.export.support import support_markdown
from engine.plugins import load_plugins

print(support_markdown(load_plugins(entry_point_plugins=False)))
