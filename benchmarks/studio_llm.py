"""The Studio on a multi-GB LLM file, for ``bench_llm.py`` (one main window, headless; run as a child:
``python benchmarks/studio_llm.py FILE.nac [--debugger]``, prints one JSON line).

* **open**: from ``open_path`` until the document is in every view and the UI thread serves the
  next event (hex, structure and disassembly show it), then until the graph's layout arrives
  from the engine host; the longest UI stall meanwhile (10 ms heartbeat);
* **inspector** on ``model.embed_tokens.weight`` and on the first layer's ``mlp.down_proj.weight``:
  from the Inspect command until the first heatmap window is on screen, and until the statistics
  and histogram have arrived; the longest stall meanwhile;
* **Studio RssAnon**: this process's anonymous memory after all of that (the engine host is
  another process);
* ``--debugger``: the debugger figures of ``studio_debugger.measure_debugger`` (F10, Continue to
  the end against ``Session.run``, Step Back, the longest stall during Continue). These import torch
  into this process, so they come after the RssAnon figure.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def rss_anon_gb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / (1 << 20)
    return float("nan")


def main() -> int:
    import os
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    path = Path(sys.argv[1])
    from PySide6.QtCore import QElapsedTimer, QSettings, QTimer
    from PySide6.QtWidgets import QApplication
    from nac_studio.qt_compat import guard_singleton_refcounts
    guard_singleton_refcounts()
    app = QApplication.instance() or QApplication([])
    from nac_studio.model.document import Selection
    from nac_studio.main_window import MainWindow

    settings = QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings, restore=False, persist=False)
    win.resize(1600, 1000)
    win.show()
    app.processEvents()
    beat, gaps = QElapsedTimer(), []
    beat.start()
    heart = QTimer()
    heart.setInterval(10)
    heart.timeout.connect(lambda: gaps.append(beat.restart()))
    heart.start()

    def pump_until(done, timeout: float = 600.0) -> float:
        t = time.perf_counter()
        while not done() and time.perf_counter() - t < timeout:
            app.processEvents()
            time.sleep(0.001)
        return time.perf_counter() - t

    out: dict = {}
    state: dict = {}
    win.documentOpened.connect(lambda _q: state.setdefault("opened", time.perf_counter()))
    win.graph_view.layoutReady.connect(lambda: state.setdefault("laid_out", time.perf_counter()))
    t0 = time.perf_counter()
    win.open_path(str(path))
    pump_until(lambda: "opened" in state)
    served: dict = {}
    QTimer.singleShot(0, lambda: served.setdefault("t", time.perf_counter()))
    pump_until(lambda: "t" in served)
    out["interactive_s"] = served["t"] - t0
    pump_until(lambda: "laid_out" in state)
    out["graph_s"] = state.get("laid_out", float("nan")) - t0
    out["open_stall_ms"] = max(gaps, default=0)

    qdoc = win.active
    names = {p.name: p for p in qdoc.nac.params.values()}
    for label, name in (("embed", "model.embed_tokens.weight"), ("mlp", "model.layers.0.mlp.down_proj.weight")):
        p = names.get(name)
        if p is None:
            continue
        gaps.clear()
        beat.restart()
        qdoc.select(Selection("param", p.id))
        t = time.perf_counter()
        panel = win.commands.run("debug.inspect")
        first = pump_until(lambda: panel.window is not None or (panel.loaded is not None and panel.array is not None))
        stats = pump_until(lambda: panel.large_stats is not None or panel.result is not None) + first
        out[label] = {"shape": list(p.meta.shape) if p.meta is not None else None, "first_view_s": first, "stats_s": time.perf_counter() - t,
                      "stall_ms": max(gaps, default=0), "windowed": panel.large is not None}
        del stats
    heart.stop()
    out["studio_rss_anon_gb"] = rss_anon_gb()
    if "--debugger" in sys.argv:
        from studio_debugger import measure_debugger
        win.close()
        app.processEvents()
        out["debugger"] = measure_debugger(path, app, steps=20, repeats=2)
        out["debugger"]["studio_rss_anon_gb"] = rss_anon_gb()   # with torch imported by the baseline here
    print(json.dumps(out, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
