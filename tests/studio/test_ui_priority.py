"""Workers step aside while the UI thread paints: a claim parks them at their checkpoints
(ui_priority), every frame of the main window claims and releases (FramePriority), and a
theme switch repaints the docks in frames of their own (repaint_in_stages)."""
from __future__ import annotations

import threading
import time

import pytest
from PySide6.QtWidgets import QWidget

from nac_studio import ui_priority
from nac_studio.paint_gate import FramePriority, repaint_in_stages
from nac_studio.tasks import TaskRunner


@pytest.fixture(autouse=True)
def _no_claim_left():
    ui_priority.release()
    yield
    ui_priority.release()


def _time_in_checkpoint(fn) -> float:
    """Seconds a worker thread spends in ``fn`` (a checkpoint)."""
    took = []

    def worker():
        t = time.perf_counter()
        fn()
        took.append(time.perf_counter() - t)
    th = threading.Thread(target=worker)
    th.start()
    th.join(5)
    return took[0]


def test_a_checkpoint_returns_at_once_without_a_claim():
    assert _time_in_checkpoint(ui_priority.yield_to_ui) < 0.01


def test_a_claim_parks_workers_until_it_ends_by_itself():
    ui_priority.claim(0.15)
    assert ui_priority.claimed()
    waited = _time_in_checkpoint(ui_priority.yield_to_ui)
    assert 0.1 <= waited < 1.0
    assert not ui_priority.claimed()


def test_release_wakes_a_parked_worker_early():
    ui_priority.claim(5.0)
    threading.Timer(0.05, ui_priority.release).start()
    assert _time_in_checkpoint(ui_priority.yield_to_ui) < 1.0


def test_the_ui_thread_itself_never_waits_on_its_claim():
    ui_priority.claim(5.0)
    t = time.perf_counter()
    ui_priority.yield_to_ui()          # this test runs on the main (Qt) thread
    assert time.perf_counter() - t < 0.01


def test_a_task_steps_aside_at_check_and_progress(qtbot):
    runner = TaskRunner()
    try:
        ui_priority.claim(0.2)
        task = runner.submit("work", lambda ctx: (time.perf_counter(), ctx.check(), time.perf_counter()))
        qtbot.waitUntil(task.done, timeout=5000)
        start, _none, end = task.result()
        assert end - start >= 0.1          # parked at ctx.check() while the claim lasted
    finally:
        runner.shutdown(wait=True)


def test_each_frame_claims_and_the_claim_ends_after_it(qtbot):
    w = QWidget()
    qtbot.addWidget(w)
    FramePriority(w)
    w.resize(200, 100)
    w.show()
    qtbot.waitExposed(w)
    qtbot.wait(50)
    seen = []
    w.paintEvent = lambda _e: seen.append(ui_priority.claimed())
    w.update()
    qtbot.waitUntil(lambda: bool(seen), timeout=2000)
    assert seen[0] is True                                     # the paint ran claimed
    qtbot.waitUntil(lambda: not ui_priority.claimed(), timeout=500)   # released right after, not at expiry


def test_staged_repaint_lets_every_stage_go(qtbot):
    top = QWidget()
    qtbot.addWidget(top)
    kids = [QWidget(top) for _ in range(4)]
    top.show()
    qtbot.waitExposed(top)
    repaint_in_stages(top, [kids[:2], kids[2:]])
    assert not any(k.updatesEnabled() for k in kids)
    top.update()
    qtbot.waitUntil(lambda: all(k.updatesEnabled() for k in kids), timeout=2000)


def test_theme_switch_repaints_docks_later_and_recolours_them(window, demo_path, qtbot):
    window.open_and_wait(demo_path)
    window.set_theme("light")
    qtbot.waitUntil(lambda: all(d.updatesEnabled() for d in window.docks.values()), timeout=2000)
    docks = [d for d in window.docks.values() if d.isVisible() and not d.isFloating()]
    assert docks
    light_base = docks[0].palette().color(docks[0].backgroundRole()).lightness()
    window.set_theme("dark")
    assert not any(d.updatesEnabled() for d in docks)        # held for the later frames
    qtbot.waitUntil(lambda: all(d.updatesEnabled() for d in docks), timeout=2000)
    assert docks[0].palette().color(docks[0].backgroundRole()).lightness() < light_base
    window.set_theme("light")
    qtbot.waitUntil(lambda: all(d.updatesEnabled() for d in docks), timeout=2000)


def _find_spec_on_preload_thread(monkeypatch) -> float:
    """Seconds the background-import thread spends in the step-aside finder for one module."""
    from nac_studio import preload
    took = []

    def body():
        t = time.perf_counter()
        assert preload._StepAsideFinder().find_spec("some.module") is None     # finds nothing, ever
        took.append(time.perf_counter() - t)
    th = threading.Thread(target=body, name="preload-stand-in")
    monkeypatch.setattr(preload, "_thread", th)
    th.start()
    th.join(5)
    return took[0]


def test_background_imports_step_aside_between_modules(monkeypatch):
    ui_priority.claim(0.15)
    assert _find_spec_on_preload_thread(monkeypatch) >= 0.1


def test_background_imports_never_park_while_the_ui_thread_waits_on_an_import(monkeypatch):
    """The UI thread blocked on a module lock the import thread may hold: parking would make
    them wait on each other until the claim ran out, so the park ends at once."""
    import importlib._bootstrap as bootstrap
    lock = bootstrap._get_module_lock("nac_test_fake_module")
    held, let_go = threading.Event(), threading.Event()

    def holder():                  # stands for the import thread inside that module's import
        lock.acquire()
        held.set()
        let_go.wait(5)
        lock.release()
    h = threading.Thread(target=holder)
    h.start()
    held.wait(5)
    ui_priority.claim(5.0)
    took = []
    threading.Thread(target=lambda: took.append(_find_spec_on_preload_thread(monkeypatch))).start()
    threading.Timer(1.0, let_go.set).start()
    lock.acquire()                 # the UI thread blocks here for ~1 s
    lock.release()
    h.join(5)
    deadline = time.perf_counter() + 5
    while not took and time.perf_counter() < deadline:
        time.sleep(0.01)
    assert took and took[0] < 1.5          # gave up while the UI thread was blocked, not after the 5 s claim
