"""The NumPy backend: always available, runs on the CPU.

fp16 tensors are stored as float16; layers compute in float32 and round their output to float16
(NumPy has no fast float16 arithmetic), so fp16 results match a GPU's fp16-storage/fp32-accumulate
path within fp16 rounding."""
from __future__ import annotations

import platform

import numpy as np

from engine.backends.base import Backend


class NumpyBackend(Backend):
    name = "numpy"
    xp = np

    @property
    def device_name(self) -> str:
        return f"CPU ({platform.processor() or platform.machine()})"
