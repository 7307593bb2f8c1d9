"""MMAP schedule checking: a static linter and a dynamic memory trace (seed 000 §4, research §9).

API
---
``check_schedule(nac) -> ScheduleReport(violations, hazards, has_schedule)`` — from OPS + MMAP alone;
it lives in the torch-free :mod:`nac_engine.format.mmap_lint` (re-exported here), with the
rules it applies.
``trace_memory(nac, inputs=None, feeds=None, **session_kwargs) -> MemoryTrace`` — runs the file in a
:class:`Session` and executes each tick's MMAP commands alongside: ``ticks``/``live_bytes`` (numpy
arrays, the Studio timeline), ``peak``/``peak_tick``, runtime ``violations`` and the static
``hazards``/``static`` report. Every :class:`Finding` has ``kind, tick, target, message``.

Semantics chosen
----------------
The static rules (concurrent ticks, who needs a route or a FREE, FORWARD, PRELOAD) are in
:mod:`nac_engine.format.mmap_lint`. The dynamic mode resolves a same-tick race in the
favourable order: the instruction reads first, then the tick's commands take effect.

* **Live bytes** after tick *i*: each value is its own buffer of ``numel * element_size`` bytes
  (views are counted as materialised, as a coprocessor would hold them), alive from its
  allocation through the tick before its release. Allocation: its tick; params from
  min(PRELOAD, load tick). Release: its FREE tick; a forwarded value at its consumer's tick;
  a value with no consumer right after its own tick; otherwise never (end of run).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch

from ..format import layout as L
from ..format.mmap_lint import Finding, ScheduleReport, check_schedule, commands
from ..format.model import NacFile
from .session import Session


@dataclass
class MemoryTrace:
    ticks: np.ndarray                 # executed instruction indices
    live_bytes: np.ndarray            # bytes alive after each tick (int64)
    peak: int
    peak_tick: int
    violations: list[Finding]         # observed while running (reads of freed buffers, bad FREEs)
    hazards: list[Finding]            # the static hazards (same-tick races)
    static: ScheduleReport
    buffers: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # v -> (alloc, end, nbytes)
    outputs: Optional[list] = None


# --------------------------------------------------------------------------- dynamic
def _nbytes(v: Any) -> int:
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, np.ndarray):
        return int(v.nbytes)
    if isinstance(v, (tuple, list)):
        return sum(_nbytes(x) for x in v)
    return 0


def trace_memory(nac: NacFile, inputs: Optional[Mapping[str, Any]] = None,
                 feeds: Optional[Sequence[Any]] = None, **session_kwargs) -> MemoryTrace:
    """Run ``nac`` and execute its MMAP schedule alongside (see the module docstring)."""
    static = check_schedule(nac)
    du = nac.def_use()
    kind = {v: du.kind(v) for v in range(du.n)}
    for f in static.hazards:          # preloaded buffers are weights for the live-bytes model too
        if f.kind == "preload_buffer":
            kind[f.target] = "param"
    by_tick: dict[int, list[tuple[int, int]]] = {}
    for t, action, v in commands(nac):
        by_tick.setdefault(t, []).append((action, v))
    session = Session(nac, inputs=inputs, feeds=feeds, **session_kwargs)
    graveyard: dict[int, Any] = {}     # freed buffers, kept only so a bad read can go on
    freed_at: dict[int, int] = {}
    forward_to: dict[int, int] = {}
    preload_at: dict[int, int] = {}
    size: dict[int, int] = {}
    found: list[Finding] = []

    while not session.finished:
        i = session.tick
        if i >= du.n:
            session.run_instruction(i)
            break
        # A read of a freed buffer is the violation; resurrect it for this read only so the rest
        # of the run (and the trace) still happens.
        revived = [p for p in sorted(set(nac.instructions[i].producers())) if p in graveyard]
        for p in revived:
            found.append(Finding("use_after_free", i, p, f"instruction {i} read v{p}, freed on tick {freed_at[p]}"))
            session.results[p] = graveyard[p]
        value = session.run_instruction(i)
        for p in revived:
            del session.results[p]
        size[i] = _nbytes(value)
        for action, v in by_tick.get(i, []):
            if action == L.MMAP_FREE:
                if v in session.results and v < i:
                    graveyard[v] = session.results.pop(v)
                    freed_at[v] = i
                else:
                    why = "already freed" if v in graveyard else "has no buffer (not executed)"
                    found.append(Finding("bad_free", i, v, f"FREE v{v} on tick {i}: v{v} {why}"))
            elif action == L.MMAP_FORWARD and v > i:
                forward_to.setdefault(i, v)
            elif action == L.MMAP_PRELOAD:
                preload_at.setdefault(v, i)

    n_exec = session.tick if session.tick <= du.n else du.n
    buffers: dict[int, tuple[int, int, int]] = {}
    for v, nb in size.items():
        if kind[v] == "output":
            continue
        alloc = min(v, preload_at.get(v, v)) if kind[v] == "param" else v
        if v in freed_at:
            end = freed_at[v]
        elif v in forward_to:
            end = forward_to[v]
        elif kind[v] == "compute" and not du.users(v) and v not in du.outputs:
            end = v + 1
        else:
            end = n_exec
        buffers[v] = (alloc, end, nb)
    # Difference array: +nb at alloc, -nb at end; the running sum is the bytes alive after each tick.
    delta = np.zeros(n_exec + 1, dtype=np.int64)
    for alloc, end, nb in buffers.values():
        if end > alloc:
            delta[alloc] += nb
            delta[min(end, n_exec)] -= nb
    live = np.cumsum(delta[:n_exec])
    peak_tick = int(np.argmax(live)) if n_exec else 0
    return MemoryTrace(np.arange(n_exec), live, int(live[peak_tick]) if n_exec else 0, peak_tick,
                       found, list(static.hazards), static, buffers, session.outputs)


__all__ = ["Finding", "ScheduleReport", "MemoryTrace", "check_schedule", "trace_memory"]
