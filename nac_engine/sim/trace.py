"""Chrome trace-event JSON of a simulation, for the Perfetto UI (ui.perfetto.dev) or chrome://tracing.

One process (the simulated chip), one thread (track) per unit — ``core``, ``systolic``,
``vector``, ``sfu``, ``mover`` — plus ``stalls`` (the cycles each instruction waited, with the
cause), one track per DMA engine, and a counter track ``SRAM bytes``. Timestamps are
microseconds at the configured clock (the format's unit); every event also carries its
cycle numbers in ``args``. Instructions run one at a time, so slices on a track never
overlap, and a DMA engine holds one transfer at a time.
"""
from __future__ import annotations

import json
from typing import Any

from .result import SimResult

_UNIT_TRACKS = ("core", "stalls", "systolic", "vector", "sfu", "mover")
PID = 1


def trace_events(result: SimResult) -> dict:
    """The trace as a JSON-ready dict ``{"traceEvents": [...], ...}``."""
    us = 1e6 / result.clock_hz
    tid = {name: n + 1 for n, name in enumerate(_UNIT_TRACKS)}
    engines = sorted({t.engine for t in result.transfers})
    for e in engines:
        tid[f"dma{e}"] = 100 + e
    ev: list[dict[str, Any]] = [
        {"ph": "M", "pid": PID, "name": "process_name",
         "args": {"name": f"{result.program} on {result.hardware} ({result.mode})"}},
    ]
    for name, t in tid.items():
        ev.append({"ph": "M", "pid": PID, "tid": t, "name": "thread_name", "args": {"name": name}})
        ev.append({"ph": "M", "pid": PID, "tid": t, "name": "thread_sort_index", "args": {"sort_index": t}})
    for r in result.instructions:
        if r.stall_cycles > 0:
            ev.append({"ph": "X", "pid": PID, "tid": tid["stalls"], "name": r.stall_cause or "stall",
                       "ts": r.issue_cycle * us, "dur": r.stall_cycles * us, "cat": "stall",
                       "args": {"tick": r.tick, "op": r.op, "cycles": r.stall_cycles, **r.stall_breakdown}})
        busy = r.end_cycle - r.start_cycle
        if busy > 0 or r.kind == "op":
            ev.append({"ph": "X", "pid": PID, "tid": tid.get(r.unit, tid["core"]),
                       "name": f"v{r.tick} {r.op}", "ts": r.start_cycle * us, "dur": busy * us,
                       "cat": r.op_class or r.kind,
                       "args": {"tick": r.tick, "start_cycle": r.start_cycle, "end_cycle": r.end_cycle,
                                "compute_cycles": r.compute_cycles, "macs": r.macs, "route": r.route}})
    for t in result.transfers:
        ev.append({"ph": "X", "pid": PID, "tid": tid[f"dma{t.engine}"], "name": f"{t.kind} v{t.value}",
                   "ts": t.start_cycle * us, "dur": (t.end_cycle - t.start_cycle) * us, "cat": "dma",
                   "args": {"bytes": t.bytes, "src": t.src, "dst": t.dst, "tick": t.tick,
                            "issue_cycle": t.issue_cycle, "start_cycle": t.start_cycle,
                            "end_cycle": t.end_cycle, "queue_cycles": t.queue_cycles}})
    for c, b in zip(result.sram_cycles, result.sram_bytes):
        ev.append({"ph": "C", "pid": PID, "name": "SRAM bytes", "ts": c * us, "args": {"bytes": b}})
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "otherData": {"hardware": result.hardware, "clock_hz": result.clock_hz,
                          "total_cycles": result.total_cycles, "program": result.program}}


def write_trace(result: SimResult, path: str) -> None:
    """Write the trace atomically."""
    from ..format.writer import atomic_write
    atomic_write(path, json.dumps(trace_events(result), separators=(",", ":")).encode("utf-8"))
