"""cProfile of the Studio's UI thread during a scripted F10 / Step Back sequence (the figures of
``studio_debugger.py`` say how long; this says where the time goes).

    QT_QPA_PLATFORM=offscreen python3 benchmarks/profile_debugger.py [--file F.nac] [--steps 30]
        [--action stepOver|stepBack|continue] [--sort tottime] [--top 40] [-o out.prof]

Only the UI thread is profiled (cProfile hooks the thread that enables it): the debugger's
worker thread runs the kernels, which ``Debugger.step`` alone measures.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", help="a .nac with an input signature (default: the cached GPT-2 12x768)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--action", choices=("stepOver", "stepBack", "continue"), default="stepOver")
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("-o", "--out", help="write the raw profile here (for snakeviz / pstats)")
    args = ap.parse_args(argv)

    from nac_studio.qt_compat import guard_singleton_refcounts
    guard_singleton_refcounts()
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from bench_studio import get_file
    from nac_studio.main_window import MainWindow
    from nac_studio.theme import apply_theme
    from studio_debugger import _settle, _wait_signal

    if args.file:
        path = Path(args.file)
    else:
        path, _source = get_file(argparse.Namespace(file=None, cache=str(Path(tempfile.gettempdir()) / "nac_bench"),
                                                    no_opt=False, layers=12, width=768))
    app = QApplication.instance() or QApplication([])
    apply_theme(app, "light")
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "prof.ini"), QSettings.Format.IniFormat)
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
    ctl = win.debug

    def action(cmd: str) -> None:
        win.commands.run(cmd)
        _wait_signal(app, ctl.actionDone)

    action("debug.stepOver")                   # the session starts, torch warms up
    _settle(app, win, lambda: True)
    if args.action == "stepBack":
        for _ in range(args.steps + 1):
            action("debug.stepOver")
        _settle(app, win, lambda: True)
    prof = cProfile.Profile()
    cpu = time.thread_time()
    t = time.perf_counter()
    n = 1 if args.action == "continue" else args.steps
    for _ in range(n):
        prof.enable()
        action(f"debug.{args.action}")
        prof.disable()
        _settle(app, win, lambda: True)     # background statistics: not the step's own cost
    wall, cpu = time.perf_counter() - t, time.thread_time() - cpu
    print(f"{n} x debug.{args.action}: {1000 * wall / n:.1f} ms wall, {1000 * cpu / n:.1f} ms UI-thread CPU each "
          f"(settling included)")
    if args.out:
        prof.dump_stats(args.out)
    pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
    win.set_active(None)
    for qd in list(win.docs):
        win.close_document(qd)
    win.tasks.shutdown(wait=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
