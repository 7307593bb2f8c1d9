"""Document model: back/forward history, selection ↔ bytes, field descriptions (no Qt)."""
from __future__ import annotations

import pytest

from nac_studio.model.document import Document, Selection


@pytest.fixture
def doc(demo_path):
    d = Document.open(str(demo_path))
    yield d
    d.nac.close()


def test_back_and_forward_walk_the_selection_history(doc):
    seen = []
    doc.observe(lambda ev, _d, src: seen.append((ev, src)))
    a, b, c = Selection("instruction", 3), Selection("param", 1), Selection("section", "OPS")
    for s in (a, b, c):
        doc.select(s, source="test")
    assert doc.can_go_back and not doc.can_go_forward
    doc.go_back()
    assert doc.selection == b
    doc.go_back()
    assert doc.selection == a
    assert not doc.can_go_back and doc.can_go_forward
    doc.go_forward()
    assert doc.selection == b
    # a new selection after going back drops the forward history, like a browser
    doc.select(Selection("constant", 99) if 99 in doc.nac.constants else Selection("instruction", 5))
    assert not doc.can_go_forward
    assert ("selection", "test") in seen


def test_going_back_does_not_record_itself(doc):
    doc.select(Selection("instruction", 1))
    doc.select(Selection("instruction", 2))
    doc.go_back()
    doc.go_back()   # nothing left: stays put
    assert doc.selection == Selection("instruction", 1)
    doc.go_forward()
    assert doc.selection == Selection("instruction", 2)
    assert not doc.can_go_forward


def test_selecting_an_instruction_moves_the_tick(doc):
    doc.select(Selection("instruction", 7))
    assert doc.tick == 7
    doc.select(Selection("param", 1))
    assert doc.tick == 7   # a parameter has no tick of its own: the tick stays


def test_a_field_inside_an_instruction_moves_the_tick_to_it(doc):
    ins = doc.nac.instructions[3]
    leaf = doc.nac.spans.span_at(ins.offset + 2)   # D[0]
    assert leaf.path == "OPS/instr[3]/D[0]"
    doc.select(Selection("span", leaf.path))
    assert doc.tick == 3
    assert doc.owner_of(leaf) == Selection("instruction", 3)
    doc.select(Selection("offset", ins.offset + 1))
    assert doc.tick == 3


def test_selection_at_returns_the_record_and_spans_of_returns_its_bytes(doc):
    for ins in doc.nac.instructions:
        for off in range(ins.offset, ins.offset + ins.nbytes):
            sel = doc.selection_at(off)
            assert sel == Selection("instruction", ins.index)
        (span,) = doc.spans_of(Selection("instruction", ins.index))
        assert (span.offset, span.length) == (ins.offset, ins.nbytes)
    p = next(iter(doc.nac.params.values()))
    spans = doc.spans_of(Selection("param", p.id))
    assert len(spans) == 2   # its name record and its tensor record
    assert any(s.offset <= p.data_offset < s.end for s in spans)


def test_describe_span_resolves_producers_constants_and_params(doc):
    nac = doc.nac
    linear = next(i for i in nac.instructions if nac.instruction_name(i) == "aten.linear.default")
    d0 = nac.spans.span_at(linear.offset + 2)
    producer = linear.index + linear.d[0]
    text = doc.describe_span(d0)
    assert text.startswith(f"OPS/instr[{linear.index}]/D[0] = {linear.d[0]} → v{producer}")
    assert nac.instruction_name(nac.instructions[producer]) in text
    load = next(i for i in nac.instructions if i.a == 2 and i.b == 1)
    c1 = nac.spans.span_at(load.offset + 4)
    assert doc.describe_span(c1).endswith(f"→ param {nac.params[load.c[1]].name}")
    a = nac.spans.span_at(linear.offset)
    assert doc.describe_span(a).endswith("→ aten.linear.default")


def test_describe_span_on_an_mmap_target_names_the_value(doc):
    rec = next(r for r in doc.nac.mmap if r.commands)
    target = doc.nac.spans.span_at(rec.offset + 4)
    assert target.name == "target"
    t = rec.commands[0].target
    assert doc.describe_span(target).endswith(f"→ v{t} ({doc.nac.instruction_name(doc.nac.instructions[t])})")


def test_the_effective_tick_is_the_execution_point_while_a_run_has_one(doc):
    """RenderDoc's current event: the selection's tick, until a run stops somewhere; before the
    first step (tick -1) and after the session ends, the selection again."""
    from types import SimpleNamespace
    doc.select(Selection("instruction", 3))
    assert doc.execution_tick is None and doc.effective_tick == 3
    doc.debug = SimpleNamespace(tick=-1)            # started, nothing executed yet
    assert doc.execution_tick is None and doc.effective_tick == 3
    doc.debug.tick = 5
    assert doc.execution_tick == 5 and doc.effective_tick == 5
    doc.select(Selection("instruction", 1))          # selecting does not move the execution point
    assert doc.tick == 1 and doc.effective_tick == 5
    doc.debug.tick = None                            # the run ended
    assert doc.effective_tick == 1
