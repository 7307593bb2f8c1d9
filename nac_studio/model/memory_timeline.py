"""The tick-by-tick MMAP timeline of a file, as arrays a plot draws in one go (no Qt here).

:func:`build_timeline` turns a file's OPS + MMAP and the byte size of every value (from the
simulator's meta shapes, :func:`nac_engine.compiler.replan.value_nbytes`) into:

* **command lanes**: ticks and targets of every PRELOAD, SAVE_RESULT, FORWARD and FREE;
* **buffer bars**: one lifetime per value with bytes (weights, inputs, computed values), from
  its allocation to its release, packed onto rows so no two bars overlap;
* **live bytes** after each tick, with the peak;
* the static lint's **violations** and **hazards** (:mod:`nac_engine.format.mmap_lint`).

The memory model is :func:`nac_engine.runtime.mmap_check.trace_memory`'s ("bytes alive after
each tick"), so the live-bytes series equals the checker's on every corpus file (tested)
without running the model: allocation at the value's tick, a weight's (or preloaded input's)
at its first PRELOAD when earlier; release at its FREE, a forwarded value at its consumer, a
computed value nobody reads right after its tick, anything else at the end of the run.
Bars cover ``[alloc, end)``: the ticks after which the buffer is alive.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from nac_engine.format import layout as L
from nac_engine.format.model import NacFile
from nac_engine.isa.optable import OP_INPUT, OP_OUTPUT

#: The command lanes, top to bottom.
LANES = ("PRELOAD", "SAVE_RESULT", "FORWARD", "FREE")
_ACTION_LANE = {L.MMAP_PRELOAD: "PRELOAD", L.MMAP_SAVE_RESULT: "SAVE_RESULT", L.MMAP_FORWARD: "FORWARD",
                L.MMAP_FREE: "FREE"}
#: Buffer kinds (``BufferBars.kind`` codes index this).
BUFFER_KINDS = ("weight", "input", "value")


@dataclass
class BufferBars:
    value: np.ndarray     # int64: the producing tick (vN)
    alloc: np.ndarray     # int64: first tick after which it is alive
    end: np.ndarray       # int64: first tick after which it is not
    nbytes: np.ndarray    # int64
    kind: np.ndarray      # uint8: index into BUFFER_KINDS
    row: np.ndarray       # int32: packed row (no two bars on a row overlap)

    def __len__(self) -> int:
        return int(self.value.size)

    @property
    def rows(self) -> int:
        return int(self.row.max()) + 1 if self.row.size else 0


@dataclass(frozen=True)
class Marker:
    """A lint finding on a tick: ``severity`` error (violation) or warning (hazard)."""
    tick: int
    severity: str
    kind: str
    target: int
    message: str


@dataclass(frozen=True)
class RangeSummary:
    first: int
    last: int
    commands: dict            # lane -> count
    bytes_preloaded: int      # DRAM -> SRAM (PRELOAD targets)
    bytes_saved: int          # results kept in shared memory (SAVE_RESULT)
    bytes_forwarded: int      # results routed core to core (FORWARD)
    peak: int
    peak_tick: int
    buffers_alive: int

    @property
    def bytes_moved(self) -> int:
        return self.bytes_preloaded + self.bytes_saved + self.bytes_forwarded


@dataclass
class MemoryTimeline:
    n: int
    lanes: dict               # lane -> (ticks int64, targets int64), ticks ascending
    buffers: BufferBars
    live_bytes: np.ndarray    # int64, bytes alive after each tick
    peak: int
    peak_tick: int
    markers: list = field(default_factory=list)
    has_schedule: bool = True
    sizes: dict = field(default_factory=dict)   # tick -> bytes of its value
    _def_use: Any = field(default=None, repr=False)

    def readers(self, v: int) -> list[int]:
        return list(self._def_use.users(v)) if self._def_use is not None else []

    def summary(self, first: int, last: int) -> RangeSummary:
        """Commands, bytes moved, peak and buffers alive over ticks ``first..last`` (inclusive)."""
        first, last = max(0, int(min(first, last))), min(self.n - 1, int(max(first, last)))
        counts, moved = {}, {}
        for lane in LANES:
            ticks, targets = self.lanes[lane]
            lo, hi = np.searchsorted(ticks, first, "left"), np.searchsorted(ticks, last, "right")
            counts[lane] = int(hi - lo)
            moved[lane] = int(sum(self.sizes.get(int(t), 0) for t in
                                  (targets[lo:hi] if lane == "PRELOAD" else ticks[lo:hi])))
        if self.n and last >= first:
            seg = self.live_bytes[first:last + 1]
            k = int(np.argmax(seg))
            peak, peak_tick = int(seg[k]), first + k
        else:
            peak, peak_tick = 0, first
        b = self.buffers
        alive = int(np.count_nonzero((b.alloc <= last) & (b.end > first)))
        return RangeSummary(first, last, counts, moved["PRELOAD"], moved["SAVE_RESULT"], moved["FORWARD"],
                            peak, peak_tick, alive)


def _pack_rows(alloc: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Greedy interval partitioning: the fewest rows with no overlap on any row."""
    order = np.lexsort((end, alloc)).tolist()
    a_l, e_l = alloc.tolist(), end.tolist()
    row = [0] * len(a_l)
    free: list[tuple[int, int]] = []          # (end of the row's last bar, row)
    push, replace = heapq.heappush, heapq.heapreplace
    rows = 0
    for k in order:
        e = e_l[k]
        if free and free[0][0] <= a_l[k]:
            r = free[0][1]
            replace(free, (e, r))
        else:
            r = rows
            rows += 1
            push(free, (e, r))
        row[k] = r
    return np.asarray(row, dtype=np.int32)


def _first_by_key(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """``out[k]`` = the value of the first (in order) entry with key ``k``; -1 where none."""
    out = np.full(n, -1, dtype=np.int64)
    if keys.size:
        uniq, first = np.unique(keys, return_index=True)
        out[uniq] = values[first]
    return out


def build_timeline(nac: NacFile, sizes: Mapping[int, int], *, lint: bool = True) -> MemoryTimeline:
    """The timeline of ``nac`` (see the module docstring). ``sizes[i]``: bytes of value ``i``.
    ``lint=False`` leaves ``markers`` empty (the Studio takes them from the Problems check,
    which has already run the same lint)."""
    ins = nac.instructions
    n = len(ins)
    recs = sorted(nac.mmap, key=lambda r: r.tick)
    count = sum(len(r.commands) for r in recs)
    t = np.fromiter((r.tick for r in recs for _c in r.commands), dtype=np.int64, count=count)
    act = np.fromiter((c.action for r in recs for c in r.commands), dtype=np.int64, count=count)
    tgt = np.fromiter((c.target for r in recs for c in r.commands), dtype=np.int64, count=count)
    lanes = {}
    for action, lane in _ACTION_LANE.items():
        m = act == action
        lanes[lane] = (t[m], tgt[m])
    inside = (t >= 0) & (t < n)
    m = inside & (act == L.MMAP_FREE) & (tgt >= 0) & (tgt < t)
    freed_at = _first_by_key(tgt[m], t[m], n)
    m = inside & (act == L.MMAP_FORWARD) & (tgt > t)
    forward_to = _first_by_key(t[m], tgt[m], n)
    m = inside & (act == L.MMAP_PRELOAD) & (tgt >= 0) & (tgt < n)
    preload_at = _first_by_key(tgt[m], t[m], n)

    du = nac.def_use()
    a = np.fromiter((i.a for i in ins), dtype=np.int64, count=n)
    b = np.fromiter((i.b for i in ins), dtype=np.int64, count=n)
    read = np.zeros(n, dtype=bool)
    rv = np.fromiter(du.read_values(), dtype=np.int64)
    read[rv[(rv >= 0) & (rv < n)]] = True
    is_out = np.zeros(n, dtype=bool)
    outs = np.asarray([v for v in nac.output_producers() if 0 <= v < n], dtype=np.int64)
    is_out[outs] = True
    nb = np.zeros(n, dtype=np.int64)
    if sizes:
        keys = np.fromiter(sizes.keys(), dtype=np.int64, count=len(sizes))
        vals = np.fromiter(sizes.values(), dtype=np.int64, count=len(sizes))
        ok = (keys >= 0) & (keys < n)
        nb[keys[ok]] = vals[ok]
    v = np.arange(n, dtype=np.int64)
    is_input = a == OP_INPUT
    weight = is_input & ((b == 1) | (preload_at >= 0))
    alloc = np.where(weight & (preload_at >= 0), np.minimum(v, np.where(preload_at >= 0, preload_at, v)), v)
    end = np.where(freed_at >= 0, freed_at,
                   np.where(forward_to >= 0, forward_to,
                            np.where(~is_input & ~read & ~is_out, v + 1, n)))
    end = np.minimum(end, n)
    keep = (a != OP_OUTPUT) & (nb > 0) & (end > alloc)
    vals_k, alloc_k, end_k, nb_k = v[keep], alloc[keep], end[keep], nb[keep]
    kind_k = np.where(weight[keep], 0, np.where(is_input[keep], 1, 2)).astype(np.uint8)
    bars = BufferBars(vals_k, alloc_k, end_k, nb_k, kind_k, _pack_rows(alloc_k, end_k))
    delta = np.zeros(n + 1, dtype=np.int64)
    np.add.at(delta, alloc_k, nb_k)
    np.add.at(delta, end_k, -nb_k)
    live = np.cumsum(delta[:n])
    peak_tick = int(np.argmax(live)) if n else 0
    markers: list[Marker] = []
    has_schedule = bool(nac.mmap)
    if lint and has_schedule:
        from nac_engine.format.mmap_lint import check_schedule
        markers = markers_of(check_schedule(nac))
    return MemoryTimeline(n, lanes, bars, live, int(live[peak_tick]) if n else 0, peak_tick, markers, has_schedule,
                          sizes if isinstance(sizes, dict) else dict(sizes), du)


def markers_of(report) -> list[Marker]:
    """Lint findings (``ScheduleReport``) as markers, violations first on each tick."""
    out = [Marker(f.tick, "error", f.kind, f.target, f.message) for f in report.violations] + \
          [Marker(f.tick, "warning", f.kind, f.target, f.message) for f in report.hazards]
    out.sort(key=lambda m: (m.tick, m.severity != "error"))
    return out


__all__ = ["BUFFER_KINDS", "LANES", "BufferBars", "Marker", "MemoryTimeline", "RangeSummary", "build_timeline",
           "markers_of"]
