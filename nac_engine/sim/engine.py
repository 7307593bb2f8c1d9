"""The event-driven simulation: compute core, DMA engines and SRAM driven by the MMAP schedule.

Time advances by instruction and by transfer, never by single cycles: each step computes
when something starts and ends from the ``max``/``+`` of the times it depends on, so a
10⁸-cycle program costs what its instruction count costs.

Execution (seed 000 §4)
-----------------------
The core executes instruction *i* at tick *i*, one instruction at a time, in order. When
the core reaches tick *i* (cycle ``issue``, the end of instruction *i−1*) the memory
coprocessor executes tick *i*'s MMAP commands, in file order, at that same cycle:

* **PRELOAD p** reserves SRAM for ``<INPUT>`` *p*'s value and queues a DRAM→SRAM transfer.
  A PRELOAD of a value already resident is a hit (no transfer).
* **FREE v** releases *v*'s buffer. When instruction *i* itself reads *v* (the reference
  planner frees on the tick of the last use) the release waits until *i* ends: the race the
  MMAP checker reports as a hazard is resolved in the favourable order, as there.
* **SAVE_RESULT i** keeps *i*'s result in SRAM; **FORWARD i→u** routes it to *u* without
  touching SRAM (0 bytes written, never in the occupancy). A computed value with readers
  and neither command is kept in SRAM (and reported, when the file has a schedule).
* A graph output nobody else reads lands in SRAM like any result (the core writes its
  results to SRAM; nothing else holds them) and stays there until a FREE or the end of the
  run; ``<OUTPUT>`` writes it back to DRAM. An output that does not fit is spilled: written
  to DRAM when it is computed, and not again at ``<OUTPUT>``.

An ``<INPUT>`` whose value was not preloaded is fetched **on demand** when the core reaches
it, and the core waits (stall ``on_demand``). A preloaded one costs the core nothing at its
own tick; the first instruction that *reads* it waits for the transfer (``preload_late``,
plus ``dma_busy`` for the part of the wait spent queueing behind other transfers).

DMA and DRAM
------------
``dma.engines`` engines take transfers in the order they are issued (first free engine);
each holds its engine from start to end. An engine waits ``dram.latency`` cycles, then moves
``bytes / dram.bytes_per_cycle`` cycles of data over the one DRAM channel, which serves data
phases in issue order. The order of transfers is fixed by the program (tick, then command
order), so every time is a max-plus function of the others: more bandwidth, lower latency
or more engines never make anything later.

SRAM capacity and spills
------------------------
Which buffers fit is decided before the timed run, from the schedule alone: a first pass
records every buffer's lifetime in tick order (allocation: a PRELOAD, an on-demand load, a
saved or kept result; release: its FREE), and :func:`plan_sram` keeps a buffer resident
when it and the smaller buffers live with it fit (details there). Resident bytes never
exceed ``sram.bytes``; a buffer that does not fit is **spilled** (flagged, with the bytes it
would have needed):

* a loaded tensor (PRELOAD or on-demand) is still transferred at its place in the DMA order
  but bypasses the SRAM: it is handed to its first reader as it arrives (weight
  streaming); every further reader fetches it again from DRAM (``spill_read``, stall
  ``sram_full``);
* a result is written to DRAM when its instruction ends (``spill_write``) and every reader
  fetches it back (``spill_read``).

Spilling therefore only ever *adds* transfers, after the ones already queued, and a larger
SRAM spills a subset of what a smaller one spills: more SRAM never makes a run slower.

Monotonicity, exactly: every time in the run is a max-plus function of the issue times and
sizes of the transfers, given their order. More bandwidth, lower latency, more engines or
more SRAM never make anything later. A PRELOAD moved to a later tick never makes anything
earlier *as long as the order of DMA requests is unchanged*; moving it past another
transfer can legitimately help that other transfer (one channel, first come first served:
a big early preload that blocks an urgent fetch is worse than the same preload issued
after it), so tests move PRELOADs only within that order.

DRAM traffic, exactly: reads = preloads + on-demand fetches + spill reads; writes = spill
writes + graph outputs written back (at ``<OUTPUT>``; an output already spilled is in DRAM),
so every computed graph output reaches DRAM exactly once.
"""
from __future__ import annotations

import heapq
from collections import Counter
from math import ceil
from typing import Optional

import numpy as np

from .config import HardwareConfig
from .costs import UNITS, Cost, instruction_cost, op_class
from .result import STALL_KINDS, InstrRecord, SimResult, Transfer
from ..runtime.shapes import MMAP_FORWARD, MMAP_FREE, MMAP_PRELOAD, MMAP_SAVE_RESULT, InstrInfo, Program

INPUT_KINDS = frozenset(("input", "param", "state", "lifted"))
READING_KINDS = frozenset(("op", "output", "subreturn", "control"))

# value states
ABSENT, RESIDENT, SPILLED, FORWARDED, REGISTER, FREED = range(6)


class DmaSystem:
    """``engines`` DMA engines in front of one DRAM channel; transfers served in issue order."""

    def __init__(self, hw: HardwareConfig):
        self.bw = hw.dram.bytes_per_cycle
        self.latency = hw.dram.latency
        self.engines = [(0, e) for e in range(hw.dma.engines)]
        heapq.heapify(self.engines)
        self.channel_free = 0
        self.transfers: list[Transfer] = []
        self.busy = [0] * hw.dma.engines

    def issue(self, kind: str, value: int, tick: int, at: int, nbytes: int, src: str, dst: str) -> Transfer:
        free_at, e = heapq.heappop(self.engines)
        start = max(at, free_at)
        data = ceil(nbytes / self.bw)
        first_byte = max(start + self.latency, self.channel_free)
        end = first_byte + data
        self.channel_free = end
        heapq.heappush(self.engines, (end, e))
        self.busy[e] += end - start
        t = Transfer(len(self.transfers), kind, value, tick, e, at, start, end, nbytes, src, dst,
                     end - (at + self.latency + data))
        self.transfers.append(t)
        return t


class _Engine:
    progress = None     # ``progress(tick, n)`` every 256 instructions; may raise to stop

    def __init__(self, prog: Program, hw: HardwareConfig, fits: Optional[list] = None):
        self.prog, self.hw = prog, hw
        self.ins: list[InstrInfo] = prog.instructions
        n = self.n = len(self.ins)
        self.warnings: list[str] = []
        self._unknown_dtypes: set = set()
        self.nbytes = [self._value_bytes(x) for x in self.ins]
        self.users: dict[int, list[int]] = {}
        for x in self.ins:
            if x.kind in READING_KINDS:
                for p in x.reads:
                    self.users.setdefault(p, []).append(x.tick)
        self.cmds: dict[int, list] = {t: list(c) for t, c in prog.mmap.items() if 0 <= t < n}
        for t in prog.mmap:
            if not 0 <= t < n:
                self.warnings.append(f"MMAP tick {t} is past the last instruction ({n - 1}); ignored")
        self.outputs = set(prog.outputs)
        self.route, self.fwd_target = self._routes()
        self.state = [ABSENT] * n
        self.ready = [0] * n
        self.xfer: list[Optional[Transfer]] = [None] * n
        self.ended = [0] * n
        self.stream_pending: dict[int, bool] = {}   # spilled loads not yet handed to their first reader
        # SRAM plan: ``fits[k]`` says whether the k-th allocation of the run is resident
        # (None: the planning run, everything resident, lifetimes recorded in ``items``).
        self.fits = fits
        self.needed: Optional[list] = None
        self.items: list[list] = []     # [value, bytes, alloc position, free position]
        self.live: dict[int, int] = {}  # value -> item index
        self.position = 0               # allocation/release events so far (tick order)
        self.resident = 0
        self.peak = 0
        self.sram_cycles: list[int] = [0]
        self.sram_bytes: list[int] = [0]
        self.buffers: dict[int, dict] = {}
        self.spills: list[dict] = []
        self.dma = DmaSystem(hw)
        self.unknown: Counter = Counter()
        self.busy = {u: 0 for u in UNITS}

    # -- static ------------------------------------------------------------------------------
    def _value_bytes(self, x: InstrInfo) -> int:
        hw = self.hw
        tensors = (x.stored,) if x.kind == "param" and x.stored is not None else x.outputs
        for t in tensors:
            if t.dtype not in hw.dtype_bytes and t.dtype not in self._unknown_dtypes:
                self._unknown_dtypes.add(t.dtype)
                self.warnings.append(f"dtype {t.dtype} has no entry in dtype_bytes; counted as 4 bytes")
        return sum(t.numel * hw.element_bytes(t.dtype) for t in tensors)

    def _routes(self):
        route: list[str] = [""] * self.n
        fwd: dict[int, int] = {}
        for x in self.ins:
            v = x.tick
            if x.kind in INPUT_KINDS:
                route[v] = "input"
                continue
            if x.kind not in ("op", "subreturn"):
                route[v] = "none"
                continue
            saved = False
            forward = []
            for a, t in self.cmds.get(v, ()):
                if a == MMAP_SAVE_RESULT:
                    if t == v:
                        saved = True
                    else:
                        self.warnings.append(f"tick {v}: SAVE_RESULT names v{t}, not the current "
                                             f"instruction; ignored")
                elif a == MMAP_FORWARD:
                    forward.append(t)
            users = self.users.get(v, [])
            if saved:
                route[v] = "saved"
            elif forward:
                route[v] = "forwarded"
                fwd[v] = forward[0]
                others = sorted(set(users) - {forward[0]})
                if others:
                    self.warnings.append(f"v{v} is FORWARDed to v{forward[0]} but also read by "
                                         + ", ".join(f"v{u}" for u in others[:5]))
            elif v in self.outputs and all(self.ins[u].kind == "output" for u in users):
                route[v] = "output"
            elif not users:
                route[v] = "discarded"
            else:
                route[v] = "kept"
                if self.prog.has_schedule:
                    self.warnings.append(f"v{v} ({x.op}) has readers but neither SAVE_RESULT nor FORWARD; "
                                         f"kept in SRAM")
        return route, fwd

    # -- SRAM ----------------------------------------------------------------------------------
    def _sram_event(self, cycle: int) -> None:
        if self.sram_cycles[-1] == cycle:
            self.sram_bytes[-1] = self.resident
        else:
            self.sram_cycles.append(cycle)
            self.sram_bytes.append(self.resident)
        if self.resident > self.peak:
            self.peak = self.resident

    def _allocate(self, v: int, cycle: int, kind: str) -> bool:
        """Open a buffer for ``v``; False when the SRAM plan spills it (see :func:`plan_sram`)."""
        k = len(self.items)
        b = self.nbytes[v]
        self.items.append([v, b, self.position, None])
        self.position += 1
        self.live[v] = k
        if self.fits is not None and not self.fits[k]:
            return False
        if b:
            self.resident += b
            self.buffers[v] = {"value": v, "bytes": b, "alloc_cycle": cycle, "free_cycle": None, "kind": kind}
            self._sram_event(cycle)
        return True

    def _release(self, v: int, cycle: int, tick: int) -> None:
        st = self.state[v]
        if v not in self.live:
            if st == FORWARDED:
                self.warnings.append(f"tick {tick}: FREE v{v}, a forwarded value (never in SRAM)")
            elif st == FREED:
                self.warnings.append(f"tick {tick}: FREE v{v} again")
            elif st == ABSENT and self.ins[v].kind != "skipped":
                self.warnings.append(f"tick {tick}: FREE v{v}, which holds no buffer")
            return
        k = self.live.pop(v)
        self.items[k][3] = self.position
        self.position += 1
        if st == RESIDENT and v in self.buffers and self.buffers[v]["free_cycle"] is None:
            self.resident -= self.items[k][1]
            self.buffers[v]["free_cycle"] = cycle
            self._sram_event(cycle)
        self.state[v] = FREED

    def _spill(self, v: int, kind: str, tick: int) -> None:
        k = self.live[v]
        self.spills.append({"value": v, "kind": kind, "tick": tick, "bytes": self.nbytes[v],
                            "needed_bytes": self.needed[k] if self.needed is not None else None})

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> SimResult:
        records: list[InstrRecord] = []
        core = 0
        for x in self.ins:
            i = x.tick
            if self.progress is not None and not i & 255:
                self.progress(i, self.n)
            T = core
            deferred: list[int] = []
            reads = set(x.reads) if x.kind in READING_KINDS else set()
            for a, t in self.cmds.get(i, ()):
                if a == MMAP_FREE:
                    if not 0 <= t < self.n:
                        self.warnings.append(f"tick {i}: FREE of v{t}, no such instruction")
                    elif t in reads or t == i:
                        deferred.append(t)
                    else:
                        self._release(t, T, i)
                elif a == MMAP_PRELOAD:
                    self._preload(t, i, T)
                elif a not in (MMAP_SAVE_RESULT, MMAP_FORWARD):
                    self.warnings.append(f"tick {i}: MMAP action {a} is not one the simulator models; ignored")
            if x.kind == "skipped":
                records.append(InstrRecord(i, x.op, x.kind, "core", "skipped", T, T, T, 0, 0))
                continue
            if x.kind in INPUT_KINDS:
                rec = self._load(x, T)
            elif x.kind == "output":
                rec = self._output(x, T)
            else:
                rec = self._compute(x, T)
            for t in deferred:
                self._release(t, rec.end_cycle, i)
            records.append(rec)
            core = rec.end_cycle
        return self._result(records, core)

    def _preload(self, p: int, tick: int, T: int) -> None:
        if not 0 <= p < self.n or self.ins[p].kind not in INPUT_KINDS:
            self.warnings.append(f"tick {tick}: PRELOAD v{p} is not an <INPUT>; ignored")
            return
        if self.state[p] in (RESIDENT, SPILLED):
            return                               # already loaded (or streaming): a hit
        fits = self._allocate(p, T, "preload")
        b = self.nbytes[p]
        if b:
            tr = self.dma.issue("preload", p, tick, T, b, "dram", "sram" if fits else "stream")
            self.xfer[p], self.ready[p] = tr, tr.end_cycle
        else:
            self.ready[p] = T
        if fits:
            self.state[p] = RESIDENT
        else:
            self.state[p], self.stream_pending[p] = SPILLED, True
            self._spill(p, "preload", tick)

    def _load(self, x: InstrInfo, T: int) -> InstrRecord:
        i = x.tick
        st = self.state[i]
        rec = InstrRecord(i, x.op, x.kind, "core", "load", T, T, T, 0, 0, out_bytes=self.nbytes[i])
        if st == RESIDENT:
            rec.route = "preloaded"
        elif st == SPILLED:
            rec.route = "streamed"
        else:
            fits = self._allocate(i, T, "load")
            rec.route = "loaded" if fits else "streamed"
            b = self.nbytes[i]
            if b:
                tr = self.dma.issue("on_demand", i, i, T, b, "dram", "sram" if fits else "stream")
                self.xfer[i], self.ready[i] = tr, tr.end_cycle
                self._stall(rec, tr.end_cycle - T, tr, "on_demand", i, f"on-demand fetch: v{i}")
                rec.start_cycle = rec.end_cycle = tr.end_cycle
            else:
                self.ready[i] = T
            if fits:
                self.state[i] = RESIDENT
            else:
                self.state[i], self.stream_pending[i] = SPILLED, True
                self._spill(i, "on_demand", i)
        self.ended[i] = rec.end_cycle
        return rec

    def _stall(self, rec: InstrRecord, stall: int, tr: Optional[Transfer], kind: str, v: int, what: str) -> None:
        """Split a wait on transfer ``tr`` into its queueing part (``dma_busy``) and the rest."""
        rec.stall_cycles = stall
        if stall <= 0:
            return
        busy = min(stall, max(tr.queue_cycles, 0)) if tr is not None else 0
        rec.stall_breakdown = {k: c for k, c in ((kind, stall - busy), ("dma_busy", busy)) if c}
        rec.stall_target = v
        if max(rec.stall_breakdown, key=rec.stall_breakdown.get) == kind:
            rec.stall_cause = what
        else:
            rec.stall_cause = f"DMA busy: {what.split(':')[-1].strip()} waited {busy} cycles behind other transfers"

    def _read(self, v: int, i: int, T: int):
        """When value ``v`` is available to instruction ``i``: (ready, transfer, kind, what, sram bytes)."""
        st = self.state[v]
        if st == RESIDENT:
            tr = self.xfer[v]
            kind = "preload_late" if tr is not None and tr.kind == "preload" else "on_demand"
            return self.ready[v], tr, kind, f"late PRELOAD: v{v}" if kind == "preload_late" \
                else f"on-demand fetch: v{v}", self.nbytes[v]
        if st == SPILLED:
            b = self.nbytes[v]
            if self.stream_pending.pop(v, False) or not b:
                # the loaded tensor that did not fit goes to its first reader as it arrives
                tr = self.xfer[v]
                kind = "preload_late" if tr is not None and tr.kind == "preload" else "on_demand"
                return self.ready[v], tr, kind, (f"late PRELOAD: v{v}" if kind == "preload_late"
                                                 else f"on-demand fetch: v{v}"), 0
            at = T if self.ins[v].kind in INPUT_KINDS else max(T, self.ready[v])
            tr = self.dma.issue("spill_read", v, i, at, b, "dram", "core")
            return tr.end_cycle, tr, "sram_full", f"SRAM full: v{v} spilled, read back", 0
        if st == FORWARDED:
            if self.fwd_target.get(v) != i:
                self.warnings.append(f"v{i} reads v{v}, which was FORWARDed to v{self.fwd_target.get(v)}")
            return self.ready[v], None, "", "", 0
        if st == FREED:
            self.warnings.append(f"v{i} reads v{v} after its FREE")
            if self.ins[v].kind in INPUT_KINDS and self.nbytes[v]:
                tr = self.dma.issue("on_demand", v, i, T, self.nbytes[v], "dram", "core")
                return tr.end_cycle, tr, "on_demand", f"on-demand fetch: v{v} again after its FREE", 0
            return T, None, "", "", 0
        return self.ready[v], None, "", "", 0

    def _compute(self, x: InstrInfo, T: int) -> InstrRecord:
        hw = self.hw
        i = x.tick
        ready, binding = T, None
        sram_read = 0
        for v in x.reads:
            r, tr, kind, what, sb = self._read(v, i, T)
            sram_read += sb
            if r > ready:
                ready, binding = r, (tr, kind, v, what)
        cost: Cost = instruction_cost(x, hw)
        if not cost.known:
            self.unknown[x.op] += 1
        dispatch = hw.core.dispatch_cycles if x.kind == "op" else 0
        rec = InstrRecord(i, x.op, x.kind, cost.unit, cost.op_class, T, ready, ready + dispatch + cost.cycles,
                          cost.cycles, 0, dispatch_cycles=dispatch, macs=cost.macs, out_bytes=self.nbytes[i],
                          sram_read_bytes=sram_read, detail=cost.detail)
        if binding is not None:
            tr, kind, v, what = binding
            self._stall(rec, ready - T, tr, kind, v, what)
        for u, c in cost.busy.items():
            self.busy[u] += c
        if dispatch:
            self.busy["core"] += dispatch
        end = rec.end_cycle
        route = self.route[i]
        rec.route = route
        if route in ("saved", "kept", "output"):
            if self._allocate(i, ready, "output" if route == "output" else "result"):
                self.state[i], self.ready[i] = RESIDENT, end
                rec.sram_write_bytes = self.nbytes[i]
            else:
                rec.route = "spilled"
                self._spill(i, "result", i)
                self.state[i] = SPILLED
                if self.nbytes[i]:
                    tr = self.dma.issue("spill_write", i, i, end, self.nbytes[i], "core", "dram")
                    self.ready[i] = tr.end_cycle
                else:
                    self.ready[i] = end
        elif route == "forwarded":
            self.state[i], self.ready[i] = FORWARDED, end
        else:
            self.state[i], self.ready[i] = REGISTER, end
        self.ended[i] = end
        return rec

    def _output(self, x: InstrInfo, T: int) -> InstrRecord:
        i = x.tick
        rec = InstrRecord(i, x.op, x.kind, "core", "output", T, T, T, 0, 0)
        for v in dict.fromkeys(x.reads):
            st = self.state[v]
            b = self.nbytes[v]
            if st == SPILLED or not b:
                continue      # already in DRAM (spilled), or nothing to write
            src = "sram" if st == RESIDENT else "core"
            self.dma.issue("writeback", v, i, max(T, self.ready[v]), b, src, "dram")
        return rec

    # -- totals --------------------------------------------------------------------------------
    def _result(self, records: list, core: int) -> SimResult:
        hw = self.hw
        transfers = self.dma.transfers
        last = max((t.end_cycle for t in transfers), default=0)
        total = max(core, last)
        by_kind = {k: 0 for k in ("preload", "on_demand", "spill_read", "spill_write", "writeback")}
        for t in transfers:
            by_kind[t.kind] += t.bytes
        reads = by_kind["preload"] + by_kind["on_demand"] + by_kind["spill_read"]
        writes = by_kind["spill_write"] + by_kind["writeback"]
        stalls = {k: 0 for k in STALL_KINDS}
        for r in records:
            for k, c in r.stall_breakdown.items():
                stalls[k] += c
        busy = dict(self.busy)
        for e, c in enumerate(self.dma.busy):
            busy[f"dma{e}"] = c
        util = {k: (c / total if total else 0.0) for k, c in busy.items()}
        dram_cycles = sum(ceil(t.bytes / self.dma.bw) for t in transfers)
        util["dram"] = dram_cycles / total if total else 0.0
        macs = sum(r.macs for r in records)
        util["mac"] = macs / (hw.array.rows * hw.array.cols * total) if total else 0.0
        if self.sram_cycles[-1] < total:
            self.sram_cycles.append(total)
            self.sram_bytes.append(self.resident)
        return SimResult(
            program=self.prog.name, hardware=hw.name, mode="event", clock_hz=hw.clock_hz,
            total_cycles=total, instructions=records, transfers=transfers,
            sram_cycles=self.sram_cycles, sram_bytes=self.sram_bytes, sram_capacity=hw.sram.bytes,
            peak_sram_bytes=self.peak, dram_read_bytes=reads, dram_write_bytes=writes,
            dram_bytes_by_kind=by_kind, utilization=util, busy_cycles=busy, stall_cycles_by_cause=stalls,
            core_cycles=core, drain_cycles=total - core, macs=macs, spills=self.spills,
            unknown_ops=dict(self.unknown), warnings=self.prog.notes + self.warnings,
            shape_source=self.prog.shape_source, buffers=list(self.buffers.values()))


def plan_sram(items: list, capacity: int) -> tuple[list, list]:
    """Which buffers are resident: ``(fits, needed)`` per allocation.

    ``items`` are the run's allocations in tick order, ``[value, bytes, alloc position, free
    position or None]``. Buffers are ranked by size (smaller first; ties by allocation order),
    and ``needed[k]`` is the most bytes that ``k`` and the buffers ranked before it hold at
    once during ``k``'s lifetime. A buffer is resident iff ``needed[k] ≤ capacity``.

    Why this rule: at any moment the resident buffers' bytes are at most the ``needed`` of the
    lowest-ranked one among them, so the capacity is never exceeded; and ``needed`` does not
    depend on the capacity, so a larger SRAM keeps a superset resident (spills a subset).
    Ranking small buffers first keeps activations on chip and streams weights that could
    never fit, instead of letting one huge live weight push everything else out."""
    n = len(items)
    end = max((it[2] for it in items), default=0) + 1
    for it in items:
        end = max(end, (it[3] if it[3] is not None else 0) + 1)
    load = np.zeros(end + 1, dtype=np.int64)
    needed = [0] * n
    for k in sorted(range(n), key=lambda k: (items[k][1], k)):
        _v, b, a, f = items[k]
        f = end if f is None else f
        if b:
            load[a:f] += b
        needed[k] = int(load[a:f].max()) if f > a else b
    return [x <= capacity for x in needed], needed


def run_event(prog: Program, hw: HardwareConfig, progress=None) -> SimResult:
    """Simulate ``prog`` on ``hw`` with the event engine (see the module docstring).

    Two passes: the first records every buffer's lifetime (in tick order; timing plays no
    part in it), :func:`plan_sram` decides which fit, the second is the timed run.
    ``progress(done, total)`` (over both passes) may raise to stop the run."""
    n = len(prog.instructions)
    plan = _Engine(prog, hw)
    if progress is not None:
        plan.progress = lambda i, _n: progress(i, 2 * n)
    plan.run()
    fits, needed = plan_sram(plan.items, hw.sram.bytes)
    engine = _Engine(prog, hw, fits)
    if progress is not None:
        engine.progress = lambda i, _n: progress(n + i, 2 * n)
    engine.needed = needed
    return engine.run()


__all__ = ["run_event", "DmaSystem", "op_class"]
