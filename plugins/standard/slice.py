"""slice: keep a range of channels, rows and columns, written like Python slices (start:end:step)."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import InputDesc, LayerDesc, ParamDesc
from engine.layer import Layer
from engine.tensor import Dims

AXES = (("channels", "C", "c"), ("height", "H", "h"), ("width", "W", "w"))


def parse_range(text: str) -> slice:
    """``start:end:step`` (each part optional, Python meaning) or a single index ``i`` (that one element).

    Raises ValueError for anything else, including a step of 0."""
    raw = str(text).strip()
    parts = raw.split(":")
    if len(parts) > 3:
        raise ValueError("more than two ':'")
    vals = [int(p) if p.strip() else None for p in parts]
    if len(parts) == 1:
        if vals[0] is None:
            return slice(None)
        i = vals[0]
        return slice(i, i + 1 if i != -1 else None)
    step = vals[2] if len(parts) == 3 else None
    if step == 0:
        raise ValueError("the step is 0")
    return slice(vals[0], vals[1], step)


def range_length(rng: slice, size: int) -> int:
    """How many elements ``rng`` keeps of an axis of ``size`` (Python clamping of out-of-range bounds)."""
    return len(range(*rng.indices(size)))


def slice_tensor(x: Any, channels: slice, height: slice, width: slice) -> Any:
    """Logical NCHW ``x[:, channels, height, width]`` (a view; negative steps reverse)."""
    return x[:, channels, height, width]


_TORCH_RANGE = """
def take_range(x: torch.Tensor, dim: int, start: int | None, stop: int | None, step: int) -> torch.Tensor:
    \"\"\"x[start:stop:step] along ``dim`` with Python's meaning, negative steps included.\"\"\"
    index = torch.tensor(range(*slice(start, stop, step).indices(x.shape[dim])), dtype=torch.long, device=x.device)
    return x.index_select(dim, index)
"""


DESC = LayerDesc(
    name="slice",
    display_name="Slice",
    summary="Keep a range of channels, rows and columns (start:end:step, like Python and ONNX Slice).",
    categories=(Category.TENSOR,),
    documentation=(
        "<p>Keeps <code>x[:, channels, height, width]</code>, each range written as in Python: "
        "<code>start:end:step</code>. Every part is optional (start defaults to the first element, end to past "
        "the last, step to 1); <code>end</code> is excluded. Negative indices count from the end "
        "(<code>-1</code> is the last element), bounds beyond the tensor are clipped, and a negative step walks "
        "backwards (<code>::-1</code> mirrors). A single integer <code>i</code> keeps only element i (the "
        "dimension stays, of size 1). Same results as ONNX Slice.</p>"
        "<p><b>Inputs</b>: <b>input</b> (primary), N x C x H x W.</p>"
        "<p><b>Parameters</b> (text, default <code>:</code> = everything)</p><ul>"
        "<li><b>channels</b>: range of C.</li><li><b>height</b>: range of H.</li><li><b>width</b>: range of W.</li>"
        "</ul><p>Each range must keep at least one element; the step must not be 0.</p>"
        "<p>Examples on 1x8x10x10: channels <code>0:3</code> gives 1x3x10x10; height <code>1:-1</code>, "
        "width <code>::2</code> gives 1x8x8x5; channels <code>-1</code> keeps the last channel; width "
        "<code>::-1</code> flips horizontally.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=tuple(ParamDesc(name, "string", ":", f"range of {axis}: start:end:step", main=True) for name, axis, _ in AXES),
)


class Slice(Layer):
    desc = DESC

    def validate(self) -> None:
        self._ranges: dict[str, slice] = {}
        for name, _, _ in AXES:
            try:
                self._ranges[name] = parse_range(self.p[name])
            except ValueError:
                raise self.param_error(name, f"{self.p[name]!r} is not a range start:end:step of integers (each part "
                                             "optional, step not 0) or a single integer") from None

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        sizes = []
        for name, axis, attr in AXES:
            size = getattr(x, attr)
            kept = range_length(self._ranges[name], size)
            if kept < 1:
                raise self.shape_error(f"{name} {self.p[name].strip()!r} keeps nothing of the input's {axis} = {size} "
                                       f"(indices 0..{size - 1}, or -{size}..-1 from the end)")
            sizes.append(kept)
        return Dims(x.n, *sizes)

    def forward(self, inputs: list[Any], out: Any) -> None:
        r = self._ranges
        y = slice_tensor(self.nchw(inputs[0]), r["channels"], r["height"], r["width"])
        self.store(out, self.activate(y))

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        starts, ends, steps = [], [], []
        big = 2 ** 63 - 1
        for name, _, _ in AXES:
            r = self._ranges[name]
            step = r.step or 1
            starts.append(r.start if r.start is not None else (0 if step > 0 else big))
            ends.append(r.stop if r.stop is not None else (big if step > 0 else -big - 1))
            steps.append(step)
        return g.node("Slice", [inputs[0], g.ints("starts", starts), g.ints("ends", ends), g.ints("axes", [1, 2, 3]),
                                g.ints("steps", steps)])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        parts, x = [], inputs[0]
        for axis, (name, _, _) in enumerate(AXES, 1):
            r = self._ranges[name]
            if (r.step or 1) < 0:  # PyTorch tensors take no negative steps: gather the indices
                x = f"{t.helper('take_range', _TORCH_RANGE)}({x}, {axis}, {r.start!r}, {r.stop!r}, {r.step!r})"
                parts.append(":")
                continue
            text = f"{'' if r.start is None else r.start}:{'' if r.stop is None else r.stop}"
            parts.append(text + (f":{r.step}" if r.step not in (None, 1) else ""))
        if all(p == ":" for p in parts):
            return x
        return f"{x}[:, {', '.join(parts)}]"


LAYER = Slice
