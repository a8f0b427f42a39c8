"""What the activations that are one ONNX operator share: the coefficients passed, in descriptor order, to the plain
function that computes the activation and, as attributes of the same name, to the ONNX operator and (unless a class
writes its own expression) as keyword arguments to the PyTorch function."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from engine.layer import Activation


class OperatorActivation(Activation):
    """An activation equal to the ONNX operator ``onnx_op``, whose attributes are the activation's coefficients, and
    computed by ``function(xp, x, *coefficients)`` (coefficients in the order of ``desc.coefficients``).

    Exported to PyTorch as ``torch_function(x, name=value, ...)`` with the coefficients as keyword arguments; a class
    whose PyTorch equivalent takes them otherwise overrides ``torch_expr``."""

    onnx_op: ClassVar[str]
    function: ClassVar[Callable[..., Any]]
    torch_function: ClassVar[str]
    onnx_support = "yes"
    torch_support = "yes"

    @classmethod
    def apply(cls, xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        return cls.function(xp, x, *(coefs[c.name] for c in cls.desc.coefficients))

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        return g.node(cls.onnx_op, [x], "act", **{c.name: float(coefs[c.name]) for c in cls.desc.coefficients})

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        args = "".join(f", {c.name}={float(coefs[c.name])!r}" for c in cls.desc.coefficients)
        return f"{cls.torch_function}({x}{args})"
