"""The OPS start walk that hops 16 instructions per Python step (reader._walk_window) against the
field-by-field decoder, with windows small enough that hops, window ends and the one-at-a-time
tail all meet (a real window holds thousands of instructions)."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from nac_engine import read
from nac_engine.format import reader as R
from tests.format.test_decoder_cost import _reference_ops, crafted

_FILES = {"ops": crafted("ops", 1), "ops_distinct": crafted("ops_distinct", 1)}


@given(st.sampled_from(sorted(_FILES)), st.sampled_from([16, 40, 256, 1 << 12, 1 << 15]),
       st.lists(st.tuples(st.integers(0, 30_000), st.integers(0, 255)), max_size=4), st.integers(0, 40))
@settings(max_examples=80, deadline=None)
def test_hopping_walk_decodes_like_the_field_by_field_decoder(name, window, edits, cut):
    data = bytearray(_FILES[name])
    ops = read(bytes(data)).spans.find("OPS")
    for at, value in edits:
        data[ops.offset + 8 + at % (ops.length - 8)] = value
    if cut:
        data[ops.end - cut:ops.end] = bytes(cut)
    saved = R._OPS_WINDOW
    R._OPS_WINDOW = window
    try:
        mutated, want, want_problems = _reference_ops(bytes(data))
    finally:
        R._OPS_WINDOW = saved
    assert [(i.a, i.b, i.c, i.d, i.offset) for i in mutated.instructions] == want
    assert [(p.section, p.offset, p.reason) for p in mutated.problems if p.section == "OPS"] == want_problems
