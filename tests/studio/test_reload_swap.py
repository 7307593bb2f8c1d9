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
