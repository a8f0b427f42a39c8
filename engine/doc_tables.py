"""The documentation's generated tables, rewritten in place from the loaded plugins.

    python -m engine.doc_tables --write   # rewrite every generated table between its markers
    python -m engine.doc_tables --check   # exit status 1 (naming the pages and tables) when one is stale

Two tables are generated: the catalogue of layers and activations (``engine.catalog``, in ``docs/layers.md``) and the
export support table (``engine.export.support``, in ``docs/exporting.md``). Each sits between its begin and end
markers; the text outside them is left as it is. A test runs the check on the repository's documentation.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.catalog import BEGIN as CATALOG_BEGIN
from engine.catalog import END as CATALOG_END
from engine.catalog import markdown as catalog_markdown
from engine.errors import LayerLabError
from engine.export.support import BEGIN as SUPPORT_BEGIN
from engine.export.support import END as SUPPORT_END
from engine.export.support import support_markdown
from engine.registry import Registry

#: the repository's documentation folder (the pages are found relative to it)
DOCS = Path(__file__).resolve().parents[1] / "docs"


@dataclass(frozen=True)
class Section:
    """One generated table: its name, the page that holds it, its markers and the function that makes it
    (markers included)."""

    name: str
    page: str
    begin: str
    end: str
    make: Callable[[Registry], str]


SECTIONS: tuple[Section, ...] = (
    Section("catalogue of layers and activations", "layers.md", CATALOG_BEGIN, CATALOG_END, catalog_markdown),
    Section("export support table", "exporting.md", SUPPORT_BEGIN, SUPPORT_END, support_markdown),
)


def _span(text: str, section: Section, where: str) -> tuple[int, int]:
    """Where the section's table is: from its begin marker (found by its start, ``<!-- NAME:begin``, so the
    marker's wording may change) to the end of its end marker."""
    begin = text.find(section.begin.split(" (")[0])
    end = text.find(section.end, begin)
    if begin < 0 or end < 0:
        raise LayerLabError(f"{where}: no {section.name} markers (expected a line {section.begin!r} and, after it, "
                            f"a line {section.end!r})")
    return begin, end + len(section.end)


def is_stale(text: str, section: Section, registry: Registry, where: str) -> bool:
    """Whether the section's table in ``text`` differs from what the plugins give now."""
    begin, end = _span(text, section, where)
    return text[begin:end] != section.make(registry)


def rewrite(text: str, section: Section, registry: Registry, where: str) -> str:
    """``text`` with the section's table replaced by the current one."""
    begin, end = _span(text, section, where)
    return text[:begin] + section.make(registry) + text[end:]


def stale_sections(registry: Registry, docs: Path = DOCS) -> list[str]:
    """``page: table`` for every generated table of the documentation that is stale."""
    out = []
    for section in SECTIONS:
        page = docs / section.page
        if is_stale(page.read_text(encoding="utf-8"), section, registry, str(page)):
            out.append(f"{section.page}: {section.name}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--write`` or ``--check`` (``--docs DIR`` for another documentation folder). Exit status 0
    (done, or up to date), 1 (stale), 2 (bad input: no such page, markers missing)."""
    parser = argparse.ArgumentParser(prog="python -m engine.doc_tables", description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="rewrite the generated tables of the pages in place")
    group.add_argument("--check", action="store_true", help="exit with status 1 when a generated table is stale")
    parser.add_argument("--docs", default=str(DOCS), help="the documentation folder (default: the repository's)")
    args = parser.parse_args(argv)
    from engine.plugins import load_plugins  # noqa: PLC0415 - only the command line loads plugins

    docs = Path(args.docs)
    try:
        registry = load_plugins(entry_point_plugins=False)
        if args.check:
            stale = stale_sections(registry, docs)
            if stale:
                print(f"stale: {'; '.join(stale)} (run python -m engine.doc_tables --write)", file=sys.stderr)
                return 1
            print("the generated tables are current")
            return 0
        for section in SECTIONS:
            page = docs / section.page
            text = page.read_text(encoding="utf-8")
            new = rewrite(text, section, registry, str(page))
            if new != text:
                page.write_text(new, encoding="utf-8")
                print(f"{page}: rewrote the {section.name}")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"python -m engine.doc_tables: cannot read a page: {exc}", file=sys.stderr)
        return 2
    except LayerLabError as exc:
        print(f"python -m engine.doc_tables: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
