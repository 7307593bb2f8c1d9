"""The engine host's open files (HostState): one decoded copy per path while it is unchanged; a
new one when the file changed on disk (the old one's mapping and descriptor released); none
once the Studio closed it (``nac/closeFile``): a session that opened many files kept each one
decoded, with its descriptor, for the host's life."""
from __future__ import annotations

import os
import shutil

from nac_studio.host.handlers import HostState, close_file
from tests.resources_path import DEMO


class _Ctx:
    def __init__(self, state):
        self.state = state


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_file_is_decoded_once_read_again_when_changed_and_released_when_closed(tmp_path, monkeypatch):
    import nac_engine.format.reader as reader
    monkeypatch.setattr(reader, "WHOLE_READ_MAX", 0)      # mapped, as a large file is: a descriptor kept
    path = str(tmp_path / "m.nac")
    shutil.copyfile(DEMO, path)
    state = HostState()
    before = _fds()
    first = state.nac(path)
    assert state.nac(path) is first and first._closer is not None and _fds() > before
    with open(path, "ab") as f:          # changed on disk: another version
        f.write(b"\0")
    second = state.nac(path)
    assert second is not first and first._closer is None        # the old version closed
    assert state.debug(path).nac is second
    close_file(_Ctx(state), {"path": path})
    assert second._closer is None and path not in state._files and path not in state._debug
    assert _fds() <= before
