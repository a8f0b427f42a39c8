"""Calling a kernel's job from its parallel kernel without compiling the job's code again.

Every parallel kernel is a ``prange`` over calls of one job (an ordinary compiled function). Numba compiles a called
function into its own library, then links a copy of that library into the caller's and optimises and generates
machine code for the whole again; a ``prange`` body is a function of its own (a gufunc) called by the kernel, so
a job's code was optimised and generated three times, and the parallel kernels took more than half of the CPU
kernels' first compile (depthwise: the parallel kernel 9.7 s against 1.2 s calling its job as here).

:func:`job_caller` gives the job a caller that calls its compiled code by its symbol instead: the kernel's library
holds a declaration, resolved against the job's own library when the kernel's code is loaded (the job is compiled,
or loaded from Numba's cache, first: when the kernel is compiled, and through ``reload_init`` when the kernel is
loaded from the cache in another process). The call is the one Numba would make, with the same calling
convention, so an error the job raises propagates as before. A job is called once per share of a layer's work,
so the inlining given up costs nothing measurable.
"""
from __future__ import annotations

import importlib
from typing import Any

from numba import types
from numba.core import errors
from numba.extending import intrinsic

#: the libraries of the jobs called by symbol, held for the life of the process: a kernel's machine code calls into
#: its job's, which Numba frees with the library object that holds it
_HELD: set[Any] = set()


def _ensure_job(module: str, name: str, args: tuple[Any, ...]) -> None:
    """Compile (or load from the cache) job ``module.name`` for ``args``: before a kernel that calls it by symbol is
    loaded. Module-level, so that Numba's cache can store it by reference among the kernel's ``reload_init``."""
    job = getattr(importlib.import_module(module), name)
    job.compile(args)
    _HELD.add(job.overloads[args].library)


class _EnsureJob:
    """A picklable ``reload_init`` entry: :func:`_ensure_job` of one job and signature (Numba keeps them in a set,
    so equal entries compare and hash equal)."""

    __slots__ = ("module", "name", "args")

    def __init__(self, module: str, name: str, args: tuple[Any, ...]) -> None:
        self.module, self.name, self.args = module, name, args

    def __call__(self) -> None:
        _ensure_job(self.module, self.name, self.args)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _EnsureJob) and (self.module, self.name, self.args) == (other.module, other.name,
                                                                                         other.args)

    def __hash__(self) -> int:
        return hash((self.module, self.name, self.args))

    def __reduce__(self) -> tuple[Any, ...]:
        return _EnsureJob, (self.module, self.name, self.args)


def job_caller(job: Any) -> Any:
    """A compiled function ``call(args)`` that calls the compiled job ``job`` (an ``@njit`` function of a module) on
    the tuple ``args`` by its symbol: ``call((a, b, c))`` computes ``job(a, b, c)`` (see the module's
    documentation). Use it where the call's cost is small beside the job's work."""
    module, name = job.py_func.__module__, job.py_func.__name__

    @intrinsic
    def call(typingctx: Any, args: Any) -> Any:  # pragma: no cover - compiled
        if not isinstance(args, types.BaseTuple):
            raise errors.TypingError(f"{name}'s caller takes its arguments as one tuple, not {args}")
        argtys = tuple(types.unliteral(t) for t in args.types)
        job.compile(argtys)  # compiled (or loaded from the cache) for these types
        restype = job.overloads[argtys].signature.return_type

        def codegen(context: Any, builder: Any, signature: Any, llargs: Any) -> Any:
            cres = job.overloads[argtys]
            _HELD.add(cres.library)
            vals = [context.cast(builder, builder.extract_value(llargs[0], i), args.types[i], t)
                    for i, t in enumerate(argtys)]
            fn = context.declare_function(builder.module, cres.fndesc)
            status, res = context.call_conv.call_function(builder, fn, restype, argtys, vals)
            with builder.if_then(status.is_error, likely=False):
                context.call_conv.return_status_propagate(builder, status)
            context.active_code_library._reload_init.add(_EnsureJob(module, name, argtys))
            return res

        return restype(args), codegen

    call.__name__ = call.__qualname__ = f"call_{name}"
    return call
