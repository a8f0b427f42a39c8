"""slice: keep a range of channels, rows and columns, written like Python slices (start:end:step), or ranges of any axes
of a tensor of any rank."""
from __future__ import annotations

from typing import Any

from engine.categories import Category
from engine.descriptors import ANY_RANK, InputDesc, LayerDesc, ParamDesc
from engine.layer import REPLAYABLE_FORWARDS, Layer
from engine.tensor import Dims, parse_range
from plugins.standard._common_rank import axis_index, int_list

AXES = (("channels", "C", "c"), ("height", "H", "h"), ("width", "W", "w"))


def range_length(rng: slice, size: int) -> int:
    """How many elements ``rng`` keeps of an axis of ``size`` (Python clamping of out-of-range bounds)."""
    return len(range(*rng.indices(size)))


def slice_tensor(x: Any, channels: slice, height: slice, width: slice) -> Any:
    """Logical NCHW ``x[:, channels, height, width]`` (a view; negative steps reverse)."""
    return x[:, channels, height, width]


def slice_axes(x: Any, ranges: dict[int, slice]) -> Any:
    """The logical array ``x`` with axis ``a`` cut to ``ranges[a]`` (a view; axes not named are kept whole)."""
    index = [slice(None)] * x.ndim
    for axis, rng in ranges.items():
        index[axis] = rng
    return x[tuple(index)]


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
        "<p><b>Any rank</b>: <b>axes</b> names axes of a tensor of any rank 1 to 6 (comma separated, negative from "
        "the end) and <b>ranges</b> their ranges in the same order, separated by commas: axes <code>1,-1</code>, "
        "ranges <code>0:48,::2</code> on 1x96x56x56 gives 1x48x56x28 (a split, a chunk, ONNX Slice on any axis). "
        "Then channels, height and width stay <code>:</code>.</p>"
    ),
    inputs=(InputDesc("input"),),
    params=tuple(ParamDesc(name, "string", ":", f"range of {axis}: start:end:step", main=True) for name, axis, _ in AXES)
    + (ParamDesc("axes", "string", "", "axes of any rank cut by ranges, comma separated (empty: channels, height and "
                 "width of N x C x H x W)"),
       ParamDesc("ranges", "string", "", "one range start:end:step per axis of axes, comma separated")),
    ranks=ANY_RANK,
)


class Slice(Layer):
    desc = DESC
    layout_role = "follow"

    def validate(self) -> None:
        self._ranges: dict[str, slice] = {}
        for name, _, _ in AXES:
            try:
                self._ranges[name] = parse_range(self.p[name])
            except ValueError:
                raise self.param_error(name, f"{self.p[name]!r} is not a range start:end:step of integers (each part "
                                             "optional, step not 0) or a single integer") from None
        try:
            self._axes = int_list(self.p["axes"])
        except ValueError:
            raise self.param_error("axes", f"{self.p['axes']!r} is not a list of axes like 1,-1") from None
        texts = [t for t in str(self.p["ranges"]).split(",") if t.strip()]
        if len(texts) != len(self._axes):
            raise self.param_error("ranges", f"{len(texts)} ranges for {len(self._axes)} axes ({self.p['axes']!r}); "
                                             "give one range per axis")
        if self._axes and any(self.p[name].strip() != ":" for name, _, _ in AXES):
            raise self.param_error("axes", "with axes, channels, height and width stay ':' (name those axes in axes)")
        try:
            self._axis_ranges = [parse_range(t) for t in texts]
        except ValueError:
            raise self.param_error("ranges", f"{self.p['ranges']!r} is not a list of ranges start:end:step") from None

    def _cuts(self, rank: int) -> dict[int, slice]:
        """axis index -> range of the any-rank form."""
        cuts = {}
        for axis, rng in zip(self._axes, self._axis_ranges):
            try:
                a = axis_index(axis, rank)
            except ValueError as exc:
                raise self.shape_error(f"axes: {exc}") from None
            if a in cuts:
                raise self.shape_error(f"axes {self.p['axes']!r} names axis {a} twice")
            cuts[a] = rng
        return cuts

    def output_dims(self, inputs: list[Dims | None]) -> Dims:
        x = self.primary(inputs)
        if self._axes:
            out = list(x)
            for axis, rng in self._cuts(len(x)).items():
                out[axis] = range_length(rng, x[axis])
                if out[axis] < 1:
                    raise self.shape_error(f"range {rng.start}:{rng.stop}:{rng.step} keeps nothing of axis {axis} of "
                                           f"the input {x}")
            return Dims(*out)
        if len(x) != 4:
            raise self.shape_error(f"channels, height and width cut an N x C x H x W tensor, the input {x} has rank "
                                   f"{len(x)} (name its axes in axes)")
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
        self.offer_replay(None)
        if self._axes:
            x = self.nchw(inputs[0])
            self.store_view(out, self.activate(slice_axes(x, self._cuts(x.ndim))), inputs[0])
            return
        r = self._ranges
        y = slice_tensor(self.nchw(inputs[0]), r["channels"], r["height"], r["width"])
        self.store_view(out, self.activate(y), inputs[0])

    onnx_support = "yes"
    torch_support = "yes"

    def to_onnx(self, g: Any, inputs: list[str | None]) -> str:
        starts, ends, steps = [], [], []
        big = 2 ** 63 - 1
        cuts = self._cuts(len(self.input_dims[0])) if self._axes else None
        for r in (cuts.values() if cuts else (self._ranges[name] for name, _, _ in AXES)):
            step = r.step or 1
            starts.append(r.start if r.start is not None else (0 if step > 0 else big))
            ends.append(r.stop if r.stop is not None else (big if step > 0 else -big - 1))
            steps.append(step)
        axes = list(cuts) if cuts else [1, 2, 3]
        return g.node("Slice", [inputs[0], g.ints("starts", starts), g.ints("ends", ends), g.ints("axes", axes),
                                g.ints("steps", steps)])

    def to_torch(self, t: Any, inputs: list[str | None]) -> str:
        parts, x = [], inputs[0]
        rank = len(self.input_dims[0])
        cuts = self._cuts(rank) if self._axes else {a: self._ranges[name] for a, (name, _, _) in enumerate(AXES, 1)}
        for axis in range(1, max(cuts, default=0) + 1):
            r = cuts.get(axis, slice(None))
            if (r.step or 1) < 0:  # PyTorch tensors take no negative steps: gather the indices
                x = f"{t.helper('take_range', _TORCH_RANGE)}({x}, {axis}, {r.start!r}, {r.stop!r}, {r.step!r})"
                parts.append(":")
                continue
            text = f"{'' if r.start is None else r.start}:{'' if r.stop is None else r.stop}"
            parts.append(text + (f":{r.step}" if r.step not in (None, 1) else ""))
        if 0 in cuts:  # the batch axis (any-rank form)
            r = cuts[0]
            x = f"{t.helper('take_range', _TORCH_RANGE)}({x}, 0, {r.start!r}, {r.stop!r}, {r.step or 1!r})"
        if all(p == ":" for p in parts):
            return x
        return f"{x}[:, {', '.join(parts)}]"


LAYER = Slice


REPLAYABLE_FORWARDS.add(Slice.forward)  # one copy between the network's buffers, where it offers it
