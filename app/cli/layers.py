"""``layerlab layers``: list the loaded plugins with their layers, activations and fusing rules, and the plugins
that failed to load. Imports no Qt."""
from __future__ import annotations

import argparse
from typing import TextIO

from app.cli.common import open_registry

DESCRIPTION = None  # the one-line help says it all


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """No arguments beyond the common flags."""


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Print every plugin's metadata and what it provides."""
    reg = open_registry(args)
    for info in reg.plugins.values():
        m = info.meta
        print(f"{m.name} {m.version} by {m.author}: {m.description}", file=out)
        if info.layers:
            print("  layers:", file=out)
            width = max(len(n) for n in info.layers)
            for n in sorted(info.layers):
                print(f"    {n:<{width}}  {reg.find_layer(n).summary}", file=out)
        if info.activations:
            print("  activations:", file=out)
            width = max(len(n) for n in info.activations)
            for n in sorted(info.activations):
                print(f"    {n:<{width}}  {reg.find_activation(n).summary}", file=out)
        if info.fusing_rules:
            print("  fusing rules:", file=out)
            for r in info.fusing_rules:
                print(f"    {r}", file=out)
    for f in reg.failures:
        print(f"FAILED {f}", file=out)
    return 0
