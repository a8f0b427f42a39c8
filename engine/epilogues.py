"""The fused epilogues: the cheap pointwise activations a kernel may apply to its result before writing it, as one
table (name -> code, the activation coefficients it reads, its CUDA C expression). The GPU kernels include the
header generated from this table (``kernels/epilogue.cuh``, :func:`epilogue_source`); the CPU kernels use the same
codes (``engine.backends.cpu.epilogue``); an activation names its epilogue (``ActivationDesc.epilogue``), so kernels
fuse it without knowing the activation.

Regenerate the header after editing the table: ``python -m engine.epilogues --write``."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Epilogue:
    """One fused epilogue. ``expression`` is CUDA C on the float ``v`` (the value to activate) and the floats ``a``
    and ``b`` (the activation's coefficients named in ``coefficients``, in that order); NaN in gives NaN out, as in
    the unfused activations. ``formula`` says the same in words for the documentation."""

    name: str
    code: int
    formula: str
    expression: str
    coefficients: tuple[str, ...] = ()


#: every fused epilogue, by name; codes are stable (kernels and on-disk caches keep them) and 0 means none
EPILOGUE_TABLE: dict[str, Epilogue] = {e.name: e for e in (
    Epilogue("relu", 1, "max(x, 0)", "v < 0.f ? 0.f : v"),
    Epilogue("leaky_relu", 2, "x if x >= 0 else alpha * x", "v < 0.f ? v * a : v", ("alpha",)),
    Epilogue("sigmoid", 3, "1 / (1 + exp(-x))", "1.f / (1.f + expf(-v))"),
    Epilogue("tanh", 4, "tanh(x)", "tanhf(v)"),
    Epilogue("clamp", 5, "min(max(x, min), max)", "v < a ? a : (v > b ? b : v)", ("min", "max")),
    Epilogue("hardswish", 6, "x * min(max(x / 6 + 1/2, 0), 1)",
             "v * layerlab_unit(v * (1.f / 6.f) + 0.5f)"),
    Epilogue("hard_sigmoid", 7, "min(max(alpha * x + beta, 0), 1)", "layerlab_unit(v * a + b)", ("alpha", "beta")),
    Epilogue("silu", 8, "x / (1 + exp(-x))", "v / (1.f + expf(-v))"),
    Epilogue("gelu", 9, "x * Phi(x) = x * erfc(-x / sqrt(2)) / 2", "0.5f * v * erfcf(-0.70710678118654752f * v)"),
    Epilogue("gelu_tanh", 10, "x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2",
             "0.5f * v * (1.f + tanhf(0.79788456080286536f * (layerlab_clip10(v) + 0.044715f * layerlab_clip10(v)"
             " * layerlab_clip10(v) * layerlab_clip10(v))))"),
    Epilogue("elu", 11, "x if x > 0 else alpha * (exp(x) - 1)", "v > 0.f ? v : a * expm1f(v)", ("alpha",)),
    Epilogue("softplus", 12, "max(x, 0) + log(1 + exp(-|x|))", "layerlab_softplus(v)"),
    Epilogue("mish", 13, "x * tanh(softplus(x))", "v * tanhf(layerlab_softplus(v))"),
)}

#: helper functions the expressions use (NaN passes through each)
_HELPERS = """\
__device__ __forceinline__ float layerlab_unit(float g) { return g < 0.f ? 0.f : (g > 1.f ? 1.f : g); }
__device__ __forceinline__ float layerlab_clip10(float v) { return v < -10.f ? -10.f : (v > 10.f ? 10.f : v); }
__device__ __forceinline__ float layerlab_softplus(float v) { return fmaxf(v, 0.f) + log1pf(expf(-fabsf(v))); }
"""


def code(epilogue: str | None) -> int | None:
    """The kernels' number of ``epilogue`` (0 for None); None for an activation no kernel fuses (the kernel then
    declines the call)."""
    if epilogue is None:
        return 0
    entry = EPILOGUE_TABLE.get(epilogue)
    return None if entry is None else entry.code


def coefficients(epilogue: str | None, coefs: dict[str, float]) -> tuple[float, float]:
    """The values ``a`` and ``b`` the epilogue reads, from the activation's coefficients (0 where it reads none)."""
    if epilogue is None:
        return 0.0, 0.0
    values = [float(coefs[c]) for c in EPILOGUE_TABLE[epilogue].coefficients]
    values += [0.0] * (2 - len(values))
    return values[0], values[1]


def single_coefficient() -> frozenset[str]:
    """The epilogues reading at most one coefficient (``a``): those a kernel with a single ``alpha`` argument fuses."""
    return frozenset(e.name for e in EPILOGUE_TABLE.values() if len(e.coefficients) <= 1)


def epilogue_source() -> str:
    """CUDA C of ``layerlab_act(code, v, a, b)`` (the epilogue of number ``code`` of ``v``, in float32; 0: ``v``)
    and a ``LAYERLAB_ACT_<NAME>`` constant per epilogue: the text of ``kernels/epilogue.cuh``."""
    lines = ["// The fused epilogues (activations) every kernel applies: layerlab_act(code, v, a, b), NaN passing",
             "// through as in the unfused activations. Generated from engine/epilogues.py (python -m engine.epilogues",
             "// --write): edit the table there, not this file.",
             "#ifndef LAYERLAB_EPILOGUE_CUH", "#define LAYERLAB_EPILOGUE_CUH", _HELPERS.rstrip()]
    lines += [f"#define LAYERLAB_ACT_{e.name.upper()} {e.code}" for e in EPILOGUE_TABLE.values()]
    lines += ["__device__ __forceinline__ float layerlab_act(int code, float v, float a, float b) {",
              "    switch (code) {"]
    lines += [f"        case {e.code}: return {e.expression};  // {e.name}" for e in EPILOGUE_TABLE.values()]
    lines += ["        default: return v;", "    }", "}", "#endif", ""]
    return "\n".join(lines)


def header_path() -> Path:
    """Where the generated header lives: the CUDA kernel folder (package data of the CuPy backend)."""
    return Path(__file__).parent / "backends" / "cuda" / "kernels" / "epilogue.cuh"


def main(argv: list[str] | None = None) -> int:
    """``--write``: regenerate ``kernels/epilogue.cuh``; otherwise print it. ``--check``: exit 1 if it is stale."""
    parser = argparse.ArgumentParser(prog="python -m engine.epilogues", description=main.__doc__)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = epilogue_source()
    if args.check:
        return 0 if header_path().read_text(encoding="utf-8") == text else 1
    if args.write:
        header_path().write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
