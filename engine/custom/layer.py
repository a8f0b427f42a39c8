"""The layer that runs a custom layer definition: the shape script gives its output size; ``forward`` runs
the CUDA kernel of the network's format on the CuPy backend (compiled lazily by
``engine.backends.cuda.custom``), else the Python code (on NumPy, or on CuPy where no kernel exists).
Code runs only with the user's consent (``engine.custom.consent``); building the layer, type checking and
shape inference never run or compile it."""
from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any, ClassVar

from engine.custom.consent import CONSENT
from engine.custom.definition import PYTHON_SIGNATURE, CustomLayerDef, parse_definition, python_problem
from engine.custom.errors import CustomCodeError
from engine.custom.script import Node, ScriptError, Values, parse_shape, shape_of
from engine.errors import LayerLabError, ParameterError
from engine.layer import Layer
from engine.limits import MAX_ECHO, cut
from engine.tensor import Dims


class CustomLayer(Layer):
    """Base of the classes ``layer_class`` makes, one per definition."""

    definition: ClassVar[CustomLayerDef]
    #: the user's code computes the layer alone: its activation runs as a separate step after it
    fused_activations: ClassVar[frozenset[str]] = frozenset()

    def validate(self) -> None:
        """A definition that cannot run anywhere (shape script that does not parse, no implementation, Python code
        with a syntax error) is reported on every instance by type checking. Nothing is run or compiled."""
        problems = static_problems(self.definition)
        if problems:
            raise ParameterError(f"{self.desc.name} {self.name}: {problems[0]}")

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        try:
            return shape_of(_shape_nodes(self.definition.shape), Values(inputs, self.p))
        except ScriptError as exc:
            raise self.shape_error(f"shape script: {exc}") from None

    def forward(self, inputs: list[Any], out: Any) -> None:
        defn = self.definition
        CONSENT.require(defn)
        variant = defn.cuda_for(self.fmt) if self.backend.name == "cupy" else None
        if variant is not None and variant.code.strip():
            from engine.backends.cuda.custom import launch  # noqa: PLC0415 - CuPy only here

            assert self.out_dims is not None
            launch(defn, variant, inputs, out, Values(self.input_dims, self.p, self.out_dims))
            return
        if not defn.python.strip():
            where = "the CPU" if self.backend.name != "cupy" else f"the GPU in {self.fmt}"
            raise LayerLabError(f"custom layer {defn.name} ({self.name}) has no implementation for {where}: "
                                f"{defn.runs_in_text()}")
        fn = python_function(defn.name, defn.python)
        arrays = [self.nchw(x) if x is not None else None for x in inputs]
        try:
            y = fn(self.xp, arrays, dict(self.p))
        except (Exception, SystemExit) as exc:  # the user's code: its error, with the line, never a crash or an exit
            raise CustomCodeError(runtime_message(defn, exc)) from None
        shape = tuple(getattr(y, "shape", ()))
        if shape != tuple(self.out_dims or ()):
            raise CustomCodeError(f"custom layer {defn.name} ({self.name}): forward returned shape {shape}, the shape "
                                  f"script gives {tuple(self.out_dims or ())} (N, C, H, W)")
        self.store(out, y)

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        from engine.custom.exports import onnx_node  # noqa: PLC0415 - the exporters import the network

        return onnx_node(self.definition, g, inputs)

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        from engine.custom.exports import torch_module  # noqa: PLC0415 - the exporters import the network

        return torch_module(self, self.definition, t, inputs)

    onnx_support: ClassVar[str] = "partial: a node of the layerlab.custom domain (a placeholder to implement)"
    torch_support: ClassVar[str] = "partial: the Python code run through NumPy, or a stub"


@functools.lru_cache(maxsize=256)
def static_problems(defn: CustomLayerDef) -> list[str]:
    """The definition's problems that stop it everywhere (CUDA launch-line problems stop only its GPU variant, at
    run time, and the dialog shows them)."""
    return [m for f, m in defn.problems() if f in ("description", "shape", "code", "python")]


@functools.lru_cache(maxsize=256)
def _shape_nodes(text: str) -> list[Node]:
    return parse_shape(text)


@functools.lru_cache(maxsize=256)
def layer_class(text: str) -> type[CustomLayer]:
    """The layer class of a definition's XML text (memoized: one class per definition content). Raises
    DefinitionError for a malformed definition. Nothing of its code is run or compiled here."""
    defn = parse_definition(text)
    desc = defn.descriptor()
    return type(f"Custom_{defn.name}", (CustomLayer,), {"desc": desc, "definition": defn, "__doc__": desc.summary})


def code_file(layer: str) -> str:
    """The file name the Python code of a custom layer runs under (tracebacks name it)."""
    return f"<custom layer {layer}: python>"


@functools.lru_cache(maxsize=64)
def python_function(layer: str, code: str) -> Callable[..., Any]:
    """The ``forward`` function of a custom layer's Python code. Runs the code: call it only with consent."""
    problem = python_problem(code)
    if problem:
        raise CustomCodeError(f"custom layer {layer}: {problem}")
    namespace: dict[str, Any] = {"__name__": f"custom_layer_{layer}"}
    try:
        exec(compile(code, code_file(layer), "exec"), namespace)  # noqa: S102 - the user's own code, with consent
    except (Exception, SystemExit) as exc:
        raise CustomCodeError(runtime_message_for(layer, code, exc, "defining forward")) from None
    fn = namespace.get("forward")
    if not callable(fn):
        raise CustomCodeError(f"custom layer {layer}: the Python code must define {PYTHON_SIGNATURE}")
    return fn


def runtime_message(defn: CustomLayerDef, exc: BaseException) -> str:
    return runtime_message_for(defn.name, defn.python, exc, "running forward")


def runtime_message_for(layer: str, code: str, exc: BaseException, doing: str) -> str:
    """An exception of the user's Python code, with the line of their code where it happened."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == code_file(layer)]
    lines = code.splitlines()
    where = ""
    if frames:
        n = frames[-1].lineno or 0
        text = lines[n - 1].strip() if 1 <= n <= len(lines) else ""
        where = f" at line {n}" + (f" ({text})" if text else "")
    text = str(exc) if len(str(exc)) <= MAX_ECHO * 4 else cut(str(exc), MAX_ECHO * 4)
    return f"custom layer {layer}: the Python code failed{where} while {doing}: {type(exc).__name__}: {text}"
