"""The Studio's heavy jobs as engine host requests (Qt-free; they run in the host): simulation
(of this file, or of another on the same hardware), sweeps, the values' sizes behind the MMAP
timeline, diffs, and Profile runs (measured time per instruction). Each answers plain data the window turns back into the engine's objects
(``SimResult.from_data``, ``DiffResult.from_data``, ``SweepRow``), so the views are unchanged; and
saving the file with a re-planned MMAP schedule."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from .feeds import decode_feeds
from .server import Cancelled, Context


def _hardware(args: dict) -> Any:
    return args.get("hardware") if isinstance(args.get("hardware"), (str, dict)) else "edge-32x32"


def simulate(ctx: Context, args: dict) -> Any:
    """``{path, hardware, overrides, feeds}`` -> ``{result: SimResult data, seconds}``."""
    from ..model.simulation_state import run_simulation
    res, seconds = run_simulation(ctx, ctx.state.nac(args["path"]), _hardware(args), args.get("overrides") or {},
                                  decode_feeds(args.get("feeds")))
    return {"result": res.to_data(), "seconds": seconds}


def simulate_file(ctx: Context, args: dict) -> Any:
    """Another file on this file's hardware: ``{path, hardware, overrides, feeds}`` (this file's
    inputs, used when the other takes as many) -> ``{result, seconds, inputs, count}``."""
    import time

    from nac_engine.runtime.input_spec import InputSpec
    from nac_engine.sim.api import simulate as sim

    from ..model.input_slots import input_slots
    from ..model.simulation_state import InputsUnknown, simulation_progress
    path = args["path"]
    nac = ctx.state.nac(path)
    this_feeds = decode_feeds(args.get("feeds")) or []
    slots = input_slots(nac)
    if len(slots) == len(this_feeds):
        feeds, inputs = list(this_feeds), "this file's inputs"
    else:
        feeds, inputs = [], "its input signature"
        for s in slots:
            if s.has_stored:
                feeds.append(None)
            elif s.shape is not None:
                feeds.append(InputSpec(tuple(int(d) for d in s.shape), s.dtype or "float32"))
            else:
                raise InputsUnknown(f"{Path(path).name}: {s.label} (tick {s.tick}) has no recorded shape and the "
                                    f"file takes {len(slots)} inputs where this one takes {len(this_feeds)}")
    t0 = time.perf_counter()
    res = sim(nac, _hardware(args), feeds=feeds, overrides=args.get("overrides") or None,
              progress=simulation_progress(ctx))
    return {"result": res.to_data(), "seconds": time.perf_counter() - t0, "inputs": inputs,
            "count": len(nac.instructions)}


def sweep(ctx: Context, args: dict) -> Any:
    """``{path, hardware, axes, feeds, scheduler, workers}`` -> ``{rows, seconds}``."""
    from ..model.simulation_state import run_sweep
    rows, seconds = run_sweep(ctx, ctx.state.nac(args["path"]), _hardware(args), args.get("axes") or {},
                              decode_feeds(args.get("feeds")), args.get("scheduler"), args.get("workers"))
    return {"rows": [dataclasses.asdict(r) for r in rows], "seconds": seconds}


def value_sizes(ctx: Context, args: dict) -> Any:
    """``{path, feeds}`` -> {tick: bytes of its result} by the meta-device shape pass."""
    from nac_engine.compiler.replan import value_nbytes_of
    from nac_engine.runtime.shapes import program_shapes

    prog = program_shapes(ctx.state.nac(args["path"]), None, decode_feeds(args.get("feeds")),
                          progress=ctx.progress)
    return {str(k): int(v) for k, v in value_nbytes_of(prog).items()}


def save_with_schedule(ctx: Context, args: dict) -> Any:
    """``{path, out, planner, sizes}`` (planner: a label such as ``min-peak`` or ``lookahead 4``;
    sizes: {tick: bytes}, the timeline's) -> ``{size, violations, hazards}``: the file re-planned
    and written atomically to ``out``, then linted as read back. In the host: encoding a file with
    its weights inside is hundreds of MB of copying the window must not wait behind."""
    from nac_engine.compiler.replan import parse_planner, replan, save_with_schedule as save
    from nac_engine.format import read
    from nac_engine.format.mmap_lint import check_schedule
    sizes = {int(k): int(v) for k, v in (args.get("sizes") or {}).items()}
    plan = replan(ctx.state.nac(args["path"]), sizes, parse_planner(str(args["planner"])))
    ctx.check()
    size = save(ctx.state.nac(args["path"]), plan.records, args["out"])
    with read(args["out"]) as saved:
        report = check_schedule(saved)
    return {"size": size, "violations": len(report.violations), "hazards": len(report.hazards)}


def diff(ctx: Context, args: dict) -> Any:
    """``{path, other, feeds, tolerance, metric}`` (other: a .nac path or FILE.py:FACTORY) ->
    DiffResult data."""
    from nac_engine.diff import DiffCancelled, diff_eager, diff_files
    path, other = args["path"], args["other"]
    feeds = decode_feeds(args.get("feeds"))
    tolerance, metric = float(args.get("tolerance", 1e-3)), str(args.get("metric", "max_abs"))

    def progress(done, total):
        ctx.progress(done, max(total, 1))
    try:
        if other.endswith(".nac"):
            result = diff_files(path, other, None, feeds, tolerance=tolerance, metric=metric,
                                cancel=lambda: ctx.cancelled, progress=progress)
        else:
            inputs = None
            if feeds is not None:
                from ..model.input_slots import input_slots
                nac = ctx.state.nac(path)
                names = nac.input_name_map
                inputs = {names[s.tick]: v for s, v in zip(input_slots(nac), feeds) if s.tick in names}
            result = diff_eager(path, other, inputs, tolerance=tolerance, metric=metric,
                                cancel=lambda: ctx.cancelled, progress=progress)
    except DiffCancelled:
        raise Cancelled("cancelled") from None
    return result.to_data()


def profile(ctx: Context, args: dict) -> Any:
    """``{path, feeds, repeat}`` -> Profile data: measured seconds per tick on this CPU. Feeds that
    are values are used; shapes only (the simulator's inputs) give way to the file's signature."""
    import numpy as np

    from nac_engine.runtime.profile import ProfileCancelled, profile as run_profile
    feeds = decode_feeds(args.get("feeds"))
    if feeds is not None and not all(isinstance(f, np.ndarray) for f in feeds):
        feeds = None
    try:
        prof = run_profile(ctx.state.nac(args["path"]), None, feeds, repeat=int(args.get("repeat", 3)),
                           cancel=lambda: ctx.cancelled, progress=lambda d, t: ctx.progress(d, max(t, 1)))
    except ProfileCancelled:
        raise Cancelled("cancelled") from None
    return prof.to_data()


HANDLERS = {"nac/profile": profile, "nac/simulate": simulate, "nac/simulateFile": simulate_file, "nac/sweep": sweep,
            "nac/valueSizes": value_sizes, "nac/diff": diff, "nac/saveWithSchedule": save_with_schedule}
