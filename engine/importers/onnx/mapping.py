"""The operator mapping table: ONNX op type -> one small function turning a node into LayerLab layers
(like the onnx reference evaluator's one operator per file). The ``ops_*`` modules register their
functions with ``maps``; the documentation's support table is generated from the same entries."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from engine.importers.onnx.context import Context

OP_MODULES = ("ops_conv", "ops_pool", "ops_norm", "ops_activation", "ops_math", "ops_tensor", "ops_resize",
              "ops_rank", "ops_attention", "ops_unary", "ops_reduce", "ops_elementwise",
              "ops_const")  # ops_rank after those it wraps (the N x C x H x W mappings); ops_const last: it wraps all


@dataclass(frozen=True)
class OpMapping:
    """How one ONNX operator is imported: ``to`` the LayerLab layer or activation it becomes, ``notes``
    the attributes and shapes handled (and what is refused)."""

    op: str
    to: str
    notes: str
    fn: Callable[[Context], None]


OPS: dict[str, OpMapping] = {}


def maps(op: str, to: str, notes: str = "") -> Callable[[Callable[[Context], None]], Callable[[Context], None]]:
    """Register the decorated function as the mapping of ONNX operator ``op``."""

    def register(fn: Callable[[Context], None]) -> Callable[[Context], None]:
        OPS[op] = OpMapping(op, to, notes, fn)
        return fn
    return register


def operator_table() -> dict[str, OpMapping]:
    """Every mapped operator (the ``ops_*`` modules imported on first use), sorted by op type."""
    for m in OP_MODULES:
        importlib.import_module(f"engine.importers.onnx.{m}")
    return dict(sorted(OPS.items()))
