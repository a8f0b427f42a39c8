"""leaky_tanh: tanh(x) + alpha * x."""
from __future__ import annotations

from ._leaky import LeakyActivation, leaky_desc
from .tanh import tanh


class LeakyTanh(LeakyActivation):
    saturating = staticmethod(tanh)
    onnx_op = "Tanh"
    torch_fn = "torch.tanh"
    desc = leaky_desc("tanh", "Tanh", "tanh")


ACTIVATION = LeakyTanh
