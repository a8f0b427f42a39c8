"""Designer import benchmark: the real main window (offscreen Qt) opening torchvision networks exported to ONNX
(the zoo's cached files, ``tests/bench/bench_zoo.py``), as File > Open does, one after another, each closed again.

Measures per network: open to interactive (the import started, the tab open, laid out, fitted and painted, and a
zero-delay timer fired: the event loop free again), wall and this process's CPU time; the layout alone
(``engine.layout`` on the imported layers); View > Expand All (layout, moves and routes until the event loop
is free); the resident memory after it opened and after it was closed. At the
end: the resident memory after all of them were closed, and (``--chain N``) an N-node ONNX chain's import.

    PYTHONPATH=$PWD python tests/bench/bench_designer_import.py [--nets densenet121 resnet50 ...] [--chain 10000]
        [--trace]   # also list the largest memory kept after the last close (tracemalloc)

Targets: densenet121 opens and is interactive in <= 3 s, lays out in <= 2 s and expands all well under 2 s; a
10,000-node chain imports in
<= 15 s; after the five networks were opened and closed, resident memory <= 600 MB."""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.bench.bench_canvas import rss_mb  # noqa: E402

NETS = ["resnet50", "mobilenet_v2", "densenet121", "efficientnet_b0", "mobilenet_v3_large"]


def zoo_file(name: str) -> Path:
    """The zoo's ONNX file of torchvision's ``name`` at 224 x 224, exported with random weights when missing (in
    a child process: torch is not loaded here, where the memory is measured)."""
    import subprocess

    path = Path(os.environ.get("LAYERLAB_ZOO_CACHE", "~/.cache/layerlab/zoo")).expanduser() / f"{name}_224.onnx"
    if not path.is_file():
        code = ("from tests.bench.bench_zoo import build_torch, onnx_file, zoo_net; "
                f"n = zoo_net({name!r}); onnx_file(n, build_torch(n))")
        subprocess.run([sys.executable, "-c", code], check=True)
    return path


def chain_file(path: Path, nodes: int) -> Path:
    """An ONNX chain of ``nodes`` Relu/Sigmoid nodes on a small tensor."""
    import onnx
    from onnx import TensorProto, helper

    names = ["x"] + [f"t{i}" for i in range(nodes)]
    graph_nodes = [helper.make_node("Relu" if i % 2 else "Sigmoid", [names[i]], [names[i + 1]], name=f"n{i}")
                   for i in range(nodes)]
    graph = helper.make_graph(graph_nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [1, 4, 8, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def open_import(app, win, path: Path) -> tuple[float, float, object]:  # noqa: ANN001
    """Open ``path`` as File > Open does; (seconds to interactive, CPU seconds, the document)."""
    from PySide6 import QtCore

    done: list[object] = []
    win.onnx_import.imported.connect(done.append)
    t0, c0 = time.perf_counter(), time.process_time()
    win.files.open_path(path)
    while not done:
        app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 20)
        if win.onnx_import.dialogs and win.onnx_import.dialogs[-1].ok is False:
            raise SystemExit(f"{path}: {win.onnx_import.dialogs[-1].message.text()}")
    doc = done[0]
    doc.canvas.viewer().viewport().repaint()
    fired: list[float] = []
    QtCore.QTimer.singleShot(0, lambda: fired.append(time.perf_counter()))
    while not fired:
        app.processEvents()
    win.onnx_import.imported.disconnect(done.append)
    return fired[0] - t0, time.process_time() - c0, doc


def layout_s(doc) -> tuple[float, float]:  # noqa: ANN001
    """The designer's layout of the open document alone (the call the import makes): wall and CPU seconds."""
    from app.designer.onnx_import import OnnxImport

    t, c = time.perf_counter(), time.process_time()
    OnnxImport.layout(doc)
    return time.perf_counter() - t, time.process_time() - c


def expand_s(app, doc) -> float:  # noqa: ANN001
    """View > Expand All on the open document until the event loop is free again (its layout, the moves, the
    routes), then Collapse All: wall seconds of the expansion (0 where nothing was collapsed)."""
    if not doc.canvas.shown_groups():
        return 0.0
    t = time.perf_counter()
    doc.canvas.expand_all()
    app.processEvents()
    wall = time.perf_counter() - t
    doc.canvas.collapse_all()
    app.processEvents()
    return wall


def layout_row(doc, app=None) -> dict[str, float]:  # noqa: ANN001
    wall, cpu = layout_s(doc)
    row = {"layout_s": round(wall, 2), "layout_cpu_s": round(cpu, 2)}
    if app is not None:
        row["expand_all_s"] = round(expand_s(app, doc), 2)
    return row


def close_all(app, win) -> None:  # noqa: ANN001
    """Close every tab as File > Close does, answering Discard, and the import dialogs."""
    from PySide6 import QtWidgets

    discard = QtWidgets.QMessageBox.StandardButton.Discard
    ask, QtWidgets.QMessageBox.question = QtWidgets.QMessageBox.question, staticmethod(lambda *a, **k: discard)
    try:
        for doc in list(win.docs):
            win.files.close_document(doc)
    finally:
        QtWidgets.QMessageBox.question = ask
    for dlg in list(win.onnx_import.dialogs):
        dlg.close()
    from PySide6 import QtCore

    for _ in range(3):
        app.processEvents()
        app.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete)  # what deleteLater left (the event loop's)
    gc.collect()


def bench(nets: list[str], chain: int, trace: bool) -> list[dict[str, object]]:
    from PySide6 import QtCore, QtWidgets

    from app.designer.main_window import MainWindow

    if trace:
        import tracemalloc

        tracemalloc.start(12)
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv)
    tmp = Path(tempfile.mkdtemp(prefix="layerlab_bench_"))
    settings = QtCore.QSettings(str(tmp / "settings.ini"), QtCore.QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, autosave_dir=str(tmp / "autosave"), reports_dir=str(tmp / "reports"))
    win.resize(1500, 900)
    win.show()
    app.processEvents()
    close_all(app, win)  # the sample the designer opens by itself
    rows: list[dict[str, object]] = [{"what": "window", "rss_mb": round(rss_mb())}]
    if trace:
        before = tracemalloc.take_snapshot()
    for name in nets:
        path = zoo_file(name)
        wall, cpu, doc = open_import(app, win, path)
        row: dict[str, object] = {"what": name, "layers": len(doc.model.layers), "open_s": round(wall, 2),
                                  "open_cpu_s": round(cpu, 2), **layout_row(doc, app),
                                  "rss_open_mb": round(rss_mb())}
        del doc
        close_all(app, win)
        row["rss_closed_mb"] = round(rss_mb())
        rows.append(row)
        print(json.dumps(row), flush=True)
    if trace:
        for stat in tracemalloc.take_snapshot().compare_to(before, "traceback")[:8]:
            print(stat, *stat.traceback.format()[-6:], sep="\n  ")
    if chain:
        path = chain_file(tmp / f"chain{chain}.onnx", chain)
        wall, cpu, doc = open_import(app, win, path)
        row = {"what": f"chain of {chain} ONNX nodes", "layers": len(doc.model.layers), "open_s": round(wall, 2),
               "open_cpu_s": round(cpu, 2), **layout_row(doc), "rss_open_mb": round(rss_mb())}
        del doc
        close_all(app, win)
        row["rss_closed_mb"] = round(rss_mb())
        rows.append(row)
        print(json.dumps(row), flush=True)
    win.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", nargs="*", default=NETS)
    ap.add_argument("--chain", type=int, default=0, help="also import a chain of this many ONNX nodes")
    ap.add_argument("--trace", action="store_true", help="list the largest memory kept (tracemalloc; slower)")
    args = ap.parse_args()
    bench(args.nets, args.chain, args.trace)


if __name__ == "__main__":
    main()
