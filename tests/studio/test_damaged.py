"""A malformed or truncated file still opens: what decoded is shown, problems say what did not.

Every variant is built in tmp_path from the demo model's bytes (and, when the shared
corpus is present, from a real compiler-written file). The window must open each one,
list problems, keep the hex and structure views usable, and never raise.
"""
from __future__ import annotations

import random

import pytest

from nac_studio.model.document import Selection, selection_for_problem

from .conftest import wait_idle


def _variants(data: bytes) -> dict[str, bytes]:
    rng = random.Random(1234)
    flipped = bytearray(data)
    for _ in range(24):
        i = rng.randrange(12, len(data))
        flipped[i] ^= 0xFF
    bad_offsets = bytearray(data)
    bad_offsets[20:28] = (len(data) * 4).to_bytes(8, "little")   # OPS offset past the end
    return {
        "empty": b"",
        "magic only": b"NAC",
        "not nac": b"\x7fELF" + bytes(200),
        "header cut": data[:40],
        "cut in MMAP": data[:120],
        "cut in OPS": data[:230],
        "cut in DATA": data[:len(data) - 700],
        "last byte gone": data[:-1],
        "random flips": bytes(flipped),
        "offset past end": bytes(bad_offsets),
        "trailing junk": data + b"\xde\xad\xbe\xef" * 5,
    }


def _check_opens(window, path, expect_problems: bool) -> None:
    qdoc = window.open_and_wait(path)
    doc = qdoc.doc
    assert window.active is qdoc
    size = path.stat().st_size
    assert window.hex_view.area.size_bytes == size
    assert window.problems_view.count() == len(doc.problems)
    if expect_problems:
        assert doc.problems, "a damaged file must report what is wrong"
        assert window.docks["problems"].windowTitle() == f"Problems ({len(doc.problems)})"
    # structure shows what decoded (or the whole file as unparsed bytes)
    if size:
        assert window.structure_view.model.rowCount() >= 1
    # every problem is a place: selecting it moves the hex cursor there
    for row in range(min(3, window.problems_view.proxy.rowCount())):
        window.problems_view.go_to_row(row)
        p = window.problems_view.model.problem(window.problems_view.proxy.mapToSource(
            window.problems_view.table.currentIndex()).row())
        # a decode problem selects its byte; an MMAP finding the record (or instruction) at its offset
        expected = selection_for_problem(p)
        assert expected is not None and doc.selection == expected
        if getattr(p, "selection", None) is None:
            assert expected == Selection("offset", p.offset)
        if isinstance(p.offset, int) and 0 <= p.offset < size:
            assert window.hex_view.area.cursor_offset == p.offset
    # clicking around every kind of byte stays safe
    for off in sorted({0, size // 3, size // 2, max(0, size - 1)}):
        if size:
            window.hex_view._on_click(off)
            window.hex_view._tooltip(off)
    window.close_document(qdoc)


@pytest.mark.parametrize("variant", list(_variants(b"x" * 900)))
def test_damaged_demo_opens(window, demo_path, tmp_path, variant):
    data = _variants(demo_path.read_bytes())[variant]
    path = tmp_path / "damaged.nac"
    path.write_bytes(data)
    _check_opens(window, path, expect_problems=True)


def test_damaged_corpus_files_open(window, corpus_case, tmp_path):
    src = corpus_case("bert_tiny").read_bytes()
    for name, data in _variants(src).items():
        path = tmp_path / f"{name.replace(' ', '_')}.nac"
        path.write_bytes(data)
        _check_opens(window, path, expect_problems=name not in ())


def test_missing_file_reports_and_keeps_running(window, qtbot, tmp_path):
    with qtbot.waitSignal(window.openFailed, timeout=5000) as blocker:
        window.open_path(str(tmp_path / "does-not-exist.nac"))
    assert "does-not-exist" in blocker.args[0]
    wait_idle(qtbot, window)
    assert window.active is None and not window.docs


def test_a_fifo_or_a_device_is_refused_not_waited_on(window, qtbot, tmp_path):
    """Open (and drop, which opens the same way) of a FIFO or of a device behind a .nac name: the
    open fails at once with what the path is; the window keeps working."""
    import os
    fifo = tmp_path / "pipe.nac"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.nac"
    zero.symlink_to("/dev/zero")
    for path, words in ((fifo, "FIFO"), (zero, "character device")):
        with qtbot.waitSignal(window.openFailed, timeout=10000) as blocker:
            window.open_path(str(path))
        assert words in blocker.args[1]
    assert not window.docs


def test_a_failed_open_is_said_on_the_welcome_page_in_full(window, qtbot, tmp_path):
    """Opening (or dropping) a folder that is no model: the refusal is said where the user looks, in
    full (the status bar cuts it and clears it after 10 s), without the byte-offset prefix of a
    problem inside a file; a file that opens takes its place. (A model's folder or file opens the
    Compile Model dialog instead: test_compile_dialog.)"""
    folder = tmp_path / "photos"
    folder.mkdir()
    with qtbot.waitSignal(window.openFailed, timeout=10000) as blocker:
        window.open_path(str(folder))
    assert "is a directory" in blocker.args[1] and "is a directory" in window.statusBar().currentMessage()
    assert not window.docs
    failure = window.welcome.failure
    assert window.stack.currentWidget() is window.welcome and failure.isVisible()
    assert f"{folder} is a directory" in failure.text() and "@ 0x0" not in failure.text()
    from tests.resources_path import DEMO
    window.open_and_wait(DEMO.parent / "demo_bert_tiny.nac")
    assert not failure.isVisible() and failure.text() == ""
