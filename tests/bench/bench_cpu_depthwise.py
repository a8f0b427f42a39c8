"""The depthwise convolutions of mobilenet_v3_large (224x224 input) one by one: LayerLab's CPU kernel (fp32 NHWC,
ReLU fused) against ONNX Runtime (2 threads) running one Conv node with group = channels followed by a Relu (which
it fuses), in turns: rounds of runs of each, medians. Prints GFLOP/s and the bytes read and written per second
(input, output and filters once: these layers are bound by memory). Not collected by the test run.

    python -m tests.bench.bench_cpu_depthwise [ROUNDS]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import engine.backends.cpu.runtime as rt  # (before onnxruntime: see bench_networks)
from engine.backends import get_backend

#: (channels, input size, filter size, stride) of mobilenet_v3_large's depthwise layers, in network order
LAYERS = [(16, 112, 3, 1), (64, 112, 3, 2), (72, 56, 3, 1), (72, 56, 5, 2), (120, 28, 5, 1), (240, 28, 3, 2),
          (200, 14, 3, 1), (184, 14, 3, 1), (480, 14, 3, 1), (672, 14, 3, 1), (672, 14, 5, 2), (960, 7, 5, 1)]


def _onnx_depthwise(c: int, h: int, k: int, s: int, w: np.ndarray, b: np.ndarray) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    ho = (h + 2 * (k // 2) - k) // s + 1
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, kernel_shape=[k, k], strides=[s, s],
                            pads=[k // 2] * 4)
    relu = helper.make_node("Relu", ["y"], ["z"])
    graph = helper.make_graph([conv, relu], "depthwise",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, c, ho, ho])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _times(run: Callable[[], object], count: int) -> list[float]:
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        run()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort

    args = sys.argv[1:] if argv is None else argv
    rounds = int(args[0]) if args else 5
    conv = get_backend("numpy").kernel("conv2d")
    rng = np.random.default_rng(0)
    print(f"load average {os.getloadavg()[0]:.2f}; {rounds} rounds of 20 runs each, medians")
    print(f"{'layer':<22}{'LayerLab ms':>12}{'ORT ms':>9}{'ratio':>7}{'GFLOP/s':>9}{'GB/s':>7}{'ORT GFLOP/s':>12}"
          f"{'rel. L2':>9}")
    total = [0.0, 0.0]
    for c, h, k, s in LAYERS:
        ho = (h + 2 * (k // 2) - k) // s + 1
        x = rng.standard_normal((1, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((c, 1, k, k)) / k).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(_onnx_depthwise(c, h, k, s, w, b), options, providers=["CPUExecutionProvider"])
        xn = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # NHWC memory, logical NCHW
        wn = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        out = np.empty((1, ho, ho, c), np.float32).transpose(0, 3, 1, 2)
        done = conv(xn, wn, b, out, (s, s), (k // 2, k // 2), (1, 1), c, "relu", {}, {})
        assert done is not None and done.replay is not None, "no depthwise kernel for the case"
        ref = session.run(None, {"x": x})[0]
        err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
        ours, theirs = [], []
        for _ in range(rounds):
            # a pause first: ONNX Runtime's threads spin for a while after its runs, and spinning on the cores
            # ours run on they made our times vary fivefold (and ours theirs, less)
            time.sleep(0.05)
            with rt.single_threaded_blas():  # as inside a network's run: no BLAS thread setting per launch
                ours += _times(done.replay, 20)[2:]
            time.sleep(0.05)
            theirs += _times(lambda session=session, x=x: session.run(None, {"x": x}), 20)[2:]
        a, o = statistics.median(ours), statistics.median(theirs)
        total[0] += a
        total[1] += o
        flops = 2 * c * ho * ho * k * k
        nbytes = 4 * (x.size + out.size + w.size)
        print(f"{f'{c}x{h}² {k}x{k}/{s}':<22}{a:>12.4f}{o:>9.4f}{a / o:>7.2f}{flops / a / 1e6:>9.2f}"
              f"{nbytes / a / 1e6:>7.2f}{flops / o / 1e6:>12.2f}{err:>9.1e}")
    print(f"{'all':<22}{total[0]:>12.4f}{total[1]:>9.4f}{total[0] / total[1]:>7.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
