"""What every CPU kernel runs on: the OpenMP start-up settings read before Numba loads, the cores the kernels
share their work over (counted from /proc), the threads of the parallel kernels and one launch at a time, BLAS's
``cblas_sgemm`` through ctypes (called by the kernels themselves, without the GIL) and BLAS held to one thread
meanwhile, and per-thread work buffers.

Every layer is one launch of a parallel Numba kernel (``prange``): its threads call BLAS themselves, so that a
layer costs no Python thread hand-offs (~50 us each on 2 cores, where an OpenMP launch costs ~2 us). BLAS is held
to one thread meanwhile: one thread per core in all. Imported only when Numba is installed."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

# GNU OpenMP threads spin this many times waiting for the next launch before they sleep (read when Numba first
# loads its OpenMP layer; set it yourself to override). A sleeping thread is slow to wake on a virtual machine, whose
# idle virtual CPU the hypervisor halts: a launch after the workers were idle 50-100 us took 10 us instead of 2-3,
# after 300 us 35, after 1 ms 170 (2 Zen 3 cores, KVM). 20000 spins keep them awake through 300 us (a layer run on
# one thread, the Python work between layers) and no more than about a millisecond; 1000 covered 20 us. Against
# ONNX Runtime in the same process, processes in turns: mobilenet_v3_large 1.21-1.46 instead of 1.42-1.77,
# efficientnet_b0 1.26-1.38 instead of 1.33-1.52, mobilenet_v2 1.22-1.30 instead of 1.24-1.36 (five and three
# pairs, every one in favour). With another process busy on one core the kernels keep to one thread (``cores``),
# so no worker spins against it: mobilenet_v3_large 15.2-15.3 against 13.3-14.8 ms, resnet18 53-54 against 46-54
# (two pairs, within this machine's swings). The default (300000) kept them spinning against the BLAS calls of the
# next layer for milliseconds.
os.environ.setdefault("GOMP_SPINCOUNT", "20000")


#: the file names of the OpenMP runtimes Numba's OpenMP layer binds to (by their shared soname): a package's
#: privately renamed copy (auditwheel's ``libgomp-<hash>.so.1.0.0``, igraph's) is another runtime and shares nothing
_SHARED_OPENMP = re.compile(r"lib(gomp|iomp5)\.so(\.\d+)*")


def _openmp_started_before() -> bool:
    """Whether a GNU or Intel OpenMP runtime under its shared name was loaded before this module (PyTorch imported
    first, say, whose copy is ``libgomp.so.1``): Numba's OpenMP layer would then run on that runtime, started with
    the default spin count (``GOMP_SPINCOUNT`` is read once, when the runtime starts), and its threads spin against
    the BLAS calls of the next layer: resnet18 on 2 cores took 364 ms instead of 29-36 ms with ``import torch``
    first. A renamed private copy does not count: igraph's (loaded by the ONNX importer's layout) had sent
    ``layerlab infer model.onnx`` to the work-queue threads, mobilenet_v3_large 21 instead of 10-11 ms."""
    if os.environ.get("OMP_WAIT_POLICY", "").lower() == "passive" or os.environ.get("NUMBA_THREADING_LAYER"):
        return False
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any(_SHARED_OPENMP.fullmatch(os.path.basename(line.split()[-1])) for line in maps
                       if len(line.split()) >= 6)
    except OSError:  # not Linux
        return False


if _openmp_started_before():  # Numba's own work-queue threads instead (57 ms in the case above)
    os.environ["NUMBA_THREADING_LAYER"] = "workqueue"

import numba  # noqa: E402
import numpy as np  # noqa: E402

if os.environ.get("NUMBA_THREADING_LAYER") == "workqueue":  # Numba imported earlier read its settings then
    numba.config.THREADING_LAYER = "workqueue"

from engine.backends.cpu.kernel_sources import forget_stale_kernels, tolerate_unreadable_kernels  # noqa: E402
from engine.backends.cpu.memory import aligned_empty  # noqa: E402

forget_stale_kernels()  # before any kernel loads from Numba's cache: compiled from these very sources
tolerate_unreadable_kernels()

#: a pooling of fewer output values (x 16), or a few-outputs convolution of fewer, runs as one job
SPLIT_MIN_PIXELS = 1024

#: reordered float32 sums (vectorised, as BLAS's) for the kernels compiled with them; NaN and Inf kept
REORDERED_SUMS = {"reassoc", "contract"}

_local = threading.local()


def scratch(slot: int, shape: tuple[int, ...]) -> np.ndarray:
    """A float32 work array of ``shape`` for the calling thread, reused between calls."""
    bufs = _local.__dict__.setdefault("bufs", {})
    size = math.prod(shape)
    buf = bufs.get(slot)
    if buf is None or buf.size < size:
        buf = bufs[slot] = aligned_empty(size)
    return buf[:size].reshape(shape)


def share(total: int, size: int, images: int) -> int:
    """A block size no larger than ``size`` that splits ``total`` units (over ``images`` images) into at
    least one block per core and a multiple of the core count, so that no core idles."""
    count = cores()
    per_image = total // images
    blocks = -(-per_image // size) * images
    blocks = max(count, -(-blocks // count) * count)
    return max(1, -(-per_image // max(1, blocks // images)))


#: seconds a count of the cores is used for (each layer asks; the system calls cost microseconds on a VM)
CORES_TTL = 1.0
#: share of a core other processes must have used over the last CORES_TTL for the kernels to leave it to them
CORE_TAKEN = 0.5
_cores_seen: list[float] = [0.0, -1e9]
#: the last look at the machine: (monotonic time, busy clock ticks of all CPUs, this process's CPU seconds)
_load_seen: list[tuple[float, int, float]] = []


def _busy_ticks() -> int | None:
    """Clock ticks all CPUs spent running something (user, system, interrupts, and niced processes where this one
    is niced too) since boot, None without /proc/stat. Time the hypervisor gave other machines (steal) is not
    counted: no thread count gets it back. Nor is that of niced processes when this one is not: they give their
    core up whenever a kernel thread of ours wants it (2 cores beside niced test runs: the kernels had kept to one
    thread, mobilenet_v2 1.6x slower than on two)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 8:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return user + (nice if _niced() else 0) + system + irq + softirq


def _niced() -> bool:
    """Whether this process runs at a lower priority than the default (its CPU time then counts as nice)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, 0) > 0
    except (AttributeError, OSError):
        return False


def _cores_taken() -> float:
    """Cores' worth of CPU time other processes used since the last call (0 on the first call, or without
    /proc/stat): everything the machine ran less this process's own CPU time."""
    ticks = _busy_ticks()
    if ticks is None:
        return 0.0
    now, own = time.monotonic(), sum(os.times()[:2])
    last = _load_seen[0] if _load_seen else None
    _load_seen[:] = [(now, ticks, own)]
    if last is None or now - last[0] <= 0:
        return 0.0
    others = (ticks - last[1]) / _CLOCK_TICKS - (own - last[2])
    return max(0.0, others / (now - last[0]))


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _own_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: the core count :func:`cores` gives inside :func:`every_core` (innermost last)
_cores_fixed: list[int] = []


@contextlib.contextmanager
def every_core() -> Iterator[None]:
    """Inside the block :func:`cores` is every core this process may run on, however busy the machine is. The
    kernels' warm-up runs in it: its layers then take the parallel paths they take on an idle machine, so that
    those kernels are compiled too. On a busy machine (a first inference running beside the warm-up, or test
    processes compiling at once) every layer had gone to its one-thread path, and the parallel kernels (the
    depthwise layers', a large pooling's) were left to compile, 6 to 11 s each, at the first run that needed them."""
    _cores_fixed.append(_own_cores())
    try:
        yield
    finally:
        _cores_fixed.pop()


def cores() -> int:
    """Cores the kernels share their work over: those this process may run on, less those other processes kept
    busy (more than CORE_TAKEN of one) over the last CORES_TTL seconds (inside :func:`every_core`: all of them).
    Waiting OpenMP threads spin (GOMP_SPINCOUNT), and a thread spinning on a core another program needs makes both
    slow; one thread fewer leaves that core alone (a kernel run on one thread wakes no other)."""
    if _cores_fixed:
        return _cores_fixed[-1]
    count, when = _cores_seen
    now = time.monotonic()
    if now - when < CORES_TTL:
        return int(count)
    count = max(1, _own_cores() - int(_cores_taken() + 1.0 - CORE_TAKEN))
    _cores_seen[:] = [count, now]
    return int(count)


#: one launch at a time in the process; re-entrant, so that a :class:`Sequence` holding it across a network's kernel
#: calls may run a prepared call that launches through :func:`launch` itself
_launch_lock = threading.RLock()


def threads() -> int:
    """Threads of the parallel kernels: one per core this process may use (set for the calling thread; Numba's
    count is per thread, remembered here so that each layer does not ask Numba again)."""
    n = min(numba.config.NUMBA_NUM_THREADS, cores())
    if _local.__dict__.get("threads") != n:
        numba.set_num_threads(n)
        _local.threads = n
    return n


def launch(kernel: Any, *args: Any) -> None:
    """Run a parallel kernel with BLAS held to one thread, one launch at a time in the process (Numba's
    fallback threading layer, used where neither OpenMP nor TBB can be loaded, refuses concurrent ones).
    Inside :func:`single_threaded_blas` (a network's run) no context manager is entered: a launch's Python
    work between kernels is a network's cost per layer."""
    if _held.depth:
        with _launch_lock:
            kernel(*args)
        return
    with _launch_lock, _blas_single_thread():
        kernel(*args)


class Launch:
    """One launch of a parallel kernel on arguments fixed when it is made: what a kernel's plan for a network's own
    buffers returns where its whole work is that launch, so that running it again (a network's replay of its
    layers) is the launch alone. ``per_threads`` (given the thread count, :func:`threads`) gives the arguments
    that follow ``args`` and depend on how many threads run (how the work is cut); they are worked out again only
    when that count changes. On mobilenet_v3_large's recorded calls (two Zen 3 cores) the Python around a replayed
    launch fell from 5-14 us to about 2 us (each layer's wrapper had reshaped its arrays, counted the threads and
    cut the work again at every run); the whole network's time moved within this machine's spread."""

    __slots__ = ("kernel", "args", "per_threads", "_threads", "_bound")

    def __init__(self, kernel: Any, *args: Any, per_threads: Callable[[int], tuple[Any, ...]] | None = None) -> None:
        self.kernel, self.args, self.per_threads = kernel, args, per_threads
        self._threads, self._bound = 0, args

    def bind(self, n: int) -> None:
        """The arguments for ``n`` threads (worked out again only when the count changes)."""
        if n != self._threads:
            self._bound = self.args if self.per_threads is None else (*self.args, *self.per_threads(n))
            self._threads = n

    def __call__(self) -> None:
        held = _held
        if held.depth:  # a network's run: the thread count of the run, the lock alone around the launch
            self.bind(held.threads)
            with _launch_lock:
                self.kernel(*self._bound)
            return
        self.bind(threads())
        launch(self.kernel, *self._bound)


class Sequence:
    """Prepared calls of a network's layers run one after another (a replay of their recorded calls): a
    :class:`Launch`'s kernel called straight on its bound arguments, the lock taken once for the whole sequence,
    any other call as it is. Against the calls one by one through the replay's loop (each launch's own Python, the
    lock taken and left per launch, the loop's checks per layer), mobilenet_v3_large's 80 calls took 0.11-0.14 ms
    less of a 2 ms run on 2 Zen 5 cores. Given a list (a profiled run), it appends the clock after each call.
    ``failed_at``: the index of the call that raised, after an exception."""

    __slots__ = ("calls", "failed_at", "_threads")

    def __init__(self, calls: list[Callable[[], None]]) -> None:
        self.calls = tuple(calls)
        self.failed_at = -1
        self._threads = 0

    def __call__(self, stamps: list[float] | None = None) -> None:
        n = _held.threads if _held.depth else threads()
        if n != self._threads:
            for call in self.calls:
                if type(call) is Launch:
                    call.bind(n)
            self._threads = n
        i = 0
        try:
            with _launch_lock, contextlib.nullcontext() if _held.depth else _blas_single_thread():
                if stamps is None:
                    for call in self.calls:
                        if type(call) is Launch:
                            call.kernel(*call._bound)
                        else:
                            call()
                        i += 1
                    return
                clock = time.perf_counter
                for call in self.calls:
                    if type(call) is Launch:
                        call.kernel(*call._bound)
                    else:
                        call()
                    stamps.append(clock())
                    i += 1
        except BaseException:
            self.failed_at = i
            raise




@functools.cache
def blas_sgemm() -> Any:
    """``cblas_sgemm`` (64-bit integers) of the BLAS library NumPy uses, as a ctypes function the kernels
    call without the GIL; None when there is none (the backend then has no fast convolution)."""
    try:
        from threadpoolctl import threadpool_info  # noqa: PLC0415
    except ImportError:
        return None
    for info in threadpool_info():
        if info.get("user_api") != "blas":
            continue
        try:
            lib = ctypes.CDLL(info["filepath"])
        except OSError:
            continue
        for name in ("scipy_cblas_sgemm64_", "cblas_sgemm64_", "cblas_sgemm_64"):
            fn = getattr(lib, name, None)
            if fn is not None:
                i64, f32, ptr = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p
                fn.restype = None
                fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, f32, ptr, i64, ptr, i64, f32,
                               ptr, i64]
                return fn
    return None


@contextlib.contextmanager
def _blas_single_thread() -> Iterator[None]:
    """BLAS limited to one thread while the worker threads run, when it can be; a no-op inside
    :func:`single_threaded_blas` (already limited). The BLAS libraries are found once (threadpoolctl); each block
    then asks and sets their thread counts directly: threadpoolctl's ``limit`` looked every library up again at
    each inference, 10-20 us a run (2 Zen 5 cores), 1% of mobilenet_v3_large."""
    if _held.depth:
        yield
        return
    libs = _blas_libraries()
    before = [lib.get_num_threads() for lib in libs]
    for lib, n in zip(libs, before, strict=True):
        if n != 1:
            lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, n in zip(libs, before, strict=True):
            if n is not None and n != 1:
                lib.set_num_threads(n)


@functools.cache
def _blas_libraries() -> tuple[Any, ...]:
    """threadpoolctl's controllers of the BLAS libraries loaded when first asked (none without threadpoolctl: BLAS
    keeps its threads)."""
    try:
        from threadpoolctl import ThreadpoolController  # noqa: PLC0415

        return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)
    except Exception:
        return ()


class _Held(threading.local):
    depth = 0
    #: :func:`threads` when the outermost :func:`single_threaded_blas` block began (a run's launches use it: asking
    #: again at each launch cost about a quarter of a microsecond of the Python around it)
    threads = 1


_held = _Held()


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """BLAS held to one thread for a whole inference, every product being spread over the cores by the
    workers instead. Switching OpenBLAS between 1 and 2 threads around each layer, with a multi-threaded
    product in between, left its helper thread spinning against the workers (2 cores: the resnet18 stem
    took 4.7-5.4 ms instead of 2.4-2.9)."""
    with _blas_single_thread():
        if not _held.depth:
            _held.threads = threads()
        _held.depth += 1
        try:
            yield
        finally:
            _held.depth -= 1


def live_contiguous(v: np.ndarray) -> Callable[[], np.ndarray]:
    """A function giving ``v`` as a C-contiguous array when called: ``v`` itself when it is one, else a copy made
    then (its memory may have changed since)."""
    if v.flags.c_contiguous:
        return lambda: v
    return lambda: np.ascontiguousarray(v)
