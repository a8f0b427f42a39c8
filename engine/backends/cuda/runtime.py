"""Compiling and launching the CUDA C of the CuPy backend: the ``.cu``/``.cuh`` files of ``kernels/`` (package
data, read with importlib.resources; files share code by ``#include`` through the include path given to NVRTC),
compiled on first use and memoized per process (CuPy also keeps compiled modules on disk, keyed by the source and
options: the options carry a digest of every kernel file, so a changed header compiles afresh). Also what every
kernel family needs: launch geometry, the device's SM count and compute capability, GPU timing of a call."""
from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import cupy

#: threads a block of the one-dimensional kernels
THREADS = 256

_FILES = contextlib.ExitStack()
atexit.register(_FILES.close)


@functools.cache
def kernel_folder() -> Path:
    """The folder of the kernel sources on disk (extracted for the process where the package is not a folder)."""
    return Path(_FILES.enter_context(resources.as_file(resources.files(__package__) / "kernels")))


@functools.cache
def source(name: str) -> str:
    """The text of kernel file ``name`` (``conv64.cu``, ``wgmma.cuh``, ...)."""
    return (kernel_folder() / name).read_text(encoding="utf-8")


@functools.cache
def _digest() -> str:
    h = hashlib.sha256()
    for path in sorted(kernel_folder().iterdir()):
        if path.suffix in (".cu", ".cuh"):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def options(*extra: str) -> tuple[str, ...]:
    """NVRTC options: the include path of the kernel files, a define naming their digest (so CuPy's disk cache
    of compiled modules changes with any included file), then ``extra``."""
    return (f"-I{kernel_folder()}", f"-DLAYERLAB_KERNELS_{_digest()}", *extra)


@functools.cache
def module(name: str, name_expressions: tuple[str, ...] = ()) -> Any:
    """Kernel file ``name`` as a ``cupy.RawModule`` (compiled when a function is first taken from it)."""
    return cupy.RawModule(code=source(name), options=options("-std=c++17"),
                          name_expressions=list(name_expressions) or None)


def function(name: str, kernel: str) -> Any:
    """Kernel ``kernel`` (a C name, or a template instance such as ``upcat_nchw<float>``) of file ``name``."""
    templated = "<" in kernel
    return module(name, (kernel,) if templated else ()).get_function(kernel)


@functools.cache
@functools.cache  # one kernel object per source: building one per call costs host time on every launch
def element_wise(in_params: str, out_params: str, operation: str, name: str,
                 includes: tuple[str, ...] = ()) -> Any:
    """A ``cupy.ElementwiseKernel`` whose operation is kernel file ``operation`` when it names one (``.cuh``), else
    that text, after the kernel files ``includes``."""
    body = source(operation) if operation.endswith(".cuh") else operation
    preamble = "".join(f'#include "{f}"\n' for f in includes)
    return cupy.ElementwiseKernel(in_params, out_params, body, name, preamble=preamble, options=options())


def compile_cubin(name: str, arch: str, defines: Sequence[str] = ()) -> bytes:
    """Kernel file ``name`` compiled by NVRTC for ``arch`` (``sm_90a``: CuPy's own compilation names sm_90, which
    has no ``wgmma``), with ``-D`` ``defines``. Raises CuPy's CompileException on an error."""
    from cupy.cuda import compiler  # noqa: PLC0415

    cubin, _ = compiler._NVRTCProgram(source(name), name, method="cubin").compile(
        options(f"-arch={arch}", "-std=c++17", "--device-as-default-execution-space", *(f"-D{d}" for d in defines)))
    return cubin


@functools.cache
def loaded(name: str, kernel: str, arch: str, defines: tuple[str, ...], smem: int, device: int) -> Any:
    """(module, function) of :func:`compile_cubin`'s cubin loaded on ``device``, its dynamic shared memory raised
    to ``smem`` bytes."""
    from cupy.cuda import driver  # noqa: PLC0415
    from cupy.cuda import function as cuda_function  # noqa: PLC0415

    with cupy.cuda.Device(device):
        mod = cuda_function.Module()
        mod.load(compile_cubin(name, arch, defines))
        fn = mod.get_function(kernel)
        driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    return mod, fn


@functools.cache
def _device_info(device: int) -> tuple[int, int]:
    dev = cupy.cuda.Device(device)
    return int(dev.attributes["MultiProcessorCount"]), int(dev.compute_capability)


def sm_count() -> int:
    """Streaming multiprocessors of the current GPU."""
    return _device_info(cupy.cuda.Device().id)[0]


def compute_capability() -> int:
    """Compute capability of the current GPU as major * 10 + minor (90: Hopper)."""
    return _device_info(cupy.cuda.Device().id)[1]


def blocks(total: int, threads: int = THREADS) -> int:
    """Blocks of ``threads`` covering ``total`` threads."""
    return (total + threads - 1) // threads


def aligned(*arrays: Any) -> bool:
    """Whether every array starts on a 16-byte boundary (vector loads and stores)."""
    return all(a.data.ptr % 16 == 0 for a in arrays)


def fp16_bias(bias: Any | None) -> bool:
    """Whether ``bias`` is absent or a contiguous fp16 vector (what the fp16 kernels read)."""
    return bias is None or (bias.dtype == cupy.float16 and bias.flags.c_contiguous)


def capturing() -> bool:
    """Whether the current stream is being captured into a CUDA graph (nothing may be timed or synchronized)."""
    try:
        return bool(cupy.cuda.get_current_stream().is_capturing())
    except Exception:  # an old CuPy without the query: assume the worst, do not time
        return True


@contextlib.contextmanager
def current_stream(stream: Any) -> Iterator[Any]:
    """``stream`` current in the calling thread for the block, then exactly the stream current before it. (CuPy's
    own ``with stream`` returns to the stream of an enclosing ``with`` block, the null stream where the caller had
    made its stream current by ``Stream.use``, so work queued after the block would no longer be ordered with the
    work on ``stream``.)"""
    previous = cupy.cuda.get_current_stream()
    stream.use()
    try:
        yield stream
    finally:
        previous.use()


def elapsed_ms(fn: Callable[[], Any], repeat: int = 3) -> float | None:
    """Device time of one call of ``fn`` on the current stream, in milliseconds (after one warm-up call, which also
    builds what the call needs); None when it declined (returned None).

    The calls are captured into a CUDA graph and the graph's replay is timed, as a network runs them: timed as
    launched from Python, a small kernel's time is the host's launch overhead (a cuDNN graph's execute call costs
    more host time than a cuBLAS call and a CuPy kernel together), and a candidate tens of microseconds slower on
    the device won. Where the calls cannot be captured, they are timed as launched."""
    if fn() is None:
        return None
    stream = cupy.cuda.get_current_stream()
    graph = _captured(fn, repeat, stream)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    if graph is not None:
        graph.launch(stream)  # warm-up of the graph itself
    start.record(stream)
    if graph is not None:
        graph.launch(stream)
    else:
        for _ in range(repeat):
            fn()
    end.record(stream)
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / repeat


_TIMING = threading.local()


def timing_capture() -> bool:
    """Whether the calling thread is capturing calls to time them (``elapsed_ms``): the graph is replayed at once and
    dropped, so what it used need not be kept for later replays."""
    return bool(getattr(_TIMING, "active", False))


def _captured(fn: Callable[[], Any], repeat: int, stream: Any) -> Any | None:
    """``repeat`` calls of ``fn`` captured on ``stream`` as a CUDA graph (memory from an asynchronous pool), or None
    where the stream cannot capture (the null stream, a capture already open) or a call does what capture forbids."""
    if stream.ptr == 0 or stream.is_capturing():
        return None
    try:
        with cupy.cuda.using_allocator(cupy.cuda.MemoryAsyncPool().malloc):
            stream.begin_capture()
            _TIMING.active = True
            try:
                for _ in range(repeat):
                    fn()
            finally:
                _TIMING.active = False
                graph = stream.end_capture()
    except Exception:  # what capture forbids (a synchronization, a pageable copy): timed as launched
        stream.synchronize()
        return None
    return graph
