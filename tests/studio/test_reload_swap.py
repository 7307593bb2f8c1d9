"""File › Reload swaps the new version into the old one's tab: the views go straight from the
old document to the new (never to "no file"), the tab keeps its place, and a file that no
longer reads leaves the old version open."""
from __future__ import annotations

import shutil

from .conftest import wait_idle


def test_reload_swaps_in_place_without_clearing_the_views(window, qtbot, demo_path, tmp_path):
    first, second = tmp_path / "a.nac", tmp_path / "b.nac"
    shutil.copy(demo_path, first)
    shutil.copy(demo_path, second)
    qa = window.open_and_wait(first)
    qb = window.open_and_wait(second)
    window.tabs.setCurrentIndex(window.docs.index(qa))
    assert window.active is qa
    handed = []
    window.documentChanged.connect(handed.append)
    with qtbot.waitSignal(window.documentOpened, timeout=20000) as opened:
        window.reload_active()
        assert window.active is qa and window.stack.currentWidget() is window.graph_view   # still shown
    wait_idle(qtbot, window)
    new = opened.args[0]
    assert new is not qa and new.doc.path == qa.doc.path
    assert window.active is new and qa not in window.docs
    assert window.docs == [new, qb] and window.tabs.currentIndex() == 0       # the same tab place
    assert [window.tabs.tabText(i) for i in range(2)] == ["a.nac", "b.nac"]
    assert None not in handed and handed[-1] is new
    assert all(getattr(v, "qdoc", new) in (new, None) for v in window.views.values())


def test_a_reload_that_fails_keeps_the_old_version(window, qtbot, demo_path, tmp_path):
    path = tmp_path / "gone.nac"
    shutil.copy(demo_path, path)
    qdoc = window.open_and_wait(path)
    path.unlink()                                      # removed on disk: it cannot be read again
    with qtbot.waitSignal(window.openFailed, timeout=20000):
        window.reload_active()
    wait_idle(qtbot, window)
    assert window.docs == [qdoc] and window.active is qdoc


def test_a_big_file_truncated_while_open_keeps_the_window_and_says_so(window, qtbot, demo_path, tmp_path,
                                                                     monkeypatch):
    """A file above the whole-read limit is mapped; another program truncates it. The hex pane
    repaints from pread (shorter data, no SIGBUS), the document stays open, and the window says
    the file changed on disk."""
    from nac_engine.format import reader
    monkeypatch.setattr(reader, "WHOLE_READ_MAX", 0)
    path = tmp_path / "big.nac"
    shutil.copy(demo_path, path)
    qdoc = window.open_and_wait(path)
    assert qdoc.nac.buffer is not None and not qdoc.nac.private_buffer
    hexv = window.views["hex"]
    size = len(qdoc.nac.buffer)
    hexv.area.set_cursor(size - 64)               # the view shows the file's last rows
    import os
    os.truncate(path, 100)
    hexv.area.viewport().repaint()                    # reads the shrunk file: must not fault
    window.reload_bar.check_now()
    qtbot.waitUntil(lambda: window.reload_bar.isVisible(), timeout=10000)
    assert window.docs == [qdoc] and window.active is qdoc
