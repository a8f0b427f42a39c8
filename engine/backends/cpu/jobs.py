"""Calling a kernel's job from its parallel kernel without compiling the job's code again.

Every parallel kernel is a ``prange`` over calls of one job (an ordinary compiled function). Numba compiles a called
function into its own library, then links a copy of that library into the caller's and optimises and generates
machine code for the whole again; a ``prange`` body is a function of its own (a gufunc) called by the kernel, so
a job's code was optimised and generated three times, and the parallel kernels took more than half of the CPU
kernels' first compile (depthwise: the parallel kernel 9.7 s against 1.2 s calling its job as here).

:func:`job_caller` gives the job a caller that calls its compiled code through a symbol of its own instead: the
kernel's code declares ``layerlab_job_<name>_<digest of the argument types>`` and calls it with Numba's calling
convention (an error the job raises propagates as before); the process maps that name to the address of the job's
compiled code (``llvmlite.binding.add_symbol``) before the kernel's code is loaded: when the kernel is compiled, and,
when Numba's cache gives the kernel to another process, through the kernel's ``reload_init`` (run before its code is
loaded), which compiles the job or loads it from the cache first. Numba's own symbol for the job would not do: it
holds a number unique to the process that compiled it, and a kernel compiled in one process while another compiled
its job (two test processes compiling at once) would call a symbol the loading process never defined. A job is
called once per share of a layer's work, so the inlining given up costs nothing measurable.
"""
from __future__ import annotations

import hashlib
import importlib
from typing import Any

from llvmlite import binding as ll
from numba import types
from numba.core import cgutils, errors
from numba.extending import intrinsic

#: the libraries of the jobs called through their symbols, held for the life of the process: a kernel's machine code
#: calls into its job's, which Numba frees with the library object that holds it
_HELD: set[Any] = set()


def job_symbol(module: str, name: str, args: tuple[Any, ...]) -> str:
    """The symbol a kernel calls job ``module.name`` compiled for argument types ``args`` by: the same in every
    process (the types' names, which Numba makes unique per type)."""
    digest = hashlib.sha256(repr((module, name, tuple(str(t) for t in args))).encode()).hexdigest()[:20]
    return f"layerlab_job_{name.strip('_')}_{digest}"


def publish_job(module: str, name: str, args: tuple[Any, ...]) -> None:
    """Compile (or load from the cache) job ``module.name`` for ``args`` and map its symbol (:func:`job_symbol`) to
    its compiled code in this process."""
    job = getattr(importlib.import_module(module), name)
    job.compile(args)
    cres = job.overloads[args]
    _HELD.add(cres.library)
    ll.add_symbol(job_symbol(module, name, args), cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))


class _PublishJob:
    """A picklable ``reload_init`` entry: :func:`publish_job` of one job and signature (Numba keeps them in a set, so
    equal entries compare and hash equal; its cache stores them with the kernel, by reference to this class)."""

    __slots__ = ("module", "name", "args")

    def __init__(self, module: str, name: str, args: tuple[Any, ...]) -> None:
        self.module, self.name, self.args = module, name, args

    def __call__(self) -> None:
        publish_job(self.module, self.name, self.args)

    def _key(self) -> tuple[Any, ...]:
        return self.module, self.name, self.args

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _PublishJob) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __reduce__(self) -> tuple[Any, ...]:
        return _PublishJob, self._key()


def job_caller(job: Any) -> Any:
    """A compiled function ``call(args)`` that calls the compiled job ``job`` (an ``@njit`` function of a module) on
    the tuple ``args`` through its own symbol: ``call((a, b, c))`` computes ``job(a, b, c)`` (see the module's
    documentation). Use it where the call's cost is small beside the job's work."""
    module, name = job.py_func.__module__, job.py_func.__name__
    if getattr(importlib.import_module(module), name, None) is not job:  # another process finds the job by its name
        raise ValueError(f"{module}.{name}: a job called by symbol must be a compiled function defined at the top "
                         "level of its module")

    @intrinsic
    def call(typingctx: Any, args: Any) -> Any:  # pragma: no cover - compiled
        if not isinstance(args, types.BaseTuple):
            raise errors.TypingError(f"{name}'s caller takes its arguments as one tuple, not {args}")
        argtys = tuple(types.unliteral(t) for t in args.types)
        job.compile(argtys)  # compiled (or loaded from the cache) for these types
        restype = job.overloads[argtys].signature.return_type

        def codegen(context: Any, builder: Any, signature: Any, llargs: Any) -> Any:
            publish_job(module, name, argtys)
            vals = [context.cast(builder, builder.extract_value(llargs[0], i), args.types[i], t)
                    for i, t in enumerate(argtys)]
            fnty = context.call_conv.get_function_type(restype, argtys)
            fn = cgutils.get_or_insert_function(builder.module, fnty, job_symbol(module, name, argtys))
            status, res = context.call_conv.call_function(builder, fn, restype, argtys, vals)
            with builder.if_then(status.is_error, likely=False):
                context.call_conv.return_status_propagate(builder, status)
            context.active_code_library._reload_init.add(_PublishJob(module, name, argtys))
            return res

        return restype(args), codegen

    call.__name__ = call.__qualname__ = f"call_{name}"
    return call
