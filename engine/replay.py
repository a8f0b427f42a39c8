"""Running a network's layers again without their per-layer Python work.

Where the backend captures graphs (CUDA), the second run of one set of layers is captured as a graph and later runs
replay it. Where it does not (the CPU), each layer whose whole forward was one prepared kernel call is replayed by
that call alone. Both hold only while the network's buffers stay the same: a new memory plan, a new input size or a
runtime option change drops them (``Replayer.drop``).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from engine.backends.base import Backend
from engine.layer import Layer, weights_generation
from engine.plugin_guard import plugin_code

#: what is kept of a layer just executed: its name, its replayable call (or None) and its weight arrays with their
#: ids (the arrays are held, so that their ids stay theirs)
Recorded = tuple[str, Callable[[], None] | None, tuple[tuple[int, ...], tuple[Any, ...]]]
#: a step of a run: given a layer's name
Step = Callable[[str], None]


class Replayer:
    """A network's replay state: its captured graph or its recorded kernel calls, for the latest set of layers.

    ``run`` takes the network's two steps: ``execute`` (compute a layer by its forward, with the layer hooks) and
    ``own`` (note that a layer's buffer holds its output after a replay computed it)."""

    def __init__(self, backend: Backend, layers: Mapping[str, Layer], layer_done: list[Callable[[str], None]],
                 capture: bool, layer_ended: list[Callable[[str, float], None]] | None = None) -> None:
        """``layers``: the network's layers by name; ``layer_done``: the callbacks told of each layer a replay of
        recorded calls computes (a graph's replay runs no Python per layer); ``layer_ended``: those told of each such
        layer's name and the host clock when it ended, after its call sequence (``Hooks.layer_ended``); ``capture``:
        capture graphs where the backend can (elsewhere: replay recorded calls)."""
        self.backend = backend
        self.layers = layers
        self.layer_done = layer_done
        self.layer_ended = [] if layer_ended is None else layer_ended
        self.graph_capture = capture and backend.supports_graphs
        self.graph_status = "off" if not self.graph_capture else "not captured yet"
        #: where the backend captures no graphs (the CPU): replay the kernel calls of the last run
        self.replay_calls = not self.graph_capture
        self.graph: Any = None
        self.graph_generation = -1
        self.graph_key: tuple[str, ...] | None = None
        self.recorded: list[Recorded] | None = None
        self.recorded_key: tuple[str, ...] | None = None
        #: the recorded layers as they run: runs of replayed calls (their names, one ``Backend.call_sequence``) and
        #: the layers between them (a name, None), with the weights generation they were recorded at
        self.segments: list[tuple[Any, Any]] = []
        self.segments_generation = -1
        self.last_key: tuple[str, ...] | None = None
        self.roots: Mapping[str, str] = {}

    def new_plan(self, roots: Mapping[str, str]) -> None:
        """The network planned its memory again: each layer's root (the layer whose buffer holds its output)."""
        self.roots = roots
        self.drop()

    def drop(self) -> None:
        """Forget the captured graph and the recorded calls: the next runs execute, record and capture afresh."""
        self.graph = self.graph_key = None
        self.recorded = self.recorded_key = None
        self.segments, self.segments_generation = [], -1
        self.last_key = None

    def run(self, key: tuple[str, ...], execute: Step, own: Step, eager: bool = False) -> None:
        """Compute the layers ``key`` (in execution order): by the captured graph or the recorded calls where they
        apply, else by ``execute``; ``eager`` (layer hooks are set): each by ``execute``."""
        if key and not eager and self.graph_capture:
            self._run_graph(key, execute, own)
        elif key and not eager and self.replay_calls:
            self._run_replay(key, execute, own)
        else:
            for name in key:
                execute(name)
        self.last_key = key

    def _run_replay(self, key: tuple[str, ...], execute: Step, own: Step) -> None:
        """Run this set of layers, replaying for each layer whose whole forward was one prepared kernel call in the
        last run of the same set (``Layer.replay_call``: the CPU's convolutions, poolings and fully connected
        layers) that call alone, while the layer keeps the same weight arrays. The layer's Python work (weights
        looked up, geometry worked out, the prepared call found and its arrays checked) is skipped: after a layer
        has streamed its weights through the caches, that work ran from memory and took 0.1-0.15 ms a layer,
        resnet18 6-10% of a run. The buffers a call reads and writes are the network's, the same until a new plan,
        a new input size or a runtime option change (all drop the replay, as they drop a CUDA graph); a layer given
        new weight arrays runs its forward and is recorded again."""
        if self.recorded is not None and self.recorded_key == key:
            if not self.layer_done and self.segments_generation == weights_generation():
                self._run_segments(execute, own)
                return
            for i, (name, call, weights) in enumerate(self.recorded):
                layer = self.layers[name]
                if call is None or tuple(map(id, layer.weights.values())) != weights[0]:
                    execute(name)
                    if call is not None:
                        self.recorded[i] = self._record(name)
                    continue
                try:
                    call()
                except Exception:
                    self.drop()  # recorded afresh by the next run
                    with plugin_code(name, layer, "forward"):
                        raise
                own(name)
                for done in self.layer_done:
                    done(name)
                if self.layer_ended:
                    now = time.perf_counter()
                    for ended in self.layer_ended:
                        ended(name, now)
            self.make_segments()
            return
        recorded = []
        for name in key:
            execute(name)
            recorded.append(self._record(name))
        self.recorded, self.recorded_key = recorded, key
        self.make_segments()

    def make_segments(self) -> None:
        """``segments`` from ``recorded``: each run of replayed calls one call sequence of the backend (the CPU's
        calls its kernels' launches straight, the lock taken once). Made when the calls are recorded; again by
        whoever replaces recorded calls (a benchmark timing each)."""
        segments: list[tuple[Any, Any]] = []
        names: list[str] = []
        calls: list[Callable[[], None]] = []
        for name, call, _ in self.recorded or ():
            if call is not None:
                names.append(name)
                calls.append(call)
                continue
            if calls:
                segments.append((tuple(names), self.backend.call_sequence(calls)))
                names, calls = [], []
            segments.append((name, None))
        if calls:
            segments.append((tuple(names), self.backend.call_sequence(calls)))
        self.segments, self.segments_generation = segments, weights_generation()

    def _run_segments(self, execute: Step, own: Step) -> None:
        """The recorded layers while no layer was given new weights and no ``layer_done`` callback wants each layer's
        end: each run of replayed calls as one sequence, the layers between them by ``execute``. ``layer_ended``
        callbacks are told of each replayed layer's end after its sequence (the sequence notes the clock after each
        call)."""
        stamps: list[float] | None = [] if self.layer_ended else None
        for names, sequence in self.segments:
            if sequence is None:
                execute(names)
                continue
            try:
                if stamps is None:
                    sequence()
                else:
                    stamps.clear()
                    sequence(stamps)
            except Exception:
                name = names[sequence.failed_at]
                self.drop()  # recorded afresh by the next run
                with plugin_code(name, self.layers[name], "forward"):
                    raise
            for name in names:
                own(name)
            if stamps is not None:
                for name, now in zip(names, stamps, strict=True):
                    for ended in self.layer_ended:
                        ended(name, now)

    def _record(self, name: str) -> Recorded:
        """What ``_run_replay`` keeps of a layer just executed (``Recorded``)."""
        layer = self.layers[name]
        call = layer.replay_call() if self.roots[name] == name else None
        if layer.activation is not None and not layer.fuses_activation:
            call = None  # the network applied the activation after the layer
        arrays = tuple(layer.weights.values())
        return name, call, (tuple(map(id, arrays)), arrays)

    def _run_graph(self, key: tuple[str, ...], execute: Step, own: Step) -> None:
        """Replay the captured graph (CUDA, by the backend) of this set of layers, or capture it on its second run
        (again when a layer was given new weights: the graph reads the arrays it was captured with)."""
        if self.graph is not None and self.graph_generation != weights_generation():
            self.graph = self.graph_key = None
        if self.graph is not None and self.graph_key == key:
            self.backend.launch_graph(self.graph)
            for n in key:
                if self.roots[n] == n:
                    own(n)
            return
        if key != self.last_key or self.graph_status.startswith("failed"):
            for name in key:  # first run of this set: eager (warms caches, plans cuDNN graphs)
                execute(name)
            return
        current = [""]

        def run_layers() -> None:
            for name in key:
                current[0] = name
                execute(name)

        try:
            graph = self.backend.capture_graph(run_layers)
            self.backend.launch_graph(graph)
            self.graph, self.graph_key, self.graph_generation = graph, key, weights_generation()
            self.graph_status = f"captured ({len(key)} layers)"
        except Exception as exc:  # a layer that cannot be captured (host sync, pageable copy): stay eager
            self.graph_status = f"failed at layer {current[0]}: {type(exc).__name__}: {exc}"
            self.backend.synchronize()
            for name in key:
                execute(name)
