"""What the Studio knows about one file's memory and hardware behaviour (``doc.simulation``; no Qt).

Holds the MMAP timeline, the planner comparison, the hardware simulations run so far and the
last sweep; every change is announced through the document's ``"simulation"`` event with what
changed (``inputs``, ``timeline``, ``planners``, ``run``, ``sweep``, ``config``, ``overlay``), and every view redraws
from here. The work itself (shape propagation, planning, simulating, sweeping) is in the
plain functions at the bottom, which the views run through :class:`~nac_studio.tasks.TaskRunner`
(they take its ``ctx``: ``ctx.progress`` and ``ctx.check`` for Cancel).

Inputs: the debugger's Inputs dialog when the user has set them (``doc.debug``), else the
file's recorded input signature (shapes only: the simulator and the sizes need no values),
else :attr:`SimulationState.feeds` when a caller set it; a file with none of these says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

#: Graph overlay metrics: the hardware run's three, and the Profile run's measured time.
OVERLAY_METRICS = ("cycles", "utilisation", "stall share", "measured time")


class InputsUnknown(ValueError):
    """The file records no input shapes and none were given."""


@dataclass
class SimRun:
    """One hardware simulation: which configuration, on which inputs, and its result."""
    label: str                      # "edge-32x32" or "edge-32x32 (array.rows=64)"
    hardware: Any                   # the preset name, TOML path or HardwareConfig it ran on
    overrides: dict
    result: Any                     # nac_engine.sim.result.SimResult
    seconds: float = 0.0


@dataclass
class SweepTable:
    hardware: Any
    axes: dict                      # key -> values
    rows: list                      # nac_engine.sim.sweep.SweepRow, grid order
    scheduler: Optional[str] = None
    seconds: float = 0.0

    def keys(self) -> list[str]:
        return list(self.axes)


@dataclass
class SimulationState:
    doc: Any = field(repr=False, default=None)
    feeds: Optional[list] = None            # explicit positional inputs (tests, scripts)
    sizes: Optional[dict] = None            # tick -> bytes of its value
    timeline: Any = None                    # memory_timeline.MemoryTimeline
    timeline_error: str = ""
    planners: list = field(default_factory=list)   # compiler.replan.PlannerCurve
    runs: list = field(default_factory=list)       # SimRun, oldest first
    current: Optional[int] = None                  # index into runs shown by the hardware view
    compare_with: Optional[int] = None             # a second run to compare against
    sweep: Optional[SweepTable] = None
    requested: Optional[tuple] = None              # (hardware, overrides) a sweep point asked to open
    overlay: Optional[str] = None                  # graph overlay metric (OVERLAY_METRICS) or None
    file_comparison: Any = None                    # file_comparison.FileComparison the Hardware pane shows
    profile: Any = None                            # nac_engine.runtime.profile.Profile: measured time per tick

    def _changed(self, what: str, source: Any = None) -> None:
        if self.doc is not None:
            self.doc.simulation_changed(what, source)

    # -- inputs -----------------------------------------------------------------------------
    def sim_feeds(self) -> list:
        """Positional values for every ``<INPUT B=0>``/``<INPUT B=3>`` (module docstring)."""
        if self.feeds is not None:
            return list(self.feeds)
        dbg = getattr(self.doc, "debug", None)
        if dbg is not None and getattr(dbg, "inputs_confirmed", False) and dbg.choices:
            return dbg.feeds()
        from nac_engine.runtime.shapes import InputSpec

        from .input_slots import input_slots
        out = []
        for s in input_slots(self.doc.nac):
            if s.has_stored:
                out.append(None)
            elif s.shape is not None:
                out.append(InputSpec(tuple(int(d) for d in s.shape), _sim_dtype(s.dtype)))
            else:
                raise InputsUnknown(f"{s.label} (tick {s.tick}): the file records no input shapes; set the inputs "
                                    "in Debug ▸ Inputs… first")
        return out

    def set_feeds(self, feeds: Optional[list], source: Any = None) -> None:
        """New inputs: the timeline (sizes depend on input shapes) is recomputed when next shown."""
        self.feeds = None if feeds is None else list(feeds)
        self.sizes, self.timeline, self.timeline_error, self.planners = None, None, "", []
        self._changed("inputs", source)

    # -- results ----------------------------------------------------------------------------
    def set_timeline(self, sizes: Optional[dict], timeline: Any, error: str = "", source: Any = None) -> None:
        self.sizes, self.timeline, self.timeline_error = sizes, timeline, error
        self._changed("timeline", source)

    def set_planners(self, curves: list, source: Any = None) -> None:
        self.planners = list(curves)
        self._changed("planners", source)

    def add_run(self, run: SimRun, source: Any = None) -> int:
        self.runs.append(run)
        del self.runs[:-8]                      # the last few are enough to compare
        self.current = len(self.runs) - 1
        if self.compare_with is not None and self.compare_with >= len(self.runs) - 1:
            self.compare_with = None
        self._changed("run", source)
        return self.current

    def set_current(self, index: Optional[int], compare_with: Optional[int] = None, source: Any = None) -> None:
        self.current, self.compare_with = index, compare_with
        self._changed("run", source)

    @property
    def run(self) -> Optional[SimRun]:
        return self.runs[self.current] if self.current is not None and 0 <= self.current < len(self.runs) else None

    @property
    def other(self) -> Optional[SimRun]:
        c = self.compare_with
        return self.runs[c] if c is not None and 0 <= c < len(self.runs) else None

    def set_sweep(self, table: SweepTable, source: Any = None) -> None:
        self.sweep = table
        self._changed("sweep", source)

    def request_config(self, hardware: Any, overrides: dict, source: Any = None) -> None:
        """Ask the hardware view to load this configuration (a sweep point was clicked)."""
        self.requested = (hardware, dict(overrides))
        self._changed("config", source)

    def set_overlay(self, metric: Optional[str], source: Any = None) -> None:
        if metric is not None and metric not in OVERLAY_METRICS:
            raise ValueError(f"unknown overlay {metric!r} (known: {', '.join(OVERLAY_METRICS)})")
        self.overlay = metric
        self._changed("overlay", source)

    def set_profile(self, profile: Any, source: Any = None) -> None:
        """A Profile run's measured time per tick (shown beside the simulated cycles)."""
        self.profile = profile
        self._changed("profile", source)

    def measured(self) -> dict[int, float]:
        """Tick -> measured seconds of the last Profile run (empty without one)."""
        if self.profile is None:
            return {}
        return {t: float(v) for t, v in enumerate(self.profile.seconds.tolist()) if v == v}

    def overlay_values(self) -> dict[int, float]:
        """Tick -> value in 0..1 of the overlay metric for the current run (empty: nothing to show)."""
        if self.overlay == "measured time":
            ops = {t for t, ins in enumerate(self.doc.nac.instructions) if ins.a >= 10} if self.doc is not None else None
            times = {t: v for t, v in self.measured().items() if ops is None or t in ops}
            top = max(times.values(), default=0.0) or 1.0
            return {t: v / top for t, v in times.items()}
        run = self.run
        if self.overlay is None or run is None:
            return {}
        recs = [r for r in run.result.instructions if r.kind == "op"]
        if not recs:
            return {}
        if self.overlay == "cycles":
            top = max((r.end_cycle - r.issue_cycle for r in recs), default=0) or 1
            return {r.tick: (r.end_cycle - r.issue_cycle) / top for r in recs}
        if self.overlay == "stall share":
            return {r.tick: (r.stall_cycles / (r.end_cycle - r.issue_cycle) if r.end_cycle > r.issue_cycle else 0.0)
                    for r in recs}
        # utilisation: MACs done over what the array could do in the instruction's busy cycles
        peak = max((r.macs / max(r.compute_cycles, 1) for r in recs), default=0.0) or 1.0
        return {r.tick: (r.macs / max(r.compute_cycles, 1)) / peak for r in recs}


def pareto_front(xs, ys) -> list[int]:
    """Indices of the points no other point beats on both (smaller x and smaller y are better),
    in ascending x. Ties keep the first point."""
    pts = sorted(range(len(xs)), key=lambda i: (xs[i], ys[i], i))
    front, best = [], None
    for i in pts:
        if best is None or ys[i] < best:
            front.append(i)
            best = ys[i]
    return front


def sweep_rows_from_json(data: Any) -> tuple[dict, list]:
    """``nac sim --sweep --json`` output → (axes, rows). Raises ValueError on anything else."""
    from nac_engine.sim.sweep import SweepRow
    if not isinstance(data, list) or not data or len(data) > 100_000:
        raise ValueError("expected the JSON list that nac sim --sweep --json prints")
    fields = [f for f in SweepRow.__dataclass_fields__ if f != "values"]
    rows, axes = [], {}
    for k, item in enumerate(data):
        if not isinstance(item, dict):
            raise ValueError(f"row {k} is not an object")
        values = {key: v for key, v in item.items() if key not in fields}
        for key, v in values.items():
            if not isinstance(v, (int, float, str, bool)):
                raise ValueError(f"row {k}: {key} is not a plain value")
            axes.setdefault(key, [])
            if v not in axes[key]:
                axes[key].append(v)
        rows.append(SweepRow(values, *(item.get(f) for f in fields)))
    return axes, rows


def _sim_dtype(dtype: Optional[str]) -> str:
    return dtype if dtype else "float32"


# --------------------------------------------------------------------------- background work
def _progress(ctx, base: float, span: float, text: Optional[str] = None):
    """``progress(done, total)`` of a part of a request (``base`` to ``base + span`` of it); it
    raises once the request is cancelled."""
    def cb(done, total):
        if ctx is not None:
            ctx.check()
            ctx.progress(base + span * (done / total if total else 1.0), 1.0, text)
    return cb


def simulation_progress(ctx):
    """``simulate``'s ``progress(stage, done, total)`` as one fraction of the request: the shape
    pass is the first half, the timed passes the second."""
    shapes, timed = _progress(ctx, 0.0, 0.5, "shapes"), _progress(ctx, 0.5, 0.5, "simulate")
    return lambda stage, done, total: (shapes if stage == "shapes" else timed)(done, total)


def hardware_argument(hardware: Any) -> Any:
    """A hardware choice as it crosses to the engine host: a preset name or TOML path as text,
    anything else (a HardwareConfig, a table) as its table."""
    if isinstance(hardware, (str, Path)):
        return str(hardware)
    from nac_engine.sim.config import load_hardware
    return load_hardware(hardware).to_dict()


def simulation_result(body: dict) -> tuple:
    """The host's ``nac/simulate`` answer -> ``(SimResult, seconds)``."""
    from nac_engine.sim.result import SimResult
    return SimResult.from_data(body["result"]), float(body["seconds"])


def sweep_result(body: dict) -> tuple:
    """The host's ``nac/sweep`` answer -> ``(rows, seconds)``."""
    from nac_engine.sim.sweep import SweepRow
    return [SweepRow(**r) for r in body["rows"]], float(body["seconds"])


def timeline_from_sizes(nac, sizes: dict) -> tuple:
    """``(sizes, timeline)`` from the engine host's value sizes ({tick: bytes}, keys as text)."""
    from .memory_timeline import build_timeline
    sizes = {int(k): int(v) for k, v in sizes.items()}
    # the lint markers come from the Problems check (the same lint, already run on open)
    return sizes, build_timeline(nac, sizes, lint=False)


def compute_planners(ctx, nac, sizes: dict, extra_lookahead: Optional[int] = None) -> list:
    from nac_engine.compiler.replan import DEFAULT_PLANNERS, Planner, compare
    planners = list(DEFAULT_PLANNERS)
    if extra_lookahead is not None and Planner("min-peak", extra_lookahead) not in planners:
        planners.append(Planner("min-peak", extra_lookahead))
    return compare(nac, sizes, planners)


def run_simulation(ctx, nac, hardware: Any, overrides: dict, feeds: list):
    """``(SimResult, seconds)`` of one simulation; Cancel stops it between two instructions."""
    import time

    from nac_engine.sim.api import simulate
    t0 = time.perf_counter()
    res = simulate(nac, hardware, feeds=feeds, overrides=overrides or None, progress=simulation_progress(ctx))
    return res, time.perf_counter() - t0


def run_sweep(ctx, nac, hardware: Any, axes: dict, feeds: list, scheduler: Optional[str] = None,
              workers: Optional[int] = None):
    """Rows of a sweep (shapes once, then every point; see :mod:`nac_engine.sim.sweep`)."""
    import time

    from nac_engine.sim.api import prepare
    from nac_engine.sim.sweep import sweep
    t0 = time.perf_counter()
    prog = prepare(nac, None, feeds, progress=_progress(ctx, 0.0, 0.5))
    if ctx is not None:
        ctx.check()
        ctx.progress(0.5, 1.0, "simulating the points")
    rows = sweep(prog, hardware, axes, workers=workers, scheduler=scheduler)
    return rows, time.perf_counter() - t0


__all__ = ["InputsUnknown", "OVERLAY_METRICS", "SimRun", "SimulationState", "SweepTable", "compute_planners",
           "timeline_from_sizes", "pareto_front", "run_simulation", "run_sweep", "sweep_rows_from_json",
           "hardware_argument", "simulation_result", "sweep_result"]
