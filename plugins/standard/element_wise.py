"""element_wise: sum, product, max, min, difference, quotient or mean of any number of inputs."""
from __future__ import annotations

from typing import Any

from engine.backends.selection import Launched
from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, InputKind, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, broadcast_dims

OPERATIONS = ("sum", "product", "max", "min", "sub", "div", "mean")
_UFUNCS = {"sum": lambda xp: xp.add, "product": lambda xp: xp.multiply, "max": lambda xp: xp.maximum,
           "min": lambda xp: xp.minimum, "sub": lambda xp: xp.subtract, "div": lambda xp: xp.divide,
           "mean": lambda xp: xp.add}


def element_wise(xp: Any, arrays: list[Any], operation: str) -> Any:
    """Combine logical arrays (NumPy broadcasting) with ``operation``; 'sub' is first minus the rest, 'div'
    the first divided by the rest, 'mean' the sum divided by the number of inputs."""
    acc = arrays[0]
    for a in arrays[1:]:
        if operation in ("sum", "mean"):
            acc = acc + a
        elif operation == "product":
            acc = acc * a
        elif operation == "max":
            acc = xp.maximum(acc, a)
        elif operation == "min":
            acc = xp.minimum(acc, a)
        elif operation == "div":
            acc = acc / a
        else:
            acc = acc - a
    if operation == "mean" and len(arrays) > 1:
        return acc * acc.dtype.type(1.0 / len(arrays))
    return acc if len(arrays) > 1 else acc.copy()


DESC = LayerDesc(
    name="element_wise",
    display_name="Element-wise",
    summary="Sum, product, max, min, difference, quotient or mean of any number of inputs.",
    categories=(Category.ARITHMETIC,),
    documentation=(
        "<p>Combines its inputs value by value. <b>operation</b>: <code>sum</code>, <code>product</code>, "
        "<code>max</code>, <code>min</code>, <code>sub</code> (the first input minus all the others), "
        "<code>div</code> (the first input divided by all the others; division by zero gives infinity or NaN "
        "as in IEEE arithmetic) or <code>mean</code> (the sum divided by the number of inputs); default sum. "
        "ONNX: Sum, Mul, Max, Min, Sub, Div, Mean.</p>"
        "<p>Inputs (primary, any number, at least one) must have the same dimensions, except that a "
        "dimension of size 1 is broadcast (e.g. a 1x1x1x1 tensor scales a whole image). Tensors of other "
        "ranks broadcast as in ONNX and NumPy: sizes aligned from the last axis, the missing leading ones taken as 1 "
        "(a tensor of 96 values adds to every row of 1x49x96).</p>"
    ),
    inputs=(InputDesc("inputs", InputKind.PRIMARY_INFINITE),),
    ranks=ANY_RANK,
    params=(ParamDesc("operation", "enum", "sum", "how inputs combine", enum_values=OPERATIONS, main=True,
                      legacy_names=("op",)),),
    inputs_commute="operation != 'sub' && operation != 'div'",
)


class ElementWise(Layer):
    desc = DESC
    layout_role = "follow"
    #: reads through nchw/physical (widening), computes in its own precision, writes once (engine.format_conversion)
    conversion_fusion = frozenset({"read", "write"})

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        present = [d for d in inputs if d is not None]
        if all(len(d) == 4 for d in present):
            out = list(present[0])
            for d in present[1:]:
                for axis, (a, b) in enumerate(zip(out, d)):
                    if a != b and 1 not in (a, b):
                        raise self.shape_error(
                            f"inputs of dimensions {Dims(*present[0])} and {d} differ in {'NCHW'[axis]} ({a} vs {b})")
                    out[axis] = max(a, b)
            return Dims(*out)
        try:
            return broadcast_dims(present)
        except ValueError:
            raise self.shape_error("inputs of dimensions " + ", ".join(map(str, present)) + " do not broadcast "
                                   "(sizes aligned from the last axis must be equal or 1)") from None

    #: the output may be written over its first two inputs (the kernels and NumPy's ufuncs read each value where they
    #: write it; the passes for a third input and more read the output, so those keep their buffers)
    overwritable_inputs = (0, 1)

    def forward(self, inputs: list[Any], out: Any) -> None:
        self.offer_replay(None)
        present = [x for x in inputs if x is not None]
        act = self.activation
        kernel = self.backend.kernel("element_wise") if len(present) == 2 else None
        if kernel is not None and (act is None or act.epilogue is not None) and (done := kernel(
                self.p["operation"], present[0], present[1], out, act.epilogue if act is not None else None,
                act.coefs if act is not None else {})):
            self.offer_replay(done.replay)  # one kernel call is the whole forward: the network may replay it
            return
        if self.p["operation"] == "product" and act is None and len(present) == 2 and (
                done := self._channel_scale(present, out)):
            self.offer_replay(done.replay)
            return
        if len(present) > 1 and all(x.shape == out.shape and x.dtype == out.dtype == self.cdtype for x in present):
            # one pass per input straight into the output buffer (no temporaries)
            op = _UFUNCS[self.p["operation"]](self.xp)
            op(present[0], present[1], out=out)
            for x in present[2:]:
                op(out, x, out=out)
            if self.p["operation"] == "mean":
                out *= out.dtype.type(1.0 / len(present))
            self.activate_inplace(out)
            return
        if all(x.shape == out.shape for x in present):  # no broadcasting: work in the memory layout
            y = element_wise(self.xp, [self.physical(x) for x in present], self.p["operation"])
            self.store_physical(out, self.activate_physical(y))
            return
        arrays = [self.nchw(x) for x in present]
        self.store(out, self.activate(element_wise(self.xp, arrays, self.p["operation"])))

    def _channel_scale(self, present: list[Any], out: Any) -> Launched | None:
        """A tensor times one value per image and channel (a squeeze-excitation gate, 1x1 pixels) by the backend's
        ``channel_scale`` kernel where it has one: one pass, no broadcast temporaries. None where it does not serve."""
        if out.ndim != 4:
            return None
        nhwc = self.hw_axes == (1, 2)
        big, gate = present if present[0].shape == out.shape else present[::-1]
        n, c = out.shape[0], out.shape[3 if nhwc else 1]
        if big.shape != out.shape or gate.shape != ((n, 1, 1, c) if nhwc else (n, c, 1, 1)):
            return None
        kernel = self.backend.kernel("channel_scale")
        return kernel(big, gate, out, nhwc, None, {}) if kernel is not None else None

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        xs = [x for x in inputs if x is not None]
        op = self.p["operation"]
        if len(xs) == 1:
            return g.node("Identity", xs)
        if op in ("sum", "max", "min", "mean"):
            return g.node({"sum": "Sum", "max": "Max", "min": "Min", "mean": "Mean"}[op], xs)
        acc = xs[0]
        binary = {"product": "Mul", "sub": "Sub", "div": "Div"}[op]
        for i, x in enumerate(xs[1:], 1):
            acc = g.node(binary, [acc, x], "" if i == len(xs) - 1 else f"step{i}")
        return acc

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        xs = [x for x in inputs if x is not None]
        op = self.p["operation"]
        if op in ("sum", "product", "sub", "div"):
            return {"sum": " + ", "product": " * ", "sub": " - ", "div": " / "}[op].join(xs)
        if op == "mean":
            return f"({' + '.join(xs)}) / {len(xs)}"
        acc = xs[0]
        for x in xs[1:]:
            acc = f"torch.{'maximum' if op == 'max' else 'minimum'}({acc}, {x})"
        return acc


REPLAYABLE_FORWARDS.add(ElementWise.forward)  # one element_wise or channel_scale call

LAYER = ElementWise
