"""The Studio on a 2 GB file (issue 25 acceptance): it opens with hex, structure and disassembly,
lays its graph out and inspects a 64 MB weight without the UI thread stalling — measured by a
10 ms heartbeat timer, as benchmarks/studio_llm.py does on real Llama files. Slow tier (the file
takes a while to write); its bound has the margin of a loaded 2-core machine, the 100 ms target
is the benchmark's."""
from __future__ import annotations

import faulthandler
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest
from PySide6.QtCore import QElapsedTimer, QTimer

from nac_studio.model.document import Selection

ROOT = Path(__file__).resolve().parents[2]
#: The longest the UI thread may go without serving its timer here (target 100 ms, quiet).
STALL_BOUND_MS = 400

class _Gap(NamedTuple):
    """One heartbeat interval of the UI thread, from the kernel's scheduler statistics."""
    wall: int        # ms between two timer ticks
    running: int     # ms the UI thread was on a CPU in it
    runnable: int    # ms it was ready to run but every core was busy with other work

    def stall(self) -> int:
        """The part of the gap the Studio answers for: its own work on the UI thread, or the
        UI thread blocked (on the GIL, a lock, a page fault). The time it waited for a core
        that other processes held is the machine's load: CI's slow tier shares its machine,
        and a 1.2 s gap there could not be told from a hung UI without this split."""
        return self.wall - self.runnable

    def __str__(self) -> str:
        return f"{self.wall} ms between ticks: {self.running} ms running, {self.runnable} ms waiting for a core"


def _ui_thread_times() -> tuple[int, int]:
    """(running, runnable) ms of the calling thread so far (Linux schedstat); zeros elsewhere,
    where a gap is then counted whole."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            run_ns, wait_ns = f.read().split()[:2]
        return int(run_ns) // 1_000_000, int(wait_ns) // 1_000_000
    except (OSError, ValueError):
        return 0, 0


_MAKE = textwrap.dedent("""
    import sys, torch, nac_engine
    width, depth, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    layers = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(depth)]).eval()
    with torch.no_grad():
        for l in layers:
            l.weight.normal_(0, width ** -0.5)
    nac_engine.write(nac_engine.compile(layers, (torch.randn(1, width),)), out)
""")


@pytest.mark.slow
@pytest.mark.timing
def test_a_2_gb_file_opens_and_inspects_without_a_stall(window, qtbot, tmp_path):
    path = tmp_path / "chain32.nac"
    subprocess.run([sys.executable, "-c", _MAKE, "4096", "32", str(path)], check=True, cwd=ROOT, timeout=600)
    assert path.stat().st_size >= 2 << 30
    # The first inspector, heatmap, icon and font of a process cost the same on any file (and
    # more beside a cold disk cache); this test is about the 2 GB file, so they are paid first
    # on the bundled demo, and the window is back to no document when the measurement starts.
    demo = window.open_and_wait(ROOT / "nac_studio" / "demos" / "demo_mlp.nac")
    demo.select(Selection("param", next(iter(demo.nac.params.values())).id))
    first = window.commands.run("debug.inspect")
    qtbot.waitUntil(lambda: first.array is not None, timeout=60000)
    window.close_document(demo)
    # the 2 GB just written are still being written back: opening now measures the kernel's I/O
    # (the reader's page faults wait for it with the GIL held: 400-500 ms here), not the Studio
    os.sync()
    beat, gaps = QElapsedTimer(), []
    heart = QTimer()
    heart.setInterval(10)
    # a stall longer than the bound dumps every thread's stack (from faulthandler's own C thread,
    # which needs no GIL), so a failure says who held the UI thread or the lock
    stacks = open(tmp_path / "stall-stacks.txt", "w+")
    clock = [_ui_thread_times()]

    def beat_once():
        now = _ui_thread_times()
        gaps.append(_Gap(beat.restart(), now[0] - clock[0][0], now[1] - clock[0][1]))
        clock[0] = now
        faulthandler.dump_traceback_later(STALL_BOUND_MS / 1000, file=stacks)
    heart.timeout.connect(beat_once)
    beat.start()
    heart.start()
    laid_out = []
    window.graph_view.layoutReady.connect(lambda: laid_out.append(True))
    qdoc = window.open_and_wait(path)
    qtbot.waitUntil(lambda: bool(laid_out), timeout=120000)
    assert len(qdoc.nac.params) == 32 and window.hex_view.area is not None
    w = next(iter(qdoc.nac.params.values()))
    qdoc.select(Selection("param", w.id))
    panel = window.commands.run("debug.inspect")
    qtbot.waitUntil(lambda: panel.window is not None and panel.large_stats is not None, timeout=120000)
    heart.stop()
    faulthandler.cancel_dump_traceback_later()
    assert panel.large is not None and panel.array is None
    stacks.seek(0)
    worst = max(gaps, key=_Gap.stall)
    assert worst.stall() <= STALL_BOUND_MS, (
        f"the UI thread stalled for {worst.stall()} ms ({worst}); during it:\n{stacks.read()}")
