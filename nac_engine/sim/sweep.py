"""Design-space sweeps: one simulation per point of a grid of config values, in parallel processes.

``sweep(program, hw, {"array.rows": [16, 32, 64], "dram.bytes_per_cycle": [8, 16]})`` runs the
cartesian product (6 points). Shapes are propagated once in the calling process; workers
receive the torch-free :class:`~nac_engine.runtime.shapes.Program` and the hardware as plain
data, so they never load torch. Every point is validated before any work starts.

Where the points run (``scheduler``): ``None`` is the local process pool (the default);
``"local:N"`` starts a Dask ``LocalCluster`` of N single-threaded worker processes;
``"tcp://HOST:PORT"`` uses an existing Dask scheduler; a ``distributed.Client`` is used as
given. Dask is imported only then (``pip install "nac-studio[cluster]"``). The program is
scattered to every worker once (``broadcast``), not shipped with each point, and rows come
back in grid order, so the table is the same whatever ran it. A point that fails while
simulating is a row with ``error`` set (its configuration in ``values``); the rest complete.
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from .config import HardwareConfig, HardwareConfigError, load_hardware, parse_value
from ..runtime.shapes import DEFAULT_CPU_BUDGET, Program


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
    error: Optional[str] = None   # why this point failed (the numbers are then None)

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict:
        """The point's values, then the results: one flat row (JSON, CSV, the Studio's table)."""
        return {**self.values, **{k: v for k, v in self.__dict__.items() if k != "values"}}


def parse_axis(spec: str) -> tuple[str, list]:
    """``"array.rows=16,32,64"`` → ``("array.rows", [16, 32, 64])``."""
    key, sep, values = spec.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise HardwareConfigError(f"--sweep {spec!r}: expected KEY=V1,V2,... such as array.rows=16,32,64")
    vals = [parse_value(v, key) for v in values.split(",") if v.strip()]
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
    return simulate_point(prog, raw, values, path)


def simulate_point(prog: Program, raw: dict, values: dict, path: Optional[str] = None) -> SweepRow:
    """One point of a sweep (what every worker runs). An error becomes the row's ``error``."""
    try:
        from . import engine
        hw = load_hardware(raw, values)
        if hw.core.model == "refcore":
            from ..format import read
            from .refcore import run_refcore
            with read(path) as nac:
                r = run_refcore(nac, hw, prog)
        else:
            r = engine.run_event(prog, hw)
    except Exception as exc:   # reported with its configuration; the other points go on
        return failed_row(values, exc)
    return SweepRow(values, r.total_cycles, r.time_s, r.stall_cycles, r.dram_read_bytes, r.dram_write_bytes,
                    r.peak_sram_bytes, len(r.spills), r.utilization.get("mac", 0.0))


def failed_row(values: dict, exc: BaseException) -> SweepRow:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return SweepRow(dict(values), None, None, None, None, None, None, None, None,
                    error=f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def sweep(program: Any, hw: Any, axes: Mapping[str, Sequence[Any]], *, inputs=None, feeds=None, states=None,
          workers: Optional[int] = None, cpu_budget: Any = DEFAULT_CPU_BUDGET,
          scheduler: Any = None) -> list[SweepRow]:
    """Simulate every point of ``axes`` on top of ``hw``; rows in grid order. ``scheduler``:
    see the module docstring (``None``: local processes)."""
    if scheduler is not None and not hasattr(scheduler, "submit"):
        parse_scheduler(scheduler)                # a bad address fails before shapes are computed
    from .api import prepare
    base: HardwareConfig = load_hardware(hw)
    points = grid(axes)

    def model_of(values: dict) -> Optional[str]:
        try:
            return load_hardware(base, values).core.model
        except HardwareConfigError:         # an invalid point is a failed row naming why, not a failed sweep
            return None
    path = None if isinstance(program, Program) or not isinstance(program, (str, os.PathLike)) else str(program)
    prog = prepare(program, inputs, feeds, states, cpu_budget=cpu_budget)
    if any(model_of(v) == "refcore" for v in points) and path is None:
        raise HardwareConfigError("a reference-core sweep needs the program as a file path")
    if scheduler is not None:
        return _run_dask(prog, base.to_dict(), points, path, scheduler)
    jobs = [(prog, base.to_dict(), values, path) for values in points]
    n = workers if workers is not None else min(len(jobs), os.cpu_count() or 1)
    if n <= 1 or len(jobs) == 1:
        return [_one(j) for j in jobs]
    with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_one, jobs))


def parse_scheduler(text: str) -> tuple[str, Any]:
    """``"local:N"`` → ``("local", N)``; ``"tcp://host:port"`` (or tls://, ws://, inproc://) →
    ``("address", text)``."""
    t = str(text).strip()
    if t.startswith("local:"):
        n = t[6:]
        if not n.isdigit() or not 1 <= int(n) <= 1024:
            raise HardwareConfigError(f"--scheduler {text!r}: expected local:N with N from 1 to 1024")
        return "local", int(n)
    if "://" in t and t.split("://", 1)[1]:
        return "address", t
    raise HardwareConfigError(f"--scheduler {text!r}: expected tcp://HOST:PORT (a Dask scheduler) or local:N")


def _run_dask(prog: Program, raw: dict, points: list, path: Optional[str], scheduler: Any) -> list[SweepRow]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise HardwareConfigError('--scheduler needs Dask: pip install "dask[distributed]" '
                                  '(or the nac-studio[cluster] extra)') from None
    cluster = None
    own_client = not hasattr(scheduler, "submit")
    if own_client:
        kind, arg = parse_scheduler(scheduler)
        if kind == "local":
            cluster = LocalCluster(n_workers=arg, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
        else:
            try:
                client = Client(arg, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise HardwareConfigError(f"--scheduler {arg}: cannot reach the Dask scheduler ({exc})") from None
    else:
        client = scheduler
    try:
        # The program goes to every worker once; each point's task carries only its values.
        [program] = client.scatter([prog], broadcast=True, hash=False)   # a key of its own per sweep
        futures = [client.submit(simulate_point, program, raw, values, path, pure=False) for values in points]
        rows = []
        for values, fut in zip(points, futures):
            try:
                rows.append(fut.result())
            except Exception as exc:   # a worker lost mid-point, say: reported, the rest go on
                rows.append(failed_row(values, exc))
        return rows
    finally:
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()


def format_table(rows: Sequence[SweepRow]) -> str:
    if not rows:
        return ""
    keys = list(rows[0].values)
    head = keys + ["cycles", "time_us", "stall_cycles", "dram_read_B", "dram_write_B", "peak_sram_B", "spills",
                   "mac_util"]
    body = [[_fmt(r.values[k]) for k in keys]
            + ([f"{r.total_cycles:,}", f"{r.time_s * 1e6:,.3f}", f"{r.stall_cycles:,}", f"{r.dram_read_bytes:,}",
                f"{r.dram_write_bytes:,}", f"{r.peak_sram_bytes:,}", str(r.spills), f"{r.mac_utilization:.1%}"]
               if r.ok else ["failed"] + [""] * 7)
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    failures = [f"failed: {', '.join(f'{k}={_fmt(v)}' for k, v in r.values.items())}: {r.error}"
                for r in rows if not r.ok]
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body] + failures)


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
