"""engine.layout: the layered drawing used by Arrange and importers."""
from __future__ import annotations

from engine.layout import layered_positions, overlaps
from engine.model import LayerSpec, Model


def _diamond() -> Model:
    m = Model("d")
    m.add_layer("input", "inp")
    m.add_layer("convolution", "a", inputs=["inp"])
    m.add_layer("convolution", "b", inputs=["inp"])
    m.add_layer("element_wise", "add", inputs=["a", "b"])
    m.add_layer("output", "out", inputs=["add"])
    m.add_layer("input", "lonely")  # a second, unlinked group
    return m


def test_columns_follow_depth_and_nothing_overlaps():
    m = _diamond()
    sizes = {n: (150.0, 100.0) for n in m.layers}
    pos = layered_positions(m.layers, sizes, origin=(10.0, 20.0))
    assert set(pos) == set(m.layers)
    assert pos["inp"][0] == 10.0 and pos["inp"][0] < pos["a"][0] == pos["b"][0] < pos["add"][0] < pos["out"][0]
    assert pos["a"][1] != pos["b"][1]  # same column, different rows
    assert overlaps(pos, sizes) == []
    assert min(p[1] for p in pos.values()) == 20.0
    assert pos["lonely"][1] > max(pos[n][1] for n in ("inp", "a", "b", "add", "out"))  # stacked under
    assert all(round(v, 1) == v for p in pos.values() for v in p)


def test_cycles_and_self_links_are_laid_out():
    m = Model("c")
    m.add_layer("convolution", "a")
    m.add_layer("convolution", "b", inputs=["a"])
    m.connect("b", "a", 0, allow_cycle=True)
    pos = layered_positions(m.layers)
    assert set(pos) == {"a", "b"} and pos["a"] != pos["b"]


def test_overlaps_finds_overlapping_boxes():
    assert overlaps({"a": (0.0, 0.0), "b": (50.0, 50.0)}, {"a": (100.0, 100.0), "b": (100.0, 100.0)}) == [("a", "b")]
    assert overlaps({"a": (0.0, 0.0), "b": (100.0, 0.0)}, {"a": (100.0, 100.0), "b": (100.0, 100.0)}) == []


def test_readable_positions_fold_a_long_chain_to_the_view_shape():
    """An imported 200-layer chain (what `layerlab import` writes) is placed in bands, not as one long ribbon:
    its drawing has about the view's shape, without overlaps, in the chain's order band after band."""
    from engine.layout import NODE_SIZE, overlaps, readable_positions
    from engine.model import LayerSpec

    layers = {f"l{i}": LayerSpec(f"l{i}", "x", inputs=[f"l{i - 1}"] if i else []) for i in range(200)}
    pos = readable_positions(layers)
    sizes = dict.fromkeys(layers, NODE_SIZE)
    width = max(x for x, _ in pos.values()) + NODE_SIZE[0] - min(x for x, _ in pos.values())
    height = max(y for _, y in pos.values()) + NODE_SIZE[1] - min(y for _, y in pos.values())
    assert 0.5 < width / height < 5.0, (width, height)
    assert not overlaps(pos, sizes)
    rows = sorted({y for _, y in pos.values()})
    assert len(rows) > 3 and pos["l0"][1] == rows[0] and pos["l199"][1] == rows[-1]


def test_estimated_node_sizes_grow_with_the_title_the_ports_and_the_shown_parameters():
    from engine.layout import NODE_SIZE, estimated_node_size, estimated_sizes
    from engine.plugins import default_registry

    short, long = estimated_node_size("c", 1, ["Convolution"]), estimated_node_size("x" * 40, 1, ["Convolution"])
    assert short[0] >= 120.0 and long[0] > 40 * 8.0 > short[0] and long[1] == short[1]
    assert estimated_node_size("c", 3, ["Convolution"])[1] > short[1]  # a port row each
    assert estimated_node_size("c", 1, ["Convolution", "kernel: 3"])[1] > short[1]  # a line each
    m = _diamond()
    m.layers["a"].activation = "relu"
    sizes = estimated_sizes(m.layers, default_registry())
    conv = default_registry().find_layer("convolution")
    main = sum(p.main for p in conv.params)
    assert sizes["a"][1] - sizes["b"][1] == estimated_node_size("a", 1, ["x"] * 2)[1] - estimated_node_size(
        "a", 1, ["x"])[1]  # the activation line
    # a port for each input the descriptor has (the weights' too), a line each for the type, the main parameters
    # and the shape
    assert sizes["b"][1] == estimated_node_size("b", len(conv.inputs), ["x"] * (main + 2))[1]
    assert sizes["b"][1] > NODE_SIZE[1]  # a convolution is taller than the old fixed guess
    assert sizes["add"][1] > sizes["inp"][1]  # two inputs (and an open one)


def _chain(n: int, skip: bool = False) -> dict:
    from engine.model import LayerSpec

    layers = {f"l{i}": LayerSpec(f"l{i}", "convolution", inputs=[f"l{i - 1}"] if i else []) for i in range(n)}
    if skip:  # the sample's skip connection: the last layer reads the first one too
        layers[f"l{n - 1}"].inputs.append("l0")
    return layers


def test_a_deep_chain_is_laid_out_without_recursion():
    """A 5,000-layer chain: one column per layer, in order, with the recursion limit lowered so that anything
    recursing once per layer would fail."""
    import sys

    from engine.layout import layered_positions

    layers = _chain(5000)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    try:
        pos = layered_positions(layers)
    finally:
        sys.setrecursionlimit(limit)
    xs = [pos[f"l{i}"][0] for i in range(5000)]
    assert xs == sorted(xs) and len(set(xs)) == 5000
    assert len({y for _, y in pos.values()}) == 1  # a straight line


def _crosses(polyline: list[tuple[float, float]], box: tuple[float, float, float, float]) -> bool:
    """Whether a segment of ``polyline`` passes strictly inside ``box`` (x0, y0, x1, y1): each segment clipped to the
    box (Liang-Barsky); touching an edge or running along it is not crossing."""
    x0, y0, x1, y1 = box
    for (ax, ay), (bx, by) in zip(polyline, polyline[1:]):
        dx, dy = bx - ax, by - ay
        lo, hi, inside = 0.0, 1.0, True
        for p, q in ((-dx, ax - x0), (dx, x1 - ax), (-dy, ay - y0), (dy, y1 - ay)):
            if p == 0:
                inside = inside and q > 0  # parallel to this edge: strictly on the box's side of it, or never
            elif p < 0:
                lo = max(lo, q / p)
            else:
                hi = min(hi, q / p)
        if inside and lo < hi:
            return True
    return False


def test_every_link_is_routed_around_the_layers():
    """A skip connection over six layers passes each column it crosses in a lane no layer box covers (not
    behind the chain); every link, drawn from port to port along its route, crosses no layer's box; the layers
    keep clear of each other."""
    from engine.layout import NODE_SIZE, layered_drawing, route_through

    layers = _chain(8, skip=True)
    drawing = layered_drawing(layers)
    route = drawing.bends[("l0", "l7")]
    assert len(route) == 2 + 2 * 6 and [p[0] for p in route] == sorted(p[0] for p in route)
    assert set(drawing.bends) == {("l0", "l7")} | {(f"l{i}", f"l{i + 1}") for i in range(7)}
    boxes = {n: (x, y, x + NODE_SIZE[0], y + NODE_SIZE[1]) for n, (x, y) in drawing.positions.items()}
    for (src, dst), route in drawing.bends.items():
        start = (boxes[src][2], boxes[src][1] + 30.0)  # output and input ports, as the canvas has them
        end = (boxes[dst][0], boxes[dst][1] + 30.0)
        line = route_through(start, route, end)
        assert not any(_crosses(line, box) for name, box in boxes.items() if name not in (src, dst)), (src, dst)
    assert not overlaps(drawing.positions, dict.fromkeys(layers, NODE_SIZE))


def test_folded_drawings_route_links_between_bands_around_the_layers():
    """A long chain with skips folded into bands: links reaching into the next band go round through the gaps,
    never behind a layer."""
    from engine.layout import NODE_SIZE, readable_drawing, route_through

    layers = _chain(60, skip=True)
    for i in range(4, 59, 4):  # residual blocks: a skip over three layers
        layers[f"l{i}"].inputs.append(f"l{i - 4}")
    drawing = readable_drawing(layers, aspect=1.5)
    assert len({y for _, y in drawing.positions.values()}) > 2  # folded
    boxes = {n: (x, y, x + NODE_SIZE[0], y + NODE_SIZE[1]) for n, (x, y) in drawing.positions.items()}
    assert set(drawing.bends) == {(s, n) for n, spec in layers.items() for s in spec.inputs if s}
    for (src, dst), route in drawing.bends.items():
        line = route_through((boxes[src][2], boxes[src][1] + 30.0), route, (boxes[dst][0], boxes[dst][1] + 30.0))
        assert not any(_crosses(line, box) for name, box in boxes.items() if name not in (src, dst)), (src, dst)


def dense_block(layers: int, scope: str = "features/denseblock1", first: str = "inp") -> dict:
    """A DenseNet-like block as an ONNX import names and groups it: per dense layer a concatenation of the block's
    input and every earlier layer's output, then two convolutions; returns the specs by name."""
    from engine.model import LayerSpec

    out, done = {}, [first]
    for i in range(1, layers + 1):
        stem = scope.replace("/", "_") + f"_denselayer{i}"
        cat, c1, c2 = f"{stem}_Concat", f"{stem}_conv1_Conv", f"{stem}_conv2_Conv"
        out[cat] = LayerSpec(cat, "concatenation", inputs=list(done), group=f"{scope}/denselayer{i}")
        out[c1] = LayerSpec(c1, "convolution", inputs=[cat], group=f"{scope}/denselayer{i}")
        out[c2] = LayerSpec(c2, "convolution", inputs=[c1], group=f"{scope}/denselayer{i}")
        done.append(c2)
    return out


def test_a_dense_block_lies_in_bands_with_its_long_links_in_lanes():
    """A dense block's links skip far ahead (every layer to every later one): the banded drawing keeps each band
    one row of layers (not a staircase as tall as the links are many), folds to the view's shape, overlaps no
    boxes, and routes every link (skips and band changes) clear of every layer."""
    from engine.layout import NODE_SIZE, banded_drawing, route_through
    from engine.model import LayerSpec

    layers = {"inp": LayerSpec("inp", "input"), **dense_block(24)}
    drawing = banded_drawing(layers, aspect=1.6)
    pos = drawing.positions
    assert set(pos) == set(layers) and not overlaps(pos, dict.fromkeys(layers, NODE_SIZE))
    rows = {y for _, y in pos.values()}
    assert 2 <= len(rows) <= len(layers) / 8  # a few bands, each a row: no diagonal of one layer per height
    width = max(x for x, _ in pos.values()) + NODE_SIZE[0]
    height = max(y for _, y in pos.values()) + NODE_SIZE[1] - min(y for _, y in pos.values())
    assert 1.6 / 3 < width / height < 1.6 * 3
    boxes = {n: (x, y, x + NODE_SIZE[0], y + NODE_SIZE[1]) for n, (x, y) in pos.items()}
    assert set(drawing.bends) == {(s, n) for n, spec in layers.items() for s in spec.inputs}
    for (src, dst), route in drawing.bends.items():
        line = route_through((boxes[src][2], boxes[src][1] + 30.0), route, (boxes[dst][0], boxes[dst][1] + 30.0))
        assert not any(_crosses(line, box) for name, box in boxes.items() if name not in (src, dst)), (src, dst)


def test_banded_drawing_takes_cycles_and_unlinked_layers():
    from engine.layout import banded_drawing

    m = _diamond()
    m.add_layer("convolution", "c", inputs=["out"])
    pos = banded_drawing(m.layers).positions
    assert set(pos) == set(m.layers) and not overlaps(pos, {})
    assert pos["inp"][0] < pos["a"][0] < pos["add"][0] < pos["out"][0] < pos["c"][0]
    cyc = Model("c")
    cyc.add_layer("convolution", "a")
    cyc.add_layer("convolution", "b", inputs=["a"])
    cyc.connect("b", "a", 0, allow_cycle=True)
    pos = banded_drawing(cyc.layers).positions
    assert set(pos) == {"a", "b"} and pos["a"] != pos["b"]


def test_bands_are_cut_where_a_block_starts():
    """A long chain of blocks of five layers folded into bands: every cut falls between two blocks (a block never
    wraps from one band to the next), and the drawing still fits the view's shape."""
    from engine.layout import group_boundaries, readable_drawing

    specs, prev = {}, None
    for b in range(24):
        for k in range(5):
            name = f"b{b}_{k}"
            specs[name] = LayerSpec(name, "convolution", inputs=[prev] if prev else [], group=f"stage/block{b}")
            prev = name
    drawing = readable_drawing(specs, aspect=1.6)
    rows = {}
    for name, (_, y) in drawing.positions.items():
        rows.setdefault(specs[name].group, set()).add(y)
    assert len({y for ys in rows.values() for y in ys}) > 1  # folded
    assert all(len(ys) == 1 for ys in rows.values())  # each block in one band
    assert group_boundaries({0.0: ["a"], 1.0: ["a", "b"], 2.0: ["c"], 3.0: ["c"]}) == [2.0]
