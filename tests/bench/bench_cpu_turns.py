"""One reference network on the CPU against ONNX Runtime (2 threads), in blocks: each block runs one side ten
times after a short pause and three untimed runs, then the other; the medians of the block medians are compared.
Blocks show how far this machine's speed moves while measuring (``run.py`` takes turns run by run). Not
collected by the test run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m tests.bench.bench_cpu_turns resnet18 [BLOCKS]
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m tests.bench.bench_cpu_turns model.onnx [BLOCKS]

An ONNX file (a network exported from PyTorch, say) is imported as ``layerlab`` does and run against ONNX Runtime
on the file itself, on a random standard-normal input.

    python -m tests.bench.bench_cpu_turns model.onnx 4 --runs 100 --settle 20 --pause 0.3

``--runs`` (10), ``--settle`` (3) and ``--pause`` (0.05 s): timed and untimed runs of a block and the pause before
it. Long blocks after a long pause keep each side clear of the other's threads, which spin a while after a run
(ONNX Runtime's) or a layer (LayerLab's OpenMP workers): with the defaults, on 2 Zen 5 cores, ONNX Runtime's
mobilenet_v3_large took 2.77 ms, with 100 runs after 20 and 0.3 s 1.80, its time alone in a process 1.75.
"""
from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import engine.backends.cpu.runtime  # noqa: F401  (before onnxruntime: see bench_networks)
from engine.backends import get_backend
from engine.export.onnx_export import OnnxOptions, build_onnx
from engine.network import Network
from engine.plugins import default_registry
from engine.tensor import TensorFormat
from tests.bench.bench_networks import CPU_SIZES
from tests.bench.networks import NETWORKS


def cpu_network(name: str) -> tuple[Network, str, np.ndarray, bytes]:
    """A reference network by name (at its CPU size, its ONNX export unfused for ONNX Runtime) or an ONNX file (as
    ``layerlab import`` reads it, the file itself for ONNX Runtime), built on the CPU in fp32 NHWC: the network, its
    input layer, a random input and the ONNX bytes."""
    reg, cpu = default_registry(), get_backend("numpy", notice=None)
    if name.endswith(".onnx"):
        from engine.importers import load_model_any

        model, weights = load_model_any(name, reg)
        net = Network(model, reg, cpu, TensorFormat.parse("fp32 nhwc"), weights=weights)
        (input_name,) = net.input_names
        x = np.random.default_rng(0).standard_normal(tuple(net.dims(input_name))).astype(np.float32)
        with open(name, "rb") as f:
            return net, input_name, x, f.read()
    dims = CPU_SIZES[name]
    model = NETWORKS[name](dims)
    x = np.random.default_rng(0).random(tuple(dims), dtype=np.float32)
    net = Network(model, reg, cpu, TensorFormat.parse("fp32 nhwc"))
    plain = Network(model, reg, cpu, TensorFormat.parse("fp32 nchw"), fusing="off")
    return net, "input", x, build_onnx(plain, OnnxOptions(explicit_sizes=True))[0].SerializeToString()


def network_from_args(argv: list[str] | None, count: int) -> tuple[str, Network, str, np.ndarray, bytes, int]:
    """The command line's first argument (default resnet18), its ``cpu_network`` with the input set, and the count
    its second argument gives (default ``count``)."""
    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else "resnet18"
    net, input_name, x, payload = cpu_network(name)
    net.set_input(input_name, x)
    return name, net, input_name, x, payload, int(args[1]) if len(args) > 1 else count


def _options(argv: list[str] | None) -> tuple[list[str], int, int, float]:
    """The positional arguments and the ``--runs``, ``--settle`` and ``--pause`` options."""
    args = list(sys.argv[1:] if argv is None else argv)
    values = {"--runs": 10.0, "--settle": 3.0, "--pause": 0.05}
    positional = []
    while args:
        arg = args.pop(0)
        if arg in values and args:
            values[arg] = float(args.pop(0))
        else:
            positional.append(arg)
    return positional, int(values["--runs"]), int(values["--settle"]), values["--pause"]


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort

    positional, runs, settle, pause = _options(argv)
    name, net, input_name, x, payload, blocks = network_from_args(positional, 6)
    net.run()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(payload, opts, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    ref, got = sess.run(None, feed)[0], net.outputs()
    err = min(float(np.linalg.norm(o.reshape(ref.shape) - ref) / np.linalg.norm(ref)) for o in got.values()
              if o.size == ref.size)
    print(f"relative error against ONNX Runtime: {err:.1e}")

    def ours() -> None:
        net.mark_affected(input_name)
        net.run()

    sides: dict[str, Callable[[], object]] = {"LayerLab": ours, "ONNX Runtime": lambda: sess.run(None, feed)}
    res: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(blocks):
        for k, f in sides.items():
            time.sleep(pause)
            for _ in range(settle):
                f()
            ts = []
            for _ in range(runs):
                t0 = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t0)
            res[k].append(1e3 * statistics.median(ts))
    ours_ms, peer_ms = (statistics.median(v) for v in res.values())
    for k, v in res.items():
        print(f"{k:13s} median {statistics.median(v):8.2f} ms   blocks {' '.join(f'{t:.1f}' for t in v)}")
    print(f"{name}: ratio {ours_ms / peer_ms:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
