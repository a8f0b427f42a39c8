"""Is there a screen the designer can open on? Checked before Qt is imported: without a display, Qt's xcb
platform plugin aborts the whole process (SIGABRT) with a message about ``xcb-cursor0`` that misleads."""
from __future__ import annotations

import os
import subprocess
import sys

HEADLESS_HINT = ("run headless commands instead (e.g. 'layerlab infer MODEL -i input=IMAGE -o output=OUT.png', "
                 "see 'layerlab --help'), or set QT_QPA_PLATFORM=offscreen")

_PROBE = "from PySide6.QtGui import QGuiApplication; QGuiApplication([]); print('ok')"


def display_problem(probe: bool = True) -> str | None:
    """Why the designer cannot open a window here, in one line (None when it can, as far as can be told).

    On Linux: no ``DISPLAY`` / ``WAYLAND_DISPLAY`` and no ``QT_QPA_PLATFORM`` chosen means no screen; with
    ``probe``, the Qt platform plugin is also started once in a child process, so that a plugin that aborts
    takes down the child, not this process."""
    if not sys.platform.startswith("linux"):
        return None
    platform = os.environ.get("QT_QPA_PLATFORM", "").strip()
    if not platform and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        return f"the designer needs a display, and there is none (DISPLAY and WAYLAND_DISPLAY are not set): {HEADLESS_HINT}"
    if not probe or platform.split(":")[0] in ("offscreen", "minimal", "vnc"):
        return None
    try:
        res = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the designer cannot start: probing the Qt platform plugin failed ({exc}): {HEADLESS_HINT}"
    if res.returncode != 0 or "ok" not in res.stdout:
        lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
        why = next((ln for ln in lines if "platform plugin" in ln or "display" in ln.lower()), lines[0] if lines else "")
        which = platform or "xcb"
        return f"the designer cannot open a window: Qt's {which!r} platform plugin failed ({why[:200]}): {HEADLESS_HINT}"
    return None
