"""Design-space sweeps: one simulation per point of a grid of config values, in parallel processes.

``sweep(program, hw, {"array.rows": [16, 32, 64], "dram.bytes_per_cycle": [8, 16]})`` runs the
cartesian product (6 points). Shapes are propagated once in the calling process; workers
receive the torch-free :class:`~nac_engine.sim.shapes.Program` and the hardware as plain
data, so they never load torch. Every point is validated before any work starts.
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from .config import HardwareConfig, HardwareConfigError, load_hardware, parse_value
from .shapes import DEFAULT_CPU_BUDGET, Program


@dataclass
class SweepRow:
    values: dict                  # dotted key -> value of this point
    total_cycles: int
    time_s: float
    stall_cycles: int
    dram_read_bytes: int
    dram_write_bytes: int
    peak_sram_bytes: int
    spills: int
    mac_utilization: float


def parse_axis(spec: str) -> tuple[str, list]:
    """``"array.rows=16,32,64"`` → ``("array.rows", [16, 32, 64])``."""
    key, sep, values = spec.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise HardwareConfigError(f"--sweep {spec!r}: expected KEY=V1,V2,... such as array.rows=16,32,64")
    vals = [parse_value(v) for v in values.split(",") if v.strip()]
    if not vals or len(vals) > 1024:
        raise HardwareConfigError(f"--sweep {spec!r}: give between 1 and 1024 values")
    return key, vals


def grid(axes: Mapping[str, Sequence[Any]]) -> list[dict]:
    keys = list(axes)
    points = [dict(zip(keys, combo)) for combo in itertools.product(*(axes[k] for k in keys))]
    if len(points) > 100_000:
        raise HardwareConfigError(f"the sweep has {len(points)} points; at most 100000")
    return points


def _one(job) -> SweepRow:
    prog, raw, values, path = job
    from .engine import run_event
    hw = load_hardware(raw, values)
    if hw.core.model == "refcore":
        from ..format import read
        from .refcore import run_refcore
        with read(path) as nac:
            r = run_refcore(nac, hw, prog)
    else:
        r = run_event(prog, hw)
    return SweepRow(values, r.total_cycles, r.time_s, r.stall_cycles, r.dram_read_bytes, r.dram_write_bytes,
                    r.peak_sram_bytes, len(r.spills), r.utilization.get("mac", 0.0))


def sweep(program: Any, hw: Any, axes: Mapping[str, Sequence[Any]], *, inputs=None, feeds=None, states=None,
          workers: Optional[int] = None, cpu_budget: Any = DEFAULT_CPU_BUDGET) -> list[SweepRow]:
    """Simulate every point of ``axes`` on top of ``hw``; rows in grid order."""
    from .api import prepare
    base: HardwareConfig = load_hardware(hw)
    points = grid(axes)
    for values in points:                         # fail before starting any work
        load_hardware(base, values)
    path = None if isinstance(program, Program) or not isinstance(program, (str, os.PathLike)) else str(program)
    prog = prepare(program, inputs, feeds, states, cpu_budget=cpu_budget)
    if any(load_hardware(base, v).core.model == "refcore" for v in points) and path is None:
        raise HardwareConfigError("a reference-core sweep needs the program as a file path")
    jobs = [(prog, base.to_dict(), values, path) for values in points]
    n = workers if workers is not None else min(len(jobs), os.cpu_count() or 1)
    if n <= 1 or len(jobs) == 1:
        return [_one(j) for j in jobs]
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_one, jobs))


def format_table(rows: Sequence[SweepRow]) -> str:
    if not rows:
        return ""
    keys = list(rows[0].values)
    head = keys + ["cycles", "time_us", "stall_cycles", "dram_read_B", "dram_write_B", "peak_sram_B", "spills",
                   "mac_util"]
    body = [[_fmt(r.values[k]) for k in keys]
            + [f"{r.total_cycles:,}", f"{r.time_s * 1e6:,.3f}", f"{r.stall_cycles:,}", f"{r.dram_read_bytes:,}",
               f"{r.dram_write_bytes:,}", f"{r.peak_sram_bytes:,}", str(r.spills), f"{r.mac_utilization:.1%}"]
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
