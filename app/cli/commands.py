"""The table of ``layerlab`` commands, and the parser built from it. Each command is a module of this package with
its ``add_arguments(parser, common)`` and ``run(args, out) -> exit status``; a command is added by writing its module
and listing it here, nothing else."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from app.cli import batch, check, compare, drift, export, gui, import_, infer, layers, profile
from app.cli.common import Parser, add_log_options
from app.cli.trust import add_trust_option


@dataclass(frozen=True)
class Command:
    """One ``layerlab`` command: its name; its one-line help (in ``layerlab --help``); its description (in its own
    ``--help``; None: none); ``add_arguments(parser, common)``, which adds its arguments to its parser (``common``:
    the parser of the flags every command takes, for commands with subcommands of their own); ``run(args, out)``,
    which runs it and returns the exit status. ``common_flags``: whether its own parser takes the common flags
    (``export`` gives them to each exporter instead)."""

    name: str
    help: str
    description: str | None
    add_arguments: Callable[[argparse.ArgumentParser, argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]
    common_flags: bool = True


#: every command, in the order ``layerlab --help`` lists them
COMMANDS: tuple[Command, ...] = (
    Command("infer", "run a network and write its outputs", infer.DESCRIPTION, infer.add_arguments, infer.run),
    Command("profile", "time every layer and write a report", profile.DESCRIPTION, profile.add_arguments, profile.run),
    Command("compare", "compare inference reports", compare.DESCRIPTION, compare.add_arguments, compare.run),
    Command("check", "type-check a model", check.DESCRIPTION, check.add_arguments, check.run),
    Command("layers", "list plugins, layers and activations", layers.DESCRIPTION, layers.add_arguments, layers.run),
    Command("gui", "open the designer", gui.DESCRIPTION, gui.add_arguments, gui.run),
    Command("export", "export to ONNX, PyTorch, a standalone project or the preprocessed model", export.DESCRIPTION,
            export.add_arguments, export.run, common_flags=False),
    Command("drift", "find the first layer whose output drifts in fp16 (or on another backend)", drift.DESCRIPTION,
            drift.add_arguments, drift.run),
    Command("batch", "run a network over a dataset (resumable; local or on a Ray cluster)", batch.DESCRIPTION,
            batch.add_arguments, batch.run),
    Command("import", "import an ONNX model as a .lnet model and its weights", import_.DESCRIPTION,
            import_.add_arguments, import_.run),
)
BY_NAME = {c.name: c for c in COMMANDS}
#: a model file where the command goes opens the designer on it: ``layerlab FILE`` is ``layerlab gui FILE``
MODEL_SUFFIXES = (".lnet", ".onnx")


def with_implied_command(argv: list[str]) -> list[str]:
    """``argv`` as ``gui`` arguments when a model file is named where the command goes (``layerlab model.onnx``);
    any other ``argv`` unchanged (an unknown command stays an error)."""
    takes_value = {s for a in _common_parser()._actions if a.nargs != 0 for s in a.option_strings}
    for i, arg in enumerate(argv):
        if arg.startswith("-") or (i > 0 and argv[i - 1] in takes_value):
            continue
        if arg not in BY_NAME and arg.lower().endswith(MODEL_SUFFIXES):
            return ["gui", *argv]  # the flags before it are the gui command's too
        break
    return argv


def _common_parser() -> argparse.ArgumentParser:
    """The flags every command takes."""
    common = argparse.ArgumentParser(add_help=False)
    add_log_options(common)
    common.add_argument("--version", action="version", version=f"layerlab {_version()}")
    common.add_argument("--plugins", action="append", metavar="DIR", help="also load plugins from DIR (repeatable)")
    add_trust_option(common)
    return common


def build_parser() -> argparse.ArgumentParser:
    """The ``layerlab`` parser: the common flags, and a subcommand per row of ``COMMANDS`` (``layerlab FILE``:
    see ``with_implied_command``)."""
    common = _common_parser()
    p = Parser(prog="layerlab", description="Design, run, check and profile convolutional networks.", parents=[common])
    sub = p.add_subparsers(dest="command", parser_class=Parser)
    for c in COMMANDS:
        cp = sub.add_parser(c.name, parents=[common] if c.common_flags else [], help=c.help, description=c.description)
        c.add_arguments(cp, common)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("layerlab")
    except PackageNotFoundError:
        return "(source tree)"
