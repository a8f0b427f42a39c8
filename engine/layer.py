"""Base classes for layers and activations. A plugin layer subclasses ``Layer``, sets ``desc`` and
implements ``output_dims`` and ``forward`` (and ``weight_shapes`` if it has weights)."""
from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np

from engine.descriptors import ActivationDesc, LayerDesc
from engine.errors import ParameterError, ShapeError
from engine.log import get_logger
from engine.tensor import Dims, Layout, TensorFormat, from_nchw_view, nchw_view

T = TypeVar("T")

#: how many times a layer was given a weights dict (``Layer.weights`` set), see :func:`weights_generation`
_weights_given = [0]


def weights_generation() -> int:
    """A count that changes whenever any layer is given a weights dict (``Layer.weights`` set, as ``set_weights``
    does): while it stays the same, every layer keeps its weight arrays (a replay of recorded kernel calls asks it
    once per run instead of each layer's arrays)."""
    return _weights_given[0]


class Activation:
    """An activation function. ``apply`` computes it on a logical array and returns the result.

    Implementations use ``xp`` (numpy or cupy) so one function serves every backend. ``elementwise``
    activations may be applied to tensors in any memory layout; others (softmax over channels) get a
    logical N, C, H, W view."""

    desc: ClassVar[ActivationDesc]
    elementwise: ClassVar[bool] = True

    @staticmethod
    def apply(xp: Any, x: Any, coefs: dict[str, float]) -> Any:
        raise NotImplementedError

    @classmethod
    def apply_inplace(cls, xp: Any, x: Any, coefs: dict[str, float]) -> None:
        """Apply to ``x`` in place (the generic activation path after a layer without a fused one)."""
        if x.dtype == np.float16 and xp is np:
            x[...] = cls.apply(xp, x.astype(np.float32), coefs)
        else:
            x[...] = cls.apply(xp, x, coefs)

    # ---- exporters (engine/export): what the support table and the exporters read ------------------
    #: ONNX / PyTorch export support: "yes", "partial: <limits>" or "no".
    onnx_support: ClassVar[str] = "no"
    torch_support: ClassVar[str] = "no"

    @classmethod
    def to_onnx(cls, g: Any, x: str, coefs: dict[str, float]) -> str:
        """Add ONNX nodes (through the ``engine.export.OnnxGraph`` ``g``) computing the activation of
        tensor ``x``; returns the output tensor name. Node suffixes start with ``act``."""
        raise NotImplementedError(f"activation {cls.desc.name} has no ONNX equivalent")

    @classmethod
    def torch_expr(cls, x: str, coefs: dict[str, float]) -> str:
        """A PyTorch expression computing the activation of the expression ``x`` (``torch``, ``F``
        = ``torch.nn.functional`` and ``nn`` are in scope)."""
        raise NotImplementedError(f"activation {cls.desc.name} has no PyTorch equivalent")


class BoundActivation:
    """An activation with its coefficient values, attached to one layer."""

    def __init__(self, impl: type[Activation], coefs: dict[str, float]) -> None:
        self.impl = impl
        self.name = impl.desc.name
        #: the fused epilogue a kernel may apply instead of this activation (None: it has none)
        self.epilogue = impl.desc.epilogue
        self.coefs = coefs

    def __call__(self, xp: Any, x: Any) -> Any:
        return self.impl.apply(xp, x, self.coefs)

    def apply_inplace(self, backend: Any, x: Any) -> None:
        """Apply to ``x`` (physical, elementwise activations) in place after a layer that did not fuse it: the
        backend's one-pass ``activation`` kernel where the activation has a fused epilogue and the backend serves the
        array, else the activation's own ``apply_inplace`` (a chain of array operations)."""
        if self.epilogue is not None:
            kernel = backend.kernel("activation")
            if kernel is not None and kernel(x, x, self.epilogue, self.coefs) is not None:
                return
        self.impl.apply_inplace(backend.xp, x, self.coefs)


#: ``forward`` methods whose offered replay (``Layer.offer_replay``), when they offer one, is all they did
REPLAYABLE_FORWARDS: set[Callable[..., None]] = set()


class Layer:
    """One layer of a built network.

    Lifecycle: constructed with typed parameters (``validate`` checks cross-parameter rules) ->
    ``output_dims`` for shape inference -> ``weight_shapes`` to load weights -> ``set_weights`` ->
    ``reshape`` whenever input sizes change -> ``forward`` on every inference where it is affected.

    ``forward`` receives arrays in the network's tensor format (``self.fmt``); helpers ``nchw`` and
    ``store`` let a layer be written once in logical NCHW order (views, no copies for layout)."""

    desc: ClassVar[LayerDesc]
    #: activations that ``forward`` applies itself (through ``activate``, ``activate_physical`` or
    #: ``activate_inplace``); the network applies the others after ``forward``. ``"*"`` (the default) means
    #: every activation; a layer whose ``forward`` never applies one sets ``frozenset()``.
    fused_activations: ClassVar[frozenset[str]] = frozenset({"*"})
    #: True when a fusing rule made this layer out of a chain of layers (set by the network): a layer that
    #: accepts more than the chain did must then refuse what the chain would have refused.
    fused = False
    #: why this layer cannot run (a placeholder of an imported operator); the type checker reports it
    not_runnable: ClassVar[str] = ""
    #: the precision conversions the network may fuse into this layer (``engine.format_conversion.fused_conversions``):
    #: ``"read"``: ``forward`` reads an input stored in the other precision (same layout) exactly, widening it to its
    #: compute dtype as it reads (``nchw``, ``physical``, ``weight``); ``"write"``: ``forward`` computes its result
    #: in its own precision and writes it once, activation included, into an output buffer of the other precision
    #: (``store``, ``store_physical``), so that write is the conversion's rounding and the only one.
    conversion_fusion: ClassVar[frozenset[str]] = frozenset()
    #: how the layer wants its rank-4 tensors held where the network computes channels-last
    #: (``engine.format_conversion.layer_formats``; only for layers without a format setting of their own):
    #: ``"image"`` channels last, the backend's layout (convolutions, pooling, and every layer that does not say);
    #: ``"logical"`` N x C x H x W in order, as a layer working along the last axis reads it (a transformer's
    #: token features: matrix products, layer normalization over the trailing axes, attention); ``"follow"`` either
    #: at no cost (element-wise, views, joins, slices): the layout of the layer it reads, else of its readers
    layout_role: ClassVar[str] = "image"

    @property
    def weights(self) -> dict[str, Any]:
        """The layer's weights by name (device arrays, logical shapes, compute dtype). A layer is given new weights
        as a new dict (``set_weights``), never by changing this one in place: runs that replay recorded kernel calls
        notice new weights by the dict being set (:func:`weights_generation`)."""
        return self._weights

    @weights.setter
    def weights(self, value: dict[str, Any]) -> None:
        self._weights = value
        _weights_given[0] += 1

    @classmethod
    def layout_for(cls, params: Mapping[str, Any]) -> str:
        """``layout_role`` for a layer of these (raw) parameters; a type whose role depends on them overrides it."""
        return cls.layout_role

    def __init__(self, name: str, params: dict[str, Any], activation: BoundActivation | None,
                 fmt: TensorFormat, backend: Any) -> None:
        self.name = name
        self.p = params
        self.activation = activation
        self.fmt = fmt
        self.backend = backend
        self.xp = backend.xp
        self.weights = {}
        self.input_dims: list[Dims | None] = []
        self.out_dims: Dims | None = None
        self.reshape_count = 0
        #: the network's ``tf32`` setting: fp32 convolutions may use TF32 tensor cores where the backend has them
        self.tf32 = False
        #: the prepared kernel call the latest forward offered (``offer_replay``), until the network asks for it
        self._replay: Callable[[], None] | None = None
        self.validate()

    # ---- helpers for implementations -------------------------------------------------------------
    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """The logger of this layer's module in LayerLab's tree (``engine.log``); records carry the layer's name
        (``record.layer``), so a warning logged while the network is built shows on the layer in the type check."""
        return logging.LoggerAdapter(get_logger(type(self).__module__), {"layer": self.name})

    @property
    def cdtype(self) -> np.dtype:
        """Compute dtype: float32, or float16 where the backend computes fp16 natively (GPU)."""
        if self.fmt.dtype == np.float16 and self.xp is not np:
            return np.dtype(np.float16)
        return np.dtype(np.float32)

    def param_error(self, param: str, message: str) -> ParameterError:
        return ParameterError(f"{self.desc.name} {self.name}: parameter {param}: {message}")

    def shape_error(self, message: str) -> ShapeError:
        return ShapeError(f"{self.desc.name} {self.name}: {message}")

    def nchw(self, x: Any) -> Any:
        """Input array seen in logical NCHW order, in the compute dtype."""
        v = nchw_view(x, self.fmt)
        return v if v.dtype == self.cdtype else v.astype(self.cdtype)

    def store(self, out: Any, y: Any) -> None:
        """Write a logical NCHW result into the output buffer (layout and dtype conversion included)."""
        nchw_view(out, self.fmt)[...] = y

    def store_view(self, out: Any, y: Any, x: Any) -> None:
        """``store`` for a result ``y`` that may be a view of the array ``x`` (an input seen permuted, sliced,
        reshaped): on the CPU, where it is, the copy into the output buffer is offered as the layer's replay
        (``offer_replay``), the same copy between the network's buffers on every run."""
        self.store(out, y)
        if self.xp is np and np.may_share_memory(y, x):
            self.offer_replay(functools.partial(np.copyto, nchw_view(out, self.fmt), y))

    @staticmethod
    def primary(inputs: list[T | None]) -> T:
        """Input 0, the primary input: connected in every built network (an unconnected mandatory input
        is refused when the network is built), so never None here."""
        x = inputs[0]
        assert x is not None, "the primary input (input 0) is not connected"
        return x

    @property
    def hw_axes(self) -> tuple[int, int]:
        """Axes of H and W in the arrays of this layer's tensor format."""
        return (1, 2) if self.fmt.layout is Layout.NHWC else (2, 3)

    @property
    def channel_axis(self) -> int:
        return 3 if self.fmt.layout is Layout.NHWC else 1

    def physical(self, x: Any) -> Any:
        """Input array in its own memory layout, in the compute dtype. Element order is the layout's,
        which keeps GPU memory accesses coalesced; use ``hw_axes``/``channel_axis`` to find the axes."""
        return x if x.dtype == self.cdtype else x.astype(self.cdtype)

    def activate_physical(self, y: Any) -> Any:
        """``activate`` for an array in this layer's memory layout."""
        if self.activation is None:
            return y
        if self.activation.impl.elementwise:
            return self.activation(self.xp, y)
        return from_nchw_view(self.activation(self.xp, nchw_view(y, self.fmt)), self.fmt)

    def activate_inplace(self, out: Any) -> None:
        """Apply the layer's activation to its output buffer (physical), in place where it can."""
        act = self.activation
        if act is None:
            return
        if act.impl.elementwise:
            act.apply_inplace(self.backend, out)
        else:
            out[...] = self.activate_physical(out)

    def store_physical(self, out: Any, y: Any) -> None:
        """Write a result already in this layer's memory layout into the output buffer."""
        out[...] = y

    def activate(self, y: Any) -> Any:
        """Apply the layer's activation (for layers that fuse it into their own computation)."""
        return self.activation(self.xp, y) if self.activation is not None else y

    def offer_replay(self, call: Callable[[], None] | None) -> None:
        """Offer ``call`` (a kernel's prepared call, ``Launched.replay``) as the whole of this forward for the buffers
        it was given, or withdraw an offer (None). A forward that does more than one kernel call offers None."""
        self._replay = call

    def replay_call(self) -> Callable[[], None] | None:
        """The one prepared kernel call that did this layer's whole latest forward for the buffers it was given,
        which the network may run again instead of ``forward`` while those buffers and the layer's weight arrays
        stay the same (``engine.replay.Replayer``); None when the forward did anything else. A forward offers its call
        through ``offer_replay``, and only a ``forward`` listed in ``REPLAYABLE_FORWARDS`` counts (a subclass
        with a forward of its own, doing more, does not inherit it). Asked once after each recorded forward: the
        offer is taken."""
        call, self._replay = self._replay, None
        return call if call is not None and type(self).forward in REPLAYABLE_FORWARDS else None

    @property
    def fuses_activation(self) -> bool:
        """True when ``forward`` applies the layer's activation itself (or there is none)."""
        if self.activation is None:
            return True
        return "*" in self.fused_activations or self.activation.name in self.fused_activations

    # ---- what a layer implements ------------------------------------------------------------------
    def validate(self) -> None:
        """Cross-parameter checks; raise ``self.param_error(...)``."""

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        """Output dimensions for these input dimensions (None = unconnected). Raise ``shape_error``."""
        raise NotImplementedError

    def weight_shapes(self, inputs: list[Dims | None]) -> dict[str, tuple[int, ...]]:
        """Logical shape of every weight this layer needs, for these input dimensions."""
        return {}

    def init_weight(self, weight: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Deterministic random value of a weight (uniform in +-1/sqrt(fan_in), like PyTorch)."""
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        bound = 1.0 / math.sqrt(max(fan_in, 1))
        return rng.uniform(-bound, bound, size=shape).astype(np.float32)

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Receive host float32 weights (validated shapes) and keep device copies."""
        self.weights = {k: self.backend.to_device(np.ascontiguousarray(v, dtype=self.cdtype))
                        for k, v in weights.items()}

    def weight_input(self, weight: str) -> int | None:
        """Index of the secondary input that replaces ``weight`` when connected."""
        found = self.__dict__.get("_weight_inputs")
        if found is None or found[0] is not self.desc:  # asked on every run of every layer: looked up once
            found = (self.desc, {inp.weight: i for i, inp in reversed(list(enumerate(self.desc.inputs)))})
            self.__dict__["_weight_inputs"] = found
        return found[1].get(weight)

    def weights_from_inputs(self, inputs: list[Any]) -> bool:
        """True when a connected secondary input provides one of the weights (they may change every run,
        so nothing derived from them may be cached)."""
        found = self.__dict__.get("_weight_input_slots")
        if found is None or found[0] is not self.desc:  # asked several times a run by every layer: found once
            slots = sorted({i for i in (self.weight_input(w) for w in self.desc.weights) if i is not None})
            found = (self.desc, slots)
            self.__dict__["_weight_input_slots"] = found
        n = len(inputs)
        for idx in found[1]:
            if idx >= n:
                return False
            if inputs[idx] is not None:
                return True
        return False

    def weight(self, weight: str, inputs: list[Any]) -> Any:
        """The weight's value: the connected secondary input if there is one, else the loaded weight."""
        idx = self.weight_input(weight)
        if idx is not None and idx < len(inputs) and inputs[idx] is not None:
            shape = self.weight_shapes(self.input_dims)[weight]
            return self.nchw(inputs[idx]).reshape(shape)
        return self.weights[weight]

    def weight_input_problem(self, weight: str, source: str, got: Dims, needed: tuple[int, ...]) -> str | None:
        """Message when a secondary input of dimensions ``got`` cannot provide ``weight`` of shape
        ``needed`` (None when it can). Layers may explain it in their own terms."""
        n_need = int(np.prod(needed))
        if got.elements == n_need:
            return None
        return (f"{weight} input {source} has {got.elements} values ({got}), "
                f"the layer needs shape {tuple(needed)} ({n_need} values)")

    def reshape(self, inputs: list[Dims | None], output: Dims) -> None:
        """Prepare for new input sizes (called by the network when they change)."""

    def flops(self, inputs: list[Dims | None], output: Dims) -> int:
        """Arithmetic operations of one forward pass (a multiply-add counts 2). Default: one per
        output value, plus the activation's."""
        return output.elements * (2 if self.activation is not None else 1)

    # ---- runtime options (analysis layers): live-editable without rebuilding ----------------------
    def runtime_options(self) -> list[dict[str, Any]]:
        """Live-editable options, each a JSON object: ``name``, ``text``, ``type`` (float, int, bool,
        enum, string), ``value``, and per type ``min``/``max``/``step`` or ``values``; extra keys allowed."""
        return []

    def set_runtime_option(self, name: str, value: Any) -> bool:
        """Validate and store an option (raise ``param_error`` with the reason when invalid).

        Returns True when the layer's output size changes (the network then reshapes)."""
        raise self.param_error(name, f"{self.desc.name} has no runtime option {name!r}")

    def fuses_conversion(self, kind: str) -> bool:
        """Whether a precision conversion may be fused into this layer as ``kind`` (``"read"`` or ``"write"``, see
        ``conversion_fusion``) on its backend; a layer whose backend kernel does not serve mixed precision says no
        there. The activation must be the layer's own for ``"write"`` (the network's in-place pass would round
        twice)."""
        if kind not in self.conversion_fusion:
            return False
        return kind == "read" or self.fuses_activation

    def bypass_input(self) -> int | None:
        """Index of the input this layer passes through unchanged (no copy), or None."""
        return None

    def input_view(self) -> Callable[[Any], Any] | None:
        """A function giving this layer's output as a view of its input 0's array (no copy: a pick along the
        leading axis), or None to compute it. Called after ``reshape``; the network takes the view only where the
        layer has no activation and the view is C-contiguous with the output's shape (engine.network.view_of)."""
        return None

    #: how many leading inputs are already in place in the output buffer (set by the network where this layer
    #: extends an earlier join of the same inputs in one buffer: ``joins_channels``); ``forward`` skips them
    in_place_inputs: int = 0

    #: the indices of the inputs whose buffer the network may give this layer's output (the first that qualifies),
    #: where this layer reads it last and the backend allows it (``Backend.overwrites_inputs``): ``forward`` must then
    #: read each value of that input before writing the output's value at its place (a residual sum, an element-wise
    #: operation), or copy it first (``out`` is that input)
    overwritable_inputs: ClassVar[tuple[int, ...]] = ()
    #: the second activation of a layer whose descriptor holds one (``LayerDesc.inner_activation``), bound by the
    #: network when it builds the layer; None otherwise
    inner_activation: BoundActivation | None = None

    def joins_channels(self) -> bool:
        """Whether the output is the inputs one after another along the channels of a 4-D tensor, each copied
        unchanged: a join the network may build in place (a later join of the same leading inputs writes only its
        new ones into the earlier join's buffer, as DenseNet's blocks do)."""
        return False

    def forward(self, inputs: list[Any], out: Any) -> None:
        """Compute the output into ``out`` (arrays in ``self.fmt``; None for unconnected inputs)."""
        raise NotImplementedError

    # ---- exporters (engine/export): what the support table and the exporters read ------------------
    #: ONNX / PyTorch export support: "yes", "partial: <limits>" or "no".
    onnx_support: ClassVar[str] = "no"
    torch_support: ClassVar[str] = "no"
    #: True when ``to_onnx`` / ``to_torch`` apply the layer's activation themselves (an activation in
    #: the middle of the layer, as conv_pool's); otherwise the exporter applies it after the layer.
    exports_activation: ClassVar[bool] = False

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        """Add standard ONNX nodes computing this layer (without its activation, unless
        ``exports_activation``) through the ``engine.export.OnnxGraph`` ``g``; ``inputs`` are the tensor
        names of the layer's inputs (None when unconnected). Returns the output tensor name.

        Raise ``self.export_unsupported(...)`` for a configuration ONNX cannot express."""
        raise self.export_unsupported("it has no ONNX equivalent")

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        """Declare this layer's module attribute through the ``engine.export.TorchModuleWriter`` ``t`` and
        return the ``forward`` expression computing it from the expressions ``inputs`` (None when
        unconnected), without its activation unless ``exports_activation``.

        Raise ``self.export_unsupported(...)`` for a configuration PyTorch cannot express."""
        raise self.export_unsupported("it has no PyTorch equivalent")

    def export_unsupported(self, reason: str) -> NotImplementedError:
        """The exception ``to_onnx``/``to_torch`` raise for what they cannot export (the exporters list
        every such layer, or write a placeholder)."""
        return NotImplementedError(f"{self.desc.name} {self.name}: {reason}")
