"""A real designer that edits an imported network, for the crash-recovery test.

``python -m tests.hostile.designer_edits MODEL.onnx OUT_DIR`` starts the designer the way ``layerlab gui MODEL.onnx``
does (``app.gui.run``); once the imported network's tab is open it makes ``edit`` through the model's API (the
commands the canvas and the parameter window use), writes what the model then is to ``OUT_DIR/edited.lnet`` and
``OUT_DIR/edited.json`` (its weights' names and sums) and keeps running until it is killed. The test SIGKILLs it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.model import Model


def edit(model: Model) -> None:
    """The edits: an activation, a parameter, a new layer linked in, a move, the network's version, a flag."""
    model.set_activation("block_conv", "relu")
    model.set_param("stem_pool", "pool_type", "average")
    model.add_layer("dropout", "extra_drop", inputs=["head_gap"], position=(123.0, 456.0))
    model.connect("extra_drop", "head_fc", 0)
    model.move_layer("stem_conv", (-40.5, 12.25))
    model.set_network(version="2.0")
    model.set_permanent("block_add", True)


def main(path: str, out_dir: str) -> int:
    from PySide6 import QtCore, QtWidgets

    from app import gui
    from app.designer.main_window import MainWindow
    from engine import modelfile

    app = QtWidgets.QApplication(sys.argv[:1])
    out = Path(out_dir)

    def poll() -> None:
        windows = [w for w in app.topLevelWidgets() if isinstance(w, MainWindow)]
        docs = [d for w in windows for d in w.workspace.docs if d.model.weights_source is not None]
        if not docs:
            return
        timer.stop()
        model = docs[0].model
        edit(model)
        arrays = model.weights_source.arrays
        sums = {f"{layer}.{w}": float(a.astype("float64").sum()) for layer, ws in arrays.items() for w, a in ws.items()}
        (out / "edited.json").write_text(json.dumps(sums), encoding="utf-8")
        tmp = out / "edited.tmp"
        tmp.write_text(modelfile.dumps(model), encoding="utf-8")
        tmp.replace(out / "edited.lnet")  # the last, whole: its presence says the edits are done

    timer = QtCore.QTimer()
    timer.setInterval(100)
    timer.timeout.connect(poll)
    timer.start()
    return gui.run(path, argv=sys.argv[:1])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
