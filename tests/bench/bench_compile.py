"""Where the CPU kernels' first compile goes: the warm-up network (``engine.backends.cpu.warmup``) family by family
in a fresh Numba cache folder, with CPU seconds per family and per kernel (the time of the kernels it calls left out)
and every kernel compiled for more than one signature. Not collected by the test run; minutes on 2 cores.

    python -m tests.bench.bench_compile [FAMILY ...]
"""
from __future__ import annotations

import collections
import os
import sys
import tempfile
import time


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="layerlab-compile-")  # before Numba loads
    from numba.core import event

    from engine.backends.cpu import warmup

    seconds: dict[str, float] = collections.defaultdict(float)
    signatures: dict[str, list[str]] = collections.defaultdict(list)
    started: list[float] = []

    class _Compiles(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            started.append(time.process_time())

        def on_end(self, ev: event.Event) -> None:
            spent = time.process_time() - started.pop()
            for i in range(len(started)):  # a callee's compile is its own, not its caller's
                started[i] += spent
            func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
            name = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"
            seconds[name] += spent
            signatures[name].append(str((ev.data or {}).get("args")))

    event.register("numba:compile", _Compiles())
    total = time.process_time()
    for family in args or list(warmup.FAMILIES):
        t0 = time.process_time()
        warmup.warm([family])
        print(f"family {family}: {time.process_time() - t0:.1f} CPU s", flush=True)
    print(f"all: {time.process_time() - total:.1f} CPU s\n\nkernels, CPU s:")
    for name, spent in sorted(seconds.items(), key=lambda kv: -kv[1])[:40]:
        print(f"{spent:8.2f}  {name}" + (f"  ({len(signatures[name])} signatures)" if len(signatures[name]) > 1 else ""))
    several = {n: s for n, s in signatures.items() if len(s) > 1 and n.startswith("engine.")}
    for name, sigs in several.items():
        print(f"\n{name} compiled {len(sigs)} times:", *(f"  {s}" for s in sigs), sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
