"""Hex view: painting reads only what is on screen, search, go to, copy, bookmarks, hover."""
from __future__ import annotations

import random

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt

from nac_studio.model.document import Selection
from nac_studio.views import hex as hexmod
from nac_studio.views.hex import (FileChunks, HexView, find_in, format_c_array, format_hex, parse_goto,
                                  parse_hex_pattern)
from nac_studio.widgets.hex_area import ROW, HexArea


class CountingBuffer:
    """A 1 GB 'file' that records how many bytes painting asks for."""

    def __init__(self, size: int):
        self.size = size
        self.served = 0

    def __len__(self):
        return self.size

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.size)
            n = max(0, stop - start)
            self.served += n
            return bytes((start + i) & 0xFF for i in range(n))
        self.served += 1
        return key & 0xFF


def test_painting_a_1gb_buffer_reads_only_the_visible_rows(qtbot):
    area = HexArea()
    qtbot.addWidget(area)
    area.resize(800, 600)
    area.show()
    buf = CountingBuffer(1 << 30)
    area.set_buffer(buf)
    area.set_regions([(0, 1 << 29, area.palette().base().color())])
    for value in (0, area.verticalScrollBar().maximum() // 2, area.verticalScrollBar().maximum()):
        buf.served = 0
        area.verticalScrollBar().setValue(value)
        area.viewport().grab()   # renders synchronously, even offscreen
        assert 0 < buf.served <= (area.visible_rows() + 2) * ROW
    assert area.rows_total == (1 << 30) // ROW
    # the last byte is reachable
    area.set_cursor((1 << 30) - 1)
    assert area.first_row() * ROW <= (1 << 30) - 1


def test_offset_at_inverts_the_cell_geometry(qtbot):
    area = HexArea()
    qtbot.addWidget(area)
    area.resize(800, 400)
    area.set_buffer(bytes(range(256)) * 4)
    area.show()
    y = area._header_h + 3 * area._lh + area._lh // 2
    for i in range(ROW):
        x_hex = (area._cell_left(i) + area._cell_right(i)) / 2
        assert area.offset_at(QPointF(x_hex, y)) == 3 * ROW + i
        x_asc = area._x_ascii + (i + 0.5) * area._cw
        assert area.offset_at(QPointF(x_asc, y)) == 3 * ROW + i
    assert area.offset_at(QPointF(2, y)) is None          # offset gutter
    assert area.offset_at(QPointF(area._cell_left(0), 2)) is None   # column header


@pytest.mark.parametrize("on_disk", [False, True], ids=["buffer", "file"])
@pytest.mark.parametrize("forward", [True, False])
def test_find_in_matches_a_plain_scan_across_chunk_edges_and_wraps(forward, on_disk, tmp_path):
    rng = random.Random(7)
    data = bytes(rng.choice(b"ab\x00") for _ in range(3000))
    source = data
    if on_disk:
        (tmp_path / "data.bin").write_bytes(data)
        source = FileChunks(str(tmp_path / "data.bin"))
    for pat in (b"ab", b"aab", b"\x00\x00b", b"abba", b"zz"):
        hits = [i for i in range(len(data)) if data.startswith(pat, i)]
        for start in (0, 1, 777, 1500, 2999, 3000):
            got = find_in(source, pat, start, forward, chunk=7)
            if not hits:
                assert got == -1
                continue
            if forward:
                later = [h for h in hits if h >= start]
                expect = later[0] if later else hits[0]
            else:
                earlier = [h for h in hits if h < start]
                expect = earlier[-1] if earlier else hits[-1]
            assert got == expect, (pat, start)


def test_pattern_and_offset_parsing():
    assert parse_hex_pattern("4E 41 43") == b"NAC"
    assert parse_hex_pattern("0x4e,0x41") == b"NA"
    assert parse_hex_pattern("4e4143") == b"NAC"
    for bad in ("4E4", "zz", ""):
        with pytest.raises(ValueError):
            parse_hex_pattern(bad)
    assert parse_goto("0x1c0", 5) == 0x1C0
    assert parse_goto("448", 5) == 448
    assert parse_goto("+16", 100) == 116
    assert parse_goto("-0x10", 100) == 84
    with pytest.raises(ValueError):
        parse_goto("nope", 0)


def test_copy_formats():
    data = bytes(range(20))
    assert format_hex(data).splitlines()[0] == " ".join(f"{b:02X}" for b in range(16))
    c = format_c_array(data)
    assert c.startswith("static const unsigned char data[20] = {")
    values = [int(x, 16) for x in c[c.index("{") + 1:c.index("}")].replace("\n", " ").split(",")]
    assert values == list(data)


@pytest.fixture
def hex_view(qtbot, qdoc_for, demo_path):
    qdoc = qdoc_for(demo_path)
    view = HexView(qdoc)
    qtbot.addWidget(view)
    view.resize(760, 520)
    view.show()
    qtbot.waitExposed(view)
    return view, qdoc


def _click_byte(qtbot, area, offset):
    area.ensure_visible(offset, center=True)
    row = offset // ROW - area.first_row()
    i = offset % ROW
    x = (area._cell_left(i) + area._cell_right(i)) / 2 - area.horizontalScrollBar().value()
    y = area._header_h + row * area._lh + area._lh / 2
    qtbot.mouseClick(area.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(int(x), int(y)))


def test_clicking_a_byte_selects_its_record_and_highlights_its_bytes(hex_view, qtbot):
    view, qdoc = hex_view
    ins = qdoc.nac.instructions[5]
    _click_byte(qtbot, view.area, ins.offset + 1)
    assert qdoc.selection == Selection("instruction", 5)
    assert view.area.highlights() == [(ins.offset, ins.offset + ins.nbytes)]
    # a selection made elsewhere highlights and scrolls
    p = next(iter(qdoc.nac.params.values()))
    qdoc.select(Selection("param", p.id))
    assert len(view.area.highlights()) == 2
    assert any(a <= p.data_offset < b for a, b in view.area.highlights())


def test_double_click_selects_the_innermost_field(hex_view, qtbot):
    view, qdoc = hex_view
    ins = qdoc.nac.instructions[3]
    off = ins.offset + 4   # D[1]
    view.area.doubleClicked.emit(off)
    assert qdoc.selection == Selection("span", "OPS/instr[3]/D[1]")
    assert qdoc.tick == 3


def test_tooltip_names_the_field_and_what_it_points_to(hex_view):
    view, qdoc = hex_view
    ins = qdoc.nac.instructions[3]
    text = view._tooltip(ins.offset + 2)
    producer = ins.index + ins.d[0]
    assert text.startswith(f"OPS/instr[3]/D[0] = {ins.d[0]} → v{producer}")
    assert view._hover_range(ins.offset + 2) == (ins.offset + 2, ins.offset + 4)


def test_go_to_selects_what_is_there(hex_view):
    view, qdoc = hex_view
    ins = qdoc.nac.instructions[8]
    assert view.go_to(hex(ins.offset))
    assert view.area.cursor_offset == ins.offset
    assert qdoc.selection == Selection("instruction", 8)
    assert view.go_to("+1") and view.area.cursor_offset == ins.offset + 1
    assert view.go_to("OPS") and qdoc.nac.spans.span_at(view.area.cursor_offset).path.startswith("OPS")
    assert not view.go_to(str(qdoc.nac.size + 10))


def test_search_finds_text_and_bytes_and_wraps(hex_view):
    view, qdoc = hex_view
    data = bytes(qdoc.nac._buf)
    view.search_mode.setCurrentText("Text")
    view.search_edit.setText("fc2.weight")
    view.area.set_cursor(0)
    view.find(True)
    at = data.find(b"fc2.weight")
    assert view.area.cursor_offset == at and view.area._match == (at, at + 10)
    view.find(True)   # the only match: wraps around onto itself
    assert view.area.cursor_offset == at
    view.search_mode.setCurrentText("Hex")
    view.search_edit.setText("4E 41 43")
    view.find(False)
    assert view.area.cursor_offset == 0


def test_big_file_search_runs_in_a_background_task(hex_view, qtbot, monkeypatch):
    view, qdoc = hex_view
    monkeypatch.setattr(hexmod, "INLINE_SEARCH_BYTES", 0)
    monkeypatch.setattr(hexmod, "SEARCH_CHUNK", 64)
    data = bytes(qdoc.nac._buf)
    target = data.rfind(b"aten.relu")
    view.search_mode.setCurrentText("Text")
    view.search_edit.setText("aten.relu")
    view.area.set_cursor(target - 1)
    task = view.find(True)
    assert task is not None
    qtbot.waitUntil(task.done, timeout=5000)
    qtbot.waitUntil(lambda: view.area._match is not None, timeout=2000)
    assert view.area.cursor_offset == target


def test_bookmarks_toggle_and_cycle(hex_view):
    view, qdoc = hex_view
    view.area.set_cursor(0x40)
    view.toggle_bookmark()
    view.toggle_bookmark(0x100)
    assert sorted(view.bookmarks()) == [0x40, 0x100]
    view.area.set_cursor(0)
    assert view.next_bookmark() == 0x40
    assert view.next_bookmark() == 0x100
    assert view.next_bookmark() == 0x40            # wraps
    assert view.next_bookmark(forward=False) == 0x100
    view.toggle_bookmark(0x40)
    assert sorted(view.bookmarks()) == [0x100]


def test_copy_takes_the_highlighted_field(hex_view):
    view, qdoc = hex_view
    ins = qdoc.nac.instructions[3]
    qdoc.select(Selection("instruction", 3))
    raw = bytes(qdoc.nac._buf[ins.offset:ins.offset + ins.nbytes])
    assert view.copied_text("hex") == raw.hex(" ").upper()
    assert f"[{ins.nbytes}]" in view.copied_text("c")
    assert view.copied_text("python") == repr(raw)
