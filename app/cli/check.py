"""``layerlab check MODEL``: print the type-check diagnostics of a model (and its memory warnings when it has no
error); exit status 1 when there is an error. Imports no Qt."""
from __future__ import annotations

import argparse
from typing import TextIO

from app.cli.common import load_model, open_registry

DESCRIPTION = "Print the type-check diagnostics; exit status 1 if there is any error."


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """The model file."""
    parser.add_argument("model")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Print each diagnostic and a summary line; 1 when there is an error."""
    from engine.run import stored_weights
    from engine.typecheck import ERROR, check, memory_warnings

    reg = open_registry(args)
    model = load_model(args.model, reg)
    diags = check(model, reg, weights=stored_weights(model))
    if not any(d.severity == ERROR for d in diags):
        diags += memory_warnings(model, reg)
    for d in diags:
        print(str(d), file=out)
    n_err = sum(d.severity == ERROR for d in diags)
    n_warn = len(diags) - n_err
    print(f"{args.model}: {len(model.layers)} layers, {n_err} error(s), {n_warn} warning(s)", file=out)
    return 1 if n_err else 0
