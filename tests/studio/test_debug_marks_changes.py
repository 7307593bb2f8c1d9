"""``debug_marks.graph_overlay_changes``: the per-stop change list the graph canvas applies instead of
replacing its layers must lead to exactly the layers ``graph_overlays`` gives for the new stop."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nac_studio import debug_marks
from nac_studio.debug_marks import DebugMarks, graph_overlay_changes, graph_overlays

N = 40


@st.composite
def marks(draw) -> DebugMarks:
    m = DebugMarks()
    m.exec_tick = draw(st.one_of(st.none(), st.integers(-1, N - 1)))
    if m.exec_tick is not None and draw(st.booleans()):
        m.error_tick, m.error = draw(st.integers(0, N - 1)), "boom"
    m.breakpoints = draw(st.dictionaries(st.integers(0, N - 1), st.booleans(), max_size=6))
    return m


def _apply(layers: dict, changes: dict) -> dict:
    out = {name: dict(styles) for name, styles in layers.items()}
    for name, change in changes.items():
        for key, style in change.items():
            if style is None:
                out[name].pop(key, None)
            else:
                out[name][key] = style
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(marks(), min_size=2, max_size=6))
def test_changes_lead_to_the_full_layers(stops):
    shown = graph_overlays(stops[0])
    for old, new in zip(stops, stops[1:]):
        shown = _apply(shown, graph_overlay_changes(old, new))
        assert shown == graph_overlays(new)


def test_a_step_changes_two_entries_not_the_executed_range():
    a, b = DebugMarks(), DebugMarks()
    a.exec_tick, b.exec_tick = 500, 501
    changes = graph_overlay_changes(a, b)
    assert changes["debug.executed"] == {500: debug_marks.EXECUTED_STYLE}
    assert set(changes["debug.current"]) == {500, 501} and changes["debug.current"][500] is None
    assert changes["debug.breakpoints"] == {}
    back = graph_overlay_changes(b, a)      # Step Back: the shading of 500 goes
    assert back["debug.executed"] == {500: None}
