"""A closed file is freed: its Document, decoded file and debug session go with the tab.

Two things kept them for the life of the window: every background task stayed a child of the
task runner after it ended (holding its result, the opened Document, and its callbacks' closures),
and the engine host's reader thread kept its last message (with the request's callbacks, which
hold the debug session) while it waited for the next one. A user who opened and closed large
files grew the window's memory by each file, and the next full collection walked all of it on
the UI thread (a 300 ms F10 in bench_studio)."""
from __future__ import annotations

import gc
import weakref

from PySide6.QtCore import QCoreApplication, QEvent, Qt

from tests.studio.test_debugger_gui import press, wait_stopped


def _freed(qtbot, ref: weakref.ref) -> bool:
    def gone() -> bool:
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        gc.collect()
        return ref() is None
    try:
        qtbot.waitUntil(gone, timeout=5000)
    except Exception:
        return False
    return True


def test_closing_a_file_frees_its_document_after_open_select_and_debug(window, qtbot, two_layer_model):
    qdoc = window.open_and_wait(two_layer_model)
    doc_ref, nac_ref = weakref.ref(qdoc.doc), weakref.ref(qdoc.doc.nac)
    biggest = max(qdoc.nac.params.values(), key=lambda p: p.data_length).id
    from nac_studio.model.document import Selection
    qdoc.select(Selection("param", biggest))             # statistics: a task and a host request
    press(qtbot, window, Qt.Key.Key_F10)                   # a debug session in the engine host
    session = qdoc.doc.debug
    qtbot.waitUntil(lambda: session.active and session.tick == 0, timeout=20000)
    wait_stopped(qtbot, window)
    qdoc = session = None                                 # the test holds nothing of the file
    sent = []
    request = window.host.request
    window.host.request = lambda command, arguments=None, **kw: sent.append((command, arguments)) or \
        request(command, arguments, **kw)
    window.commands.run("file.close")
    assert ("nac/closeFile", {"path": str(two_layer_model)}) in sent     # the host lets go of its copy too
    assert not window.docs
    assert _freed(qtbot, doc_ref), "the closed file's Document is still alive"
    assert nac_ref() is None


def test_ending_a_run_releases_the_workers_waiting_for_the_host():
    """A worker blocked on the host's answer about a run (the inspector's statistics) held the
    debug session, and through it the closed file's Document, until a busy host answered: the
    flake of the test above on a loaded machine. Ending the run (detach) ends the wait."""
    import threading

    from nac_studio.host.connection import Request, RequestCancelled
    from nac_studio.host.remote_debugger import RemoteDebugger

    class SilentHost:                           # a host that never answers
        listeners: list = []

        def __init__(self):
            self.sent, self.pending = [], {}

        def request(self, command, arguments=None):
            req = Request(self, len(self.sent) + 1, command)
            self.pending[req.seq] = req
            self.sent.append(command)
            return req

        def send(self, command, arguments=None):
            self.sent.append(command)

        def _settle(self, req, body=None, error=None):
            self.pending.pop(req.seq, None)
            req.future.set_exception(error)

    host = SilentHost()
    remote = RemoteDebugger(host, "/m.nac", None)
    got = []
    worker = threading.Thread(target=lambda: got.append(_raised(lambda: remote.result(3))), daemon=True)
    worker.start()
    for _ in range(500):                        # (at most 5 s)
        if "nac/result" in host.sent or not worker.is_alive():
            break
        worker.join(0.01)
    remote.detach()
    worker.join(5)
    assert not worker.is_alive() and isinstance(got[0], RequestCancelled)
    assert host.sent == ["nac/result", "cancel"] and not host.pending     # the host is told to drop it


def _raised(fn):
    try:
        fn()
    except BaseException as e:      # noqa: BLE001 - what the worker saw
        return e
    return None
