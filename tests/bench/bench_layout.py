"""Layout benchmark: engine.layout on a chain (10,000 layers by default) and on a densenet121-shaped graph (four
dense blocks of 6, 12, 24 and 16 layers whose concatenations read every earlier layer of their block: about 300
layers and many long links). Prints the time of each drawing and checks that no two boxes overlap. Not collected
by the test run.

    python -m tests.bench.bench_layout
    python -m tests.bench.bench_layout --chain 200000
"""
from __future__ import annotations

import argparse
import time

from engine.layout import NODE_SIZE, layered_drawing, overlaps, readable_positions
from engine.model import LayerSpec


def chain(n: int) -> dict[str, LayerSpec]:
    """``n`` layers, each reading the one before."""
    return {f"l{i}": LayerSpec(f"l{i}", "convolution", inputs=[f"l{i - 1}"] if i else []) for i in range(n)}


def densenet(blocks: tuple[int, ...] = (6, 12, 24, 16), per_layer: int = 4) -> dict[str, LayerSpec]:
    """A densenet121-shaped graph: in each block, every dense layer (a concatenation and ``per_layer`` - 1 layers
    after it) reads every earlier output of its block; a transition after each block."""
    layers: dict[str, LayerSpec] = {"input": LayerSpec("input", "input")}
    prev = "input"
    for b, count in enumerate(blocks):
        members = [prev]
        for i in range(count):
            cat = f"b{b}_l{i}_cat"
            layers[cat] = LayerSpec(cat, "concatenation", inputs=list(members))
            x = cat
            for j in range(per_layer - 1):
                name = f"b{b}_l{i}_{j}"
                layers[name] = LayerSpec(name, "convolution", inputs=[x])
                x = name
            members.append(x)
        prev = f"transition{b}"
        layers[prev] = LayerSpec(prev, "concatenation", inputs=list(members))
    return layers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chain", type=int, default=10_000)
    args = parser.parse_args()
    for what, layers in (("densenet121-shaped", densenet()), (f"chain of {args.chain}", chain(args.chain))):
        sizes = dict.fromkeys(layers, NODE_SIZE)
        start = time.perf_counter()
        drawing = layered_drawing(layers, sizes)
        mid = time.perf_counter()
        readable_positions(layers, sizes)
        end = time.perf_counter()
        links = sum(len(s.inputs) for s in layers.values())
        print(f"{what}: {len(layers)} layers, {links} links: layered {mid - start:.2f} s, folded {end - mid:.2f} s, "
              f"{len(drawing.bends)} links bent, {len(overlaps(drawing.positions, sizes))} overlaps")


if __name__ == "__main__":
    main()
