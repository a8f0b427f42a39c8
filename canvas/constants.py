"""Settings and small helpers the canvas modules share: sizes, budgets and the text of node labels."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtGui

from engine.events import (
    CustomLayerChanged,
    LayerEvent,
    TemplateEvent,
)
from engine.tensor import Dims

#: text/plain payload of a palette drag: ``layerlab-layer:<type>``
DRAG_PREFIX = "layerlab-layer:"
NODE_SIZE_GUESS = (180.0, 90.0)
TEXT = "#d8d8d8"
LINK_PICK_PX = 5.0  # a click this close to a link (on screen) selects it
POSITION_DECIMALS = 1  # positions are kept to a tenth of a scene unit (what the canvas can show)
FREE_GAP = 60.0  # space left between a new layer and its neighbours
#: models of up to this many layers get every node at once; larger ones get nodes as they are needed (canvas.lazy);
#: LAYERLAB_EAGER_LAYERS=0 makes every canvas lazy (to run the tests through that path)
EAGER_LAYERS = int(os.environ.get("LAYERLAB_EAGER_LAYERS", "300"))
PREFETCH_BUDGET_S = 0.005  # idle time spent per turn of the event loop making nodes near the view
BULK_UNINDEXED = 100  # making this many nodes at once, the scene's index is rebuilt once at the end

NAME_PX = 12.0  # a group's name (on its box or its frame) is at least this tall on screen

#: the scale ``focus_layer`` zooms in to from further out: nodes drawn in full (``canvas.nodes.DETAIL_LOD``)
FOCUS_SCALE = 0.8


def snap_position(pos: tuple[float, float]) -> tuple[float, float]:
    """A canvas position as stored in the model and the file (no 13-decimal noise from the view transform)."""
    return (round(float(pos[0]), POSITION_DECIMALS), round(float(pos[1]), POSITION_DECIMALS))
#: model events after which the overview (zoomed-out drawing) recomputes its boxes and lines
STRUCTURE_EVENTS = (LayerEvent, TemplateEvent, CustomLayerChanged)


PRESSES = (QtCore.QEvent.Type.MouseButtonPress, QtCore.QEvent.Type.MouseButtonDblClick)


def dims_text(d: Dims) -> str:
    return "×".join(str(v) for v in d)


def compact_dims(p: Any, text: str) -> str:
    """``1x1x3x3`` -> ``3×3`` (leading 1s of N and C dropped) for the node label; dimensions of another rank than 4
    (an input's ``1x49x96``) are shown as written, since their rank is what they say."""
    try:
        d = list(p.parse(text))
    except ValueError:
        return text
    if len(d) != 4:
        return "×".join(map(str, d))
    while len(d) > 2 and d[0] == 1:
        d.pop(0)
    if len(d) == 2 and d[0] == d[1]:
        return str(d[0]) if p.name != "dimensions" else "×".join(map(str, d))
    return "×".join(map(str, d))


def shrunk_font(text: str, px: float, least: float, width: float) -> tuple[QtGui.QFont, float]:
    """A bold font of ``px`` pixels for a group's name, shrunk so that ``text`` fits ``width`` but never below
    ``least`` (a name stays readable zoomed out; what still does not fit is cut at its start by the caller, keeping
    the distinguishing end). Returns the font and its pixel size."""
    font = QtGui.QFont()
    font.setBold(True)
    font.setPixelSize(max(1, round(px)))
    wide = QtGui.QFontMetricsF(font).horizontalAdvance(text)
    if wide > width:
        px = max(px * width / wide, min(px, least))
        font.setPixelSize(max(1, round(px)))
    return font, px


def next_turn_timer(parent: QtCore.QObject, call: Callable[[], object]) -> QtCore.QTimer:
    """A single-shot timer, owned by ``parent``, that calls ``call`` at the next turn of the event loop once started
    (a burst of starts calls it once). A canvas closed before the timer came due ends the call quietly: Qt's
    objects are gone then (RuntimeError) and there is nothing left to update."""
    def due() -> None:
        try:
            call()
        except RuntimeError:  # the canvas was closed before the timer came due
            pass

    timer = QtCore.QTimer(parent)
    timer.setSingleShot(True)
    timer.setInterval(0)
    timer.timeout.connect(due)
    return timer
