"""The longest UI-thread stall per Studio action, against the 100 ms target.

    python benchmarks/studio_stalls.py FILE [FILE ...]          # offscreen
    QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" python benchmarks/studio_stalls.py FILE

(``bench_studio.py`` runs it too, on its GPT-2 file: ``--stalls yes|no|only``.)

A 5 ms heartbeat timer runs while each action is done through the main window, then the
event loop is pumped until every background task has ended and the window has settled;
the largest gap between heartbeats is the longest the window could not respond, printed with
the CPU time the UI thread itself spent inside that gap ("busy"): on a loaded machine the
rest is time it waited for a core or for the GIL (``profile_stalls.py`` says who held it). Actions:
open (parse + views + graph layout), selection (instructions and parameters across the
file, each followed by its repaint), layout (switching the layer mode and back), blocks
(collapse all, expand all), statistics (the largest tensor's histogram), theme (dark and
back) and reload. Also timed without Qt: the expand-all layout of the file, and a 20,000-node
synthetic graph's layout, against their 2 s / 3 s targets.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

TARGET_STALL_MS = 100.0
TARGET_EXPAND_ALL_S = 2.0
TARGET_SYNTHETIC_S = 3.0


class Heartbeat:
    """Largest gap between 5 ms timer ticks since :meth:`reset`, and the CPU time the UI
    thread itself spent inside that gap (the rest it waited: for a core, or for the GIL)."""

    def __init__(self):
        from PySide6.QtCore import QElapsedTimer, QTimer
        self.clock = QElapsedTimer()
        self.clock.start()
        self.worst = 0
        self.worst_cpu = 0.0
        self._cpu = time.thread_time()
        self.timer = QTimer()
        self.timer.setInterval(5)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def _tick(self) -> None:
        gap = self.clock.restart()
        cpu = time.thread_time()
        if gap > self.worst:
            self.worst, self.worst_cpu = gap, (cpu - self._cpu) * 1000
        self._cpu = cpu

    def reset(self) -> None:
        self.clock.restart()
        self._cpu = time.thread_time()
        self.worst = 0
        self.worst_cpu = 0.0

    def stop(self) -> None:
        self.timer.stop()


def _pump(app, win, settle: float = 0.25, timeout: float = 120.0) -> None:
    """Serve events until no task runs and ``settle`` seconds passed quietly."""
    end = time.perf_counter() + timeout
    quiet_since = None
    while time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.001)
        if win.is_idle():
            quiet_since = quiet_since or time.perf_counter()
            if time.perf_counter() - quiet_since >= settle:
                return
        else:
            quiet_since = None


def measure_stalls(path: Path, app) -> dict:
    """Action -> longest stall in ms (and a few seconds figures), for one file."""
    from PySide6.QtCore import QSettings

    from nac_studio.model.document import Selection
    from nac_studio.main_window import MainWindow

    settings = QSettings(str(Path(tempfile.mkdtemp()) / "stalls.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings, restore=False, persist=False, theme="light")
    win.resize(1600, 1000)
    win.apply_default_layout()
    win.show()
    _pump(app, win, settle=0.5)
    beat = Heartbeat()
    out: dict = {}

    def action(name: str, fn, settle: float = 0.25) -> None:
        _pump(app, win, settle=0.05)
        beat.reset()
        t = time.perf_counter()
        cpu = time.thread_time()
        fn()
        _pump(app, win, settle=settle)
        out[name] = beat.worst
        out[name + "_worst_cpu"] = beat.worst_cpu
        out[name + "_s"] = time.perf_counter() - t - settle
        # CPU time the UI thread itself spent: on a loaded machine the stall includes time
        # the thread waited for a core; this does not
        out[name + "_cpu"] = time.thread_time() - cpu

    action("open", lambda: win.open_path(str(path)), settle=0.5)
    qdoc = win.active
    n = len(qdoc.nac.instructions)
    graph = win.graph_view

    def select_many() -> None:
        worst, worst_cpu = 0, 0.0
        ticks = [int(n * f) for f in (0.02, 0.2, 0.4, 0.6, 0.8, 0.98)]
        pids = sorted(qdoc.nac.params)[:: max(1, len(qdoc.nac.params) // 4)][:4]
        for sel in [Selection("instruction", t) for t in ticks] + [Selection("param", p) for p in pids]:
            beat.reset()
            qdoc.select(sel)
            end = time.perf_counter() + 0.12
            while time.perf_counter() < end:
                app.processEvents()
                time.sleep(0.001)
            if beat.worst > worst:
                worst, worst_cpu = beat.worst, beat.worst_cpu
        beat.worst, beat.worst_cpu = worst, worst_cpu
    action("selection", select_many, settle=0.05)

    def relayout() -> None:
        graph.set_mode("tick")
        _pump(app, win)
        graph.set_mode("longest-path")
    action("layout", relayout)

    if graph.act_collapse.isEnabled():
        def blocks() -> None:
            graph.act_collapse.setChecked(not graph.act_collapse.isChecked())
            _pump(app, win)
            graph.act_collapse.setChecked(not graph.act_collapse.isChecked())
        action("blocks", blocks)

    big = max(qdoc.nac.params.values(), key=lambda p: p.data_length)
    props = win.properties_view

    def stats() -> None:
        qdoc.select(Selection("param", big.id))
        if getattr(props, "_stats_task", None) is None and hasattr(props, "compute_stats"):
            props.compute_stats()
    action("statistics", stats)

    def theme() -> None:
        win.set_theme("dark")
        _pump(app, win, settle=0.1)
        win.set_theme("light")
    action("theme", theme)
    action("reload", win.reload_active, settle=0.5)
    beat.stop()
    out["instructions"] = n
    from studio_debugger import dispose_window
    dispose_window(app, win)       # before the next file's window
    return out


def layout_figures(path: Path) -> dict:
    """Seconds, without Qt: this file's graph with every block expanded, and a synthetic
    20,000-node graph (GPT-2-shaped blocks), both built and laid out."""
    from nac_engine.format.reader import read
    from nac_studio.model.graph_layout import layout_graph
    from nac_studio.model.graph_model import build_graph

    out = {}
    nac = read(str(path), strict=False)
    t = time.perf_counter()
    g = build_graph(nac)
    layout_graph(g)
    out["expand_all_s"], out["expand_all_nodes"] = time.perf_counter() - t, g.n_nodes
    nac.close()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.studio.gpt2_like import gpt2_like
    big = gpt2_like(400, d=64, n_head=2, seq=4)
    t = time.perf_counter()
    g = build_graph(big)
    lay = layout_graph(g)
    out["synthetic_s"], out["synthetic_nodes"] = time.perf_counter() - t, g.n_nodes
    out["synthetic_layout"] = lay
    return out


def pan_fps(lay, app, frames: int = 30) -> float:
    """Frames per second panning across ``lay`` in a 1200×800 canvas at the opening zoom."""
    from PySide6.QtCore import QPointF

    from nac_studio.widgets.graph_canvas import GraphCanvas
    c = GraphCanvas()
    c.resize(1200, 800)
    c.show()
    c.set_graph_layout(lay)
    app.processEvents()
    t = time.perf_counter()
    for k in range(frames):
        c.offset = c.offset + QPointF(0, -37.0)
        c._changed()
        c.repaint()
    fps = frames / (time.perf_counter() - t)
    c.deleteLater()
    return fps


def report(path: Path, stalls: dict, layouts: dict, fps: float) -> bool:
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"UI stalls, {path.name} ({stalls['instructions']:,} instructions, platform {platform}, "
          f"load average {load:.1f} on {os.cpu_count()} cores); target < {TARGET_STALL_MS:.0f} ms")
    ok = True
    for name in ("open", "selection", "layout", "blocks", "statistics", "theme", "reload"):
        if name not in stalls:
            continue
        ms = stalls[name]
        good = ms < TARGET_STALL_MS
        ok &= good
        print(f"  {name:11s} longest stall {ms:7.0f} ms   {ms / TARGET_STALL_MS:5.2f} of target   "
              f"(UI thread busy {stalls[name + '_worst_cpu']:4.0f} ms of it; action {stalls[name + '_s']:.2f} s, "
              f"UI thread CPU {stalls[name + '_cpu'] * 1000:.0f} ms){'' if good else '   MISSED'}")
    e, s = layouts["expand_all_s"], layouts["synthetic_s"]
    print(f"  expand-all layout ({layouts['expand_all_nodes']:,} nodes, no Qt)  {e:6.2f} s   "
          f"{e / TARGET_EXPAND_ALL_S:5.2f} of the 2 s target")
    print(f"  synthetic layout ({layouts['synthetic_nodes']:,} nodes, no Qt)   {s:6.2f} s   "
          f"{s / TARGET_SYNTHETIC_S:5.2f} of the 3 s target")
    print(f"  panning the synthetic graph: {fps:.0f} frames/s")
    return ok and e < TARGET_EXPAND_ALL_S and s < TARGET_SYNTHETIC_S


def run(paths: list[Path], app) -> bool:
    ok = True
    for p in paths:
        stalls = measure_stalls(p, app)
        layouts = layout_figures(p)
        fps = pan_fps(layouts.pop("synthetic_layout"), app)
        ok = report(p, stalls, layouts, fps) and ok
    return ok


def main(argv=None) -> int:
    paths = [Path(a) for a in (argv if argv is not None else sys.argv[1:])]
    if not paths:
        print(__doc__)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nac_studio.qt_compat import guard_singleton_refcounts
    guard_singleton_refcounts()
    from PySide6.QtWidgets import QApplication

    from nac_studio.theme import apply_theme
    app = QApplication.instance() or QApplication([])
    apply_theme(app, "light")
    return 0 if run(paths, app) else 1


if __name__ == "__main__":
    sys.exit(main())
