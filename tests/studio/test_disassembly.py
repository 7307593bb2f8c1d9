"""Disassembly view: the lazy table model, resolved arguments, links, filter, selection sync."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import QModelIndex, QPoint, Qt  # noqa: E402
from PySide6.QtGui import QFontMetrics  # noqa: E402

from nac_engine.format.model import Header, Instruction, NacFile  # noqa: E402
from nac_engine.format.reader import read  # noqa: E402
from nac_engine.isa.coerce import use_note  # noqa: E402
from nac_engine.text.literals import format_literal  # noqa: E402
from nac_studio.model.document import Document, Selection  # noqa: E402
from nac_studio.qt_document import QtDocument  # noqa: E402
from nac_studio.views.disassembly import (COL_ARGS, COL_MMAP, COL_OP, COL_TICK, DisassemblyModel,  # noqa: E402
                                          DisassemblyView, SegmentsRole)


@pytest.fixture
def bert(qdoc_for, corpus_case):
    return qdoc_for(corpus_case("bert_tiny"))


@pytest.fixture
def view(qtbot, bert):
    v = DisassemblyView(bert)
    qtbot.addWidget(v)
    v.resize(1200, 600)
    v.show()
    qtbot.waitExposed(v)
    return v


def test_model_passes_qmodeltester(qtmodeltester, bert):
    model = DisassemblyModel()
    model.set_nac(bert.nac)
    qtmodeltester.check(model)
    model.set_filter("linear")
    assert 0 < model.rowCount() < len(bert.nac.instructions)
    qtmodeltester.check(model)


def test_every_corpus_file_rows_resolve_their_arguments(corpus_file):
    nac = read(str(corpus_file))
    model = DisassemblyModel()
    model.set_nac(nac)
    assert model.rowCount() == len(nac.instructions)
    loads = {ins.index: ins.c[1] for ins in nac.instructions if ins.a == 2 and ins.b == 1}
    for ins in nac.instructions:
        row = model.row_data(ins.index)
        assert row.op == nac.instruction_name(ins)
        assert row.offset == (f"0x{ins.offset:08x}" if ins.offset >= 0 else "")
        segs = [s for s in row.segments if s.text != ", "]
        if ins.a >= 10:
            args = nac.arguments(ins)
            assert len(segs) == len(args)
            for seg, arg in zip(segs, args):
                if arg.kind == "ref" and arg.producer in loads:       # parameters by name
                    pid = loads[arg.producer]
                    assert seg.kind == "param" and seg.text == nac.params[pid].name
                    assert seg.target == Selection("param", pid)
                elif arg.kind == "ref":                                 # producers as vN links
                    assert seg.kind == "ref" and seg.text == f"v{arg.producer}"
                    assert seg.target == Selection("instruction", arg.producer)
                else:                                                   # constants by value
                    c = nac.constants[arg.const_id]
                    assert seg.kind == "const"
                    used = use_note(c.value, arg.code)     # a shared constant as the op uses it
                    assert seg.text == (used or format_literal(c.type, c.value)[:48]) or seg.text.endswith("…")
        elif ins.a == 2 and ins.b == 1:
            assert segs[0].target == Selection("param", ins.c[1])
        elif ins.a == 3:
            assert [s.target for s in segs] == [Selection("instruction", p) if p not in loads
                                                else Selection("param", loads[p]) for p in ins.producers()]
    # the MMAP column lists that tick's commands
    by_tick = nac.mmap_by_tick()
    for t, cmds in by_tick.items():
        if t < len(nac.instructions):
            text = model.data(model.index(t, COL_MMAP))
            assert text.count("v") == len(cmds)


def test_rows_are_formatted_lazily(qtbot):
    n = 120_000
    nac = NacFile(Header(version="1.8"))
    nac.cmap = {40: "aten.relu.default"}
    nac.perms = {1: "T", 2: "TT"}
    ins = [Instruction(0, 2, 0, None, None)]
    for i in range(1, n):
        ins.append(Instruction(i, 11, 2, None, (-1, -2)) if i % 3 == 0 and i > 1 else Instruction(i, 40, 1, None, (-1,)))
    nac.instructions = ins
    qdoc = QtDocument(Document(nac))
    v = DisassemblyView(qdoc)
    qtbot.addWidget(v)
    v.resize(900, 500)
    v.show()
    qtbot.waitExposed(v)
    assert v.model.rowCount() == n
    # only what is on screen (plus the cache) was formatted, not 120k rows
    assert len(v.model._cache) < 200
    qdoc.select(Selection("instruction", n - 5))
    assert v.table.currentIndex().row() == n - 5
    assert len(v.model._cache) < 400
    v.filter.setText("add")
    v.apply_filter()
    assert v.model.rowCount() == len(range(3, n, 3))
    assert v.count.text() == f"{v.model.rowCount():,} of {n:,}"
    qdoc.tasks.shutdown()


def test_click_row_selects_instruction(view, bert, qtbot):
    rect = view.table.visualRect(view.model.index(12, COL_OP))
    qtbot.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert bert.selection == Selection("instruction", 12)
    assert bert.tick == 12


def test_document_selection_moves_the_current_row(view, bert):
    bert.select(Selection("instruction", 40))
    assert view.table.currentIndex().row() == 40
    assert view.model.data(view.model.index(40, COL_TICK), Qt.ItemDataRole.BackgroundRole) is not None
    assert view.model.data(view.model.index(39, COL_TICK), Qt.ItemDataRole.BackgroundRole) is None
    # a parameter selects the row that loads it
    pid = next(p.id for p in bert.nac.params.values() if p.name.endswith("layer.1.attention.self.key.weight"))
    load = next(i.index for i in bert.nac.instructions if i.a == 2 and i.b == 1 and i.c[1] == pid)
    bert.select(Selection("param", pid))
    assert view.table.currentIndex().row() == load
    # the tick stays where it was: the highlighted row is still instruction 40
    assert bert.tick == 40
    assert view.model.data(view.model.index(40, COL_TICK), Qt.ItemDataRole.BackgroundRole) is not None
    bert.set_tick(41)
    assert view.model.data(view.model.index(40, COL_TICK), Qt.ItemDataRole.BackgroundRole) is None
    assert view.model.data(view.model.index(41, COL_TICK), Qt.ItemDataRole.BackgroundRole) is not None


def _click_segment(view, qtbot, row: int, k: int):
    idx = view.model.index(row, COL_ARGS)
    segs = idx.data(SegmentsRole)
    font = idx.data(Qt.ItemDataRole.FontRole)
    fm = QFontMetrics(font)
    rect = view.table.visualRect(idx)
    x = rect.left() + 4 + sum(fm.horizontalAdvance(s.text) for s in segs[:k]) + fm.horizontalAdvance(segs[k].text) // 2
    assert x < rect.right(), "segment is off screen"
    qtbot.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(x, rect.center().y()))


def test_argument_links_select_producer_param_and_constant(view, bert, qtbot):
    # v29 = aten.linear.default(v19, <query.weight>, <query.bias>)
    segs = view.model.index(29, COL_ARGS).data(SegmentsRole)
    assert [s.kind for s in segs if s.text != ", "] == ["ref", "param", "param"]
    _click_segment(view, qtbot, 29, 0)
    assert bert.selection == Selection("instruction", 19)
    assert view.table.currentIndex().row() == 19          # the view followed its own link
    _click_segment(view, qtbot, 29, 2)
    assert bert.selection.kind == "param"
    assert bert.nac.params[bert.selection.key].name.endswith("layer.0.attention.self.query.weight")
    # v30 = nac.view(v29, [1, -1, 2, 32]): the list constant links to its CNST entry
    segs = view.model.index(30, COL_ARGS).data(SegmentsRole)
    k = next(i for i, s in enumerate(segs) if s.kind == "const")
    _click_segment(view, qtbot, 30, k)
    assert bert.selection == segs[k].target and bert.selection.kind == "constant"
    assert list(bert.nac.constants[bert.selection.key].value) == [1, -1, 2, 32]


def test_filter(view, bert, qtbot):
    nac = bert.nac
    view.filter.setText("layer_norm")
    view.apply_filter()
    want = [i.index for i in nac.instructions if "layer_norm" in nac.instruction_name(i)]
    assert [view.model.tick_at(r) for r in range(view.model.rowCount())] == want
    view.filter.setText("v39")
    view.apply_filter()
    assert view.model.rowCount() == 1 and view.model.tick_at(0) == 39
    view.filter.setText("LAYER.1 query")    # words AND, any case: op or parameter name
    view.apply_filter()
    ticks = [view.model.tick_at(r) for r in range(view.model.rowCount())]
    assert ticks and all("layer.1.attention.self.query" in nac.params[nac.instructions[t].c[1]].name for t in ticks)
    # the filter is debounced while typing
    view.filter.setText("")
    qtbot.waitUntil(lambda: view.model.rowCount() == len(nac.instructions), timeout=2000)
    # a selected instruction outside the filter is not shown as selected
    view.filter.setText("softmax")
    view.apply_filter()
    bert.select(Selection("instruction", 3))
    assert not view.table.currentIndex().isValid()
    bert.select(Selection("instruction", 46))
    assert view.model.tick_at(view.table.currentIndex().row()) == 46


def test_filter_by_mmap_action(qdoc_for, corpus_case, qtbot):
    qdoc = qdoc_for(corpus_case("mlp"))
    v = DisassemblyView(qdoc)
    qtbot.addWidget(v)
    v.filter.setText("preload")
    v.apply_filter()
    by_tick = qdoc.nac.mmap_by_tick()
    want = sorted(t for t, cmds in by_tick.items() if any(c.name == "PRELOAD" for c in cmds))
    assert [v.model.tick_at(r) for r in range(v.model.rowCount())] == want and want


def test_set_document_none_and_back(view, bert):
    view.set_document(None)
    assert view.model.rowCount() == 0
    assert view.model.rowCount(QModelIndex()) == 0
    view.set_document(bert)
    assert view.model.rowCount() == len(bert.nac.instructions)


def test_shared_constant_shows_the_used_value_and_the_stored_form(corpus_case):
    nac = read(str(corpus_case("consts_mixed")))
    model = DisassemblyModel()
    model.set_nac(nac)
    segs = [s.text for s in model.row_data(8).segments if s.text != ", "]
    assert segs[-1] == "1 (stored 1.0)"          # aten.cat.default(v4, v7, dim) stored as 1.0


def test_data_cost_per_call_on_a_2000_row_model_stays_small(qapp):
    """Qt 6 asks a model for ~10 roles per cell per repaint, so data() must be a dispatch,
    not a chain of enum comparisons that builds colours: per call, within 60× a no-op Python
    function called by the same loop in the same run (~24× now; the old chain was ~130×)."""
    import time

    from PySide6.QtCore import Qt

    from nac_studio.views.disassembly import DisassemblyModel, SegmentsRole, TickRole
    from tests.studio.gpt2_like import gpt2_like
    nac = gpt2_like(36, d=64, n_head=2, seq=4)
    assert len(nac.instructions) >= 2000
    m = DisassemblyModel()
    m.set_nac(nac)
    m.set_current_tick(7)
    roles = [int(r) for r in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.DecorationRole, Qt.ItemDataRole.FontRole,
                              Qt.ItemDataRole.TextAlignmentRole, Qt.ItemDataRole.BackgroundRole,
                              Qt.ItemDataRole.ForegroundRole, Qt.ItemDataRole.CheckStateRole,
                              Qt.ItemDataRole.ToolTipRole, SegmentsRole, TickRole)]
    cells = [m.index(r, c) for r in range(1000, 1040) for c in range(m.columnCount())]
    assert m.data(m.index(7, 0), int(Qt.ItemDataRole.BackgroundRole)) is not None      # the current tick's tint
    assert m.data(m.index(1000, 0), TickRole) == 1000

    def noop(_index, _role):
        return None

    def per_call(fn) -> float:
        t = time.perf_counter()
        for idx in cells:
            for role in roles:
                fn(idx, role)
        return (time.perf_counter() - t) / (len(cells) * len(roles))
    per_call(m.data)                                 # rows formatted once (cached), then timed
    data = min(per_call(m.data) for _ in range(7))
    trivial = min(per_call(noop) for _ in range(7))
    assert data < 60 * trivial, f"data() {data * 1e6:.2f} µs per call vs a no-op {trivial * 1e6:.3f} µs"
