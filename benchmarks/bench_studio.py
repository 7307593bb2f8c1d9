"""How fast the Studio opens a GPT-2-size file, headless.

    python benchmarks/bench_studio.py [--file GPT2.nac] [--layers 12 --width 768] [--no-opt] [--repeat 3]

The file: by default GPT-2 small (12 layers × 768, random weights, ~500 MB) compiled with
``nac_engine.compile`` from a transformers config (cached under ``--cache``); a deeper,
narrower model (``--layers 60 --width 256``) gives thousands of instructions at less size. If the
compiler cannot build it (transformers missing, export failure) a file of the same size
and shape is synthesised with the codec instead; the output says which.

Measured, each the median of ``--repeat`` runs in one fresh main window per run:

* **baseline**: ``nac_engine.read`` of the file (the codec alone, mmap, lazy weights);
* **open → interactive**: from ``open_path`` until the document is in every view and the
  UI thread has served a queued event (target < 2 s);
* **graph layout**: from the document arriving until the graph view's background layout
  is on screen (target < 3 s), and the same layout computed without Qt;
* **longest UI stall**: the largest gap between 10 ms heartbeat timers during open and
  layout — how long the window could not respond;
* **hex paint**: one frame of the hex view at the start, middle and end of the file;
* **search** over the whole file and **statistics** of the largest tensor, both background
  tasks, with the longest UI stall while they run.

Ratios are printed against the targets and against the baseline of this run.

``--debugger yes|no|only`` adds (or runs alone) the debugger's figures on the same file: F10
with every view updating, Continue vs ``Session.run``, the longest stall during Continue,
step back and a 4096×4096 heatmap (see ``benchmarks/studio_debugger.py``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

TARGET_INTERACTIVE = 2.0
TARGET_LAYOUT = 3.0


# --------------------------------------------------------------------------- the file
def compile_gpt2(path: Path, optimize: bool, n_layer: int = 12, width: int = 768) -> str:
    import torch
    from transformers import GPT2Config, GPT2Model

    from nac_engine.compiler import compile_model
    from nac_engine.format import write

    config = GPT2Config(n_layer=n_layer, n_embd=width, n_head=12 if width % 12 == 0 else 8, use_cache=False)
    torch.manual_seed(0)
    model = GPT2Model(config).eval()
    ids = torch.randint(0, config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0))
    result = compile_model(model, (), {"input_ids": ids}, optimize=optimize)
    write(result.nac, str(path))
    return f"GPT2Model {n_layer}x{width} compiled by nac_engine.compile (optimize={optimize})"


def synthesize_gpt2(path: Path) -> str:
    """Same parameter shapes as GPT-2 small and a per-block op stream of GPT-2's length."""
    import numpy as np

    from nac_engine.format import write
    from nac_engine.format.model import Header, InputName, Instruction, NacFile, Parameter, TensorMeta

    d, n_layer, vocab, ctx = 768, 12, 50257, 1024
    nac = NacFile(Header(version="1.8", num_inputs=1, num_outputs=1, d_model=d))
    names = ["aten.embedding.default", "aten.layer_norm.default", "aten.addmm.default", "nac.view",
             "aten.split.Tensor", "aten.permute.default", "nac.matmul", "aten.softmax.int", "nac.add",
             "aten.gelu.default"]
    nac.cmap = {40 + i: n for i, n in enumerate(names)}
    op = {n: 40 + i for i, n in enumerate(names)}
    nac.perms = {1: "T", 2: "TT", 3: "TTT"}
    ins: list[Instruction] = [Instruction(0, 2, 0, None, None)]
    nac.input_names = [InputName(0, "input_ids")]

    def param(name, shape):
        pid = len(nac.params) + 1
        data = np.zeros(shape, "<f4")
        nac.params[pid] = Parameter(pid, name, TensorMeta(0, tuple(shape), 0), _payload=data,
                                    data_length=data.nbytes, _file=nac)
        nac.tensor_order.append(pid)
        ins.append(Instruction(len(ins), 2, 1, (1, pid), None))
        return len(ins) - 1

    def emit(name, *srcs):
        i = len(ins)
        ins.append(Instruction(i, op[name], len(srcs), None, tuple(s - i for s in srcs)))
        return i

    x = emit("aten.embedding.default", param("wte.weight", (vocab, d)), 0)
    x = emit("nac.add", x, param("wpe.weight", (ctx, d)))
    for b in range(n_layer):
        p = f"h.{b}"
        h = emit("aten.layer_norm.default", x, param(f"{p}.ln_1.weight", (d,)), param(f"{p}.ln_1.bias", (d,)))
        qkv = emit("aten.addmm.default", param(f"{p}.attn.c_attn.bias", (3 * d,)), h,
                   param(f"{p}.attn.c_attn.weight", (d, 3 * d)))
        q = emit("aten.permute.default", emit("aten.split.Tensor", qkv))
        k = emit("aten.permute.default", emit("aten.split.Tensor", qkv))
        v = emit("aten.permute.default", emit("aten.split.Tensor", qkv))
        a = emit("aten.softmax.int", emit("nac.matmul", q, k))
        o = emit("nac.view", emit("aten.permute.default", emit("nac.matmul", a, v)))
        o = emit("aten.addmm.default", param(f"{p}.attn.c_proj.bias", (d,)), o,
                 param(f"{p}.attn.c_proj.weight", (d, d)))
        x = emit("nac.add", o, x)
        h = emit("aten.layer_norm.default", x, param(f"{p}.ln_2.weight", (d,)), param(f"{p}.ln_2.bias", (d,)))
        h = emit("aten.addmm.default", param(f"{p}.mlp.c_fc.bias", (4 * d,)), h,
                 param(f"{p}.mlp.c_fc.weight", (d, 4 * d)))
        h = emit("aten.gelu.default", h)
        h = emit("aten.addmm.default", param(f"{p}.mlp.c_proj.bias", (d,)), h,
                 param(f"{p}.mlp.c_proj.weight", (4 * d, d)))
        x = emit("nac.add", h, x)
    x = emit("aten.layer_norm.default", x, param("ln_f.weight", (d,)), param("ln_f.bias", (d,)))
    out = len(ins)
    ins.append(Instruction(out, 3, 0, (1, 0), (x - out,)))
    nac.instructions = ins
    write(nac, str(path))
    return "synthesised with the codec (GPT-2 small parameter shapes, simplified op stream)"


def get_file(args) -> tuple[Path, str]:
    if args.file:
        return Path(args.file), "given with --file"
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"gpt2_{args.layers}x{args.width}{'_noopt' if args.no_opt else ''}.nac"
    note = path.with_suffix(".source.txt")
    if path.is_file() and note.is_file():
        return path, note.read_text().strip() + " (cached)"
    try:
        source = compile_gpt2(path, optimize=not args.no_opt, n_layer=args.layers, width=args.width)
    except Exception as exc:   # the benchmark still runs without the compiler
        print(f"compiler unavailable ({type(exc).__name__}: {exc}); synthesising instead", file=sys.stderr)
        source = synthesize_gpt2(path)
    note.write_text(source)
    return path, source


# --------------------------------------------------------------------------- measuring
def measure_once(path: Path, app) -> dict:
    from PySide6.QtCore import QElapsedTimer, QSettings, QTimer

    from nac_studio.main_window import MainWindow

    settings = QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings, restore=False, persist=False)
    win.show()
    app.processEvents()
    out: dict = {}

    # heartbeat: the largest gap between 10 ms timer ticks is the longest the UI froze
    beat = QElapsedTimer()
    gaps = []
    beat.start()

    def tick():
        gaps.append(beat.restart())
    heart = QTimer()
    heart.setInterval(10)
    heart.timeout.connect(tick)
    heart.start()

    t0 = time.perf_counter()
    state = {}
    win.documentOpened.connect(lambda _q: state.setdefault("opened", time.perf_counter()))
    win.graph_view.layoutReady.connect(lambda: state.setdefault("laid_out", time.perf_counter()))
    win.open_path(str(path))
    while "opened" not in state:
        app.processEvents()
        time.sleep(0.001)
    # interactive = the UI thread serves a queued event after the views took the document
    served = {}
    QTimer.singleShot(0, lambda: served.setdefault("t", time.perf_counter()))
    while "t" not in served:
        app.processEvents()
    out["interactive"] = served["t"] - t0
    deadline = time.perf_counter() + 120
    while "laid_out" not in state and time.perf_counter() < deadline:
        app.processEvents()
        time.sleep(0.001)
    out["layout"] = state.get("laid_out", float("nan")) - state["opened"]
    out["stall_ms"] = max(gaps) if gaps else 0

    def background(start_task) -> tuple[float, float]:
        """Seconds until the task ends, and the longest UI stall meanwhile."""
        gaps.clear()
        beat.restart()
        t = time.perf_counter()
        task = start_task()
        while task is not None and not task.done():
            app.processEvents()
            time.sleep(0.001)
        app.processEvents()
        return time.perf_counter() - t, (max(gaps) if gaps else 0)

    # a search that scans the whole file (the pattern is absent) and the statistics of the
    # largest tensor: both run as tasks while the heartbeat measures the UI
    hexv = win.hex_view
    hexv.search_mode.setCurrentText("Hex")
    hexv.search_edit.setText("DE AD BE EF 01 23 45 67 89")
    hexv.area.set_cursor(0)
    out["search_s"], out["search_stall_ms"] = background(lambda: hexv.find(True))
    qdoc = win.active
    big = max(qdoc.nac.params.values(), key=lambda p: p.data_length)
    from nac_studio.model.document import Selection
    qdoc.select(Selection("param", big.id))
    props = win.properties_view
    out["stats_s"], out["stats_stall_ms"] = background(
        lambda: props._stats_task if props._stats_task is not None else props.compute_stats())
    out["stats_elements"] = props.stats.get("count", 0) if props.stats else 0
    heart.stop()
    graph = win.graph_view.shown
    out["nodes"] = graph.n_nodes if graph is not None else 0
    out["edges"] = graph.n_edges if graph is not None else 0

    # hex frames at three places in the file
    area = win.hex_view.area
    frames = []
    for frac in (0.0, 0.5, 1.0):
        area.verticalScrollBar().setValue(int(area.verticalScrollBar().maximum() * frac))
        t = time.perf_counter()
        area.viewport().grab()
        frames.append(time.perf_counter() - t)
    out["hex_frame_ms"] = 1000 * max(frames)
    from studio_debugger import dispose_window
    dispose_window(app, win)
    return out


def layout_without_qt(path: Path) -> dict:
    from nac_engine.format.reader import read
    from nac_studio.model.graph_layout import layout_graph
    from nac_studio.model.graph_model import build_graph

    nac = read(str(path), strict=False)
    out = {}
    for mode in ("longest-path", "tick"):
        t = time.perf_counter()
        graph = build_graph(nac)
        built = time.perf_counter() - t
        layout_graph(graph, mode=mode)
        out[mode] = (built, time.perf_counter() - t)
    nac.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", help="a .nac to open instead of compiling GPT-2")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "nac_bench"),
                    help="where the compiled GPT-2 file is kept between runs")
    ap.add_argument("--no-opt", action="store_true", help="compile without the optimiser (more instructions)")
    ap.add_argument("--layers", type=int, default=12, help="GPT-2 blocks (12 = GPT-2 small)")
    ap.add_argument("--width", type=int, default=768, help="hidden size (768 = GPT-2 small)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--debugger", choices=("yes", "no", "only"), default="yes",
                    help="the debugger's figures (F10, Continue, stall, step back, heatmap): after the open "
                         "figures, not at all, or alone")
    ap.add_argument("--simulation", choices=("yes", "no", "only"), default="yes",
                    help="the MMAP timeline (1k/10k/100k ticks) and hardware-pane figures (studio_simulation.py): "
                         "after the open figures, not at all, or alone")
    ap.add_argument("--stalls", choices=("yes", "no", "only"), default="yes",
                    help="the longest UI stall per action (open, selection, layout, blocks, statistics, theme, "
                         "reload; studio_stalls.py): after the open figures, not at all, or alone")
    args = ap.parse_args(argv)

    path, source = get_file(args)
    from nac_studio.qt_compat import guard_singleton_refcounts
    guard_singleton_refcounts()
    from PySide6.QtWidgets import QApplication

    from nac_engine.format.reader import read
    from nac_studio.theme import apply_theme

    app = QApplication.instance() or QApplication([])
    apply_theme(app, "light")
    if args.simulation == "only":
        ok = run_simulation_figures(path, source, app)
        print("targets met" if ok else "TARGETS MISSED: timeline/hardware figures")
        return 0 if ok else 1
    if args.stalls == "only":
        import studio_stalls
        print(f"file: {path}\n      {source}")
        ok = studio_stalls.run([path], app)
        print("targets met" if ok else "TARGETS MISSED: UI stalls")
        return 0 if ok else 1
    if args.debugger == "only":
        from studio_debugger import measure_debugger, report
        print(f"file: {path}\n      {source}")
        missed = report(measure_debugger(path, app))
        print("targets met" if not missed else "TARGETS MISSED: " + "; ".join(missed))
        return 1 if missed else 0
    base = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        nac = read(str(path), strict=False)
        base.append(time.perf_counter() - t)
        n_ins, n_par, size = len(nac.instructions), len(nac.params), nac.size
        nac.close()
    baseline = statistics.median(base)
    runs = [measure_once(path, app) for _ in range(args.repeat)]
    med = {k: statistics.median(r[k] for r in runs) for k in ("interactive", "layout", "stall_ms", "hex_frame_ms",
                                                               "search_s", "search_stall_ms", "stats_s",
                                                               "stats_stall_ms")}
    pure = layout_without_qt(path)

    print(f"file: {path}  ({size / 2**20:.0f} MB, {n_ins:,} instructions, {n_par:,} parameters)")
    print(f"      {source}")
    print(f"graph: {runs[0]['nodes']:,} nodes, {runs[0]['edges']:,} edges   (median of {args.repeat} runs)")
    print(f"baseline nac_engine.read          {baseline * 1000:8.1f} ms")
    print(f"open -> interactive               {med['interactive'] * 1000:8.1f} ms   "
          f"{med['interactive'] / TARGET_INTERACTIVE:5.2f} of the 2 s target   "
          f"{med['interactive'] / baseline:6.1f}x baseline")
    print(f"graph layout (background, in app) {med['layout'] * 1000:8.1f} ms   "
          f"{med['layout'] / TARGET_LAYOUT:5.2f} of the 3 s target")
    for mode, (built, total) in pure.items():
        print(f"  without Qt, {mode:13s}        {total * 1000:8.1f} ms   (graph build {built * 1000:.1f} ms)")
    print(f"longest UI stall (open + layout)  {med['stall_ms']:8.1f} ms")
    print(f"hex view frame (worst of 3 spots) {med['hex_frame_ms']:8.1f} ms")
    print(f"search whole file (background)    {med['search_s'] * 1000:8.1f} ms   "
          f"longest UI stall {med['search_stall_ms']:.0f} ms")
    print(f"stats of largest tensor ({runs[0]['stats_elements']:,} values) {med['stats_s'] * 1000:8.1f} ms   "
          f"longest UI stall {med['stats_stall_ms']:.0f} ms")
    missed = [name for name, ok in (("open -> interactive", med["interactive"] < TARGET_INTERACTIVE),
                                    ("graph layout", med["layout"] < TARGET_LAYOUT)) if not ok]
    if args.debugger == "yes":
        from studio_debugger import measure_debugger, report
        missed += report(measure_debugger(path, app))
    if args.stalls == "yes":
        import studio_stalls
        if not studio_stalls.run([path], app):
            missed.append("UI stalls")
    if args.simulation == "yes":
        if not run_simulation_figures(path, source, app):
            missed.append("timeline/hardware figures")
    print("targets met" if not missed else "TARGETS MISSED: " + "; ".join(missed))
    return 0 if not missed else 1


def run_simulation_figures(path: Path, source: str, app) -> bool:
    """Issue 11's figures: timeline open/frame time, hardware pane vs nac sim (studio_simulation.py)."""
    from studio_simulation import measure_hardware, measure_timeline, report
    print(f"file: {path}\n      {source}")
    return report(measure_timeline(app), measure_hardware(path, app))


if __name__ == "__main__":
    sys.exit(main())
