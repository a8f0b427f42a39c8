"""Whether a CUDA GPU is usable through CuPy, and the names of this machine's GPUs; cupy imported only when asked."""
from __future__ import annotations


def probe() -> tuple[bool, str]:
    """(usable, reason or the first GPU's name) for the CuPy backend; never raises."""
    try:
        import cupy  # noqa: PLC0415

        count = cupy.cuda.runtime.getDeviceCount()
        if count < 1:
            raise RuntimeError("no CUDA device found")
        check = cupy.arange(4, dtype=cupy.float32) * 2
        if float(check.sum()) != 12.0:
            raise RuntimeError("a test computation on the GPU gave a wrong result")
        return True, device_name(0)
    except ImportError:
        return False, "cupy is not installed (pip install 'layerlab[gpu]')"
    except Exception as exc:  # any driver/runtime failure means "not usable", never a crash
        return False, f"no usable CUDA GPU ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"


def device_name(ordinal: int) -> str:
    """The name of GPU ``ordinal`` as the driver reports it."""
    import cupy  # noqa: PLC0415

    name = cupy.cuda.runtime.getDeviceProperties(ordinal)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def gpu_names() -> list[str]:
    """The names of this machine's CUDA GPUs by ordinal (call only where :func:`probe` said usable)."""
    import cupy  # noqa: PLC0415

    return [device_name(i) for i in range(cupy.cuda.runtime.getDeviceCount())]
