"""One-line notices that are worth saying once, not on every command: remembered per machine by a marker
file in the user's cache folder (``$XDG_CACHE_HOME/layerlab/notices``, else ``~/.cache/layerlab/notices``)."""
from __future__ import annotations

import os
import re
from pathlib import Path


def cache_dir() -> Path:
    """LayerLab's folder in the user's cache folder."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "layerlab"


def once_per_machine(key: str) -> bool:
    """True the first time ``key`` is asked for on this machine (then a marker remembers it). Where the
    marker cannot be written, True every time: a notice too many is better than a lost one."""
    marker = cache_dir() / "notices" / re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:100]
    if marker.exists():
        return False
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
    return True
