"""The ``layerlab`` command line: runs, checks, profiles, exports and imports without a screen. One module per
command, listed in one table (``app.cli.commands``); what the designer shares with the command line lives in
``app.services``. Imports no Qt (the ``gui`` command imports the designer only when it is asked for)."""
from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import TextIO

from app.cli.commands import BY_NAME, COMMANDS, Command, build_parser, with_implied_command
from app.cli.common import USER_ERROR, CliError, verbosity

__all__ = ["COMMANDS", "CliError", "Command", "build_parser", "main"]

#: the exit status of a bug (an unexpected exception), said in one line; user errors are USER_ERROR (2)
INTERNAL_ERROR = 3


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the `layerlab` console script: runs the command ``argv`` names (default: ``sys.argv[1:]``;
    none: the designer; a model file instead: the designer on it), printing on ``out`` (default stdout) and errors
    on stderr. Returns the exit status: 0, 1
    where the command says so, 2 for a user error, 3 for a bug, 130 when interrupted (``--help`` and ``--version``
    exit through argparse's SystemExit)."""
    from engine.errors import LayerLabError

    out = out or sys.stdout
    argv = with_implied_command(list(sys.argv[1:] if argv is None else argv))
    level = verbosity(argv)
    verbose = level > 0
    try:
        args = build_parser().parse_args(argv)
        from engine.log import configure  # after parsing: `layerlab --help` imports no engine

        configure(level)
        if args.command is None:
            args = build_parser().parse_args(["gui", *argv])
        return BY_NAME[args.command].run(args, out)
    except (CliError, LayerLabError) as exc:
        if verbose:
            traceback.print_exc()
        print(f"layerlab: error: {exc}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        print("layerlab: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: say so in one line, the traceback with --verbose
        from engine.device_errors import translate  # noqa: PLC0415

        gpu = translate(exc, f"layerlab {argv[0] if argv else ''}".rstrip())
        if gpu is not None:  # out of GPU memory or a GPU fault outside any layer: the run's condition, not a bug
            print(f"layerlab: error: {gpu}", file=sys.stderr)
            return USER_ERROR
        if verbose:
            traceback.print_exc()
        print(f"layerlab: internal error: {type(exc).__name__}: {exc} (run with --verbose for details)",
              file=sys.stderr)
        return INTERNAL_ERROR
