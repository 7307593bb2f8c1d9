"""A file changed on disk while open: the Studio notices and offers Reload in a non-modal bar
(issue 15 §5). Driven through the real MainWindow."""
from __future__ import annotations

import os
import shutil

from PySide6.QtCore import Qt

from tests.studio.conftest import wait_idle


def _bar_shown(win, qtbot, shown=True, timeout=5000):
    qtbot.waitUntil(lambda: win.reload_bar.isVisible() == shown, timeout=timeout)


def test_changed_file_offers_reload(window, qtbot, demo_path, tmp_path):
    path = tmp_path / demo_path.name
    shutil.copy(demo_path, path)
    qdoc = window.open_and_wait(path)
    assert not window.reload_bar.isVisible()
    n_before = len(qdoc.doc.nac.instructions)
    with open(path, "ab") as fh:           # another program rewrites the file
        fh.write(b"\0" * 16)
    _bar_shown(window, qtbot)
    assert "changed on disk" in window.reload_bar.label.text()
    assert window.reload_bar.changedFiles() == [os.path.abspath(path)]
    with qtbot.waitSignal(window.documentOpened, timeout=20000):
        qtbot.mouseClick(window.reload_bar.reload_button, Qt.MouseButton.LeftButton)
    wait_idle(qtbot, window, 20000)
    assert not window.reload_bar.isVisible()
    assert window.active is not qdoc and len(window.active.doc.nac.instructions) == n_before
    assert window.active.doc.problems, "the reloaded file's trailing bytes are reported"


def test_truncated_file_is_reported_and_dismiss_keeps_the_version(window, qtbot, demo_path, tmp_path):
    path = tmp_path / demo_path.name
    shutil.copy(demo_path, path)
    qdoc = window.open_and_wait(path)
    os.truncate(path, 200)                 # truncated in place underneath the mapping
    _bar_shown(window, qtbot)
    from nac_engine import NacFormatError
    param = next(iter(qdoc.doc.nac.params.values()))
    try:
        param.array()                      # refused, not SIGBUS
    except NacFormatError as e:
        assert "changed on disk" in e.reason
    qtbot.mouseClick(window.reload_bar.dismiss_button, Qt.MouseButton.LeftButton)
    assert not window.reload_bar.isVisible() and window.active is qdoc
    with open(path, "ab") as fh:           # a later change shows it again
        fh.write(b"x")
    _bar_shown(window, qtbot)


def test_atomic_replace_is_noticed(window, qtbot, demo_path, tmp_path):
    """Editors and our own writer save by rename-over: the watch must survive it."""
    path = tmp_path / demo_path.name
    shutil.copy(demo_path, path)
    window.open_and_wait(path)
    from nac_engine.format.writer import atomic_write
    atomic_write(str(path), demo_path.read_bytes())
    _bar_shown(window, qtbot)
    window.reload_bar.dismiss()
    atomic_write(str(path), demo_path.read_bytes())
    _bar_shown(window, qtbot)
