"""Hex bookmarks persist per file between sessions (in the throwaway settings file the
``studio_settings`` fixture makes, never the user's), and bookmarks saved for another
version of a file (size or mtime changed) are held back, not applied silently."""
from __future__ import annotations

import json
import os
import shutil

import pytest
from PySide6.QtCore import QSettings

from nac_studio import bookmark_store
from nac_studio.bookmark_store import GROUP, BookmarkStore, file_identity
from nac_studio.main_window import MainWindow

from .conftest import wait_idle


@pytest.fixture
def model_copy(demo_path, tmp_path):
    """A copy of the demo model we may touch and rewrite."""
    path = tmp_path / "model.nac"
    shutil.copyfile(demo_path, path)
    return path


def _open(qtbot, win, path):
    with qtbot.waitSignal(win.documentOpened, timeout=20000) as blocker:
        win.open_path(str(path))
    wait_idle(qtbot, win)
    return blocker.args[0]


def _new_window(qtbot, settings):
    win = MainWindow(settings, restore=False, persist=True)
    qtbot.addWidget(win)
    win.show()
    return win


def _close_window(win):
    win.set_active(None)
    for qd in list(win.docs):
        win.close_document(qd)
    win.tasks.shutdown(wait=True)


def test_store_round_trip_version_check_and_hostile_values(model_copy, studio_settings):
    store = BookmarkStore(studio_settings)
    ident = file_identity(str(model_copy))
    size = ident[0]
    store.save(str(model_copy), ident, {0x40: "OPS/instr[0]", 0x10: "header/x"})
    assert store.load(str(model_copy), ident) == ({0x10: "header/x", 0x40: "OPS/instr[0]"}, {})
    # another version of the file: same path, other size or mtime -> stale, not applied
    assert store.load(str(model_copy), (size + 1, ident[1])) == ({}, {0x10: "header/x", 0x40: "OPS/instr[0]"})
    assert store.load(str(model_copy), (size, ident[1] + 1))[0] == {}
    assert store.load(str(model_copy.with_name("other.nac")), ident) == ({}, {})
    # the settings file is the user's: junk is ignored, offsets outside the file dropped
    key = bookmark_store._key(str(model_copy))
    for junk in ("not json", "[1, 2]", json.dumps({"path": "/elsewhere", "marks": []})):
        studio_settings.setValue(key, junk)
        assert store.load(str(model_copy), ident) == ({}, {})
    studio_settings.setValue(key, json.dumps({
        "path": os.path.abspath(model_copy), "size": size, "mtime_ns": ident[1],
        "marks": [[5, "ok"], [size + 10, "past the end"], [-1, "negative"], ["7", "str"], [True, "bool"],
                  [9, 3], [11, "x" * 1000], "junk"]}))
    marks, stale = store.load(str(model_copy), ident)
    assert stale == {} and sorted(marks) == [5, 11] and len(marks[11]) == bookmark_store.MAX_LABEL
    # no bookmarks left: the file is forgotten
    store.save(str(model_copy), ident, {})
    assert not studio_settings.contains(key)


def test_store_forgets_the_oldest_files_beyond_its_limit(tmp_path, studio_settings, monkeypatch):
    monkeypatch.setattr(bookmark_store, "MAX_FILES", 3)
    store = BookmarkStore(studio_settings)
    paths = [str(tmp_path / f"f{i}.nac") for i in range(5)]
    clock = iter(range(1000, 2000))
    monkeypatch.setattr(bookmark_store.time, "time", lambda: next(clock))
    for p in paths:
        store.save(p, (10, 1), {1: "a"})
    studio_settings.beginGroup(GROUP)
    assert len(studio_settings.childKeys()) == 3
    studio_settings.endGroup()
    assert [bool(store.load(p, (10, 1))[0]) for p in paths] == [False, False, True, True, True]


def test_bookmarks_survive_a_restart_in_the_settings_file(window, model_copy, studio_settings, qtbot):
    qdoc = window.open_and_wait(model_copy)
    ins = qdoc.nac.instructions[4]
    window.hex_view.toggle_bookmark(0x40)
    window.hex_view.toggle_bookmark(ins.offset)
    window.hex_view.toggle_bookmark(0x20)
    window.hex_view.toggle_bookmark(0x20)          # removed again: not kept either
    expected = {0x40: window.hex_view.bookmarks()[0x40], ins.offset: "OPS/instr[4]/A"}
    assert window.hex_view.bookmarks() == expected
    window.close_document(qdoc)

    # a new window on the same settings file (as the next session would read it)
    again_settings = QSettings(studio_settings.fileName(), QSettings.Format.IniFormat)
    again = _new_window(qtbot, again_settings)
    try:
        _open(qtbot, again, model_copy)
        assert again.hex_view.bookmarks() == expected
        assert again.hex_view.area._bookmarks == sorted(expected)     # drawn
        assert again.hex_view.stale_bookmarks() == {}
        again.hex_view.area.set_cursor(0)
        assert again.hex_view.next_bookmark() == 0x40
        assert again.hex_view.next_bookmark() == ins.offset
    finally:
        _close_window(again)
    # they are in the throwaway INI file, under the file's entry
    text = open(studio_settings.fileName(), encoding="utf-8").read()
    assert GROUP in text and "model.nac" in text


def test_bookmarks_of_a_changed_file_are_flagged_not_applied(window, model_copy, qtbot):
    qdoc = window.open_and_wait(model_copy)
    window.hex_view.toggle_bookmark(0x40)
    window.hex_view.toggle_bookmark(0x50)
    window.close_document(qdoc)
    st = os.stat(model_copy)
    os.utime(model_copy, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))   # "recompiled"

    qdoc = window.open_and_wait(model_copy)
    view = window.hex_view
    assert view.bookmarks() == {} and view.area._bookmarks == []
    assert sorted(view.stale_bookmarks()) == [0x40, 0x50]
    assert "not applied" in window.statusBar().currentMessage()
    view._fill_bookmark_menu()
    texts = [a.text() for a in view.bookmark_menu.actions()]
    assert any("earlier version" in t for t in texts) and "Restore Them Anyway" in texts
    assert view.restore_stale_bookmarks() == 2
    assert sorted(view.bookmarks()) == [0x40, 0x50] and view.stale_bookmarks() == {}
    assert view.area._bookmarks == [0x40, 0x50]
    window.close_document(qdoc)
    # restored bookmarks were saved for this version: they come back without a flag
    qdoc = window.open_and_wait(model_copy)
    assert sorted(window.hex_view.bookmarks()) == [0x40, 0x50]
    window.close_document(qdoc)

    # discard: the stale ones are gone for good
    st = os.stat(model_copy)
    os.utime(model_copy, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    qdoc = window.open_and_wait(model_copy)
    assert sorted(window.hex_view.stale_bookmarks()) == [0x40, 0x50]
    window.hex_view.discard_stale_bookmarks()
    window.close_document(qdoc)
    qdoc = window.open_and_wait(model_copy)
    assert window.hex_view.bookmarks() == {} and window.hex_view.stale_bookmarks() == {}


def test_without_settings_nothing_is_kept(qtbot, model_copy, qdoc_for, studio_settings):
    """A bare HexView (and the --screenshot window, persist=False) keeps bookmarks only in memory."""
    from nac_studio.views.hex import HexView
    view = HexView(qdoc_for(model_copy))
    qtbot.addWidget(view)
    view.toggle_bookmark(0x40)
    assert view.bookmarks() == {0x40: view.bookmarks()[0x40]}
    view2 = HexView(qdoc_for(model_copy))
    qtbot.addWidget(view2)
    assert view2.bookmarks() == {}
    win = MainWindow(studio_settings, restore=False, persist=False)
    qtbot.addWidget(win)
    assert win.hex_view.store is None
    win.tasks.shutdown(wait=True)
