"""``layerlab compare REPORT...``: compare profile reports layer by layer (matched by name and type), as text and
optionally as HTML. Imports no Qt."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

DESCRIPTION = "Compare reports layer by layer (matched by name and type)."


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The reports, the base report's index and ``--html``."""
    parser.add_argument("reports", nargs="+", metavar="REPORT", help="report JSON files")
    parser.add_argument("--base", type=int, default=0, help="index of the base report (default 0)")
    parser.add_argument("--html", metavar="PATH", help="also write an HTML comparison")
    parser.add_argument("--no-kernels", action="store_true", help="leave out the kernels listed under each layer")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Print the comparison; write it as HTML with ``--html``."""
    from engine import report as rep

    docs = [rep.load(p) for p in args.reports]
    labels = [f"{Path(p).name}: {d['model']['name']} {d['run']['backend']} {d['run']['format']}"
              for p, d in zip(args.reports, docs)]
    c = rep.compare(docs, labels, args.base)
    print(rep.comparison_text(c, kernels=not args.no_kernels), file=out)
    if args.html:
        from engine.atomic import atomic_write_text

        atomic_write_text(args.html, rep.comparison_html(c), "comparison")
        print(f"wrote {args.html}", file=out)
    return 0
