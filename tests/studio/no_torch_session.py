"""Run in a fresh process by test_engine_host.py: the real main window, offscreen, opens a
GPT-2-shaped model, runs it to the end with F5, steps back, inspects a result and a weight,
simulates it, shows the MMAP timeline, sweeps two points and shows every pane; then prints
whether torch was ever imported in this process (it must not be: the engine host runs it)."""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main(path: str) -> int:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from nac_studio.model.document import Selection
    from nac_studio.main_window import MainWindow
    app = QApplication([])
    settings = QSettings(os.path.join(os.path.dirname(path), "studio.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings, restore=False, persist=False)
    win.show()

    def pump_until(cond, timeout=180.0, what=""):
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            app.processEvents()
            time.sleep(0.01)

    win.open_path(path)
    pump_until(lambda: win.active is not None and win.is_idle(), what="the open")
    if win.active.doc.debug is None or win.active.doc.debug.needs_inputs():
        raise SystemExit("the file should record its input signature")
    qdoc = win.active
    for name, dock in win.docks.items():         # every pane once
        dock.show()
        dock.raise_()
        app.processEvents()
    s = qdoc.doc.debug
    win.commands.run("debug.continue")              # F5 (the keys themselves: tests/studio/test_debugger_gui.py)
    pump_until(lambda: s.state == "finished", what="F5 to the end")
    win.commands.run("debug.stepBack")              # Shift+F10
    pump_until(lambda: s.state == "stopped", what="step back")
    r = []
    win.views["tensor_inspector"].inspect(__import__("nac_studio.debug_session", fromlist=["Subject"]).Subject("result", s.tick))
    pump_until(win.is_idle, what="the inspector")
    p = max(qdoc.nac.params.values(), key=lambda p: p.data_length)
    qdoc.select(Selection("param", p.id))
    win.views["properties"].compute_stats()
    pump_until(lambda: win.views["properties"].stats is not None, what="statistics")
    task = win.views["hardware"].simulate()
    pump_until(lambda: task.done() and win.is_idle(), what="the simulation")
    assert qdoc.doc.simulation.run is not None, "no simulation result"
    win.views["timeline"].ensure_computed()
    pump_until(lambda: qdoc.doc.simulation.timeline is not None and win.is_idle(), what="the timeline")
    sweep = win.views["sweep"]
    sweep.axes.setText("array.rows=16,32")
    t = sweep.run()
    pump_until(lambda: t is None or (t.done() and win.is_idle()), what="the sweep")
    r.append(qdoc.doc.simulation.sweep is not None)
    win.close()
    print("torch imported:", "torch" in sys.modules, "sweep:", r[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
