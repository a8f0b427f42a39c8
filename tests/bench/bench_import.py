"""Import benchmark: a generated ONNX model of about 1,000 nodes (residual blocks of Conv, BatchNormalization,
Relu and Add, a squeeze-excitation every few blocks), imported from scratch, then opened on the canvas
(offscreen Qt, when PySide6 and NodeGraphQt are installed). Not collected by the test run.

    python -m tests.bench.bench_import                # ~1,000 nodes, 3 repeats
    python -m tests.bench.bench_import --nodes 200 --repeat 5 --no-canvas
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def generated_model(path: Path, nodes: int, channels: int = 8) -> int:
    """Write a chain of residual blocks with about ``nodes`` ONNX nodes; returns the exact count."""
    rng = np.random.default_rng(0)
    graph_nodes, inits = [], []
    x, k = "input", 0

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def node(op: str, ins: list[str], **attrs: object) -> str:
        nonlocal k
        k += 1
        out = f"t{k}"
        graph_nodes.append(helper.make_node(op, ins, [out], name=f"/block{k // 8}/{op}_{k}", **attrs))
        return out

    c = channels
    while len(graph_nodes) < nodes - 8:
        w = const(f"w{k}", rng.standard_normal((c, c, 3, 3)) * 0.1)
        y = node("Conv", [x, w], pads=[1, 1, 1, 1])
        y = node("BatchNormalization", [y, const(f"s{k}", rng.uniform(0.5, 1.5, c)), const(f"b{k}", rng.standard_normal(c)),
                                        const(f"m{k}", rng.standard_normal(c) * 0.1), const(f"v{k}", rng.uniform(0.5, 2, c))])
        y = node("Relu", [y])
        if k % 5 == 0:  # squeeze-excitation
            s = node("GlobalAveragePool", [y])
            s = node("Conv", [s, const(f"se{k}", rng.standard_normal((c, c, 1, 1)) * 0.1)])
            s = node("Sigmoid", [s])
            y = node("Mul", [y, s])
        x = node("Add", [x, y])
    graph = helper.make_graph(graph_nodes, "generated", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                                        [1, c, 32, 32])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return len(graph_nodes)


def open_on_canvas(model: object) -> float:
    """Seconds to build the designer's canvas of ``model`` (offscreen)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6 import QtWidgets  # noqa: PLC0415

    from canvas.bridge import ModelBridge  # noqa: PLC0415
    from canvas.graph import ModelCanvas  # noqa: PLC0415
    from engine.plugins import default_registry  # noqa: PLC0415

    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    t0 = time.perf_counter()
    canvas = ModelCanvas(model, default_registry(), ModelBridge(model))  # type: ignore[arg-type]
    app.processEvents()
    elapsed = time.perf_counter() - t0
    canvas.deleteLater()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    from engine.importers.onnx import import_onnx  # noqa: PLC0415
    from engine.layout import layered_positions  # noqa: PLC0415
    from engine.plugins import default_registry  # noqa: PLC0415

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-canvas", action="store_true")
    args = p.parse_args(argv)
    reg = default_registry()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "generated.onnx"
        n = generated_model(path, args.nodes)
        times, layouts, result = [], [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            result = import_onnx(path, registry=reg)
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            layered_positions(result.model.layers)
            layouts.append(time.perf_counter() - t0)
        assert result is not None
        print(f"{n} ONNX nodes -> {len(result.model.layers)} layers ({len(result.folded)} folds)")
        print(f"import: median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}) over "
              f"{args.repeat} runs; of which layout: median {statistics.median(layouts):.2f} s")
        if not args.no_canvas:
            try:
                print(f"open on the canvas: {open_on_canvas(result.model):.2f} s")
            except ImportError as exc:
                print(f"open on the canvas: skipped ({exc})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
