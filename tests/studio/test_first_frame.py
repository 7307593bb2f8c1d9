"""Opening a file paints its first frame before the views' background work starts (the frame
would otherwise wait on workers for the GIL at every call into Python), and hidden panes do no
work for it."""
from __future__ import annotations

import threading

from PySide6.QtCore import QEvent, QObject

from nac_studio.paint_gate import after_next_paint
from nac_studio.tasks import Cancelled, TaskRunner


def test_held_tasks_start_on_release_in_order_and_count_as_active(qtbot):
    runner = TaskRunner()
    ran = []
    try:
        runner.hold()
        tasks = [runner.submit(f"t{i}", lambda _ctx, i=i: ran.append(i) or i) for i in range(3)]
        qtbot.wait(50)
        assert ran == [] and runner.held == 3 and len(runner.active) == 3
        runner.release()
        qtbot.waitUntil(lambda: all(t.done() for t in tasks), timeout=5000)
        assert sorted(ran) == [0, 1, 2] and [t.result() for t in tasks] == [0, 1, 2] and runner.held == 0
    finally:
        runner.shutdown(wait=True)


def test_holds_nest_and_a_shutdown_cancels_what_is_held(qtbot):
    runner = TaskRunner()
    started = threading.Event()
    failed = []
    runner.hold()
    runner.hold()
    task = runner.submit("held", lambda _ctx: started.set(), on_error=failed.append)
    runner.release()
    qtbot.wait(50)
    assert not started.is_set() and runner.held == 1          # one hold still on
    runner.shutdown(wait=True)
    qtbot.waitUntil(lambda: bool(failed), timeout=5000)
    assert task.done() and isinstance(task.error, Cancelled) and not started.is_set()


def test_after_next_paint_runs_after_the_frame_and_once(qtbot):
    from PySide6.QtWidgets import QWidget
    w = QWidget()
    qtbot.addWidget(w)
    w.resize(200, 100)
    w.show()
    qtbot.waitExposed(w)
    order = []

    class Spy(QObject):
        def eventFilter(self, obj, ev):
            if obj is w and ev.type() == QEvent.Type.Paint:
                order.append("paint")
            return False
    spy = Spy()
    w.installEventFilter(spy)
    after_next_paint(w, lambda: order.append("fn"), fallback_ms=5000)
    w.update()
    qtbot.waitUntil(lambda: "fn" in order, timeout=3000)
    qtbot.wait(100)
    assert order.count("fn") == 1 and order.index("paint") < order.index("fn")


def test_after_next_paint_falls_back_without_a_frame(qtbot):
    from PySide6.QtWidgets import QWidget
    w = QWidget()                 # never shown: no frame comes
    qtbot.addWidget(w)
    calls = []
    after_next_paint(w, lambda: calls.append(1), fallback_ms=50)
    qtbot.waitUntil(lambda: calls == [1], timeout=3000)
    qtbot.wait(100)
    assert calls == [1]


def test_open_paints_before_the_views_background_work_starts(window, qtbot, demo_path, monkeypatch):
    """The graph layout (a view's background task) begins only after the window painted the
    new document once."""
    events = []

    class Spy(QObject):
        def eventFilter(self, obj, ev):
            if obj is window and ev.type() == QEvent.Type.UpdateRequest and window.active is not None:
                events.append("frame")
            return False
    spy = Spy()
    window.installEventFilter(spy)
    pool_submit = window.tasks._pool.submit

    def recording(fn, *a, **k):
        events.append("start")
        return pool_submit(fn, *a, **k)
    monkeypatch.setattr(window.tasks._pool, "submit", recording)
    window.open_and_wait(demo_path)
    window.removeEventFilter(spy)
    # events: "start" (the open itself), then the first frame of the document, then its views' work
    assert events[0] == "start" and "frame" in events
    assert events.index("frame") < events.index("start", 1), events


def test_hidden_source_pane_does_not_highlight_until_shown(window, qtbot, tmp_path):
    from nac_engine.cli import main
    from nac_studio.document import Selection
    from tests.studio.test_source_and_diff_views import FACTORY
    (tmp_path / "model.py").write_text(FACTORY)
    assert main(["compile", str(tmp_path / "model.py"), "-o", str(tmp_path / "f.nac")]) == 0
    qdoc = window.open_and_wait(tmp_path / "f.nac")
    src = window.views["source"]
    window.docks["source"].show()
    window.docks["disassembly"].show()
    window.tabifyDockWidget(window.docks["disassembly"], window.docks["source"])
    window.docks["disassembly"].raise_()           # the Source tab behind another
    qtbot.wait(50)
    tick = next(i.index for i in qdoc.nac.instructions if "linear" in qdoc.nac.instruction_name(i))
    qdoc.select(Selection("instruction", tick))
    qtbot.wait(100)
    assert src.shown_path == str(tmp_path / "model.py")
    assert src._documents[src.shown_path][1] is None        # loaded, not highlighted
    window.docks["source"].raise_()
    qtbot.waitUntil(lambda: src._documents[src.shown_path][1] is not None, timeout=3000)
    doc = src.editor.document()
    qtbot.waitUntil(lambda: any(doc.findBlockByNumber(n).layout().formats() for n in range(doc.blockCount())),
                    timeout=3000)


def test_a_document_opened_during_the_start_up_imports_shows_when_they_end(window, qtbot, demo_path,
                                                                          monkeypatch):
    """A file that finished decoding while torch was still being imported waits for the import
    (its first frame would wait on it for the GIL), with the window responsive and saying why."""
    from nac_studio import preload
    importing = [True]
    monkeypatch.setattr(preload, "running", lambda: importing[0])
    shown = []
    window.documentOpened.connect(shown.append)
    task = window.open_path(str(demo_path))
    qtbot.waitUntil(task.done, timeout=10000)
    ticks = []
    from PySide6.QtCore import QTimer
    beat = QTimer(window)
    beat.timeout.connect(lambda: ticks.append(1))
    beat.start(10)
    qtbot.wait(300)
    beat.stop()
    assert shown == [] and window.active is None and not window.is_idle()
    assert "loading libraries" in window.statusBar().currentMessage()
    assert len(ticks) >= 10           # the event loop kept running meanwhile
    importing[0] = False
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=5000)
    assert window.active is shown[0]


def test_the_wait_for_the_start_up_imports_is_bounded(window, qtbot, demo_path, monkeypatch):
    from nac_studio import main_window, preload
    monkeypatch.setattr(preload, "running", lambda: True)       # an import that never ends
    monkeypatch.setattr(main_window, "FIRST_FRAME_IMPORT_WAIT_S", 0.4)
    with qtbot.waitSignal(window.documentOpened, timeout=10000):
        window.open_path(str(demo_path))
    assert window.active is not None
