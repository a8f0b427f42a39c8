"""LayerLab's inference library. Qt-free: usable from scripts, the CLI, tests and the GPU machine."""
from __future__ import annotations

from engine.backends import get_backend
from engine.errors import LayerLabError
from engine.model import LayerSpec, Model
from engine.modelfile import load as load_model
from engine.modelfile import save as save_model
from engine.network import Network
from engine.plugins import default_registry, load_plugins
from engine.tensor import Dims, TensorFormat

__version__ = "0.1.0"

__all__ = ["Dims", "LayerLabError", "LayerSpec", "Model", "Network", "TensorFormat", "default_registry",
           "get_backend", "load_model", "load_plugins", "save_model"]
