"""Every GPU kernel of one network run, in order, with its duration (CUPTI through PyTorch's profiler, which records
CuPy's and cuDNN's kernels too), then the host's issue time against the wall time of a run:
python -m tests.bench.gpu_timeline dncnn ["fp16 nhwc"]

On an H200 (dncnn 1080p fp16 NHWC, CUDA graph): 40 kernels, 5.2-5.6 ms busy of a 5.2-5.6 ms span;
the 15 middle convolutions 292-298 us each (cuDNN's sm90 implicit GEMM, 256x64x32 tiles), the input layer 272-300 us
(an sm80 kernel over channels padded to 8) after two 30 us copies (the fp16 conversion and the padding), the output
layer 314-365 us (outputs padded to 8) then a 31 us copy back to 3 channels and the 31 us residual sum; the host
issues a run in 0.08 ms."""
from __future__ import annotations

import sys
import time

import numpy as np


def main() -> None:
    from torch.profiler import ProfilerActivity, profile

    from engine.backends import get_backend
    from engine.network import Network
    from engine.plugins import default_registry
    from engine.tensor import TensorFormat
    from tests.bench.bench_networks import GPU_SIZES
    from tests.bench.networks import NETWORKS

    name = sys.argv[1] if len(sys.argv) > 1 else "dncnn"
    fmt = sys.argv[2] if len(sys.argv) > 2 else "fp16 nhwc"
    backend = get_backend("cupy", notice=None)
    dims = GPU_SIZES[name]
    net = Network(NETWORKS[name](dims), default_registry(), backend, TensorFormat.parse(fmt), fusing="on")
    net.set_input("input", np.random.default_rng(0).random(tuple(dims), dtype=np.float32))

    def run() -> None:
        net.mark_affected("input")
        net.run()

    for _ in range(5):
        run()
    backend.synchronize()
    print("graph:", net.graph_status)
    runs = 10
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            run()
        backend.synchronize()
    events = sorted((e for e in prof.events() if e.device_type.name == "CUDA"), key=lambda e: e.time_range.start)
    last = events[-(len(events) // runs):]
    t0 = last[0].time_range.start
    for e in last:
        print(f"{(e.time_range.start - t0) / 1000:8.3f} ms {e.time_range.elapsed_us():8.1f} us  {e.name[:100]}")
    busy = sum(e.time_range.elapsed_us() for e in last) / 1000
    print(f"kernels {len(last)}, busy {busy:.3f} ms, span {(last[-1].time_range.end - t0) / 1000:.3f} ms")
    for _ in range(3):
        backend.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            run()
        issued = time.perf_counter()
        backend.synchronize()
        print(f"20 runs: host issue {(issued - start) * 50:.3f} ms a run, wall {(time.perf_counter() - start) * 50:.3f} ms")


if __name__ == "__main__":
    main()
