"""The CUDA source of a custom layer variant as it is compiled, and compile logs in the user's terms. Pure
text work (no CuPy): the CuPy backend's ``engine.backends.cuda.custom`` compiles what ``kernel_source`` gives."""
from __future__ import annotations

import re

from engine.tensor import Precision, TensorFormat

_LOG_LINE = re.compile(r"^(?P<file>[^\n(]*)\((?P<line>\d+)\): (?P<kind>error|warning|catastrophic error)[^:]*: (?P<msg>.*)$",
                       re.M)


def source_file_name(layer: str, fmt: TensorFormat) -> str:
    return f"{layer}_{fmt.precision.value}_{fmt.layout.value}.cu"


def kernel_source(layer: str, fmt: TensorFormat, code: str) -> str:
    """The user's code behind a short prelude (``cuda_fp16.h`` for fp16 formats) and a ``#line`` directive,
    so the compiler's line numbers are those of the user's code."""
    prelude = "#include <cuda_fp16.h>\n" if fmt.precision is Precision.FP16 else ""
    return f'{prelude}#line 1 "{source_file_name(layer, fmt)}"\n{code}'


def compile_message(layer: str, fmt: TensorFormat, code: str, log: str) -> str:
    """A compile failure as the user should read it: each error with its line of the user's code."""
    lines = code.splitlines()
    name = source_file_name(layer, fmt)
    found = []
    for m in _LOG_LINE.finditer(log):
        if m.group("kind") == "warning" or (m.group("file") and not m.group("file").endswith(name)):
            continue
        n = int(m.group("line"))
        text = lines[n - 1].strip() if 1 <= n <= len(lines) else ""
        found.append(f"line {n}: {m.group('msg').strip()}" + (f"\n    {n} | {text}" if text else ""))
    if not found:
        tail = "\n".join(log.strip().splitlines()[-6:])
        found.append(tail or "the compiler gave no reason")
    return f"custom layer {layer}: the CUDA kernel for {fmt} does not compile:\n" + "\n".join(found)
