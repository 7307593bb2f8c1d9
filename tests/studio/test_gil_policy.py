"""The process settings that keep the UI thread answering while other threads work:
torch's native libraries load without the GIL, the window shortens the switch interval and
makes full collections rarer, and the start-up imports end frozen out of the collector."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="dlopen through libc is the Linux path")
def test_torch_libraries_load_while_another_thread_keeps_running():
    """In a fresh process: a thread counting 1 ms sleeps keeps counting while libtorch is
    dlopened (ctypes.CDLL, which holds the GIL, let it count ~0 times in 0.2-0.45 s), and
    torch then imports and computes with the libraries loaded that way."""
    code = """if True:
        import threading, time
        from nac_studio import preload
        ticks, stop = [0], threading.Event()
        def beat():
            while not stop.is_set():
                time.sleep(0.001)
                ticks[0] += 1
        t = threading.Thread(target=beat); t.start()
        time.sleep(0.05)
        before, t0 = ticks[0], time.perf_counter()
        loaded = preload.load_native_libraries("torch")
        seconds, during = time.perf_counter() - t0, ticks[0] - before
        stop.set(); t.join()
        import torch
        print(loaded, round(seconds, 3), during, float(torch.arange(4.0).sum()))
        """
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    loaded, seconds, during, total = out.stdout.split()
    assert loaded == "1" and float(total) == 6.0
    # the beat thread ran through the load: at least a tick per 10 ms of it (GIL held: ~0)
    assert int(during) >= max(3, int(float(seconds) * 100)), out.stdout


def test_the_window_sets_the_policy_and_the_start_up_imports_end_frozen(window):
    from nac_studio import gil_policy, preload
    assert sys.getswitchinterval() <= gil_policy.UI_SWITCH_INTERVAL_S
    assert gc.get_threshold()[2] >= gil_policy.GEN2_AFTER
    assert preload.wait(120)
    assert "torch" in sys.modules and "pyqtgraph" in sys.modules
    assert gc.get_freeze_count() > 0


def test_opening_a_file_imports_nothing_after_the_start_up_imports():
    """In a fresh process, after the background imports: the work the views start for a newly
    opened file (meta-shape pass, graph layout, debugger session) imports no module. Each of
    those imports held the GIL on a worker right after the file's first frame (torch._dynamo
    alone took 1.3 s, through the first meta ``add``)."""
    code = """if True:
        import sys
        from nac_studio import preload
        preload.start_background_imports()
        assert preload.wait(300)
        from nac_engine.format.reader import read
        from nac_engine.format.input_signature import read_input_signature
        from nac_studio import graph_layout, graph_model, graph_shapes
        nac = read(sys.argv[1])
        assert read_input_signature(nac), "the demo must carry an input signature"
        before = set(sys.modules)
        shapes = graph_shapes.propagated_shapes(nac)
        graph_layout.layout_graph(graph_model.build_graph(nac))
        assert shapes
        new = sorted(m for m in set(sys.modules) - before)
        print(" ".join(new) or "-")
        """
    model = ROOT / "resources" / "models" / "demo_bert_tiny.nac"   # has an input signature and adds
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", code, str(model)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["-"], f"imported while opening: {out.stdout[:2000]}"
