"""The README's generated tables, rewritten in place from the loaded plugins.

    python -m engine.readme --write README.md   # rewrite every generated table between its markers
    python -m engine.readme --check README.md   # exit status 1 (naming the tables) when one is stale

Two tables are generated: the catalogue of layers and activations (``engine.catalog``) and the export
support table (``engine.export.support``). Each sits between its begin and end markers; the text outside
them is left as it is. A test runs the check on the repository's README.
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


@dataclass(frozen=True)
class Section:
    """One generated table: its name, its markers and the function that makes it (markers included)."""

    name: str
    begin: str
    end: str
    make: Callable[[Registry], str]


SECTIONS: tuple[Section, ...] = (
    Section("catalogue of layers and activations", CATALOG_BEGIN, CATALOG_END, catalog_markdown),
    Section("export support table", SUPPORT_BEGIN, SUPPORT_END, support_markdown),
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


def stale_sections(text: str, registry: Registry, where: str = "README") -> list[str]:
    """Names of the generated tables of ``text`` that differ from what the plugins give now."""
    out = []
    for section in SECTIONS:
        begin, end = _span(text, section, where)
        if text[begin:end] != section.make(registry):
            out.append(section.name)
    return out


def rewrite(text: str, registry: Registry, where: str = "README") -> str:
    """``text`` with every generated table replaced by the current one."""
    for section in SECTIONS:
        begin, end = _span(text, section, where)
        text = text[:begin] + section.make(registry) + text[end:]
    return text


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--write FILE`` or ``--check FILE``. Exit status 0 (done, or up to date), 1 (stale),
    2 (bad input: no such file, markers missing)."""
    parser = argparse.ArgumentParser(prog="python -m engine.readme", description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="FILE", help="rewrite the generated tables of FILE in place")
    group.add_argument("--check", metavar="FILE", help="exit with status 1 when a generated table of FILE is stale")
    args = parser.parse_args(argv)
    from engine.plugins import load_plugins  # noqa: PLC0415 - only the command line loads plugins

    path = Path(args.write or args.check)
    try:
        text = path.read_text(encoding="utf-8")
        registry = load_plugins(entry_point_plugins=False)
        if args.check:
            stale = stale_sections(text, registry, str(path))
            if stale:
                print(f"{path}: stale: {', '.join(stale)} (run python -m engine.readme --write {path})", file=sys.stderr)
                return 1
            print(f"{path}: the generated tables are current")
            return 0
        new = rewrite(text, registry, str(path))
    except (OSError, UnicodeDecodeError) as exc:
        print(f"python -m engine.readme: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    except LayerLabError as exc:
        print(f"python -m engine.readme: {exc}", file=sys.stderr)
        return 2
    if new != text:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: rewrote the generated tables")
    else:
        print(f"{path}: the generated tables are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
