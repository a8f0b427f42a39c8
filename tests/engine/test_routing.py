"""Routes found from boxes alone: through the free space of the columns a link crosses, around when it runs back,
kept while clear, found again when a box comes over them."""
from __future__ import annotations

from engine.routing import BoxGrid, route_clear, route_links

BOXES = {"a": (0.0, 0.0, 100.0, 150.0), "b": (200.0, 0.0, 100.0, 60.0), "b2": (200.0, 90.0, 100.0, 60.0),
         "c": (400.0, 0.0, 100.0, 150.0)}


def clear(boxes, link, ports, route) -> bool:  # noqa: ANN001
    grid = BoxGrid(boxes)
    ends = {grid.names.index(n) for n in link}
    return route_clear(*ports[:1], route, ports[1], grid, ends)


def test_a_skip_link_passes_a_column_between_its_boxes() -> None:
    ports = {("a", "c"): ((100.0, 40.0), (400.0, 40.0)), ("a", "b"): ((100.0, 30.0), (200.0, 30.0))}
    routes = route_links(BOXES, ports)
    assert routes[("a", "b")] == [(100.0, 30.0), (200.0, 30.0)]  # nothing between: straight
    route = routes[("a", "c")]
    assert len(route) > 2 and clear(BOXES, ("a", "c"), ports[("a", "c")], route)
    y = route[1][1]  # through the column of b and b2, in the gap between them
    assert 60.0 < y < 90.0
    assert not clear(BOXES, ("a", "c"), ports[("a", "c")], [])  # drawn straight it would run behind b


def test_a_link_running_back_goes_around() -> None:
    ports = {("c", "a"): ((500.0, 30.0), (0.0, 30.0))}
    route = route_links(BOXES, ports)[("c", "a")]
    assert clear(BOXES, ("c", "a"), ports[("c", "a")], route)


def test_a_kept_route_stays_until_a_box_comes_over_it() -> None:
    ports = {("a", "c"): ((100.0, 30.0), (400.0, 30.0))}
    old = route_links(BOXES, ports)
    assert route_links(BOXES, ports, keep=old) == old
    y = old[("a", "c")][1][1]
    moved = {**BOXES, "x": (150.0, y - 10.0, 20.0, 20.0)}  # a box now over the route
    new = route_links(moved, ports, keep=old)[("a", "c")]
    assert new != old[("a", "c")] and clear(moved, ("a", "c"), ports[("a", "c")], new)


def test_a_link_no_route_serves_is_left_out() -> None:
    walled = {**BOXES, "wall": (150.0, -1e6, 20.0, 2e6)}
    ports = {("a", "c"): ((100.0, 30.0), (400.0, 30.0))}
    assert route_links(walled, ports) == {}
