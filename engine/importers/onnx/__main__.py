"""``python -m engine.importers.onnx [--write docs/onnx-import.md]``: print (or write into that page) the table of
imported ONNX operators."""
from __future__ import annotations

import sys

from engine.importers.onnx.table import import_markdown, write_readme

if len(sys.argv) == 3 and sys.argv[1] == "--write":
    print(f"{sys.argv[2]}: {'updated' if write_readme(sys.argv[2]) else 'already current'}")
else:
    print(import_markdown())
