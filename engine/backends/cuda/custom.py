"""Custom layer CUDA kernels on the CuPy backend: compiled lazily with ``cupy.RawKernel`` on first use,
cached per definition content, tensor format and device, and launched on the current stream (the
backend's), so a network's CUDA graph captures them like any other layer's kernels. Compiling happens on
the first (eager) run of a layer, never inside a capture."""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from engine.custom.cuda_source import compile_message, kernel_source
from engine.custom.definition import CudaVariant, CustomLayerDef
from engine.custom.launch import LaunchSpec, parse_launch
from engine.custom.script import Values
from engine.errors import LayerLabError

_kernels: dict[tuple[str, str, int], Any] = {}


def _entry_point(name: str) -> str:
    """How a kernel called ``name`` is declared (``kernels/custom_entry.cuh``), for the error naming a missing one."""
    from engine.backends.cuda.runtime import source  # noqa: PLC0415

    return source("custom_entry.cuh").strip().replace("NAME", name)


@functools.lru_cache(maxsize=256)
def _spec(defn: CustomLayerDef, launch: str) -> LaunchSpec:
    return parse_launch(launch, defn.scope(has_out=True))


def kernel(defn: CustomLayerDef, variant: CudaVariant) -> Any:
    """The compiled kernel of a variant on the current device (compiled on first use)."""
    import cupy  # noqa: PLC0415

    from engine.custom.errors import CustomCodeError  # noqa: PLC0415

    device = cupy.cuda.runtime.getDevice()
    key = (defn.digest(), str(variant.format), device)
    found = _kernels.get(key)
    if found is not None:
        return found
    spec = _spec(defn, variant.launch)
    source = kernel_source(defn.name, variant.format, variant.code)
    try:
        k = cupy.RawKernel(source, spec.kernel)
        k.compile()
        _ = k.kernel  # loads the module and finds the function now, not during a graph capture
    except cupy.cuda.compiler.CompileException as exc:
        raise CustomCodeError(compile_message(defn.name, variant.format, variant.code, str(exc))) from None
    except cupy.cuda.driver.CUDADriverError as exc:
        if "NOT_FOUND" in str(exc):
            raise CustomCodeError(f"custom layer {defn.name}: the CUDA code for {variant.format} has no kernel named "
                                  f"{spec.kernel!r}: declare it {_entry_point(spec.kernel)}") from None
        raise CustomCodeError(f"custom layer {defn.name}: loading the CUDA kernel for {variant.format} failed: {exc}") from None
    _kernels[key] = k
    return k


def launch(defn: CustomLayerDef, variant: CudaVariant, inputs: Sequence[Any], out: Any, values: Values) -> None:
    """Launch the variant's kernel: grid for one thread per output element, arguments as the launch line says."""
    import cupy  # noqa: PLC0415

    k = kernel(defn, variant)
    spec = _spec(defn, variant.launch)
    assert values.out is not None
    if spec.block_problem():
        raise LayerLabError(f"custom layer {defn.name}: launch line for {variant.format}: {spec.block_problem()}")
    grid = spec.grid(values.out)
    scalars = spec.scalar_values(values)
    if not out.flags.c_contiguous:
        raise LayerLabError(f"custom layer {defn.name}: the output buffer is not contiguous")
    args: list[Any] = []
    for arg, value in zip(spec.args, scalars, strict=True):
        if arg.tensor == "out":
            args.append(out)
        elif arg.tensor is not None:
            index = int(arg.tensor)
            x = inputs[index] if index < len(inputs) else None
            if x is None:
                raise LayerLabError(f"custom layer {defn.name}: launch argument {arg.text}: input {index} is not connected")
            args.append(x if x.flags.c_contiguous else cupy.ascontiguousarray(x))
        elif arg.is_float:
            args.append(np.float32(value))
        else:
            args.append(np.int32(value))
    k(grid, spec.block, tuple(args), shared_mem=spec.shared_bytes)
