"""The MMAP timeline's and the hardware pane's figures for ``bench_studio.py`` (headless).

* **Timeline open** on synthetic 1k / 10k / 100k-instruction streams (element-wise adds with
  weights every 10th tick, planned by min-peak; value sizes given, no shape propagation): from
  handing the pane the sizes until its first frame is painted (build the timeline, the batched
  items, paint), next to ``build_timeline`` alone (the Qt-free part, the baseline). Target: < 1 s
  at 100k.
* **Frame time**: the median and worst repaint after an A/D pan step, with the whole program in
  view (level of detail) and zoomed to 1% of it, next to the same widget's frame with nothing in
  it (baseline, same run). Target: a 60 Hz frame (16.7 ms), or at most twice the empty widget's
  frame where the widget alone is slower than that (a loaded or software-rendered machine).
* **Hardware pane end to end** on the benchmark's GPT-2 (12 × 768 by default): from Simulate
  until the run is drawn (totals, table, lanes, roofline), next to ``nac_engine.sim.simulate`` on
  the same file and inputs in this process and ``nac sim FILE`` as a fresh process, in the same run.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_TIMELINE_OPEN = 1.0
TARGET_FRAME_MS = 1000 / 60


def _pump(app, done, timeout: float = 600.0) -> None:
    end = time.perf_counter() + timeout
    while not done():
        app.processEvents()
        time.sleep(0.0005)
        if time.perf_counter() > end:
            raise TimeoutError("benchmark step did not finish")
    app.processEvents()


def empty_frame_ms(app, frames: int = 24) -> float:
    """Baseline: a pan frame of the same three-plot lanes widget with nothing in it (axes, view
    boxes and the widget's own paint), at the same size, in the same run."""
    from nac_studio.widgets.lanes_plot import LanesPlot
    plot = LanesPlot()
    plot.resize(1500, 480)
    for key in ("lanes", "buffers", "live"):
        plot.add_plot(key)
    plot.set_x_limits(0, 1000)
    plot.show()
    plot.show_all()
    app.processEvents()
    out = []
    for k in range(frames):
        t = time.perf_counter()
        plot.pan(0.05 if k % 2 == 0 else -0.05)
        plot.repaint()
        app.processEvents()
        out.append((time.perf_counter() - t) * 1000)
    plot.close()
    plot.deleteLater()
    return statistics.median(out)


def measure_timeline(app, sizes=(1000, 10000, 100000), repeat: int = 3) -> list[dict]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nac_studio.model.document import Document
    from nac_studio.model.memory_timeline import build_timeline
    from nac_studio.qt_document import QtDocument
    from nac_studio.views.timeline import TimelineView
    from tests.studio.long_stream import long_stream, synthetic_sizes
    out = []
    for n in sizes:
        t0 = time.perf_counter()
        nac = long_stream(n, params_every=10)
        made = time.perf_counter() - t0
        value_sizes = synthetic_sizes(nac)
        nac.def_use()                       # built when the file opens (graph, lint): not timeline work
        base, opened, frames_all, frames_zoom = [], [], [], []
        drawn = 0
        for _ in range(repeat):
            t = time.perf_counter()
            build_timeline(nac, value_sizes, lint=False)
            base.append(time.perf_counter() - t)
            qdoc = QtDocument(Document(nac, f"stream{n}.nac"))
            view = TimelineView(None)
            view.resize(1500, 520)
            view.show()
            view.set_document(qdoc)
            if view.task is not None:
                view.task.cancel()
            app.processEvents()
            t = time.perf_counter()
            tl = build_timeline(nac, value_sizes, lint=False)
            qdoc.doc.simulation.set_timeline(value_sizes, tl)
            view.plot.repaint()
            app.processEvents()
            opened.append(time.perf_counter() - t)
            for frames, zoom in ((frames_all, None), (frames_zoom, 0.01)):
                view.plot.show_all()
                if zoom:
                    view.plot.zoom(zoom)
                app.processEvents()
                view.plot.repaint()
                for k in range(12):
                    t = time.perf_counter()
                    view.plot.pan(0.05 if k % 2 == 0 else -0.05)
                    view.plot.repaint()
                    app.processEvents()
                    frames.append((time.perf_counter() - t) * 1000)
            drawn = view.items["buffers"].drawn
            view.close()
            view.deleteLater()
            qdoc.tasks.shutdown(wait=True)
            qdoc.close()
            app.processEvents()
        out.append({"n": n, "made_s": made, "empty_frame_ms": empty_frame_ms(app), "baseline_s": statistics.median(base), "open_s": statistics.median(opened),
                    "frame_all_ms": statistics.median(frames_all), "frame_all_max_ms": max(frames_all),
                    "frame_zoom_ms": statistics.median(frames_zoom), "frame_zoom_max_ms": max(frames_zoom),
                    "buffers": len(tl.buffers), "drawn_zoomed": drawn})
    return out


def measure_hardware(path: Path, app, preset: str = "edge-32x32") -> dict:
    """The pane end to end vs ``simulate`` in-process and ``nac sim`` as a process, same file."""
    from PySide6.QtCore import QSettings

    from nac_engine.format.input_signature import describe, read_input_signature
    from nac_engine.format.reader import read
    from nac_engine.sim import simulate
    from nac_studio.main_window import MainWindow
    with read(str(path)) as nac:
        specs = read_input_signature(nac) or []
    args = [a for s in specs for a in ("--input", describe(s))]
    t = time.perf_counter()
    cli = subprocess.run([sys.executable, "-m", "nac_engine.cli", "sim", str(path), "--hw", preset, *args],
                         capture_output=True, text=True)
    cli_s = time.perf_counter() - t
    if cli.returncode != 0:
        raise RuntimeError(f"nac sim failed: {cli.stderr.strip()}")
    win = MainWindow(QSettings(str(Path(path).with_suffix(".bench.ini")), QSettings.Format.IniFormat),
                     restore=False, persist=False)
    win.resize(1600, 1000)
    win.show()
    win.open_path(str(path))
    _pump(app, lambda: win.active is not None and not win.tasks.active)
    view = win.views["hardware"]
    win.docks["hardware"].show()
    win.docks["hardware"].raise_()
    view.load_hardware(preset)
    qdoc = win.active
    t = time.perf_counter()
    task = view.simulate()
    if task is None:
        raise RuntimeError(f"the hardware pane did not start: {view.error.text()}")
    _pump(app, lambda: qdoc.doc.simulation.run is not None or task.error is not None)
    win.repaint()
    app.processEvents()
    pane_s = time.perf_counter() - t
    if task.error is not None:
        raise RuntimeError(f"the hardware pane failed: {task.error}")
    res = qdoc.doc.simulation.run.result
    feeds = qdoc.doc.simulation.sim_feeds()
    t = time.perf_counter()
    ref = simulate(str(path), preset, feeds=feeds)
    engine_s = time.perf_counter() - t
    assert ref.total_cycles == res.total_cycles, (ref.total_cycles, res.total_cycles)
    n = len(res.instructions)
    win.close()
    app.processEvents()
    return {"instructions": n, "cycles": res.total_cycles, "pane_s": pane_s, "engine_s": engine_s, "cli_s": cli_s,
            "run_seconds": qdoc.doc.simulation.run.seconds if qdoc.doc.simulation.run else 0.0}


def report(timeline: list[dict], hardware: dict | None) -> bool:
    ok = True
    for r in timeline:
        good = r["open_s"] < TARGET_TIMELINE_OPEN if r["n"] <= 100_000 else True
        ok = ok and good
        print(f"timeline {r['n']:>7,} ticks ({r['buffers']:,} bars): open {r['open_s'] * 1000:7.1f} ms "
              f"({r['open_s'] / TARGET_TIMELINE_OPEN:4.2f} of the 1 s target; build_timeline alone "
              f"{r['baseline_s'] * 1000:.1f} ms = {r['open_s'] / max(r['baseline_s'], 1e-9):.1f}x baseline)")
        print(f"         pan frame, all in view {r['frame_all_ms']:6.1f} ms median, {r['frame_all_max_ms']:6.1f} worst; "
              f"1% in view {r['frame_zoom_ms']:6.1f} ms median, {r['frame_zoom_max_ms']:6.1f} worst "
              f"(60 Hz = {TARGET_FRAME_MS:.1f} ms; the empty widget's frame {r['empty_frame_ms']:.1f} ms, "
              f"{r['frame_all_ms'] / r['empty_frame_ms']:.1f}x / {r['frame_zoom_ms'] / r['empty_frame_ms']:.1f}x)")
        # the widget alone (axes, view boxes) may already miss 60 Hz on a loaded machine: the
        # frame must then stay within twice that empty frame
        limit = max(TARGET_FRAME_MS, 2 * r["empty_frame_ms"])
        ok = ok and r["frame_all_ms"] <= limit and r["frame_zoom_ms"] <= limit
    if hardware:
        h = hardware
        print(f"hardware pane, {h['instructions']:,} instructions, {h['cycles']:,} cycles: Simulate -> drawn "
              f"{h['pane_s']:.2f} s; simulate() in this process {h['engine_s']:.2f} s "
              f"({h['pane_s'] / h['engine_s']:.2f}x); nac sim as a process {h['cli_s']:.2f} s "
              f"({h['pane_s'] / h['cli_s']:.2f}x)")
    return ok
