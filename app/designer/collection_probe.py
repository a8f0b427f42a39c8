"""New collections are tried in a separate process before the designer loads them.

A plugin folder added in Tools > Manage Collections (and the folders remembered from the last run, at start) is
loaded plugin by plugin; each plugin the designer has not seen pass before is first loaded in a child process with a
time limit (``engine.plugin_probe``). A plugin that crashes that process, ends it (``os._exit``), hangs or fails to
load is refused: it is listed with the reason among the collections that failed to load, and the user is told,
while the designer and its open models carry on. What came of each try is remembered by the plugin's path, modification
times and sizes in the application's settings (``collections/probed``: those that passed, ``collections/refused``:
those refused, with the reason), so an unchanged plugin is not tried again at each start."""
from __future__ import annotations

import json
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from engine.log import get_logger
from engine.plugin_probe import PROBE_TIMEOUT_S, ProbeResult, probe_entry, probe_key

PROBED_KEY = "collections/probed"
REFUSED_KEY = "collections/refused"
MAX_REMEMBERED = 200  # plugins remembered as good (the oldest are forgotten first)
log = get_logger(__name__)


class CollectionProbe:
    """The gate a ``CollectionManager`` asks before importing a plugin (``manager.accept``): None lets a plugin
    load, a reason refuses it. ``refused`` collects the refusals since the last ``take_refused``."""

    def __init__(self, settings: QtCore.QSettings, timeout: float | None = None) -> None:
        self.settings = settings
        self.timeout = timeout  # None: PROBE_TIMEOUT_S
        self.refused: list[ProbeResult] = []
        self.probed = 0  # child processes started (an unchanged plugin is not tried again)

    def _good(self) -> list[str]:
        value = self.settings.value(PROBED_KEY)
        if not value:
            return []
        return [value] if isinstance(value, str) else [str(v) for v in value]

    def _refused(self) -> dict[str, list[str]]:
        try:
            value = json.loads(str(self.settings.value(REFUSED_KEY) or "{}"))
        except ValueError:
            return {}
        if not isinstance(value, dict):
            return {}
        return {str(k): [str(v[0]), str(v[1])] for k, v in value.items() if isinstance(v, list) and len(v) == 2}

    def __call__(self, entry: Path) -> str | None:
        key = probe_key(entry)
        good = self._good()
        if key in good:
            return None
        known = self._refused()
        if key in known:
            kind, reason = known[key]
            self.refused.append(ProbeResult(str(entry), False, reason, kind=kind))
            return reason
        self.probed += 1
        app = QtWidgets.QApplication.instance()
        if isinstance(app, QtWidgets.QApplication):
            app.setOverrideCursor(QtCore.Qt.CursorShape.WaitCursor)
        try:
            result = probe_entry(entry, self.timeout or PROBE_TIMEOUT_S)
        finally:
            if isinstance(app, QtWidgets.QApplication):
                app.restoreOverrideCursor()
        if result.ok:
            self.settings.setValue(PROBED_KEY, [*good, key][-MAX_REMEMBERED:])
            return None
        log.warning("%s", result)
        self.refused.append(result)
        known = dict(list(known.items())[-(MAX_REMEMBERED - 1):])
        known[key] = [result.kind, result.reason]
        self.settings.setValue(REFUSED_KEY, json.dumps(known))
        return result.reason

    def take_refused(self) -> list[ProbeResult]:
        """The refusals since the last call (and forget them)."""
        out, self.refused = self.refused, []
        return out


def refused_message(refused: list[ProbeResult]) -> str:
    """What the user is told about plugins that would have crashed, ended or hung the designer."""
    lines = "\n".join(f"• {Path(r.entry).name}: {r.reason}" for r in refused)
    return (f"{len(refused)} plugin(s) were not loaded: tried in a separate process first, they would have crashed, "
            f"ended or hung LayerLab.\n\n"
            f"{lines}\n\nThe designer and your open models are untouched. Fix the plugin and restart "
            "LayerLab to try it again.")


def tell_refused(parent: QtWidgets.QWidget | None, refused: list[ProbeResult]) -> None:
    """Show the plugins that would have crashed, ended or hung the designer in a message box (those that merely
    failed to load are listed in the dialog's failures, as ever)."""
    fatal = [r for r in refused if r.fatal]
    if fatal:
        QtWidgets.QMessageBox.warning(parent, "Collections not loaded — LayerLab", refused_message(fatal))
