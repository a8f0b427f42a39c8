"""The fused epilogues of the depthwise, pooling and channel-scale kernels (``kernels/epilogue.cuh``): the number
each activation has there and the two coefficients it reads."""
from __future__ import annotations

#: ``ActivationDesc.epilogue`` -> its number in ``layerlab_act`` (None: no activation)
CODES: dict[str | None, int] = {None: 0, "relu": 1, "leaky_relu": 2, "sigmoid": 3, "tanh": 4, "clamp": 5,
                                "hardswish": 6, "hard_sigmoid": 7, "silu": 8}

#: the coefficients ``layerlab_act`` reads as ``a`` and ``b`` for each epilogue, with their defaults
_COEFS: dict[str, tuple[tuple[str, float], tuple[str, float]]] = {
    "leaky_relu": (("alpha", 0.01), ("", 0.0)),
    "clamp": (("min", 0.0), ("max", 6.0)),
    "hard_sigmoid": (("alpha", 0.2), ("beta", 0.5)),
}


def code(epilogue: str | None) -> int | None:
    """The kernel's number for ``epilogue``, or None when the kernels do not compute it."""
    return CODES.get(epilogue)


def coefficients(epilogue: str | None, coefs: dict[str, float]) -> tuple[float, float]:
    """``(a, b)``: the coefficients of ``epilogue`` as ``layerlab_act`` reads them."""
    (na, da), (nb, db) = _COEFS.get(epilogue or "", (("", 0.0), ("", 0.0)))
    return float(coefs.get(na, da)), float(coefs.get(nb, db))
