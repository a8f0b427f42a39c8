"""The network's memory plan on hand-made graphs: buffer roots through aliases, slot reuse by liveness (best fit,
pinned buffers kept, aliases sharing their root's slot) and the layers a run must compute when a buffer was taken."""
from __future__ import annotations

from engine.memory_plan import assign_slots, buffer_roots, evaluation_set, holds_output


def graph(links: dict[str, list[str | None]]) -> tuple[list[str], dict[str, list[str | None]], dict[str, list[str]]]:
    """(order, inputs, readers) of layers given in execution order with their inputs."""
    order = list(links)
    readers: dict[str, list[str]] = {n: [] for n in order}
    for n, ins in links.items():
        for s in ins:
            if s is not None:
                readers[s].append(n)
    return order, links, readers


def plain_roots(order: list[str]) -> dict[str, str]:
    return {n: n for n in order}


def test_a_chain_reuses_the_slot_of_a_buffer_no_longer_read():
    order, _, readers = graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c"]})
    sizes = dict.fromkeys(order, 64)
    capacity, slot_of = assign_slots(order, plain_roots(order), readers, {"a", "d"}, sizes, reuse=True)
    # b is free once c has run: d (computed after c) takes its slot; c cannot, as it reads b
    assert slot_of == {"a": 0, "b": 1, "c": 2, "d": 1}
    assert capacity == [64, 64, 64]
    capacity, slot_of = assign_slots(order, plain_roots(order), readers, {"a", "d"}, sizes, reuse=False)
    assert sorted(slot_of.values()) == [0, 1, 2, 3] and capacity == [64] * 4


def test_a_pinned_buffer_is_never_reused():
    order, _, readers = graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c"]})
    sizes = dict.fromkeys(order, 64)
    _, free_a = assign_slots(order, plain_roots(order), readers, {"d"}, sizes, reuse=True)
    assert free_a["c"] == free_a["a"]  # a is free after b: c takes its slot
    _, kept = assign_slots(order, plain_roots(order), readers, {"a", "d"}, sizes, reuse=True)
    assert [n for n in order if kept[n] == kept["a"]] == ["a"]


def test_the_smallest_free_slot_that_fits_is_taken_else_the_largest_grows():
    order, _, readers = graph({"x": [], "p": ["x"], "q": ["x"], "r": ["p", "q"], "s": ["r"], "t": ["s"]})
    sizes = {"x": 1, "p": 100, "q": 10, "r": 1, "s": 8, "t": 200}
    capacity, slot_of = assign_slots(order, plain_roots(order), readers, {"x", "t"}, sizes, reuse=True)
    assert slot_of["s"] == slot_of["q"]  # 8 bytes: the 10-byte slot, not the 100-byte one
    assert slot_of["t"] == slot_of["p"] and capacity[slot_of["t"]] == 200  # nothing fits 200: the largest grows
    assert capacity == [1, 200, 10, 1]


def test_an_aliasing_layer_shares_its_roots_slot_and_keeps_it_alive_for_its_readers():
    # b passes a through (bypass): its readers read a's buffer, so a's slot stays taken until c has run
    order, inputs, readers = graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c"], "e": ["d"]})
    roots = buffer_roots(order, inputs, {"b": 0})
    assert roots == {"a": "a", "b": "a", "c": "c", "d": "d", "e": "e"}
    sizes = {n: 64 for n in order if roots[n] == n}
    _, slot_of = assign_slots(order, roots, readers, {"e"}, sizes, reuse=True)
    assert slot_of["b"] == slot_of["a"]
    assert slot_of["c"] != slot_of["a"]  # c reads a's buffer through b
    assert slot_of["d"] == slot_of["a"]  # free once c has run


def test_a_layer_writes_over_an_input_it_reads_last_and_only_then():
    # s = conv(b) + a: a residual sum may write over a, whose last reader it is; t's over b, which u still reads
    order, _, readers = graph({"x": [], "a": ["x"], "b": ["a"], "s": ["b", "a"], "t": ["s", "b"], "u": ["t", "b"]})
    sizes = dict.fromkeys(order, 64)
    over = {"s": ["a"], "t": ["b"]}
    _, slot_of = assign_slots(order, plain_roots(order), readers, {"x", "u"}, sizes, reuse=True, overwrites=over)
    assert slot_of["s"] == slot_of["a"]
    assert slot_of["t"] not in (slot_of["b"], slot_of["s"])  # b is read by u after t
    _, plain = assign_slots(order, plain_roots(order), readers, {"x", "u"}, sizes, reuse=True)
    assert plain["s"] != plain["a"]
    _, kept = assign_slots(order, plain_roots(order), readers, {"x", "a", "u"}, sizes, reuse=True, overwrites=over)
    assert kept["s"] != kept["a"]  # a pinned buffer is never written over
    _, fresh = assign_slots(order, plain_roots(order), readers, {"x", "u"}, sizes, reuse=False, overwrites=over)
    assert len(set(fresh.values())) == len(order)
    _, other = assign_slots(order, plain_roots(order), readers, {"x", "u"}, sizes | {"s": 32}, reuse=True,
                            overwrites=over)
    assert other["s"] != other["a"]  # of another size
    _, second = assign_slots(order, plain_roots(order), readers, {"x", "u"}, sizes, reuse=True,
                             overwrites={"t": ["b", "s"]})
    assert second["t"] == second["s"]  # b is read after t: the next one it may write over


def test_roots_follow_chains_of_aliases_and_stop_at_an_unconnected_input():
    order, inputs, _ = graph({"a": [], "b": ["a"], "c": ["b"], "d": [None, "c"]})
    assert buffer_roots(order, inputs, {"b": 0, "c": 0, "d": 0}) == {"a": "a", "b": "a", "c": "a", "d": "d"}
    assert buffer_roots(order, inputs, {"d": 1, "c": 0}) == {"a": "a", "b": "b", "c": "b", "d": "b"}


def test_a_producer_whose_buffer_was_taken_is_computed_again_with_its_readers():
    order, inputs, readers = graph({"a": [], "b": ["a"], "c": ["b"]})
    roots = plain_roots(order)
    slot_of = {"a": 0, "b": 1, "c": 0}  # c reuses a's slot
    owner = ["c", "b"]  # after a full run
    assert not holds_output("a", roots, slot_of, owner) and holds_output("c", roots, slot_of, owner)
    assert evaluation_set({"b"}, order, inputs, readers, roots, slot_of, owner) == {"a", "b", "c"}
    assert evaluation_set({"c"}, order, inputs, readers, roots, slot_of, owner) == {"c"}  # b still holds
    kept = ["a", "b"]  # a's buffer still holds its output
    assert evaluation_set({"b"}, order, inputs, readers, roots, slot_of, kept) == {"b", "c"}
    assert evaluation_set({"b"}, order, inputs, readers, roots, slot_of, kept, downstream=False) == {"b"}


def test_a_recycled_alias_brings_back_its_root():
    order, inputs, readers = graph({"a": [], "b": ["a"], "c": ["b"], "d": ["c"]})
    roots = buffer_roots(order, inputs, {"b": 0})
    slot_of = {"a": 0, "b": 0, "c": 1, "d": 0}  # d reuses a's slot (and so b's)
    owner = ["d", "c"]
    assert evaluation_set({"c"}, order, inputs, readers, roots, slot_of, owner, downstream=False) == {"a", "b", "c"}


def test_joins_of_the_same_leading_inputs_form_a_chain():
    """A join whose leading inputs are an earlier join's (DenseNet: every layer joins all earlier outputs again)
    extends it; a join extended once is not extended again, and other prefixes do not count."""
    from engine.memory_plan import join_chains

    order, inputs, _ = graph({"x": [], "j1": ["x"], "f1": ["j1"], "j2": ["x", "f1"], "f2": ["j2"],
                              "j3": ["x", "f1", "f2"], "k": ["x", "f1"], "other": ["f1", "x", "f2"]})
    joins = {"j1", "j2", "j3", "k", "other"}
    chains = join_chains(order, inputs, joins)
    assert chains == {"j1": ("j1", None, 0), "j2": ("j1", "j1", 1), "j3": ("j1", "j2", 2)}
    # k has j2's inputs but j2 is already extended by j3: a tree is not a chain; 'other' extends nothing
    assert join_chains(order, inputs, {"j2", "j3"}) == {"j2": ("j2", None, 0), "j3": ("j2", "j2", 2)}
    # j3 extends j1 when j2 is not a join that may: one input in place, two to write
    assert join_chains(order, inputs, {"j1", "j3"}) == {"j1": ("j1", None, 0), "j3": ("j1", "j1", 1)}
    assert join_chains(order, inputs, {"j1", "other"}) == {}  # other's leading input is f1, not x


def test_a_chain_of_joins_shares_one_slot_for_its_whole_life():
    """The joins of a chain write into the first one's slot, sized for the longest; it is held until the last
    reader of any of them, and the slots of layers read last by a join are free after it."""
    order, _, readers = graph({"x": [], "j1": ["x"], "f1": ["j1"], "j2": ["x", "f1"], "f2": ["j2"],
                               "j3": ["x", "f1", "f2"], "g": ["j3"], "h": ["g"], "out": ["h"]})
    sizes = {**dict.fromkeys(order, 64), "j1": 192, "h": 192}
    shared = {"j2": "j1", "j3": "j1"}
    capacity, slot_of = assign_slots(order, plain_roots(order), readers, {"x", "out"}, sizes, True, shared)
    assert slot_of["j1"] == slot_of["j2"] == slot_of["j3"]
    assert capacity[slot_of["j1"]] == 192
    # nothing computed while the chain lives takes its slot; after g (the last reader), h may
    assert all(slot_of[n] != slot_of["j1"] for n in ("f1", "f2", "g"))
    assert slot_of["h"] == slot_of["j1"]
    # the slots of f1 and f2, read last by j3, are free after it: g and out take them, no new slot
    assert {slot_of["g"], slot_of["out"]} == {slot_of["f1"], slot_of["f2"]} and len(capacity) == 4
