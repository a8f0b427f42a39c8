"""``layerlab gui [MODEL]`` (and ``layerlab`` with no command): open the designer. Qt is imported only here, inside
``run``, so the rest of the command line never loads it."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from app.cli.common import CliError

DESCRIPTION = None  # the one-line help says it all


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """An optional model file to open."""
    parser.add_argument("model", nargs="?")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Start the designer and return its exit status; a user error when there is no display or no Qt."""
    if args.model and not Path(args.model).is_file():
        raise CliError(f"{args.model}: no such model file")
    from app.display import display_problem

    problem = display_problem()
    if problem:
        raise CliError(problem)
    try:
        from app import gui  # noqa: PLC0415 - Qt only when the designer is asked for
    except ImportError as exc:
        raise CliError(f"the designer cannot start: {exc} (install LayerLab with its GUI dependencies)") from None
    return int(gui.run(args.model, plugins=list(args.plugins or [])))
