"""The NumPy backend's buffers aligned to a cache line against buffers 16 bytes past one (where NumPy's allocator
leaves most): a zoo network (bench_zoo's cached ONNX file) opened twice in one process, every buffer of the second
(tensors, prepared weights, padded inputs, work buffers) allocated 16 bytes past a line, both run in turns, medians.
Not collected by the test run.

    python -m tests.bench.bench_cpu_alignment mobilenet_v2 [ROUNDS] [OFFSET]
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from engine.backends.cpu import backend as cpu_backend  # (before onnxruntime: see bench_networks)
from engine.backends.cpu import memory
from engine.backends.cpu import runtime as rt
from tests.bench import bench_zoo
from tests.bench.bench_networks import interleaved_ms


def _skewed(offset: int) -> Any:
    def empty(shape: Any, dtype: Any = np.float32) -> np.ndarray:
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        raw = np.empty(count * dtype.itemsize + 2 * memory.CACHE_LINE, np.uint8)
        start = -raw.ctypes.data % memory.CACHE_LINE + offset
        return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)
    return empty


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else "mobilenet_v2"
    rounds = int(args[1]) if len(args) > 1 else 40
    offset = int(args[2]) if len(args) > 2 else 16
    open_it = bench_zoo.cpu_opener(name)
    if open_it is None:
        return 2
    nets = {}
    real = memory.aligned_empty
    for label, empty in (("aligned", real), ("skewed", _skewed(offset))):
        memory.aligned_empty = cpu_backend.aligned_empty = rt.aligned_empty = empty
        rt._local.__dict__.pop("bufs", None)  # the work buffers made again
        nets[label] = open_it()
    memory.aligned_empty = cpu_backend.aligned_empty = rt.aligned_empty = real
    (a, ia, oa), (s, is_, os_) = nets["aligned"], nets["skewed"]
    diff = float(np.abs(a.output(oa) - s.output(os_)).max())
    times = interleaved_ms({"skewed": bench_zoo._timer(s, is_), "aligned": bench_zoo._timer(a, ia)}, rounds)
    print(f"{name}: {offset} bytes past a line {times['skewed']:.2f} ms, aligned {times['aligned']:.2f} ms, "
          f"ratio {times['aligned'] / times['skewed']:.3f} (outputs differ by at most {diff:.1e})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
