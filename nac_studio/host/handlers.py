"""What the engine host can be asked (Qt-free). Each handler is ``fn(ctx, arguments) -> body``.

Files are named by path in every request: the host opens each once and keeps it while its size
and modification time stay the same, so a restarted host needs nothing re-sent to serve the same
documents. Everything here that imports torch or allocates per weight runs in the host only.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

from .server import Context, Handler

#: In the host's directory: the tick of the running action (int64, little-endian; -1 when none).
PROGRESS_FILE = "progress.bin"


class HostState:
    """The host's open files (by path), and what the debug requests keep between them.
    ``array_dir``: where the tick of a running action is kept (``progress.bin``, 8 bytes
    written at every instruction), so the Studio knows where a run was when the host died."""

    def __init__(self, array_dir: str = ""):
        self._files: dict[str, tuple] = {}
        self._debug: dict[str, object] = {}
        self._progress = None
        self.statistics = SharedStatistics()
        if array_dir:
            import mmap
            path = os.path.join(array_dir, PROGRESS_FILE)
            with open(path, "wb") as f:
                f.write((-1).to_bytes(8, sys.byteorder, signed=True))
            with open(path, "r+b") as f:
                # as one native int64 (what the Studio reads on this same machine): one store
                # per instruction, not a bytes object and a slice copy
                self._progress = memoryview(mmap.mmap(f.fileno(), 8)).cast("q")

    def mark_tick(self, tick: int) -> None:
        if self._progress is not None:
            self._progress[0] = tick

    def debug(self, path: str, launch: bool = False):
        """The file's debug service (made on first use; kept while the Studio debugs it). A run
        goes on over the version of the file it was launched on, whatever happens on disk (the
        Studio shows that version until the user reloads); a launch takes the file as it is now."""
        service = self._debug.get(path)
        if service is None or (launch and service.nac is not self.nac(path)):
            from nac_engine.dap.service import DebugService
            if service is not None:
                self.drop_debug(path)
            service = self._debug[path] = DebugService(self.nac(path))
        return service

    def drop_debug(self, path: str) -> None:
        service = self._debug.pop(path, None)
        if service is not None:
            service.close()
            self._close_if_unused(path, service.nac)

    def nac(self, path: str):
        """The decoded file at ``path`` (read once; read again when it changed on disk)."""
        from nac_engine.format.reader import read
        st = os.stat(path)
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        held = self._files.get(path)
        if held is not None and held[0] == key:
            return held[1]
        nac = read(path, strict=False)
        self._files[path] = (key, nac)
        if held is not None:
            self._close_if_unused(path, held[1])
        return nac

    def forget(self, path: str) -> None:
        """The Studio closed ``path``: its debug service and decoded file go (a job still on it
        finishes on what it holds, and fails where it needed the closed descriptor)."""
        held = self._files.pop(path, None)
        self.drop_debug(path)
        self.statistics.forget(path)
        if held is not None:
            self._close_if_unused(path, held[1])

    def _close_if_unused(self, path: str, nac) -> None:
        """Close a version of ``path`` that is neither the current one nor a run's: its mapping
        and descriptor go (freed with a view still on it)."""
        held, service = self._files.get(path), self._debug.get(path)
        if (held is None or held[1] is not nac) and (service is None or service.nac is not nac):
            nac.close()


class SharedStatistics:
    """A parameter's statistics, computed once per version of its file and shared. Selecting a
    weight asks twice at once (the Properties pane and the tensor inspector): for GPT-2's
    embedding that was two 0.9 s passes over 38.6 M values fighting for the host's cores, 3.1 s
    until either answered. A request that finds the same pass running waits for it (its progress
    relayed); if that pass is cancelled (its view moved on), the waiter computes it itself. Done
    results stay until the file changes or is closed (a few KB each: the histogram is 256 bins),
    so going back to a weight answers at once."""

    def __init__(self):
        import threading
        self._lock = threading.Lock()
        self._by_path: dict[str, tuple] = {}      # path -> (weak ref to its version, {param id: _Pass})

    def forget(self, path: str) -> None:
        with self._lock:
            self._by_path.pop(path, None)

    def of(self, ctx: Context, path: str, nac, p) -> dict:
        import weakref

        from .server import Cancelled
        while True:
            with self._lock:
                slot = self._by_path.get(path)
                if slot is None or slot[0]() is not nac:          # first asked, or a new version
                    slot = self._by_path[path] = (weakref.ref(nac), {})
                held = slot[1]
                entry = held.get(p.id)
                mine = entry is None
                if mine:
                    entry = held[p.id] = _Pass()
            if mine:
                return self._compute(ctx, held, p, entry)
            last = None
            while not entry.done.wait(0.05):
                ctx.check()                       # this request's own cancel
                if entry.progress != last and entry.progress is not None:
                    last = entry.progress
                    ctx.progress(*last)
            if entry.error is None:
                return entry.result
            if not isinstance(entry.error, Cancelled):
                raise entry.error
            # the pass it waited for was cancelled: take it over (its entry is gone)

    def _compute(self, ctx: Context, held: dict, p, entry: "_Pass") -> dict:
        from types import SimpleNamespace

        from ..model.tensor_stats import param_stats

        def progress(done, total=1.0, text=None):    # relayed to the requests waiting on this pass
            entry.progress = (done, total)
            ctx.progress(done, total, text)
        try:
            entry.result = param_stats(SimpleNamespace(check=ctx.check, progress=progress), p)
        except BaseException as exc:
            entry.error = exc
            with self._lock:
                if held.get(p.id) is entry:
                    del held[p.id]
            raise
        finally:
            entry.done.set()
        return entry.result


class _Pass:
    def __init__(self):
        import threading
        self.done = threading.Event()
        self.result: Optional[dict] = None
        self.error: Optional[BaseException] = None
        self.progress: Optional[tuple] = None

def _param(nac, args: dict):
    ref = args.get("param")
    if isinstance(ref, int) and ref in nac.params:
        return nac.params[ref]
    if isinstance(ref, str):
        for p in nac.params.values():
            if p.name == ref:
                return p
    raise KeyError(f"the file has no parameter {ref!r}")


def statistics(ctx: Context, args: dict) -> Any:
    """``{path, param}`` (a parameter id or name) -> the tensor's statistics and histogram, read
    a block of rows at a time with progress (a 7B model's embedding is never held whole). Computed
    once per parameter of a file version (:class:`SharedStatistics`)."""
    nac = ctx.state.nac(args["path"])
    out = dict(ctx.state.statistics.of(ctx, args["path"], nac, _param(nac, args)))
    if "hist" in out:
        counts, edges = out.pop("hist")
        out["hist"] = [counts, edges]
    return out


def shapes(ctx: Context, args: dict) -> Any:
    """``{path}`` -> {tick: "f32[1,16,768]"} from the meta-device shape pass (the graph's edges);
    empty when the file records no input signature or its shapes cannot be propagated."""
    from ..model.graph_shapes import propagated_shapes
    try:
        found = propagated_shapes(ctx.state.nac(args["path"]), progress=ctx.progress)
    except Exception as exc:      # noqa: BLE001 - shapes are a nicety: the Studio keeps the file's
        from .server import Cancelled
        if isinstance(exc, Cancelled):
            raise
        found = {}
    return {str(k): v for k, v in found.items()}


def layout(ctx: Context, args: dict) -> Any:
    """``{path, mode, show_params, show_consts, collapse_prefixes}`` -> the file's dataflow graph,
    built and laid out here (both are Python-heavy: in the window's process they held the GIL
    against its first frame), as ``graph_layout.layout_to_data``."""
    from ..model.graph_layout import LayoutCancelled, layout_graph, layout_to_data
    from ..model.graph_model import build_graph
    graph = build_graph(ctx.state.nac(args["path"]), show_params=bool(args.get("show_params", True)),
                        show_consts=bool(args.get("show_consts", False)),
                        collapse_prefixes=list(args.get("collapse_prefixes") or []))
    ctx.check()
    try:
        lay = layout_graph(graph, str(args.get("mode", "longest-path")), progress=ctx.progress,
                           cancelled=lambda: ctx.cancelled)
    except LayoutCancelled:
        ctx.check()
        raise
    return layout_to_data(lay)


def sugiyama(ctx: Context, args: dict) -> Any:
    """``{n, edges (m×2), layers (n), maxiter}`` -> igraph's Sugiyama coordinates and edge bends."""
    import numpy as np
    from ..model.graph_layout import sugiyama_coordinates
    n = int(args["n"])
    edges = np.asarray(args["edges"], np.int64).reshape(-1, 2)
    layers = np.asarray(args["layers"], np.int64)
    if len(layers) != n or (len(edges) and (edges.min() < 0 or edges.max() >= n)):
        raise ValueError("edges or layers do not fit the vertex count")
    coords, points, counts = sugiyama_coordinates(n, edges, layers, int(args.get("maxiter", 100)))
    return {"coords": coords, "points": points, "counts": counts}


#: Parameters with more values than this are not sent whole to the inspector: it asks for windows
#: (``nac/paramWindow``) and statistics (``nac/statistics``) instead.
INSPECT_WHOLE_MAX = 4 << 20
#: The most values one window may hold (a screen's worth of heatmap, a page of the table).
WINDOW_MAX = 4 << 20


def param_values(ctx: Context, args: dict) -> Any:
    """``{path, param}`` -> the parameter's values (dequantised) and, for a quantised one, its
    stored form, each with its statistics (the tensor inspector). A parameter of more than
    :data:`INSPECT_WHOLE_MAX` values answers ``{"large": {"shape", "dtype"}}`` instead, reading
    none of them."""
    import math
    import numpy as np
    from nac_engine.format.tensor_rows import value_rows, value_shape
    from nac_engine.runtime.tick_result import TickResult
    p = _param(ctx.state.nac(args["path"]), args)
    shape = value_shape(p)
    if math.prod(shape) > INSPECT_WHOLE_MAX:
        dtype = value_rows(p, 0, 0).dtype           # no values: the dtype of what rows would be
        return {"large": {"shape": list(shape), "dtype": dtype.str, "name": p.name}}
    out = {"value": TickResult(-1, p.name, np.asarray(p.array())).summary(), "raw": None}
    if p.meta is not None and getattr(p.meta, "quant", 0) not in (0, None):
        try:
            out["raw"] = TickResult(-1, p.name, np.asarray(p.raw())).summary()
        except Exception:    # noqa: BLE001 - a stored form we cannot show: the dequantised one still is
            pass
    return out


def param_window(ctx: Context, args: dict) -> Any:
    """``{path, param, window}`` -> the values ``array()[window]``, reading only the rows of the
    first axis it covers. ``window`` has one entry per axis: an index, or ``[start, stop, step]``.
    At most :data:`WINDOW_MAX` values."""
    import math
    from nac_engine.format.tensor_rows import value_rows, value_shape
    p = _param(ctx.state.nac(args["path"]), args)
    shape = value_shape(p)
    window = args.get("window")
    if not isinstance(window, list) or len(window) != len(shape) or not shape:
        raise ValueError(f"window {window!r} does not have one entry per axis of {list(shape)}")
    index, counts = [], []
    for d, (w, n) in enumerate(zip(window, shape)):
        if isinstance(w, int) and not isinstance(w, bool):
            if not -n <= w < n:
                raise ValueError(f"index {w} is outside axis {d} of {n}")
            index.append(w % n)
            counts.append(1)
        elif isinstance(w, list) and len(w) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in w) \
                and w[2] > 0:
            sl = slice(*w)
            index.append(sl)
            counts.append(len(range(*sl.indices(n))))
        else:
            raise ValueError(f"window entry {w!r} for axis {d} is not an index or [start, stop, step]")
    if math.prod(counts) > WINDOW_MAX:
        raise ValueError(f"a window of {math.prod(counts):,} values is more than {WINDOW_MAX:,}")
    first = index[0]
    rows = value_rows(p, first, first + 1) if isinstance(first, int) else value_rows(p, first.start, first.stop,
                                                                                      first.step)
    rest = tuple(index[1:])
    return rows[(0,) + rest] if isinstance(first, int) else rows[(slice(None),) + rest]


def run_file(ctx: Context, args: dict) -> Any:
    """``{path, inputs: {name: array}}`` -> ``{"outputs": [...]}``: one plain run of a file (a
    generation's prefill, which the Studio does not step through)."""
    from nac_engine.runtime.session import Session
    with Session(ctx.state.nac(args["path"]), inputs=dict(args.get("inputs") or {})) as session:
        return {"outputs": session.run()}


# -- the debugger (shaped as DAP's requests; see nac_engine.dap.service) ----------------------------
def launch(ctx: Context, args: dict) -> Any:
    """``{path, feeds, breakpoints, watches, imports}`` -> the run's state and the breakpoints'
    verdicts (``imports``: the code that registers the file's custom operators, imported once)."""
    from nac_engine.compiler.command import import_operator_code
    import_operator_code(args.get("imports") or [])
    service = ctx.state.debug(args["path"], launch=True)
    verdicts = service.set_breakpoints(args.get("breakpoints") or [])
    service.set_watches(args.get("watches") or [])
    feeds = list(args.get("feeds") or [])
    state = service.launch(feeds)
    return {"state": state, "breakpoints": verdicts}


def set_breakpoints(ctx: Context, args: dict) -> Any:
    service = ctx.state.debug(args["path"])
    return {"breakpoints": service.set_breakpoints(args.get("breakpoints") or []), "state": service.state()}


def set_watches(ctx: Context, args: dict) -> Any:
    service = ctx.state.debug(args["path"])
    service.set_watches(args.get("watches") or [])
    return {"state": service.state()}


def import_operator_code(ctx: Context, args: dict) -> Any:
    """``{imports}``: the code that registers a file's custom operators, imported now (once)."""
    from nac_engine.compiler.command import import_operator_code as load
    load(args.get("imports") or [])
    return {}


def evaluate(ctx: Context, args: dict) -> Any:
    return ctx.state.debug(args["path"]).evaluate(str(args.get("expression", "")))


#: How often a running action reports its tick (the status bar's "Running… tick N").
RUNNING_EVENT_S = 0.1


def _action(name: str):
    def run(ctx: Context, args: dict) -> Any:
        import time
        service = ctx.state.debug(args["path"])
        d = service.debugger
        last = [0.0]

        def on_tick(tick: int) -> None:
            ctx.state.mark_tick(tick)
            now = time.monotonic()
            if now - last[0] >= RUNNING_EVENT_S:
                last[0] = now
                ctx.send_event("nac/running", {"path": args["path"], "tick": tick})
        if d is not None:
            d.on_tick.append(on_tick)
        hook = _crash_hook(args)
        if hook is not None and d is not None:
            d.on_tick.append(hook)
        try:
            return {"state": service.act(name, args.get("tick"), bool(args.get("breakpoints", False)))}
        finally:
            ctx.state.mark_tick(-1)
            if d is not None:
                d.on_tick[:] = [f for f in d.on_tick if f is not on_tick and f is not hook]
    run.__name__ = f"action_{name}"
    return run


def _crash_hook(args: dict):
    """Test hooks (``NAC_HOST_TEST_HOOKS=1`` only): ``crashAtTick`` ends the host inside the run
    the way a kernel's segfault would; ``tickDelay`` (seconds) makes every instruction slow, so a
    test can act while a run is surely under way."""
    if os.environ.get("NAC_HOST_TEST_HOOKS") != "1" or not ({"crashAtTick", "tickDelay"} & set(args)):
        return None
    at = int(args.get("crashAtTick", -1))
    delay = float(args.get("tickDelay", 0.0))

    def hook(tick: int) -> None:
        if 0 <= at <= tick:
            import ctypes
            ctypes.string_at(0)
        if delay:
            import time
            time.sleep(delay)
    return hook


def pause(ctx: Context, args: dict) -> Any:
    service = ctx.state._debug.get(args.get("path", ""))
    if service is not None:
        service.pause()
    return {}


def result(ctx: Context, args: dict) -> Any:
    limit = args.get("maxValues")
    return ctx.state.debug(args["path"]).result(args.get("tick"), limit if isinstance(limit, int) else None)


def outputs(ctx: Context, args: dict) -> Any:
    return {"outputs": ctx.state.debug(args["path"]).outputs()}


def terminate(ctx: Context, args: dict) -> Any:
    ctx.state.debug(args["path"]).terminate()
    return {}


def close_debug(ctx: Context, args: dict) -> Any:
    ctx.state.drop_debug(args["path"])
    return {}


def close_file(ctx: Context, args: dict) -> Any:
    ctx.state.forget(args["path"])
    return {}


#: What runs, steps, lays out and simulates files (torch above all: seconds). A plain host imports
#: it on ``nac/warmUp``; the zygote imports it before it forks hosts (zygote_main).
WARM_IMPORTS = ("torch", "nac_engine.runtime.session", "nac_engine.runtime.debugger",
                "nac_engine.runtime._shape_session", "nac_engine.sim", "igraph", "nac_studio.host.jobs",
                "nac_studio.model.graph_layout", "nac_studio.model.graph_model", "nac_studio.model.graph_shapes",
                "nac_studio.model.tensor_stats")


def warm_up(ctx: Context, args: dict) -> Any:
    """Import :data:`WARM_IMPORTS`, so that the first F5, graph or simulation does not wait for
    them. The Studio asks right after its window shows."""
    import importlib
    for name in WARM_IMPORTS:
        ctx.check()
        importlib.import_module(name)
    return {}


def test_hook(ctx: Context, args: dict) -> Any:
    """Only with ``NAC_HOST_TEST_HOOKS=1`` in the host's environment: end the host the ways a
    kernel can (the Studio's crash tests), wait cancellably, or say whether a module is loaded."""
    how = args.get("how")
    if how == "loaded":
        return {"loaded": args.get("module") in sys.modules}
    if how == "segfault":
        import ctypes
        ctypes.string_at(0)           # SIGSEGV, as a bad kernel would
    if how == "abort":
        os.abort()
    if how == "exit":
        os._exit(int(args.get("code", 3)))
    if how == "allocate":               # past the memory cap: MemoryError, answered as a failure
        blocks = []
        while True:
            blocks.append(bytearray(64 << 20))
    if how == "sleep":
        import time
        end = time.monotonic() + float(args.get("seconds", 1.0))
        while time.monotonic() < end:
            ctx.progress(1.0 - (end - time.monotonic()), float(args.get("seconds", 1.0)))
            time.sleep(0.01)
        return {"slept": True}
    raise ValueError(f"unknown test hook {how!r}")


def handlers() -> dict[str, Handler]:
    out = {"nac/statistics": Handler(statistics, "inspect"), "nac/paramValues": Handler(param_values, "view"),
           "nac/paramWindow": Handler(param_window, "view"), "nac/run": Handler(run_file),
           "nac/sugiyama": Handler(sugiyama), "nac/shapes": Handler(shapes), "nac/layout": Handler(layout),
           "launch": Handler(launch, "debug"), "nac/setBreakpoints": Handler(set_breakpoints, "debug"),
           "nac/setWatches": Handler(set_watches, "debug"), "evaluate": Handler(evaluate, "debug"),
           "nac/importOperatorCode": Handler(import_operator_code, "debug"),
           "pause": Handler(pause, "now"),
           "next": Handler(_action("next"), "debug"), "continue": Handler(_action("continue"), "debug"),
           "stepBack": Handler(_action("stepBack"), "debug"), "stepIn": Handler(_action("stepIn"), "debug"),
           "stepOut": Handler(_action("stepOut"), "debug"),
           "reverseContinue": Handler(_action("reverseContinue"), "debug"), "nac/runTo": Handler(_action("runTo"), "debug"),
           "restart": Handler(_action("restart"), "debug"), "nac/rerun": Handler(_action("rerun"), "debug"),
           "nac/result": Handler(result, "debug"),
           "nac/outputs": Handler(outputs, "debug"), "terminate": Handler(terminate, "debug"),
           "nac/closeDebug": Handler(close_debug, "debug"),
           "nac/closeFile": Handler(close_file, "debug"), "nac/warmUp": Handler(warm_up, "debug")}
    from .jobs import HANDLERS as jobs
    out.update({name: Handler(fn) for name, fn in jobs.items()})
    if os.environ.get("NAC_HOST_TEST_HOOKS") == "1":
        out["nac/testHook"] = Handler(test_hook)
    return out
