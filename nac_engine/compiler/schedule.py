"""MMAP scheduling: SAVE_RESULT / FREE / FORWARD / PRELOAD for a fixed instruction order (seed 000 §4).

API
---
``plan_mmap(nac, value_nbytes, *, mode="min-peak", preload_lookahead=2, weights=None) -> MmapPlan``
plans the memory commands for ``nac.instructions`` (the existing ``nac.mmap`` is ignored and
left untouched; assign ``plan.records`` to ``nac.mmap`` to use the plan).
``value_nbytes[i]`` is the byte size of instruction ``i``'s result; a parameter missing from it
is sized from its ``TensorMeta`` (logical elements × 4 when quantised, since the runtime
dequantises to float32 at load, else its stored size); anything else missing counts 0 bytes.
``resident_bytes(nac, records, value_nbytes)`` measures any schedule (a corpus file's own
MMAP, say) with the same model.

``weights`` names the instructions planned as weights. By default that is every
``<INPUT B=1>``; the reference compiler also planned non-persistent buffers as weights even
though it emitted them as unnamed ``<INPUT B=0>`` (v1.8) or ``<INPUT B=3>`` (v1.6), so pass
them here to reproduce its bytes on such files (research §9.1, §9.5).

Modes
-----
``"reference"``
    The reference compiler's current planner ("chronological half-split", research §9.2,
    commit c72bb01 onward), byte for byte. FREE lands on the tick of the last use, which the
    checker reports as a same-tick hazard (never a violation); kept so that our output can be
    compared with theirs on the same graph. Like the original it gives graph outputs no
    command at all, even one a later instruction reads (a BERT's last hidden state feeding
    its pooler), which seed §4.5 would SAVE_RESULT; the simulator warns about those.
``"reference-lookback"``
    The reference's older planner (research §9.4: every v1.6/v1.7 file), with one minimal fix.
    The original drops every record that falls on a weight tick; that loses PRELOADs
    (harmless: the weight then loads at its own tick) but also FREEs, which the checker
    rightly reports as ``never_freed`` violations (e.g. corpus ``cnn__v1.6``: 4). The fix
    keeps FREE commands on weight ticks and drops the rest as the original does. Everything
    else is unchanged; with the fix off (internal ``_reference_lookback(..., keep_frees=False)``)
    it reproduces the corpus v1.6 files byte for byte.
``"min-peak"`` (our default)
    The smallest resident memory at every tick among schedules that are race-free (zero
    violations *and* zero same-tick hazards from ``check_schedule``) and honour the lookahead:

    * **PRELOAD** of weight ``p`` on tick ``p - preload_lookahead`` (tick 0 when fewer ticks
      precede it) — not earlier. Ticks are instruction indices, the spec's unit, and the
      distance is to the weight's own ``<INPUT B=1>``: seed §4.5 has the load begin "before the
      main core reaches that instruction", and a PRELOAD at or after it is a checker hazard.
      A weight at tick 0 cannot be preloaded; ``preload_lookahead=0`` emits no PRELOADs.
    * **FORWARD** ``v → u`` when ``u`` is ``v``'s only consumer and every tick strictly
      between them is a weight tick (the next instruction that does work; the v1.6 planner's
      rule). Forwarded values need no FREE.
    * **SAVE_RESULT** ``v`` for every other computed value that is read; **FREE** it on the
      tick after its last use (seed §4.5). Weights, named inputs and lifted constants are FREEd
      the tick after their last use too (states, ``B=2``, persist across runs and are left
      alone); a weight nobody reads is FREEd the tick after it loads. Graph outputs are never
      freed; a computed output is saved when an instruction other than ``<OUTPUT>`` reads it
      (it then has several consumers), and needs no command when only ``<OUTPUT>`` does.
    * Commands of one tick are ordered FREE, FORWARD, SAVE_RESULT, PRELOAD (memory is
      released before new loads start), then by target.

    Why this is minimal: the instruction order is fixed, so each buffer's lifetime is an
    interval, and each rule above picks the shortest interval the constraints allow; the
    resident bytes at every tick — and so the peak — cannot be lower for any race-free
    schedule with the same lookahead.

Memory model (``MmapPlan.live_bytes``)
--------------------------------------
Bytes resident *while* tick ``t`` runs: every buffer allocated at or before ``t`` that is
not yet released, plus every buffer instruction ``t`` reads (an instruction needs its inputs
and its output at the same time). Allocation: a value's own tick; a weight's PRELOAD tick if
earlier. Release: its FREE tick; a forwarded value's consumer tick; a value nobody reads, the
tick after its own; otherwise never. This is :func:`nac_engine.runtime.mmap_check.trace_memory`'s
model (bytes held *after* each tick) plus the inputs being read, which that model drops on the
tick that releases them. Counting them is what makes a same-tick FREE (HEAD) and a FREE on
the next tick cost the same, as they do on hardware: the buffer is needed until the read ends.

Consequence for comparisons with ``"reference"`` (HEAD): min-peak releases every buffer no later
than HEAD does in this model, and HEAD puts each PRELOAD on the last non-weight tick before the weight or earlier,
so at ``preload_lookahead=1`` min-peak is at or below HEAD at every tick — except for weights
that precede every other instruction, which HEAD "preloads" after they load (no effect) and
min-peak one tick before. At larger lookaheads min-peak may hold a weight longer than HEAD does;
on the corpus streams its peak at the default lookahead 2 equals HEAD's (measured in
tests/compiler/test_schedule.py, not guaranteed in general).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

import numpy as np

from ..format import layout as L
from ..format.model import MmapCommand, MmapRecord, NacFile
from ..isa.optable import OP_INPUT, OP_OUTPUT

MODES = ("min-peak", "reference", "reference-lookback")
MAX_COMMANDS_PER_TICK = 0xFF          # u8 command count (seed 000 §4.3)
_LOOKBACK_WINDOW = 12                 # research §9.4: ticks the v1.6 planner looks back
_LOOKBACK_CLEAN = 3                   # ... stopping after this many non-weight ticks

# Command order inside a tick, per planner.
_ORDER_HEAD = {L.MMAP_FREE: 0, L.MMAP_FORWARD: 1, L.MMAP_SAVE_RESULT: 2, L.MMAP_PRELOAD: 3}
_ORDER_LOOKBACK = {L.MMAP_FORWARD: 0, L.MMAP_FREE: 1, L.MMAP_SAVE_RESULT: 2, L.MMAP_PRELOAD: 3}


@dataclass
class MmapPlan:
    records: list[MmapRecord]          # ascending tick, only ticks with commands
    live_bytes: list[int]              # resident bytes while each tick runs (module docstring)
    peak_live_bytes: int
    peak_tick: int
    mode: str
    preload_lookahead: int = 0
    stats: dict = field(default_factory=dict)   # command counts by action name

    @property
    def by_tick(self) -> dict[int, list[MmapCommand]]:
        return {r.tick: r.commands for r in self.records}


# --------------------------------------------------------------------------- the program
class _Program:
    """What every planner needs from OPS: consumers, kinds and graph outputs."""

    def __init__(self, nac: NacFile, weights: Optional[Iterable[int]]):
        ins = nac.instructions
        self.n = len(ins)
        du = nac.def_use()     # the file's one def-use index; planners see backward reads only
        self.users: dict[int, list[int]] = {}
        for p in du.read_values():
            if 0 <= p < self.n:
                us = [u for u in du.users(p) if u > p]
                if us:
                    self.users[p] = us
        self.outputs = set(du.outputs)
        self.is_input = [i.a == OP_INPUT for i in ins]
        self.is_output_op = [i.a == OP_OUTPUT for i in ins]
        self.variant = [i.b for i in ins]
        if weights is None:
            self.weights = {i.index for i in ins if i.a == OP_INPUT and i.b == 1}
        else:
            self.weights = set(int(w) for w in weights)
            bad = sorted(w for w in self.weights if not (0 <= w < self.n) or not self.is_input[w])
            if bad:
                raise ValueError(f"weights must be <INPUT> instructions; not: {bad[:10]}")

    def next_work(self) -> list[int]:
        """``next_work()[v]``: the first tick after ``v`` that is not a weight (``n`` if none)."""
        out = [self.n] * (self.n + 1)
        for v in range(self.n - 1, -1, -1):
            out[v] = v + 1 if (v + 1 < self.n and v + 1 not in self.weights) else out[v + 1]
        return out[:self.n]

    def last_use(self, v: int) -> Optional[int]:
        u = self.users.get(v)
        return u[-1] if u else None


# --------------------------------------------------------------------------- sizes
def _param_nbytes(nac: NacFile, tick: int) -> int:
    p = nac.param_for(nac.instructions[tick])
    if p is None or p.meta is None:
        return 0
    m = p.meta
    if m.quant != L.QUANT_NONE:
        n = int(np.prod(m.logical_shape, dtype=np.int64)) if m.logical_shape else 1
        return n * 4
    return m.stored_nbytes


def _sizes(nac: NacFile, value_nbytes: Mapping[int, int]) -> list[int]:
    out = []
    for i, ins in enumerate(nac.instructions):
        nb = value_nbytes.get(i)
        if nb is None:
            nb = _param_nbytes(nac, i) if ins.a == OP_INPUT and ins.b == 1 else 0
        if nb < 0:
            raise ValueError(f"value_nbytes[{i}] = {nb} is negative")
        out.append(int(nb))
    return out


# --------------------------------------------------------------------------- memory model
def resident_bytes(nac: NacFile, records: Iterable[MmapRecord], value_nbytes: Mapping[int, int],
                   *, weights: Optional[Iterable[int]] = None, during_tick: bool = True) -> list[int]:
    """Bytes resident per tick under ``records`` (module docstring, "Memory model").

    ``during_tick=False`` gives ``trace_memory``'s "after the tick" numbers instead (the inputs
    released by the tick that reads them are not counted on that tick).
    """
    prog = _Program(nac, weights)
    size = _sizes(nac, value_nbytes)
    n = prog.n
    freed_at: dict[int, int] = {}
    forward_to: dict[int, int] = {}
    preload_at: dict[int, int] = {}
    weights_now = set(prog.weights)
    for rec in sorted(records, key=lambda r: r.tick):
        for c in rec.commands:
            if c.action == L.MMAP_FREE and c.target < rec.tick:
                freed_at.setdefault(c.target, rec.tick)
            elif c.action == L.MMAP_FORWARD and c.target > rec.tick:
                forward_to.setdefault(rec.tick, c.target)
            elif c.action == L.MMAP_PRELOAD and 0 <= c.target < n:
                preload_at.setdefault(c.target, rec.tick)
                if prog.is_input[c.target]:
                    weights_now.add(c.target)   # a preloaded input is held like a weight
    delta = np.zeros(n + 1, dtype=np.int64)
    for v in range(n):
        if prog.is_output_op[v] or size[v] == 0:
            continue
        users = prog.users.get(v, [])
        alloc = min(v, preload_at.get(v, v)) if v in weights_now else v
        if v in freed_at:
            end = freed_at[v]
        elif v in forward_to:
            end = forward_to[v]
        elif not prog.is_input[v] and not users and v not in prog.outputs:
            end = v + 1
        else:
            end = n
        if during_tick and users:
            end = max(end, users[-1] + 1)    # held until its last reader has run
        end = min(end, n)
        if end > alloc:
            delta[alloc] += size[v]
            delta[end] -= size[v]
    return [int(x) for x in np.cumsum(delta[:n])]


# --------------------------------------------------------------------------- assembly
def _assemble(cmds: dict[int, set], order: dict[int, int], drop_ticks=frozenset(),
              keep_on_dropped=frozenset()) -> list[MmapRecord]:
    records = []
    for t in sorted(cmds):
        pairs = cmds[t]
        if t in drop_ticks:
            pairs = {c for c in pairs if c[0] in keep_on_dropped}
        if not pairs:
            continue
        ordered = sorted(pairs, key=lambda c: (order[c[0]], c[1]))
        records.append(MmapRecord(t, [MmapCommand(a, v) for a, v in ordered]))
    return records


def _fit_command_counts(records: list[MmapRecord], n: int, order: dict[int, int]) -> list[MmapRecord]:
    """A tick holds at most 255 commands (u8 count). Overflowing FREEs move to later ticks and
    overflowing PRELOADs to earlier ones — both stay valid, each costs a little memory."""
    if all(len(r.commands) <= MAX_COMMANDS_PER_TICK for r in records):
        return records
    cmds: dict[int, list] = {r.tick: [(c.action, c.target) for c in r.commands] for r in records}
    for t in sorted(cmds):
        while len(cmds[t]) > MAX_COMMANDS_PER_TICK:
            frees = [c for c in cmds[t] if c[0] == L.MMAP_FREE]
            pre = [c for c in cmds[t] if c[0] == L.MMAP_PRELOAD]
            if frees and t + 1 < n:
                c = frees[-1]
                cmds[t].remove(c)
                cmds.setdefault(t + 1, []).append(c)
            elif pre and t > 0:
                c = pre[0]
                cmds[t].remove(c)
                cmds.setdefault(t - 1, []).append(c)
            else:
                raise ValueError(f"MMAP tick {t} needs {len(cmds[t])} commands; a record holds at most "
                                 f"{MAX_COMMANDS_PER_TICK} and none can move")
    # Moving PRELOADs earlier may overflow an already-visited tick; one more pass settles it.
    out = [MmapRecord(t, [MmapCommand(a, v) for a, v in sorted(set(c), key=lambda c: (order[c[0]], c[1]))])
           for t, c in sorted(cmds.items()) if c]
    if any(len(r.commands) > MAX_COMMANDS_PER_TICK for r in out):
        return _fit_command_counts(out, n, order)
    return out


# --------------------------------------------------------------------------- planners
def _reference_head(prog: _Program) -> list[MmapRecord]:
    """Research §9.2 (HEAD, "chronological half-split")."""
    n, W = prog.n, prog.weights
    compute = [i for i in range(n) if i not in W] or [0]
    preloads: dict[int, list[int]] = {t: [] for t in compute}
    for p in sorted(W):
        k = bisect.bisect_left(compute, p)     # compute ticks below p: compute[:k]
        preloads[compute[k - 1] if k else compute[0]].append(p)
    for t in preloads:
        preloads[t].sort()
    changed = True
    while changed:
        changed = False
        candidate = None
        for t in compute:
            lst = preloads[t]
            if not lst:
                candidate = t
            elif len(lst) == 1:
                candidate = None
            else:
                if candidate is not None:
                    k = len(lst) // 2
                    preloads[candidate].extend(lst[:k])
                    preloads[t] = lst[k:]
                    changed = True
                candidate = None
    cmds: dict[int, set] = {}
    add = lambda t, a, v: cmds.setdefault(t, set()).add((a, v))   # noqa: E731
    for t, lst in preloads.items():
        for p in lst:
            add(t, L.MMAP_PRELOAD, p)
    forwarded = set()
    for i in range(n):
        users = prog.users.get(i, [])
        if i in W or i in prog.outputs or not users:
            continue
        if users == [i + 1]:
            add(i, L.MMAP_FORWARD, i + 1)
            forwarded.add(i)
        else:
            add(i, L.MMAP_SAVE_RESULT, i)
    for i in range(n):
        last = prog.last_use(i)
        if i in forwarded or i in prog.outputs or last is None:
            continue
        add(last, L.MMAP_FREE, i)
    return _assemble(cmds, _ORDER_HEAD, drop_ticks=frozenset(W))


def _reference_lookback(prog: _Program, keep_frees: bool = True) -> list[MmapRecord]:
    """Research §9.4 (v1.6 "look-back"); ``keep_frees`` is our fix (module docstring)."""
    n, W = prog.n, prog.weights
    preload_at: dict[int, list[int]] = {}
    planned: list[int] = []
    i = 0
    while i < n:
        if i not in W:
            i += 1
            continue
        j = i
        while j < n and j in W:
            j += 1
        group = list(range(i, j))
        best = max(i - 1, 0)
        clean = 0
        for off in range(1, _LOOKBACK_WINDOW + 1):
            t = i - off
            if t < 0 or t in preload_at:
                break
            best = t
            if t not in W:
                clean += 1
                if clean >= _LOOKBACK_CLEAN:
                    break
        preload_at.setdefault(best, []).extend(group)
        planned.extend(group)
        i = j
    cmds: dict[int, set] = {}
    add = lambda t, a, v: cmds.setdefault(t, set()).add((a, v))   # noqa: E731
    for t, lst in preload_at.items():
        for p in lst:
            add(t, L.MMAP_PRELOAD, p)
    planned_set = set(planned)       # every weight: each one starts or joins a group
    next_work = prog.next_work()
    saved = []
    for v in range(n):
        users = prog.users.get(v, [])
        if v in W or prog.is_input[v] or not users:
            continue
        u = users[0]
        if len(users) == 1 and v not in prog.outputs and u == next_work[v]:
            add(v, L.MMAP_FORWARD, u)
        else:
            add(v, L.MMAP_SAVE_RESULT, v)
            saved.append(v)
    for v in sorted(planned_set) + saved:
        last = prog.last_use(v)
        if last is None or v in prog.outputs:
            continue
        # last + 1 == n only when the last reader is the final instruction and not <OUTPUT>;
        # the original would write an out-of-range tick, we free on the last tick instead.
        add(min(last + 1, n - 1), L.MMAP_FREE, v)
    keep = frozenset({L.MMAP_FREE}) if keep_frees else frozenset()
    return _assemble(cmds, _ORDER_LOOKBACK, drop_ticks=frozenset(W), keep_on_dropped=keep)


def _min_peak(prog: _Program, lookahead: int) -> list[MmapRecord]:
    n, W = prog.n, prog.weights
    cmds: dict[int, set] = {}
    add = lambda t, a, v: cmds.setdefault(t, set()).add((a, v))   # noqa: E731
    if lookahead > 0:
        for p in sorted(W):
            if p > 0:
                add(max(0, p - lookahead), L.MMAP_PRELOAD, p)

    def free_after(v: int, last: int) -> None:
        # The final instruction has no tick after it; freeing there is a same-tick race, the
        # least bad option (only reachable when the stream does not end with <OUTPUT>).
        add(last + 1 if last + 1 < n else n - 1, L.MMAP_FREE, v)

    next_work = prog.next_work()
    for v in range(n):
        users = prog.users.get(v, [])
        if prog.is_output_op[v]:
            continue
        if v in prog.outputs:
            # Kept to the end, so never FREEd; but a later instruction reading it needs it in
            # shared memory like any value with several consumers (<OUTPUT> is one of them).
            if v not in W and not prog.is_input[v] and any(not prog.is_output_op[u] for u in users):
                add(v, L.MMAP_SAVE_RESULT, v)
            continue
        if v in W:
            if users:
                free_after(v, users[-1])
            elif v + 1 < n:
                add(v + 1, L.MMAP_FREE, v)
            continue
        if prog.is_input[v]:
            if users and prog.variant[v] != 2:
                free_after(v, users[-1])
            continue
        if not users:
            continue
        u = users[0]
        if len(users) == 1 and u == next_work[v]:
            add(v, L.MMAP_FORWARD, u)
        else:
            add(v, L.MMAP_SAVE_RESULT, v)
            free_after(v, users[-1])
    return _assemble(cmds, _ORDER_HEAD)


# --------------------------------------------------------------------------- entry point
def plan_mmap(nac: NacFile, value_nbytes: Mapping[int, int], *, mode: str = "min-peak",
              preload_lookahead: int = 2, weights: Optional[Iterable[int]] = None) -> MmapPlan:
    """Plan the MMAP schedule of ``nac``'s instruction stream (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown MMAP mode {mode!r} (known: {', '.join(MODES)})")
    if preload_lookahead < 0:
        raise ValueError(f"preload_lookahead must be >= 0, not {preload_lookahead}")
    prog = _Program(nac, weights)
    if prog.n == 0:
        return MmapPlan([], [], 0, 0, mode, preload_lookahead)
    if mode == "reference":
        records, order = _reference_head(prog), _ORDER_HEAD
    elif mode == "reference-lookback":
        records, order = _reference_lookback(prog), _ORDER_LOOKBACK
    else:
        records, order = _min_peak(prog, preload_lookahead), _ORDER_HEAD
    records = _fit_command_counts(records, prog.n, order)
    live = resident_bytes(nac, records, value_nbytes, weights=prog.weights)
    peak_tick = int(np.argmax(live)) if live else 0
    stats: dict[str, int] = {}
    for r in records:
        for c in r.commands:
            stats[c.name] = stats.get(c.name, 0) + 1
    return MmapPlan(records, live, live[peak_tick] if live else 0, peak_tick, mode,
                    preload_lookahead if mode == "min-peak" else 0, stats)


__all__ = ["MmapPlan", "MODES", "plan_mmap", "resident_bytes"]
