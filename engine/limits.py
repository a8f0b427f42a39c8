"""Bounds on the work a small file may ask for, and short messages about hostile values.

A model file of a few kilobytes must not make LayerLab allocate gigabytes, run for hours or exhaust the
Python stack. These limits are checked where the file is read (indices, nesting) and before memory is
allocated (tensors and weights against the backend's memory), each with a message naming what is too large."""
from __future__ import annotations

import math
import os
import resource
from typing import Any

from engine.errors import LayerLabError

#: most input links one layer may have (``<input index="...">`` beyond this is refused)
MAX_INPUT_INDEX = 4096
#: deepest nesting of templates inside templates
MAX_TEMPLATE_DEPTH = 64
#: deepest nesting of XML elements in a model file
MAX_XML_DEPTH = 256
#: deepest nesting of parentheses / negations in a fusing rule condition
MAX_RULE_DEPTH = 64
#: longest value echoed in a message
MAX_ECHO = 60
#: most pixels (width x height) of an image input, like image libraries' decompression-bomb limits;
#: ``LAYERLAB_MAX_IMAGE_PIXELS`` overrides it (0: no limit)
DEFAULT_MAX_IMAGE_PIXELS = 178_956_970  # Pillow's default limit (about 0.7 GiB at 4 bytes a pixel)


class LimitError(LayerLabError):
    """A file asks for more than LayerLab accepts (too deep, too large, too many)."""


def cut(value: Any, limit: int = MAX_ECHO) -> str:
    """``repr(value)`` shortened to about ``limit`` characters for a message (the cut is marked)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return repr(text[: limit - 20]) + f"... ({len(text)} characters)"


def human_bytes(n: float) -> str:
    """``1.75 TiB``, ``112.0 GiB``, ``96.0 KiB``."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB"  # pragma: no cover


def max_image_pixels() -> int:
    """The image pixel limit in force (``LAYERLAB_MAX_IMAGE_PIXELS``, else the default; 0: none)."""
    raw = os.environ.get("LAYERLAB_MAX_IMAGE_PIXELS", "").strip()
    if not raw:
        return DEFAULT_MAX_IMAGE_PIXELS
    if not raw.isascii() or not raw.isdigit():
        raise LimitError(f"LAYERLAB_MAX_IMAGE_PIXELS={cut(raw)} is not a whole number of pixels")
    return int(raw)


def host_memory_bytes() -> int:
    """Memory the host can still give this process: the available RAM, capped by its address-space limit."""
    avail = None
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        try:
            with open("/proc/meminfo", encoding="ascii") as fh:  # MemAvailable counts reclaimable caches too
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        avail = int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    except (ValueError, OSError, AttributeError):
        avail = None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            avail = soft if avail is None else min(avail, soft)
    except (ValueError, OSError):
        pass
    return int(avail) if avail else 1 << 62


def check_allocation(what: str, nbytes: int, available: int, where: str = "") -> None:
    """Refuse to allocate ``nbytes`` for ``what`` (names the layer) when more than ``available`` is free."""
    if nbytes > available:
        place = f" on {where}" if where else ""
        raise LimitError(f"{what} needs {human_bytes(nbytes)}, more than the {human_bytes(available)} of memory "
                         f"available{place}")


def check_layer_memory(what: str, dims: Any, weight_shapes: dict[str, tuple[int, ...]], itemsize: int,
                       available: int, where: str = "") -> int:
    """Check that one layer's output tensor (``dims``, N, C, H, W) and weights fit in ``available`` bytes
    before anything is allocated; returns the bytes they need. Raises LimitError naming ``what`` and the size."""
    out = math.prod(int(d) for d in dims) * int(itemsize)
    weights = {w: math.prod(int(x) for x in s) * 4 for w, s in weight_shapes.items()}
    total = out + sum(weights.values())
    if total > available:
        biggest = max(weights, key=weights.__getitem__) if weights else None
        if biggest is not None and weights[biggest] > out:
            part = f"weight {biggest!r} of shape {tuple(weight_shapes[biggest])}"
        else:
            part = f"output {'x'.join(str(int(d)) for d in dims)}"
        check_allocation(f"{what}: its {part}" + (" (with its other tensors)" if total > max(out, *weights.values(), 0)
                                                  else ""), total, available, where)
    return total
