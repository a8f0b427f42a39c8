"""leaky_sigmoid: sigmoid(x) + alpha * x."""
from __future__ import annotations

from ._leaky import LeakyActivation, leaky_desc
from .sigmoid import sigmoid


class LeakySigmoid(LeakyActivation):
    saturating = staticmethod(sigmoid)
    onnx_op = "Sigmoid"
    torch_fn = "torch.sigmoid"
    desc = leaky_desc("sigmoid", "Sigmoid", "the sigmoid", definition=", where <code>sigmoid(x) = 1 / (1 + exp(-x))</code>")


ACTIVATION = LeakySigmoid
