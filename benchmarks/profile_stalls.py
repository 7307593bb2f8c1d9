"""Where the UI thread's stalls come from: a stack sampler beside ``studio_stalls.py``'s actions.

    QT_QPA_PLATFORM=offscreen python3 benchmarks/profile_stalls.py FILE [--actions open,selection,theme,reload]
        [--threshold 40] [--top 12] [--cprofile]

A watchdog thread samples every thread's Python stack every 2 ms while the 5 ms heartbeat
has not ticked for ``--threshold`` ms; each stall longer than that is printed with the UI
thread's most frequent frames (innermost project frames first) and what the other threads
were doing meanwhile (a worker holding the GIL in a C call stalls the UI thread too).
``--cprofile`` adds a cProfile of the UI thread per action (by cumulative time).
"""
from __future__ import annotations

import argparse
import cProfile
import collections
import gc
import io
import os
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _frames(frame, limit: int = 40) -> list[str]:
    out = []
    while frame is not None and len(out) < limit:
        code = frame.f_code
        out.append(f"{Path(code.co_filename).name}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return out


class StallSampler:
    """Samples all stacks while the heartbeat is late; groups the samples per stall."""

    def __init__(self, threshold_ms: float):
        self.threshold = threshold_ms / 1000.0
        self.last_beat = time.perf_counter()
        self.last_cpu = time.thread_time()
        self.main_id = threading.get_ident()
        self.stalls: list[dict] = []
        self._current: dict | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="stall-sampler")
        self._thread.start()

    def beat(self) -> None:
        now = time.perf_counter()
        cpu = time.thread_time()
        if self._current is not None:
            self._current["cpu_ms"] = (cpu - self.last_cpu) * 1000
            self._current["ms"] = (now - self._current["since"]) * 1000
            self._current["mono"] = (time.monotonic() - (now - self._current["since"]), time.monotonic())
            self.stalls.append(self._current)
            self._current = None
        self.last_beat = now
        self.last_cpu = cpu

    def _run(self) -> None:
        names = {}
        while not self._stop.wait(0.002):
            late = time.perf_counter() - self.last_beat
            if late < self.threshold:
                continue
            cur = self._current
            if cur is None:
                cur = self._current = {"since": self.last_beat, "main": collections.Counter(),
                                       "others": collections.Counter(), "n": 0}
            frames = sys._current_frames()
            cur["n"] += 1
            for tid, fr in frames.items():
                if tid == threading.get_ident():
                    continue
                stack = _frames(fr)
                if tid == self.main_id:
                    for i, f in enumerate(stack):
                        cur["main"][(i, f)] += 1
                    cur.setdefault("main_stacks", collections.Counter())[" <- ".join(stack[:14])] += 1
                else:
                    if tid not in names:
                        names = {t.ident: t.name for t in threading.enumerate()}
                    cur["others"][f"[{names.get(tid, tid)}] " + " <- ".join(stack[:6])] += 1

    def stop(self) -> None:
        self._stop.set()


class GcWatch:
    """Each garbage collection over 5 ms: generation, thread, duration (a collection holds the
    GIL, so one in a worker stalls the UI thread as much as one on it)."""

    def __init__(self):
        self.events: list[tuple[int, str, float]] = []
        self._start = {}
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict) -> None:
        tid = threading.get_ident()
        if phase == "start":
            self._start[tid] = time.perf_counter()
        elif tid in self._start:
            ms = (time.perf_counter() - self._start.pop(tid)) * 1000
            if ms > 5:
                self.events.append((info["generation"], threading.current_thread().name, ms))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--actions", default="open,selection,reload")
    ap.add_argument("--threshold", type=float, default=40.0)
    ap.add_argument("--top", type=int, default=3, help="stacks shown per stall")
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--stall-log", help="append 'action start end' (CLOCK_MONOTONIC seconds) per stall, to "
                                        "match with `perf record -k CLOCK_MONOTONIC` samples")
    args = ap.parse_args(argv)
    wanted = set(args.actions.split(","))

    from nac_studio.qt_compat import guard_singleton_refcounts
    guard_singleton_refcounts()
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from nac_studio.model.document import Selection
    from nac_studio.main_window import MainWindow
    from nac_studio.theme import apply_theme
    from studio_stalls import _pump

    app = QApplication.instance() or QApplication([])
    apply_theme(app, "light")
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "prof.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings, restore=False, persist=False, theme="light")
    win.resize(1600, 1000)
    win.apply_default_layout()
    win.show()
    _pump(app, win, settle=0.5)
    sampler = StallSampler(args.threshold)
    gcw = GcWatch()
    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(sampler.beat)
    timer.start()

    def action(name: str, fn, settle: float = 0.25) -> None:
        if name not in wanted:
            fn()
            _pump(app, win, settle=settle)
            return
        _pump(app, win, settle=0.05)
        sampler.stalls.clear()
        gcw.events.clear()
        prof = cProfile.Profile() if args.cprofile else None
        if prof:
            prof.enable()
        fn()
        _pump(app, win, settle=settle)
        if prof:
            prof.disable()
        print(f"=== {name}: {len(sampler.stalls)} stalls over {args.threshold:.0f} ms (UI CPU): "
              + ", ".join(f"{s['ms']:.0f} ({s.get('cpu_ms', 0):.0f})" for s in sampler.stalls))
        if args.stall_log:
            with open(args.stall_log, "a") as f:
                for st in sampler.stalls:
                    f.write(f"{name} {st['mono'][0]:.6f} {st['mono'][1]:.6f} {os.getpid()}\n")
        for gen, thread, ms in gcw.events:
            print(f"  gc gen {gen} on {thread}: {ms:.0f} ms")
        for s in sorted(sampler.stalls, key=lambda s: -s["ms"])[:6]:
            print(f"--- stall {s['ms']:.0f} ms (UI thread CPU {s.get('cpu_ms', 0):.0f} ms), {s['n']} samples")
            for stack, k in s.get("main_stacks", collections.Counter()).most_common(args.top):
                print(f"  UI x{k}: {stack}")
            for stack, k in s["others"].most_common(3):
                print(f"  other x{k}: {stack}")
        if prof:
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(45)
            print(out.getvalue())

    action("open", lambda: win.open_path(args.file), settle=0.5)
    qdoc = win.active
    n = len(qdoc.nac.instructions)

    def select_many() -> None:
        ticks = [int(n * f) for f in (0.02, 0.2, 0.4, 0.6, 0.8, 0.98)]
        pids = sorted(qdoc.nac.params)[:: max(1, len(qdoc.nac.params) // 4)][:4]
        for sel in [Selection("instruction", t) for t in ticks] + [Selection("param", p) for p in pids]:
            qdoc.select(sel)
            end = time.perf_counter() + 0.12
            while time.perf_counter() < end:
                app.processEvents()
                time.sleep(0.001)
    action("selection", select_many, settle=0.05)

    def theme() -> None:
        win.set_theme("dark")
        _pump(app, win, settle=0.1)
        win.set_theme("light")
    action("theme", theme)
    action("reload", win.reload_active, settle=0.5)
    sampler.stop()
    timer.stop()
    win.tasks.shutdown(wait=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
