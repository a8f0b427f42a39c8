"""Convolutions through the cuDNN frontend graph API (tensor cores, fused bias + activation epilogue),
directly on CuPy buffers in their own layout. Imported only by the CuPy backend; when the ``cudnn``
package or a configuration is not supported, callers fall back to the generic im2col + cuBLAS path.

Graphs are built once per configuration (shapes, strides, dtype, stride/padding/dilation, activation)
and cached; building takes tens of milliseconds, executing is one launch."""
from __future__ import annotations

import os
import threading
from typing import Any

import cupy

from engine.backends.cuda import runtime
from engine.backends.cuda.pointwise import activation
from engine.backends.selection import Launched
from engine.tensor import is_nhwc_memory

#: cuDNN heuristics used to pick a plan (A: fast query; B: a learned model, slower to query)
HEURISTICS = os.environ.get("LAYERLAB_CUDNN_HEURISTICS", "A")

#: how many of the heuristics' best plans are built and timed on the real buffers the first time a configuration
#: runs (the fastest is kept, as PyTorch's ``cudnn.benchmark`` does); 0 or 1: the heuristics' first plan
AUTOTUNE = int(os.environ.get("LAYERLAB_CUDNN_AUTOTUNE", "8") or 0)

#: tuning applies to convolutions of at least this many floating-point operations: on small ones (resnet18 at batch
#: 1, 0.24 GFLOP at most) the heuristics' plans did better inside the captured network than the plans that won
#: timed alone (H100: 0.30 ms tuned, 0.25 ms not), while on large ones tuning won (resnet18 at batch 32: 1.75 to
#: 1.02 ms; dncnn 1080p fp16: 6.6 to 6.1 ms)
TUNE_MIN_FLOP = float(os.environ.get("LAYERLAB_TUNE_MIN_FLOP", "1e9") or 0)


def worth_tuning(w: Any, out: Any, groups: int = 1) -> bool:
    """Whether the convolution of weights ``w`` (K, C/groups, kh, kw) into ``out`` is worth tuning: large enough,
    or grouped (the heuristics' first plan for a grouped or depthwise convolution is a grouped direct kernel several
    times slower than the depthwise engine that timing finds: H200, mobilenet_v2 at batch 32, 3.6 ms for 17 layers)."""
    return AUTOTUNE >= 2 and (groups > 1 or 2.0 * out.size * w.shape[1] * w.shape[2] * w.shape[3] >= TUNE_MIN_FLOP)

#: the plan chosen for each configuration, for the whole process: every network (and every thread) of a process
#: runs a configuration with the same plan, so two networks give bit-identical results (a new process times again:
#: ``LAYERLAB_CUDNN_AUTOTUNE=0`` for results identical across processes)
_TUNED: dict[tuple[Any, ...], int] = {}
#: per configuration with an epilogue, whether it runs split (the plain convolution, then the epilogue kernel) or
#: fused, for the whole process like the plans (fused and split round differently in fp16)
_SPLIT: dict[tuple[Any, ...], bool] = {}
_TUNING = threading.Lock()

#: channel counts are padded to a multiple of this for fp16 NHWC (tensor-core kernels need 16-byte rows)
CHANNEL_ALIGN = 8
PAD_CHANNELS = os.environ.get("LAYERLAB_CUDNN_PAD_CHANNELS", "on").lower() not in ("off", "0", "no", "false")

#: fused epilogues (``ActivationDesc.epilogue``) the cuDNN graph computes itself, each as one pointwise node of the
#: graph (:func:`_epilogue_node`); a graph that the installed frontend cannot build declines, and the epilogue then
#: runs as one kernel after the convolution (``activation``)
EPILOGUES = ("relu", "leaky_relu", "sigmoid", "tanh", "clamp", "silu", "gelu", "gelu_tanh", "softplus", "elu")


def _epilogue_node(g: Any, y: Any, act: str, coefs: dict[str, float]) -> Any:
    """The pointwise node of ``g`` computing epilogue ``act`` of ``y``: ReLU with a slope or clipping bounds (leaky
    ReLU, clamp), or the frontend's activation of that name (silu is its swish of beta 1, gelu its erf form). ELU is
    fused only with alpha = 1 (the node takes no alpha); raises ValueError for what no node computes."""
    if act == "relu":
        return g.relu(name="act", input=y)
    if act == "leaky_relu":
        return g.relu(name="act", input=y, negative_slope=float(coefs["alpha"]))
    if act == "clamp":  # ReLU's clipping: max(lower, min(upper, x))
        return g.relu(name="act", input=y, lower_clip=float(coefs["min"]), upper_clip=float(coefs["max"]))
    if act == "elu" and float(coefs["alpha"]) != 1.0:
        raise ValueError("cuDNN's ELU node has alpha 1")
    method = {"sigmoid": "sigmoid", "tanh": "tanh", "silu": "swish", "gelu": "gelu", "gelu_tanh": "gelu_approx_tanh",
              "softplus": "softplus", "elu": "elu"}.get(act)
    if method is None:
        raise ValueError(f"no cuDNN node for the {act} epilogue")
    return getattr(g, method)(name="act", input=y)


def _dims_strides(a: Any) -> tuple[list[int], list[int]]:
    item = a.dtype.itemsize
    return [int(d) for d in a.shape], [int(s) // item for s in a.strides]


class CudnnConvolutions:
    """Cached cuDNN frontend graphs computing ``act(conv(x, w) + b)`` into an output buffer."""

    def __init__(self, stream: Any) -> None:
        import cudnn  # noqa: PLC0415 - optional dependency of the gpu extra

        self.cudnn = cudnn
        self.stream = stream
        self.handle = cudnn.create_handle()
        cudnn.set_stream(handle=self.handle, stream=stream.ptr)
        self._graphs: dict[tuple[Any, ...], tuple[Any, dict[str, Any], Any] | None] = {}
        self._pads: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # one workspace for every graph: they all run on ``stream``, one after another (PyTorch likewise takes
        # each convolution's workspace from its allocator for the call only); a graph per configuration holding
        # its own took resnet18 at batch 32 in strict fp32 NHWC to 1.3 GiB held against PyTorch's 0.8
        self._workspace: Any = None
        self._workspace_captured = False  # whether a CUDA graph captured the current workspace's address
        self._retired: list[Any] = []  # outgrown workspaces that captured CUDA graphs may still use
        self.version = f"cuDNN frontend {cudnn.__version__}, backend {cudnn.backend_version()}"

    def _dtype(self, dt: Any) -> Any:
        return self.cudnn.data_type.HALF if dt == cupy.float16 else self.cudnn.data_type.FLOAT

    def _build(self, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
               dilation: tuple[int, int], act: str | None,
               coefs: dict[str, float], tf32: bool = False, key: tuple[Any, ...] = ()) -> tuple[Any, dict[str, Any], Any]:
        c = self.cudnn
        io = self._dtype(x.dtype)
        g = c.pygraph(io_data_type=io, intermediate_data_type=c.data_type.FLOAT,
                      compute_data_type=c.data_type.FLOAT, handle=self.handle)
        xd, xs = _dims_strides(x)
        wd, ws = _dims_strides(w)
        X = g.tensor(name="X", dim=xd, stride=xs, data_type=io)
        W = g.tensor(name="W", dim=wd, stride=ws, data_type=io)
        Y = g.conv_fprop(image=X, weight=W, padding=list(padding), stride=list(stride), dilation=list(dilation),
                         compute_data_type=c.data_type.FLOAT, name="conv")
        tensors = {"X": X, "W": W}
        if b is not None:
            k = wd[0]
            B = g.tensor(name="B", dim=[1, k, 1, 1], stride=[k, 1, k, k], data_type=io)
            Y = g.bias(name="bias", input=Y, bias=B)
            tensors["B"] = B
        if act is not None:
            Y = _epilogue_node(g, Y, act, coefs)
        od, os_ = _dims_strides(out)
        Y.set_output(True).set_data_type(io).set_dim(od).set_stride(os_)
        tensors["Y"] = Y
        g.validate()
        g.build_operation_graph()
        modes = [getattr(c.heur_mode, m) for m in HEURISTICS.split(",")] + [c.heur_mode.FALLBACK]
        if x.dtype == cupy.float32 and not tf32:
            # strict float32: leave out the engines that round the operands to TF32 on tensor cores
            g.deselect_numeric_notes([c.numerical_note.TENSOR_CORE, c.numerical_note.DOWN_CONVERT_INPUTS])
        g.create_execution_plans(modes)
        g.check_support()
        if not worth_tuning(w, out, x.shape[1] // w.shape[1]) or self._plan(g, self._pack(tensors, x, w, b, out), key) is None:
            g.build_plans()
        return g, tensors, int(g.get_workspace_size())

    def workspace(self, size: int) -> Any:
        """The shared workspace, grown to at least ``size`` bytes. An outgrown workspace is freed unless a CUDA
        graph captured its address while it was current (then it is kept for as long as this object lives; not for a
        graph captured to time a call, replayed at once and dropped)."""
        ws = self._workspace
        if ws is None or ws.nbytes < size:
            if ws is not None and self._workspace_captured:
                self._retired.append(ws)
            self._workspace = ws = cupy.empty(max(size, 1), dtype=cupy.uint8)
            self._workspace_captured = False
        if not self._workspace_captured and self.stream.is_capturing() and not runtime.timing_capture():
            self._workspace_captured = True
        return ws

    def _plan(self, g: Any, pack: dict[Any, int], key: tuple[Any, ...]) -> int | None:
        """Select the process's plan for configuration ``key`` (timing the candidates the first time); its index,
        or None for the heuristics' choice."""
        if AUTOTUNE < 2:
            return None
        with _TUNING:
            index = _TUNED.get(key)
            if index is not None:
                try:
                    g.build_plan_at_index(index)
                    return index
                except Exception:
                    return None
            index = self._autotune(g, pack)
            if index is not None:
                _TUNED[key] = index
            return index

    def _autotune(self, g: Any, pack: dict[Any, int]) -> int | None:
        """Build and time the first ``AUTOTUNE`` plans of the ranked list on the real buffers (the output is about
        to be written anyway); select and return the fastest one's index. None when tuning is off, impossible
        (the stream is being captured into a CUDA graph) or no plan built."""
        if AUTOTUNE < 2:
            return None
        try:
            if self.stream.is_capturing():
                return None
            count = min(int(g.get_execution_plan_count()), AUTOTUNE)
        except Exception:
            return None
        best: tuple[float, int] | None = None
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        for index in range(count):
            try:
                g.build_plan_at_index(index)
                ws = self.workspace(int(g.get_workspace_size()))
                g.execute(pack, ws.data.ptr, handle=self.handle)  # warm-up
                start.record(self.stream)
                for _ in range(3):
                    g.execute(pack, ws.data.ptr, handle=self.handle)
                end.record(self.stream)
                end.synchronize()
                ms = cupy.cuda.get_elapsed_time(start, end)
            except Exception:  # a plan that does not build or run here: the next one
                continue
            if best is None or ms < best[0]:
                best = (ms, index)
        if best is None:
            return None
        try:
            g.build_plan_at_index(best[1])
        except Exception:
            return None
        return best[1]

    @staticmethod
    def _pack(t: dict[str, Any], x: Any, w: Any, b: Any | None, out: Any) -> dict[Any, int]:
        pack = {t["X"]: x.data.ptr, t["W"]: w.data.ptr, t["Y"]: out.data.ptr}
        if b is not None:
            pack[t["B"]] = b.data.ptr
        return pack

    def conv(self, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
             dilation: tuple[int, int], act: str | None = None, coefs: dict[str, float] | None = None,
             tf32: bool = False) -> Launched | None:
        """Compute into ``out``; all arrays are logical N,C,H,W (views of any layout). None when cuDNN
        does not support this configuration (nothing was written). ``tf32``: fp32 convolutions may use TF32 tensor
        cores (10-bit mantissa products, float32 sums); off, strict float32 as the NumPy backend computes.

        fp16 NHWC convolutions of one group whose input or output channel count is not a multiple of 8
        (an RGB input, a 3-channel output) run on zero-padded copies, so that cuDNN can use its tensor-core kernels:
        the unaligned cases otherwise fall on kernels over ten times slower."""
        coefs = coefs or {}
        if act is not None and act not in EPILOGUES:
            return None
        c, k = x.shape[1], w.shape[0]
        if (PAD_CHANNELS and (c % CHANNEL_ALIGN or k % CHANNEL_ALIGN) and w.shape[1] == c and x.dtype == cupy.float16
                and all(map(is_nhwc_memory, (x, w, out)))):
            if self._conv_padded(x, w, b, out, stride, padding, dilation, act, coefs):
                return Launched("cudnn")
        return Launched("cudnn") if self._conv(x, w, b, out, stride, padding, dilation, act, coefs, tf32) else None

    def _conv_padded(self, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int],
                     padding: tuple[int, int], dilation: tuple[int, int], act: str | None,
                     coefs: dict[str, float]) -> bool:
        """The convolution on channel-padded copies (buffers kept per configuration; the padding
        channels are zeroed once and never written, the copies are small kernels that graphs capture)."""
        c, k = x.shape[1], w.shape[0]
        key = (x.shape, x.strides, w.shape, b is None, out.shape, out.strides)
        bufs = self._pads.get(key)
        if bufs is None:
            cp, kp = -(-c // CHANNEL_ALIGN) * CHANNEL_ALIGN, -(-k // CHANNEL_ALIGN) * CHANNEL_ALIGN
            n, _, h, wd = x.shape
            bufs = (cupy.zeros((n, h, wd, cp), x.dtype) if cp != c else None,
                    cupy.zeros((kp, w.shape[2], w.shape[3], cp), w.dtype),
                    cupy.zeros(kp, w.dtype) if b is not None else None,
                    cupy.empty((n, out.shape[2], out.shape[3], kp), out.dtype) if kp != k else None)
            self._pads[key] = bufs
        xb, wb, bb, yb = bufs
        if xb is not None:
            xb[..., :c] = x.transpose(0, 2, 3, 1)
        wb[:k, :, :, :c] = w.transpose(0, 2, 3, 1)
        if bb is not None:
            bb[:k] = b
        xl = x if xb is None else xb.transpose(0, 3, 1, 2)
        yl = out if yb is None else yb.transpose(0, 3, 1, 2)
        if not self._conv(xl, wb.transpose(0, 3, 1, 2), bb, yl, stride, padding, dilation, act, coefs):
            return False
        if yb is not None:
            out.transpose(0, 2, 3, 1)[...] = yb[..., :k]
        return True

    def _conv(self, x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int], padding: tuple[int, int],
              dilation: tuple[int, int], act: str | None, coefs: dict[str, float], tf32: bool = False) -> bool:
        """``act(conv(x, w) + b)`` into ``out``: with the epilogue inside cuDNN's graph, or (where that is slower or
        unsupported) the graph without it followed by the epilogue as one pass in place. An epilogue node can
        restrict cuDNN to slow engines (a clipped ReLU on a 1x1 convolution in fp16 NHWC took a grouped direct
        kernel ten times slower than the plain convolution), so the first call outside a CUDA-graph capture
        times both and keeps the faster for the configuration."""
        geometry = (x.shape, x.strides, str(x.dtype), w.shape, w.strides, b is None, out.shape, out.strides, stride,
                    padding, dilation, tf32)
        if act is None:
            return self._execute(geometry + (None, ()), x, w, b, out, stride, padding, dilation, None, {}, tf32)
        key = geometry + (act, tuple(sorted(coefs.items())))
        split = _SPLIT.get(key)
        if split is None:
            split = self._choose_split(geometry, key, x, w, b, out, stride, padding, dilation, act, coefs, tf32)
        if not split:
            return self._execute(key, x, w, b, out, stride, padding, dilation, act, coefs, tf32)
        if not self._execute(geometry + (None, ()), x, w, b, out, stride, padding, dilation, None, {}, tf32):
            return False
        with runtime.current_stream(self.stream):  # after cuDNN's kernel on the same stream, whatever the caller's
            return activation(out, out, act, coefs) is not None

    def _choose_split(self, geometry: tuple[Any, ...], key: tuple[Any, ...], x: Any, w: Any, b: Any | None, out: Any,
                      stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], act: str,
                      coefs: dict[str, float], tf32: bool) -> bool:
        """Whether configuration ``key`` runs split (convolution, then the epilogue kernel): where the fused graph
        does not build, or, when tuning is on and the stream is not capturing, where it was the faster of the two
        timed on the real buffers. Capturing or not tuned: fused where it builds (decided again on a later call)."""
        fused = self._entry(key, x, w, b, out, stride, padding, dilation, act, coefs, tf32) is not None
        plain = self._entry(geometry + (None, ()), x, w, b, out, stride, padding, dilation, None, {}, tf32) is not None
        if not fused or not plain or activation(out, out, act, coefs) is None:
            split = not fused and plain and activation(out, out, act, coefs) is not None
            _SPLIT[key] = split
            return split
        if AUTOTUNE < 2 or self.stream.is_capturing():
            return False

        def fused_run() -> None:
            self._execute(key, x, w, b, out, stride, padding, dilation, act, coefs, tf32)

        def split_run() -> None:
            self._execute(geometry + (None, ()), x, w, b, out, stride, padding, dilation, None, {}, tf32)
            activation(out, out, act, coefs)

        split = self._elapsed_ms(split_run) < self._elapsed_ms(fused_run)
        return _SPLIT.setdefault(key, split)  # another thread's choice, where it came first, stands

    def _elapsed_ms(self, launch: Any) -> float:
        """Device time of one run of ``launch`` on this object's stream (``runtime.elapsed_ms``: captured and
        replayed as a network runs it). The calling thread's current stream is left as it was: CuPy's ``with
        stream`` would leave the stream of an enclosing ``with`` block (the null stream) current instead of the
        backend's stream set by ``Stream.use``, and the network's next kernels would then race with cuDNN's."""
        with runtime.current_stream(self.stream):
            ms = runtime.elapsed_ms(lambda: launch() or True)
        return float("inf") if ms is None else float(ms)

    def _entry(self, key: tuple[Any, ...], x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int],
               padding: tuple[int, int], dilation: tuple[int, int], act: str | None, coefs: dict[str, float],
               tf32: bool) -> tuple[Any, dict[str, Any], int] | None:
        """The built graph of configuration ``key`` (built on first use; None where cuDNN does not support it)."""
        entry = self._graphs.get(key, ())
        if entry == ():
            try:
                entry = self._build(x, w, b, out, stride, padding, dilation, act, coefs, tf32, key)
            except Exception:  # unsupported configuration: remember, fall back
                entry = None
            self._graphs[key] = entry
        return entry

    def _execute(self, key: tuple[Any, ...], x: Any, w: Any, b: Any | None, out: Any, stride: tuple[int, int],
                 padding: tuple[int, int], dilation: tuple[int, int], act: str | None, coefs: dict[str, float],
                 tf32: bool) -> bool:
        entry = self._entry(key, x, w, b, out, stride, padding, dilation, act, coefs, tf32)
        if entry is None:
            return False
        g, t, size = entry
        g.execute(self._pack(t, x, w, b, out), self.workspace(size).data.ptr, handle=self.handle)
        return True
