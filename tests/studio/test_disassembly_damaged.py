"""Damaged instructions are marked in the disassembly as on the graph (issue 12).

Files are cut from the demo model's bytes (as in ``test_damaged.py``); the rows the graph
marks (``graph_problems.problem_ticks``, the one source of truth) get a red tint and the
reason as tooltip on every column, and clean rows get neither.
"""
from __future__ import annotations

from PySide6.QtCore import Qt

from nac_studio.model.graph_problems import problem_ticks
from nac_studio.views.disassembly import COL_ARGS, COL_OP, COL_TICK, HEADERS

TIP, BG = Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.BackgroundRole


def _open_cut(window, demo_path, tmp_path, cut: int):
    data = demo_path.read_bytes()
    path = tmp_path / "damaged.nac"
    path.write_bytes(data[:cut] if cut > 0 else data[:len(data) + cut])
    return window.open_and_wait(path)


def _row_marks(window, tick):
    model = window.disassembly_view.model
    row = model.row_of_tick(tick)
    assert row is not None
    tips = [model.data(model.index(row, c), TIP) for c in range(len(HEADERS))]
    bg = model.data(model.index(row, COL_OP), BG)
    return tips, bg


def _disasm(window):
    return window.disassembly_view


def test_missing_tensor_rows_are_red_with_reason(window, demo_path, tmp_path):
    qdoc = _open_cut(window, demo_path, tmp_path, -700)      # DATA cut: fc2's tensors are gone
    doc = qdoc.doc
    marked = problem_ticks(doc)
    assert marked, "cutting DATA must leave loads without tensors"
    view = _disasm(window)
    # select a clean row so the current-tick tint is not on a damaged one
    clean = [t for t in range(len(doc.nac.instructions)) if t not in marked]
    assert clean
    view.select_tick(clean[0])
    for tick, reason in marked.items():
        tips, bg = _row_marks(window, tick)
        assert all(t is not None and reason in t for t in tips), tips
        assert bg is not None and bg.red() > 150 and bg.green() < 100, bg
    for tick in clean[1:]:
        tips, bg = _row_marks(window, tick)
        assert bg is None
        assert not any(t and "Damaged" in t for t in tips)


def test_decode_problem_rows_marked_and_clean_file_has_none(window, demo_path, tmp_path):
    qdoc = _open_cut(window, demo_path, tmp_path, 230)       # cut in OPS: bad signatures
    marked = problem_ticks(qdoc.doc)
    assert marked
    view = _disasm(window)
    assert view.model.problem_ticks == marked
    tick, reason = next(iter(marked.items()))
    tips, _bg = _row_marks(window, tick)
    assert reason in tips[COL_ARGS] and reason in tips[COL_TICK]
    window.close_document(qdoc)
    window.open_and_wait(demo_path)
    assert _disasm(window).model.problem_ticks == {}
