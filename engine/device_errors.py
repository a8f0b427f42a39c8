"""GPU memory and faults as user errors: CuPy's out-of-memory error and CUDA's illegal-address fault, raised
while a network is built or run, become one-line LayerLabErrors naming the layer and the sizes (exit status 2
on the command line, a message in the designer) instead of bugs. Recognised by the class names and CUDA error
names CuPy uses, so this module imports no cupy and is tested on machines without a GPU."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from engine.errors import LayerLabError

#: CUDA errors after which the device's context is lost: no later GPU work in this process can succeed
CONTEXT_LOST = ("cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
                "cudaErrorMisalignedAddress", "cudaErrorHardwareStackError", "an illegal memory access")


class GpuOutOfMemory(LayerLabError):
    """The network does not fit in the GPU's memory (the run can be retried smaller, or on the CPU)."""


class GpuFault(LayerLabError):
    """A kernel faulted on the GPU; the CUDA context is lost, so GPU runs need a restart of the application."""

    context_lost = True


def translate(exc: BaseException, where: str, sizes: str = "") -> LayerLabError | None:
    """The LayerLabError for ``exc`` when it is a GPU memory error or fault (else None); ``where`` names the layer
    or step (``layer conv1``), ``sizes`` what it was allocating or computing (``1x64x16384x16384``)."""
    if isinstance(exc, LayerLabError):
        return None
    name, text = type(exc).__name__, str(exc)
    detail = f" ({sizes})" if sizes else ""
    if name == "OutOfMemoryError" or "cudaErrorMemoryAllocation" in text or "CUDNN_STATUS_ALLOC_FAILED" in text:
        first = text.splitlines()[0] if text else name
        return GpuOutOfMemory(f"{where}{detail}: out of GPU memory: {first}; use smaller inputs or run on the CPU "
                              "(--backend numpy)")
    if any(k in text for k in CONTEXT_LOST):
        return GpuFault(f"{where}{detail}: the GPU kernel faulted ({text.splitlines()[0]}); the CUDA context is lost: "
                        "GPU runs need a restart of the application (CPU runs still work)")
    return None


@contextmanager
def device_errors(where: str, sizes: str = "") -> Iterator[None]:
    """Run the block, turning a GPU memory error or fault into :class:`GpuOutOfMemory` / :class:`GpuFault`."""
    try:
        yield
    except Exception as exc:
        err = translate(exc, where, sizes)
        if err is None:
            raise
        raise err from None
