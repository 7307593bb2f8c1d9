"""The Studio debugger's figures for ``bench_studio.py`` (one main window, headless).

* **F10** (Step Over through the command registry): from the command until the run is back on
  the UI thread, every view has taken the new tick (Variables and the inspector's statistics
  tasks included) and the window has repainted — median and worst over ``steps`` steps, next to
  ``Debugger.step`` alone on the same file (baseline, no UI).
* **Continue to the end** from before tick 0 vs ``Session.run`` of the same file and inputs in
  the same process (the interpreter's plain fast path, what ``nac run`` executes), like with
  like: with the weights loaded (F5 after Stop, which keeps them, vs a Session's second run)
  and the file's first run (F5 after ``DebugSession.close()`` vs a new Session's run), each
  the best of a few interleaved pairs.
* **Longest UI stall during Continue**: the largest gap between 10 ms heartbeat timers.
* **Step back** (Shift+F10) from the end, with every view updating.
* **4096×4096 float32 heatmap**: a tensor inspector panel opening it and re-slicing (a second
  slice of a 2×4096×4096 tensor), statistics precomputed as the background task does.
"""
from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path

TARGET_STEP_MS = 30.0
TARGET_CONTINUE_RATIO = 1.2      # F5 to the end against the run alone (issues 21 §5 and 25 §2)
TARGET_STALL_MS = 100.0
TARGET_STEP_BACK_MS = 50.0
#: Continue/Session.run pairs per kind (weights loaded: twice this many).
CONTINUE_REPEATS = 3


def _settle(app, win, done) -> None:
    """Until ``done()`` and no background task runs, then one more event pass (the repaint)."""
    while not (done() and not win.tasks.active):
        app.processEvents()
        time.sleep(0.0005)
    app.processEvents()


def _wait_signal(app, signal, timeout_ms: int = 600_000) -> None:
    """Block in a Qt event loop until ``signal`` fires: the UI thread sleeps in the native
    wait (GIL released) as in the application, instead of a polling loop that would compete
    with the debugger's worker thread for the GIL."""
    from PySide6.QtCore import QEventLoop, QTimer
    loop = QEventLoop()
    signal.connect(loop.quit)
    QTimer.singleShot(timeout_ms, loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)
    app.processEvents()          # the repaint the views asked for


def dispose_window(app, win) -> None:
    """Close a measured window's files, end its tasks and delete it now, before the next
    measurement: processEvents alone runs no deferred delete, and a window left alive takes
    every later palette change, and its objects a later full collection (a 300 ms F10 once)."""
    from PySide6.QtCore import QCoreApplication, QEvent
    win.set_active(None)
    for qd in list(win.docs):
        win.close_document(qd)
    win.tasks.shutdown(wait=True)
    win.close()
    win.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    app.processEvents()


def measure_debugger(path: Path, app, steps: int = 40, repeats: int = CONTINUE_REPEATS) -> dict:
    import numpy as np
    from PySide6.QtCore import QElapsedTimer, QSettings, QTimer

    from nac_engine.format.reader import read
    from nac_engine.runtime.debugger import Debugger
    from nac_engine.runtime.session import Session
    from nac_studio.main_window import MainWindow

    out: dict = {}
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings, restore=False, persist=False)
    win.resize(1600, 1000)
    win.show()
    opened = {}
    win.documentOpened.connect(lambda q: opened.setdefault("q", q))
    win.open_path(str(path))
    while "q" not in opened:
        app.processEvents()
        time.sleep(0.001)
    _settle(app, win, lambda: True)
    qdoc = opened["q"]
    s = qdoc.doc.debug
    if s.needs_inputs():
        raise SystemExit("the benchmark file records no input signature")
    feeds = s.feeds()
    ctl = win.debug
    ui_cpu: list[float] = []     # the UI thread's own CPU time per action (independent of machine load)
    finished = []
    ctl.actionDone.connect(lambda _q: finished.append(time.perf_counter()))

    def action(cmd: str) -> float:
        """Command -> the UI thread has the result, every view has taken it and repainted.
        Statistics of big tensors still arrive later from their workers (by design)."""
        t, cpu = time.perf_counter(), time.thread_time()
        win.commands.run(cmd)
        _wait_signal(app, ctl.actionDone)
        ui_cpu.append(time.thread_time() - cpu)
        return time.perf_counter() - t

    def settled() -> float:
        """... and the background statistics (Variables, inspector) have arrived too."""
        t = time.perf_counter()
        _settle(app, win, lambda: True)
        return time.perf_counter() - t

    # F10 with every view updating
    action("debug.stepOver")          # first step: the session starts, torch warms up
    settled()
    times, with_stats = [], []
    for _ in range(steps):
        times.append(action("debug.stepOver"))
        with_stats.append(times[-1] + settled())
    out["step_ms"] = [1000 * t for t in times]
    out["step_cpu_ms"] = [1000 * t for t in ui_cpu[-steps:]]
    out["step_stats_ms"] = [1000 * t for t in with_stats]
    # baseline: the engine's step alone over the same ticks
    nac = read(str(path), strict=False)
    dbg = Debugger(nac, feeds=feeds)
    dbg.step()
    base = []
    for _ in range(steps):
        t = time.perf_counter()
        dbg.step()
        base.append(time.perf_counter() - t)
    out["engine_step_ms"] = [1000 * t for t in base]

    # Continue to the end from before tick 0 vs Session.run on the same inputs, in two pairs
    # that each compare like with like (interleaved, best of CONTINUE_REPEATS):
    # * weights loaded: F5 after a Stop (the document keeps its interpreter session, weights
    #   loaded) vs a second Session.run of one Session (its weights loaded by its first run);
    # * first run of the file: F5 after DebugSession.close() (weights dropped, as when the file
    #   was just opened) vs Session(nac, feeds).run() on a new Session (reads every weight).
    # Each Continue includes the Debugger's construction (Stop ended the last one). The longest
    # UI stall is measured by a 10 ms heartbeat timer on Continues of their own (a cold and a
    # warm one per round): its wake-ups take the GIL from the worker, which would charge the
    # timed Continues with work the Session.run baseline never has.
    beat = QElapsedTimer()
    gaps: list[int] = []
    heart = QTimer()
    heart.setInterval(10)
    heart.timeout.connect(lambda: gaps.append(beat.restart()))

    def continue_to_end(heartbeat: bool = False) -> tuple[float, float]:
        win.commands.run("debug.stop")
        _settle(app, win, lambda: not s.active)
        if heartbeat:
            beat.start()
            heart.start()
        cpu = time.process_time()       # every thread of the process: the worker's kernels and the UI
        wall = action("debug.continue")
        cpu = time.process_time() - cpu
        heart.stop()
        return wall, cpu

    def drop_weights() -> None:
        win.commands.run("debug.stop")
        _settle(app, win, lambda: not s.active)
        s.close()                                   # the file's weights dropped: the next F5 loads them
        gc.collect()

    def timed(fn) -> tuple[float, float]:
        t, cpu = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - t, time.process_time() - cpu

    cold, cold_run, warm, warm_run = [], [], [], []
    outputs: list = []
    for _ in range(repeats):
        drop_weights()
        continue_to_end(heartbeat=True)             # stalls: a first run (weights read by the worker)...
        continue_to_end(heartbeat=True)             # ... and a warm one
        drop_weights()
        cold.append(continue_to_end())
        outputs.append(s.debugger.outputs)
        ref = Session(nac, feeds=feeds)             # what a user's first `Session(nac, feeds).run()` costs
        cold_run.append(timed(lambda: outputs.append(ref.run())))
        for _ in range(2):
            warm.append(continue_to_end())
            outputs.append(s.debugger.outputs)
            warm_run.append(timed(lambda: outputs.append(ref.run())))
        ref = None                                  # its weights go before the next round
        gc.collect()
    out["finished"] = s.state == "finished"
    out["ticks"] = len(s)
    out["stall_ms"] = max(gaps) if gaps else 0.0
    best = lambda pairs: min(pairs)            # noqa: E731 (best wall, and the CPU of that run)
    out["continue_s"], out["continue_cpu_s"] = best(warm)
    out["run_s"], out["run_cpu_s"] = best(warm_run)
    out["cold_continue_s"], out["cold_continue_cpu_s"] = best(cold)
    out["cold_run_s"], out["cold_run_cpu_s"] = best(cold_run)
    out["continue_runs"] = len(warm), len(cold)
    out["outputs_equal"] = bool(all(o is not None for o in outputs) and all(
        np.array_equal(a, b) for o in outputs[1:] for a, b in zip(outputs[0], o)))

    # Step back from the end, every view updating
    settled()
    backs = []
    for _ in range(5):
        backs.append(action("debug.stepBack"))
        settled()
    out["step_back_ms"] = [1000 * t for t in backs]
    out["step_back_cpu_ms"] = [1000 * t for t in ui_cpu[-5:]]
    import os
    out["load"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    out["cpus"] = os.cpu_count()
    dispose_window(app, win)
    nac.close()
    out.update(measure_heatmap(app))
    return out


def measure_heatmap(app) -> dict:
    import numpy as np

    from nac_engine.runtime.debugger import TickResult
    from nac_studio.debug_session import Subject
    from nac_studio.views.tensor_inspector import InspectorPanel, Loaded, _histogram

    rng = np.random.default_rng(0)
    big = rng.standard_normal((2, 4096, 4096), dtype=np.float32)
    t = time.perf_counter()
    stats = TickResult(-1, "big", big)
    loaded = Loaded("big", big, stats, _histogram(big))
    bg = time.perf_counter() - t
    panel = InspectorPanel(Subject("result", 0))
    panel.resize(900, 700)
    panel.show()
    app.processEvents()
    t = time.perf_counter()
    panel.show_loaded(loaded)
    panel.repaint()
    app.processEvents()
    open_s = time.perf_counter() - t
    t = time.perf_counter()
    panel.set_slice({0: 1})
    panel.repaint()
    app.processEvents()
    reslice_s = time.perf_counter() - t
    panel.deleteLater()
    app.processEvents()
    return {"heatmap_open_ms": 1000 * open_s, "heatmap_reslice_ms": 1000 * reslice_s,
            "heatmap_stats_bg_ms": 1000 * bg}


def report(d: dict) -> list[str]:
    """Print the figures; the targets missed (empty when every one is met)."""
    med = statistics.median(d["step_ms"])
    base = statistics.median(d["engine_step_ms"])
    ratio = d["continue_s"] / d["run_s"] if d["run_s"] > 0 else float("nan")
    back = statistics.median(d["step_back_ms"])
    print(f"debugger ({d['ticks']:,} ticks; Continue {'reached the end' if d['finished'] else 'DID NOT FINISH'}, "
          f"outputs {'equal' if d['outputs_equal'] else 'DIFFER'} to Session.run)")
    print(f"  F10 with every view updating    median {med:7.1f} ms  worst {max(d['step_ms']):7.1f} ms   "
          f"{med / TARGET_STEP_MS:5.2f} of the 30 ms target   (Debugger.step alone: median {base:.2f} ms)")
    print(f"    UI thread CPU per F10: median {statistics.median(d['step_cpu_ms']):.1f} ms  worst "
          f"{max(d['step_cpu_ms']):.1f} ms   (machine load {d['load']:.1f} on {d['cpus']} CPUs: wall times "
          f"include waiting for a core)")
    print(f"    ... until background statistics arrive: median {statistics.median(d['step_stats_ms']):7.1f} ms  "
          f"worst {max(d['step_stats_ms']):7.1f} ms (UI responsive meanwhile)")
    cold_ratio = d["cold_continue_s"] / d["cold_run_s"] if d["cold_run_s"] > 0 else float("nan")
    n_warm, n_cold = d["continue_runs"]
    print(f"  Continue to the end, weights loaded (after Stop): {d['continue_s'] * 1000:8.1f} ms   Session.run, weights "
          f"loaded {d['run_s'] * 1000:.1f} ms   {ratio:5.2f}x  (target <= {TARGET_CONTINUE_RATIO}x; best of {n_warm})")
    print(f"    process CPU: Continue {d['continue_cpu_s'] * 1000:.1f} ms, Session.run {d['run_cpu_s'] * 1000:.1f} ms"
          f"   {d['continue_cpu_s'] / d['run_cpu_s']:5.2f}x")
    print(f"  first Continue of the file (reads the weights): {d['cold_continue_s'] * 1000:8.1f} ms   "
          f"Session(nac, feeds).run() {d['cold_run_s'] * 1000:.1f} ms   {cold_ratio:5.2f}x  (best of {n_cold})")
    print(f"    process CPU: Continue {d['cold_continue_cpu_s'] * 1000:.1f} ms, Session.run "
          f"{d['cold_run_cpu_s'] * 1000:.1f} ms   {d['cold_continue_cpu_s'] / d['cold_run_cpu_s']:5.2f}x")
    print(f"  longest UI stall during Continue {d['stall_ms']:7.1f} ms   (target <= {TARGET_STALL_MS:.0f} ms)")
    print(f"  step back (Shift+F10), views     median {back:7.1f} ms  worst {max(d['step_back_ms']):7.1f} ms"
          f"   (target <= {TARGET_STEP_BACK_MS:.0f} ms; UI thread CPU median "
          f"{statistics.median(d['step_back_cpu_ms']):.1f} ms)")
    print(f"  4096x4096 float32 heatmap       open {d['heatmap_open_ms']:7.1f} ms   re-slice "
          f"{d['heatmap_reslice_ms']:6.1f} ms   (statistics off the UI thread: {d['heatmap_stats_bg_ms']:.0f} ms)")
    checks = {"F10 median": med <= TARGET_STEP_MS,
              f"Continue (weights loaded) {ratio:.2f}x Session.run": ratio <= TARGET_CONTINUE_RATIO,
              f"first Continue {cold_ratio:.2f}x Session.run": cold_ratio <= TARGET_CONTINUE_RATIO,
              "stall during Continue": d["stall_ms"] <= TARGET_STALL_MS, "step back": back <= TARGET_STEP_BACK_MS,
              "Continue reached the end with Session.run's outputs": d["finished"] and d["outputs_equal"]}
    return [name for name, ok in checks.items() if not ok]
