"""PyTorch export: a Python module with one ``torch.nn.Module`` subclass (named after the network, in
CamelCase) and its weights as a ``.npz`` file (written with NumPy: exporting needs no torch).

The code is meant to be read and edited: one attribute per layer, created in ``__init__`` with its
parameters spelt out, and a ``forward`` that computes the layers in execution order, one line each,
named after the layers. Layers describe their code themselves (``Layer.to_torch``,
``Activation.torch_expr``); this module assembles the file.

The weights file maps the module's ``state_dict`` keys (``conv1.weight``...) to arrays; the generated
``load_weights`` loads it into the module's parameters and buffers. Layers without a PyTorch
equivalent make the export fail with a message listing each, or, with ``stubs``, get a stub class with
a TODO that raises until the user writes its ``forward``."""
from __future__ import annotations

import keyword
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.atomic import atomic_write, atomic_write_text, check_output_folder, make_folder, refuse_overwrite
from engine.export.codegen import camel_case, py_literal, py_text
from engine.export.codegen import plain_value as _plain
from engine.export.common import (
    ExportError,
    ExportResult,
    LayerWriter,
    Unsupported,
    build_network,
    reason_of,
    unsupported_message,
)
from engine.layer import Layer
from engine.model import Model
from engine.network import Network
from engine.registry import Registry
from engine.tensor import Layout, Precision, TensorFormat
from engine.weights import WeightsSource

FP16_NCHW = TensorFormat(Precision.FP16, Layout.NCHW)

#: attribute names a layer may not take on an nn.Module (its methods and internals); such layers get
#: a ``layer_`` prefix, as do Python keywords and names of the generated module's globals.
_RESERVED = frozenset("""
T_destination add_module apply bfloat16 buffers call_super_init children compile cpu cuda double dump_patches eval
extra_repr float forward get_buffer get_extra_state get_parameter get_submodule half ipu load_state_dict
load_weights from_weights modules mtia named_buffers named_children named_modules named_parameters parameters
register_backward_hook register_buffer register_forward_hook register_forward_pre_hook register_full_backward_hook
register_full_backward_pre_hook register_load_state_dict_post_hook register_module register_parameter
register_state_dict_pre_hook requires_grad_ set_extra_state share_memory state_dict to to_empty train training
type xpu zero_grad self torch nn F np Path WEIGHTS super
""".split())


@dataclass(frozen=True)
class TorchOptions:
    """``stubs``: write a stub class with a TODO for each layer type without a PyTorch equivalent
    (instead of failing)."""

    stubs: bool = False


class TorchModuleWriter(LayerWriter):
    """The module being written, as a layer's ``to_torch`` sees it.

    ``layer`` is the layer being exported. ``module(code, state)`` declares its attribute
    (``self.<name> = <code>``) and the arrays of its state_dict entries; ``params`` declares an
    ``nn.ParameterDict`` of arrays; ``weight`` reads a loaded weight; ``helper`` adds a module-level
    function once; ``activation`` applies the layer's activation (layers with ``exports_activation``);
    ``forward_input`` declares a forward argument (input layers)."""

    def __init__(self, net: Network, class_name: str, options: TorchOptions = TorchOptions()) -> None:
        super().__init__(net)
        self.class_name = class_name
        self.options = options
        self.init_lines: list[str] = []
        self.forward_lines: list[str] = []
        self.helpers: dict[str, str] = {}
        self.stub_classes: dict[str, str] = {}
        self.state: dict[str, np.ndarray] = {}
        self.forward_args: list[str] = []
        self._names: set[str] = set()
        self._py: dict[str, str] = {}
        self.fp32_attrs: list[str] = []
        self.uses_dtype = False

    def compute_dtype(self) -> str:
        """The name of ``forward``'s local holding the module's compute dtype (its first input's dtype:
        float32, or float16 after ``half()``), for conversions back from a layer pinned to fp32."""
        self.uses_dtype = True
        return "dtype"

    # ---- names ------------------------------------------------------------------------------------
    def py_name(self, layer: str) -> str:
        """The identifier used for a layer: its name, or ``layer_<name>`` where that is reserved."""
        if layer not in self._py:
            base = layer
            if keyword.iskeyword(base) or base in _RESERVED or base.startswith("_") or base in self.helpers:
                base = f"layer_{layer.lstrip('_')}"
            name, k = base, 2
            while name in self._names:
                name = f"{base}_{k}"
                k += 1
            self._names.add(name)
            self._py[layer] = name
        return self._py[layer]

    @property
    def attr(self) -> str:
        assert self.layer is not None
        return self.py_name(self.layer.name)

    # ---- what layers call -----------------------------------------------------------------------------
    def module(self, code: str, state: dict[str, np.ndarray] | None = None) -> str:
        """Declare ``self.<layer> = <code>``; ``state`` gives the arrays of its state_dict keys (relative
        to the attribute). Returns ``self.<layer>``."""
        self.init_lines.append(f"self.{self.attr} = {code}")
        for k, v in (state or {}).items():
            self.state[f"{self.attr}.{k}"] = np.ascontiguousarray(v, dtype=np.float32)
        return f"self.{self.attr}"

    def params(self, values: dict[str, np.ndarray], trainable: bool = True) -> str:
        """Declare ``self.<layer> = nn.ParameterDict(...)`` holding ``values`` (loaded from the weights
        file); ``trainable=False`` for fixed coefficients. Returns ``self.<layer>``; use it as
        ``f'{ref}["scale"]'``."""
        grad = "" if trainable else ", requires_grad=False"
        items = ", ".join(f"{k!r}: nn.Parameter(torch.empty{py_literal(tuple(v.shape))}{grad})"
                          for k, v in values.items())
        return self.module(f"nn.ParameterDict({{{items}}})", values)

    def weight(self, name: str) -> np.ndarray:
        """Host float32 copy of a loaded weight of the current layer."""
        assert self.layer is not None
        return np.asarray(self.net.backend.to_host(self.layer.weights[name]), dtype=np.float32)

    def no_weight_inputs(self, inputs: list[str | None]) -> None:
        """Raise ``export_unsupported`` when a secondary input replaces one of the layer's weights."""
        layer = self.layer
        assert layer is not None
        for w in layer.desc.weights:
            idx = layer.weight_input(w)
            if idx is not None and idx < len(inputs) and inputs[idx] is not None:
                raise layer.export_unsupported(f"the {w} come from input {idx}; PyTorch export takes weights "
                                               "from the weights file only")

    def helper(self, name: str, code: str) -> str:
        """Add the module-level function ``name`` (its full source in ``code``) once; returns ``name``."""
        self.helpers.setdefault(name, code.strip("\n"))
        return name

    def line(self, code: str) -> None:
        """Add a line to ``forward`` before the current layer's own line (an intermediate result)."""
        self.forward_lines.append(code)

    def activation(self, expr: str) -> str:
        """The current layer's activation applied to ``expr`` (an expression the activation would
        evaluate twice is first assigned to the layer's variable)."""
        assert self.layer is not None
        act = self.layer.activation
        if act is None:
            return expr
        if act.impl.torch_expr("__x__", act.coefs).count("__x__") > 1 and not expr.isidentifier():
            self.line(f"{self.attr} = {expr}")
            expr = self.attr
        return act.impl.torch_expr(expr, act.coefs)

    def forward_input(self) -> str:
        """Declare the current (input) layer as an argument of ``forward``; returns its name."""
        self.forward_args.append(self.attr)
        return self.attr

    # ---- what the exporter calls ----------------------------------------------------------------------
    def stub(self, inputs: list[str | None]) -> str:
        """A stub module for the current layer: parameters as arguments, weights as parameters, a TODO."""
        layer = self.layer
        assert layer is not None
        cls = f"{camel_case(layer.desc.name)}Stub"
        if cls not in self.stub_classes:
            self.stub_classes[cls] = _STUB.format(cls=cls, type=layer.desc.name, summary=py_text(layer.desc.summary))
        args = ", ".join(f"{p.name}={py_literal(_plain(layer.p[p.name]))}" for p in layer.desc.params
                         if p.name.isidentifier() and not keyword.iskeyword(p.name))
        weights = {w: self.weight(w) for w in sorted(layer.weights)}
        shapes = ", ".join(f"{k!r}: {py_literal(tuple(v.shape))}" for k, v in weights.items())
        sep = ", " if args else ""
        ref = self.module(f"{cls}({args}{sep}weight_shapes={{{shapes}}})",
                          {f"weights.{k}": v for k, v in weights.items()})
        return f"{ref}({', '.join(i for i in inputs if i is not None)})"

    def activation_stub(self, expr: str) -> str:
        assert self.layer is not None and self.layer.activation is not None
        act = self.layer.activation
        name = self.helper(f"todo_{act.name}", _ACT_STUB.format(name=act.name, coefs=", ".join(act.coefs) or "none"))
        coefs = ", ".join(f"{k}={py_literal(float(v))}" for k, v in act.coefs.items())
        return f"{name}({expr}{', ' if coefs else ''}{coefs})"

    def source(self, net_name: str, version: str, module_name: str, weights_file: str, outputs: list[str]) -> str:
        """The complete module source."""
        ret = self._py[outputs[0]] if len(outputs) == 1 else "(" + ", ".join(self._py[o] for o in outputs) + ",)"
        args = ", ".join(f"{a}: torch.Tensor" for a in self.forward_args)
        rtype = "torch.Tensor" if len(outputs) == 1 else "tuple[torch.Tensor, ...]"
        init = "\n".join(f"        {line}" if line else "" for line in self.init_lines)
        lines = list(self.forward_lines)
        if self.uses_dtype:
            first = self.forward_args[0] if self.forward_args else None
            lines.insert(0, f"dtype = {first + '.dtype' if first else 'torch.get_default_dtype()'}  "
                            "# the module's compute dtype: float16 after half()")
        fwd = "\n".join(f"        {line}" for line in lines)
        blocks = "".join(f"\n\n{code}\n" for code in [*self.helpers.values(), *self.stub_classes.values()])
        inputs_doc = ", ".join(f"{a} ({self.net.dims(n)})" for n, a in self._inputs())
        outputs_doc = ", ".join(f"{self._py[o]} ({self.net.dims(o)})" for o in outputs)
        return _MODULE.format(
            name=py_text(net_name), version=py_text(version), cls=self.class_name, module=module_name, weights=weights_file,
            blocks=blocks, init=init, forward=fwd, args=args, ret=ret, rtype=rtype, inputs_doc=inputs_doc,
            outputs_doc=outputs_doc, math="import math\n" if "math." in blocks else "",
            pinned=_PINNED.format(layers=tuple(self.fp32_attrs), cls=self.class_name) if self.fp32_attrs else "",
        )

    def _inputs(self) -> list[tuple[str, str]]:
        return [(n, self._py[n]) for n in self.net.input_names if n in self._py]


_STUB = '''class {cls}(nn.Module):
    """TODO: LayerLab layer type {type!r} has no PyTorch equivalent yet: {summary}

    The layer's parameters arrive as keyword arguments; its weights (if any) are in ``self.weights``.
    Write ``forward`` to compute what LayerLab computes (see its documentation in the designer)."""

    def __init__(self, weight_shapes: dict[str, tuple[int, ...]] | None = None, **params) -> None:
        super().__init__()
        self.params = params
        self.weights = nn.ParameterDict({{k: nn.Parameter(torch.empty(s)) for k, s in (weight_shapes or {{}}).items()}})

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("TODO: implement the LayerLab layer {type} ({cls} in " + __file__ + ")")'''

_ACT_STUB = '''def todo_{name}(x: torch.Tensor, **coefs: float) -> torch.Tensor:
    """TODO: LayerLab activation {name!r} (coefficients: {coefs}) has no PyTorch equivalent yet."""
    raise NotImplementedError("TODO: implement the LayerLab activation {name} (todo_{name} in " + __file__ + ")")'''

_MODULE = '''"""PyTorch module of the LayerLab network '{name}' (version {version}), generated by LayerLab.

    from {module} import {cls}
    model = {cls}.from_weights()  # the weights of {weights}, next to this file
    y = model(x)  # float32 tensor(s) N x C x H x W

Inputs: {inputs_doc}. Outputs: {outputs_doc}. (Sizes at the exported input dimensions.)
The module starts in eval() mode: batch normalization uses its stored statistics and dropout is off,
as in LayerLab. Call .train() to train it."""
from __future__ import annotations

{math}from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

WEIGHTS = Path(__file__).with_name({weights!r})
{blocks}

class {cls}(nn.Module):
    """The network '{name}': one attribute per layer, ``forward`` in execution order."""

    def __init__(self) -> None:
        super().__init__()
{init}
        self.eval()

    def forward(self, {args}) -> {rtype}:
{forward}
        return {ret}

    def load_weights(self, path: str | Path = WEIGHTS) -> {cls}:
        """Load the weights file (state_dict keys -> arrays) into the parameters and buffers."""
        with np.load(path) as data:
            state = {{k: torch.from_numpy(data[k]) for k in data.files}}
        missing, unexpected = self.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith("num_batches_tracked")]
        if missing or unexpected:
            raise KeyError(f"{{path}}: missing weights {{missing}}, unexpected weights {{unexpected}}")
        return self

    @classmethod
    def from_weights(cls, path: str | Path = WEIGHTS) -> {cls}:
        """A new module with the weights of ``path`` (default: the exported weights file)."""
        return cls().load_weights(path)
{pinned}'''

_PINNED = '''
    #: layers running in fp32 in LayerLab's fp16 networks (pinned to fp32): ``forward`` gives them float32 inputs
    #: (``.float()``) and converts back to the module's dtype where LayerLab converts back to fp16, so they compute in
    #: float32 whatever the module's dtype; ``half()`` keeps their weights in float32 (use ``half()``, not
    #: ``to(torch.float16)``, to get that)
    FP32_LAYERS = {layers!r}

    def half(self) -> {cls}:
        """fp16 weights, except those of the layers pinned to fp32 (``FP32_LAYERS``)."""
        super().half()
        for name in self.FP32_LAYERS:
            module = getattr(self, name, None)
            if isinstance(module, nn.Module):
                module.float()
        return self
'''


def build_torch(net: Network, class_name: str, module_name: str, weights_file: str,
                options: TorchOptions = TorchOptions(),
                fp32_layers: AbstractSet[str] = frozenset()) -> tuple[str, dict[str, np.ndarray], list[Unsupported]]:
    """(module source, weights arrays by state_dict key, stubbed layers) of a planned network. ``fp32_layers``:
    the layers that run in fp32 in the network (built in fp16: its format conversions around them become
    ``.float()`` and ``.to(dtype)``); ``half()`` keeps their weights in float32. An input layer staged in fp32 (read
    only by such layers) is ``.float()`` at once.

    Raises ExportError listing every layer and activation without a PyTorch equivalent unless stubs are on."""
    t = TorchModuleWriter(net, class_name, options)
    var: dict[str, str] = {}
    missing: list[Unsupported] = []
    for name, layer, ins in t.each_layer(var):
        mark = len(t.init_lines)
        try:
            expr = layer.to_torch(t, ins)
        except NotImplementedError as exc:
            missing.append(Unsupported(name, layer.desc.name, reason_of(exc, name, layer.desc.name)))
            del t.init_lines[mark:]
            expr = t.stub(ins)
        act = layer.activation
        if act is not None and not layer.exports_activation:
            try:
                expr = t.activation(expr)
            except NotImplementedError as exc:
                missing.append(Unsupported(name, act.name, str(exc) or "no PyTorch equivalent", activation=True))
                expr = t.activation_stub(expr)
        if name in fp32_layers and name in net.input_names:
            expr = f"{expr}.float()"
        elif name in fp32_layers and len(t.init_lines) > mark:
            t.fp32_attrs.append(t.py_name(name))
        v = t.py_name(name)
        if len(t.init_lines) > mark:
            t.init_lines.insert(mark, f"# {name}: {_describe(net, layer)}")
        if expr != v:
            t.forward_lines.append(f"{v} = {expr}")
        var[name] = v
    if missing and not options.stubs:
        raise ExportError(unsupported_message("PyTorch", missing, "Use stubs (--stubs) to write stub classes with a "
                                              "TODO for them, or replace them."))
    version = getattr(net.model, "version", "")
    return t.source(net.model.name, version, module_name, weights_file, net.output_names), t.state, missing


def _describe(net: Network, layer: Layer) -> str:
    ins = [d for d in layer.input_dims if d is not None]
    shape = f"{' + '.join(str(d) for d in ins)} -> {net.dims(layer.name)}" if ins else str(net.dims(layer.name))
    act = f", activation {layer.activation.name}" if layer.activation is not None else ""
    return f"{layer.desc.name}, {shape}{act}"


def export_torch(model: Model, registry: Registry, folder: str | Path, options: TorchOptions = TorchOptions(),
                 weights: WeightsSource | None = None, seed: int = 0, fusing: str | list[Any] = "on") -> ExportResult:
    """Write ``<folder>/<network name>.py`` and ``<folder>/<network name>_weights.npz``."""
    check_output_folder(folder, "PyTorch export folder")
    # built in fp16, so that the layers pinned to fp32 (engine.formats) run in fp32 behind their conversions,
    # written as .float() and .to(dtype) (no-ops in a float32 module)
    net = build_network(model, registry, weights, seed, fusing, FP16_NCHW)
    stem = model.name if model.name.isidentifier() and not keyword.iskeyword(model.name) else "network"
    cls = camel_case(model.name)
    out = Path(folder)
    weights_file = f"{stem}_weights.npz"
    conversions = {c[0] for c in net.conversions}
    pins = {n for n, f in net.pinned.items() if f.precision is Precision.FP32 and n not in conversions}
    source, state, missing = build_torch(net, cls, stem, weights_file, options, pins)
    make_folder(out, "PyTorch export folder")
    module_path = out / f"{stem}.py"
    refuse_overwrite(module_path, [model.path])
    atomic_write_text(module_path, source, "PyTorch module")
    atomic_write(out / weights_file, lambda tmp: np.savez(tmp, **state), "weights file")
    warnings = [f"stub written for {u}" for u in missing]
    n_values = sum(int(v.size) for v in state.values())
    summary = f"wrote {module_path} (class {cls}, {len(net.order)} layers) and {out / weights_file} ({n_values} values)"
    return ExportResult("torch", module_path, [module_path, out / weights_file], warnings, summary)
