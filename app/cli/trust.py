"""The command line and custom layers: code in a model file runs only with ``--trust-custom-code``.

Commands that only read a model (``check``, ``export``, ``layers``) never run custom layer code and need no
consent; commands that run it (``infer``, ``profile``, ``drift``) stop with exit status 2, naming the custom
layers, unless the flag is given."""
from __future__ import annotations

import argparse
import sys
from typing import Any

TRUST_FLAG = "--trust-custom-code"


def add_trust_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(TRUST_FLAG, action="store_true",
                        help="run the custom layer code (Python and CUDA) the model file carries; without it, "
                             "commands that run such a model stop")


def require_custom_consent(args: argparse.Namespace, model: Any) -> None:
    """Give consent to the custom layers ``model`` uses when ``--trust-custom-code`` is set, else raise ConsentError
    (a user error: exit status 2) naming them."""
    from engine.custom import CONSENT, ConsentError, used_definitions  # noqa: PLC0415

    used = used_definitions(model)
    if not used:
        return
    names = ", ".join(sorted(d.name for d in used))
    if not getattr(args, "trust_custom_code", False):
        raise ConsentError(f"{args.model}: the model carries code in its custom layers ({names}), which runs only if you "
                       f"trust the file: add {TRUST_FLAG} to run it")
    CONSENT.grant(used)
    print(f"layerlab: running the code of custom layers {names} ({TRUST_FLAG})", file=sys.stderr)
