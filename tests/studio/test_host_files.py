"""The engine host's open files (HostState): one decoded copy per path while it is unchanged; a
new one when the file changed on disk (the old one's mapping and descriptor released once no run
uses it); none once the Studio closed it (``nac/closeFile``): a session that opened many files
kept each one decoded, with its descriptor, for the host's life. A run goes on over the version
it was launched on when the file changes on disk: touching the file mid-session made every
later step fail with "no run: launch first" until the user stopped and started again."""
from __future__ import annotations

import os
import shutil

import pytest
from PySide6.QtCore import Qt

from nac_studio.host.handlers import HostState, close_file
from tests.resources_path import DEMO
from tests.studio.test_debugger_gui import press, wait_stopped


class _Ctx:
    def __init__(self, state):
        self.state = state


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def mapped(monkeypatch):
    import nac_engine.format.reader as reader
    monkeypatch.setattr(reader, "WHOLE_READ_MAX", 0)      # mapped, as a large file is: a descriptor kept


def _touch(path: str) -> None:
    with open(path, "ab") as f:          # changed on disk: another version
        f.write(b"\0")


def test_a_file_is_decoded_once_read_again_when_changed_and_released_when_closed(tmp_path, mapped):
    path = str(tmp_path / "m.nac")
    shutil.copyfile(DEMO, path)
    state = HostState()
    before = _fds()
    first = state.nac(path)
    assert state.nac(path) is first and first._closer is not None and _fds() > before
    _touch(path)
    second = state.nac(path)
    assert second is not first and first._closer is None        # the old version closed
    assert state.debug(path).nac is second
    close_file(_Ctx(state), {"path": path})
    assert second._closer is None and path not in state._files and path not in state._debug
    assert _fds() <= before


def test_a_run_keeps_its_version_when_the_file_changes_and_a_launch_takes_the_new_one(tmp_path, mapped):
    path = str(tmp_path / "m.nac")
    shutil.copyfile(DEMO, path)
    state = HostState()
    service = state.debug(path, launch=True)
    old = service.nac
    _touch(path)
    assert state.nac(path) is not old and old._closer is not None      # newer version read; the run's kept open
    assert state.debug(path) is service                                  # the run's actions: the same service
    relaunched = state.debug(path, launch=True)
    assert relaunched is not service and relaunched.nac is state.nac(path) and old._closer is None


def test_touching_the_file_while_debugging_does_not_break_the_run(window, qtbot, two_layer_model):
    qdoc = window.open_and_wait(two_layer_model)
    s = qdoc.doc.debug
    press(qtbot, window, Qt.Key.Key_F10)
    qtbot.waitUntil(lambda: s.active and s.tick == 0, timeout=20000)
    wait_stopped(qtbot, window)
    st = os.stat(two_layer_model)
    os.utime(two_layer_model, (st.st_atime, st.st_mtime + 5))       # saved again: the same bytes, a new time
    press(qtbot, window, Qt.Key.Key_F10)
    qtbot.waitUntil(lambda: s.tick == 1 or bool(s.error), timeout=20000)
    wait_stopped(qtbot, window)               # (F5 while the step still completes is ignored, as it should be)
    assert not s.error and s.tick == 1
    press(qtbot, window, Qt.Key.Key_F5)
    qtbot.waitUntil(lambda: s.state == "finished" or bool(s.error), timeout=20000)
    assert not s.error


def test_a_reload_keeps_the_file_open_in_the_host(window, qtbot, two_layer_model):
    """Reload shows the new version, then closes the old tab: that close must not make the host
    forget the file the new tab reads (its graph shapes, its debug runs)."""
    window.open_and_wait(two_layer_model)
    sent = []
    request = window.host.request
    window.host.request = lambda command, arguments=None, **kw: (sent.append(command) or
                                                                 request(command, arguments, **kw))
    with qtbot.waitSignal(window.documentOpened, timeout=20000):
        window.commands.run("file.reload")
    qtbot.waitUntil(lambda: len(window.docs) == 1, timeout=20000)
    assert "nac/closeFile" not in sent
    s = window.active.doc.debug
    press(qtbot, window, Qt.Key.Key_F10)
    qtbot.waitUntil(lambda: s.tick == 0 or bool(s.error), timeout=20000)
    assert not s.error
    window.commands.run("file.close")
    assert sent[-1] == "nac/closeFile"
