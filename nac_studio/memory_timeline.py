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
from typing import Mapping, Optional

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
    _readers: dict = field(default_factory=dict, repr=False)
    _by_value: dict = field(default_factory=dict, repr=False)

    def readers(self, v: int) -> list[int]:
        return list(self._readers.get(v, ()))

    def buffer_of(self, v: int) -> Optional[int]:
        """Index into ``buffers`` of value ``v``'s bar (None: it has none)."""
        return self._by_value.get(v)

    def buffer_at(self, tick: float, row: int) -> Optional[int]:
        """The bar on ``row`` that covers ``tick`` (for hovering)."""
        b = self.buffers
        hit = np.nonzero((b.row == row) & (b.alloc <= tick) & (b.end > tick))[0]
        return int(hit[0]) if hit.size else None

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
    order = np.lexsort((end, alloc))
    row = np.zeros(alloc.size, dtype=np.int32)
    free: list[tuple[int, int]] = []          # (end of the row's last bar, row)
    rows = 0
    for k in order:
        a = int(alloc[k])
        if free and free[0][0] <= a:
            _e, r = heapq.heappop(free)
        else:
            r, rows = rows, rows + 1
        row[k] = r
        heapq.heappush(free, (int(end[k]), r))
    return row


def build_timeline(nac: NacFile, sizes: Mapping[int, int], *, lint=True) -> MemoryTimeline:
    """The timeline of ``nac`` (see the module docstring). ``sizes[i]``: bytes of value ``i``."""
    ins = nac.instructions
    n = len(ins)
    lanes_t: dict[str, list] = {k: [] for k in LANES}
    lanes_v: dict[str, list] = {k: [] for k in LANES}
    freed_at: dict[int, int] = {}
    forward_to: dict[int, int] = {}
    preload_at: dict[int, int] = {}
    for rec in sorted(nac.mmap, key=lambda r: r.tick):
        t = rec.tick
        for c in rec.commands:
            lane = _ACTION_LANE.get(c.action)
            if lane is not None:
                lanes_t[lane].append(t)
                lanes_v[lane].append(c.target)
            if not (0 <= t < n):
                continue
            if c.action == L.MMAP_FREE and 0 <= c.target < t:
                freed_at.setdefault(c.target, t)
            elif c.action == L.MMAP_FORWARD and c.target > t:
                forward_to.setdefault(t, c.target)
            elif c.action == L.MMAP_PRELOAD and 0 <= c.target < n:
                preload_at.setdefault(c.target, t)
    lanes = {k: (np.asarray(lanes_t[k], dtype=np.int64), np.asarray(lanes_v[k], dtype=np.int64)) for k in LANES}

    du = nac.def_use()
    outputs = set(nac.output_producers())
    vals, allocs, ends, nbs, kinds = [], [], [], [], []
    readers: dict[int, tuple] = {}
    for i in ins:
        v = i.index
        users = du.users(v)
        if users:
            readers[v] = users
        if i.a == OP_OUTPUT:
            continue
        nb = int(sizes.get(v, 0))
        if nb <= 0:
            continue
        is_input = i.a == OP_INPUT
        weight = is_input and (i.b == 1 or v in preload_at)
        alloc = min(v, preload_at.get(v, v)) if weight else v
        if v in freed_at:
            end = freed_at[v]
        elif v in forward_to:
            end = forward_to[v]
        elif not is_input and not users and v not in outputs:
            end = v + 1
        else:
            end = n
        end = min(end, n)
        if end <= alloc:
            continue
        vals.append(v)
        allocs.append(alloc)
        ends.append(end)
        nbs.append(nb)
        kinds.append(0 if weight else (1 if is_input else 2))
    alloc_a = np.asarray(allocs, dtype=np.int64)
    end_a = np.asarray(ends, dtype=np.int64)
    nb_a = np.asarray(nbs, dtype=np.int64)
    bars = BufferBars(np.asarray(vals, dtype=np.int64), alloc_a, end_a, nb_a, np.asarray(kinds, dtype=np.uint8),
                      _pack_rows(alloc_a, end_a))
    delta = np.zeros(n + 1, dtype=np.int64)
    np.add.at(delta, alloc_a, nb_a)
    np.add.at(delta, end_a, -nb_a)
    live = np.cumsum(delta[:n])
    peak_tick = int(np.argmax(live)) if n else 0
    markers: list[Marker] = []
    has_schedule = bool(nac.mmap)
    if lint and has_schedule:
        from nac_engine.format.mmap_lint import check_schedule
        report = check_schedule(nac)
        markers = [Marker(f.tick, "error", f.kind, f.target, f.message) for f in report.violations] + \
                  [Marker(f.tick, "warning", f.kind, f.target, f.message) for f in report.hazards]
        markers.sort(key=lambda m: (m.tick, m.severity != "error"))
    return MemoryTimeline(n, lanes, bars, live, int(live[peak_tick]) if n else 0, peak_tick, markers, has_schedule,
                          {int(k): int(v) for k, v in sizes.items()}, readers,
                          {int(v): k for k, v in enumerate(vals)})


__all__ = ["BUFFER_KINDS", "LANES", "BufferBars", "Marker", "MemoryTimeline", "RangeSummary", "build_timeline"]
