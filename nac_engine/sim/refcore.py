"""Reference-core mode: the upstream NAC-Core RTL's orchestration and MMAP-engine timing.

Formulas from the research note ``upstream_hardware.md`` §3–§4 (measured on the RTL, and
reproduced here cycle for cycle on its scenario table, tests/sim/test_refcore.py). Cycle
convention: "event at cycle N" means a synchronous observer sees it at edge N; edge 0
samples the run command.

ORCH (cached run; the instruction cache replays decoded instructions)
    first fetch ``f₀ = 2``; ``<INPUT>``: commit at ``f + 4 + ILAT``; regular op (A ≥ 10, any
    class): commit at ``f + 3 + KLAT``; the next fetch is ``commit + 1``; ``<OUTPUT B=0>``:
    commit at ``f + 2``, ORCH done at ``f + 3``.
ORCH (legacy streaming ``start``)
    fetch ``fᵢ = max(fᵢ₋₁ + bytesᵢ + [Aᵢ ≥ 10] + 2, commitᵢ₋₁ + 1)`` (``f₋₁ = 0``, first
    ``commit + 1`` = 2), everything else as cached. ``bytesᵢ`` is the RTL's parse length
    (its ``<OUTPUT B=0>`` reads ``C[0]`` C entries and ``C[0] − 1`` D entries).
Load (``cmd_load_model``)
    ``1 + Σ (bytesᵢ + 2 + [Aᵢ ≥ 10])``.
MMAP engine
    Ticks are drained in order; tick *t*'s scan starts at ``max(previous scan end, commitₜ + 1)``
    and visits its S slots one per cycle. A slot holding a command raises ``valid`` the cycle
    after it is visited; the command is accepted when ``ready`` comes (``valid + latency``)
    and the next slot is visited the cycle after the accept. Commands sit in the slots in
    file order. The engine is idle the cycle after the last slot of the last tick.
Done
    ``max(ORCH done + 1, MMAP engine idle)``. MMAP never stalls the core.
Watchdog (``refcore.watchdog_cycles``, 1000 in the TINY profile)
    Handshakes are instruction fetches and commits, kernel start/done, ORCH done and MMAP
    accepts (scanning empty slots is none). A run that goes longer than the limit without one
    before it is done is :class:`RefcoreWatchdog` at ``last handshake + limit`` (RTL C7: P1 with
    S = 256 and no MMAP times out at 1045; the reset also wipes the cached model).
Op table (``refcore.op_table = "cmap"``)
    ORCH executes the hard-wired standard ids (§3.4: 10–14, 16–18, 20, 22) and the ids the
    op table holds (the file's CMAP); any other op id is :class:`RefcoreOrchError` at
    ``fetch + 2`` (RTL C12: ``nac.div``, id 21, without an entry errors at 10).

Memory semantics (``refcore.memory_semantics``): ``accept`` applies each command's effect at
its accept cycle, as the RTL does, and reports the hazards that follow (a FORWARD accepted
after its consumer committed overwrites the consumer's descriptor; a FREE accepted before a
reader's kernel start; a PRELOAD whose data lands after its reader's kernel start). ``tick``
applies effects at the tick's commit, as the spec describes; the timing is the same (the RTL
never waits for MMAP), so the done cycle is the same, and there are no accept-time hazards.

Derived (not measured) parts, labelled so in the result: kernel latencies from op shapes
(``refcore.klat = "derived"``: matmul ``K + 3·DIM − 2`` per DIM×DIM tile, or ``M·N·⌈K/L⌉ + 3``
on the 1-D MAC when DIM = 0; element-wise ``⌈N/L⌉ + 3``; softmax and layer-norm passes with
SFU round trips, §5.4), and MMAP ready latencies from the DMA manager model
(``refcore.latency.* = "dma"``: one command at a time; PRELOAD miss busy
``request + DRAM latency + ⌈bytes/bandwidth⌉ + 1 + ready`` cycles, others ``command_cycles``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil
from typing import Optional

from ..format.model import Instruction, NacFile
from ..isa.optable import OP_INPUT, OP_OUTPUT
from .config import HardwareConfig
from .costs import INTERPOLATION_TAPS, _elements_in, _elements_out, _rows, base_name, gemms, op_class, \
    recurrent_layers
from .result import InstrRecord, SimResult, Transfer
from ..runtime.shapes import MMAP_FORWARD, MMAP_FREE, MMAP_PRELOAD, MMAP_SAVE_RESULT, Program

ACTION_KEYS = {MMAP_PRELOAD: "preload", MMAP_SAVE_RESULT: "save_result", MMAP_FORWARD: "forward",
               MMAP_FREE: "free"}


class RefcoreError(ValueError):
    """The program cannot run on the reference core as modelled."""


class RefcoreRunError(RefcoreError):
    """The core itself reports an error during the run; ``cycle`` is when (RTL cycles)."""

    def __init__(self, message: str, cycle: int, tick: Optional[int] = None):
        super().__init__(message)
        self.cycle = cycle
        self.tick = tick


class RefcoreOrchError(RefcoreRunError):
    """ORCH fetched an op id that is neither hard-wired nor in the op table (RTL C12)."""


class RefcoreWatchdog(RefcoreRunError):
    """No handshake for longer than the watchdog limit (RTL C7): the core resets."""


# Standard op ids nac_op_dispatch decodes itself (§3.4); every other id needs an op-table entry.
HARDWIRED_OPS = frozenset({10, 11, 12, 13, 14, 16, 17, 18, 20, 22})


@dataclass
class MmapAccept:
    tick: int
    slot: int
    action: str
    target: int
    valid_cycle: int
    accept_cycle: int


@dataclass
class RefcoreTimeline:
    fetch: list
    commit: list
    klat: list
    orch_done: int
    mmap_idle: int
    done: int
    load_cycles: int
    accepts: list = field(default_factory=list)
    hazards: list = field(default_factory=list)
    dma: list = field(default_factory=list)      # (tick, target, accept, request, data_done, ready)


def rtl_instruction_bytes(ins: Instruction) -> int:
    """Bytes the RTL decoder consumes for ``ins`` (§3.1)."""
    if ins.a == OP_OUTPUT and ins.b == 0:
        n = ins.c[0] if ins.c else 0
        return 2 + 2 * max(n, 0) + 2 * max(n - 1, 0)
    if ins.a == OP_INPUT:
        return 2 + (4 if 1 <= ins.b <= 5 else 0)
    return ins.nbytes


def load_cycles(instrs: list) -> int:
    return 1 + sum(rtl_instruction_bytes(x) + 2 + (1 if x.a >= 10 else 0) for x in instrs)


def orch_timeline(instrs: list, klat: list, ilat: int, legacy: bool,
                  op_table: Optional[set] = None, names: Optional[dict] = None) -> tuple[list, list, int]:
    """Fetch and commit cycle of every instruction, and the ORCH done cycle. ``op_table``: the
    regular op ids ORCH can execute (None: all); another is RefcoreOrchError at fetch + 2."""
    fetch, commit = [], []
    h_prev, ready = 0, 2
    orch_done = None
    for x, k in zip(instrs, klat):
        f = max(h_prev + rtl_instruction_bytes(x) + (1 if x.a >= 10 else 0) + 2, ready) if legacy else ready
        if x.a == OP_INPUT:
            c = f + 4 + ilat
        elif x.a >= 10 and op_table is not None and x.a not in op_table:
            name = (names or {}).get(x.a, "")
            raise RefcoreOrchError(f"instruction {x.index}: op id {x.a}{f' ({name})' if name else ''} is "
                                   f"neither hard-wired in the core nor in its op table (the file's CMAP): "
                                   f"ORCH error at cycle {f + 2} (fetched at {f}; RTL scenario C12; "
                                   f"--set refcore.op_table=any times the run anyway)",
                                   f + 2, x.index)
        elif x.a >= 10:
            c = f + 3 + k
        elif x.a == OP_OUTPUT and x.b == 0:
            c = f + 2
            orch_done = f + 3
        else:
            raise RefcoreError(f"instruction {x.index}: A={x.a} B={x.b} is not modelled in reference-core "
                               f"mode (INPUT, regular ops and OUTPUT B=0 are)")
        fetch.append(f)
        commit.append(c)
        h_prev, ready = f, c + 1
        if orch_done is not None:
            break
    if orch_done is None:
        raise RefcoreError("the program has no <OUTPUT B=0>: the reference core never finishes")
    return fetch, commit, orch_done


def mmap_drain(commit: list, slots: dict, S: int, accept_at) -> tuple[int, list]:
    """Scan every tick's S slots after its commit; ``accept_at(tick, slot, action, target,
    valid_cycle)`` returns the accept cycle. Returns (idle cycle, accepts)."""
    cur = None
    accepts = []
    for t, c in enumerate(commit):
        cmds = slots.get(t, ())
        if len(cmds) > S:
            raise RefcoreError(f"tick {t} has {len(cmds)} MMAP commands; the engine holds {S} per tick")
        cur = c + 1 if cur is None else max(cur, c + 1)
        for k, (action, target) in enumerate(cmds):
            valid = cur + 1
            acc = accept_at(t, k, action, target, valid)
            accepts.append(MmapAccept(t, k, ACTION_KEYS.get(action, str(action)), target, valid, acc))
            cur = acc + 1
        cur += S - len(cmds)
    return cur, accepts


def check_watchdog(instrs: list, fetch: list, commit: list, klat: list, orch_done: int, accepts: list,
                   done: int, limit: int, derived: bool = False) -> None:
    """RefcoreWatchdog when the run goes longer than ``limit`` cycles without a handshake
    before ``done`` (see the module docstring for what counts)."""
    events = [0, orch_done] + list(fetch) + list(commit) + [a.accept_cycle for a in accepts]
    for x, f, k in zip(instrs, fetch, klat):
        if x.a >= 10:
            events += [f + 1, f + 1 + k]          # kernel_start seen, kernel_done seen
    kernels = {f + 1: (x.index, k) for x, f, k in zip(instrs, fetch, klat) if x.a >= 10}
    last = 0
    for e in sorted(set(events)) + [done]:
        if e > done:
            break
        if e - last > limit:
            running = [(i, k) for start, (i, k) in kernels.items() if start <= last < start + k]
            if running:
                what = (f"instruction {running[0][0]}'s kernel ({running[0][1]} cycles"
                        f"{', a derived latency' if derived else ''}) ran")
            else:
                what = "the MMAP engine scanned" if last >= orch_done else "the run went on"
            raise RefcoreWatchdog(f"watchdog timeout at cycle {last + limit}: no handshake since cycle {last} "
                                  f"for more than refcore.watchdog_cycles={limit} while {what} "
                                  f"(done would be {done}); the core resets, which also wipes the cached "
                                  f"model (RTL scenario C7; --set refcore.watchdog_cycles=0 times the run "
                                  f"without it)", last + limit)
        last = max(last, e)


# --------------------------------------------------------------------------- derived costs
def derived_klat(info, hw: HardwareConfig) -> int:
    """Kernel latency of one regular instruction from its shapes (§5.4; derived, not measured)."""
    rc = hw.refcore
    L, D, R = rc.lanes, rc.systolic_dim, rc.sfu_round_trip
    cls = op_class(info.op)
    n_out = max(_elements_out(info), 1)
    n_in = max(_elements_in(info), 1)

    def gemm_klat(g) -> int:
        if D > 0:
            return g.batch * ceil(g.m / D) * ceil(g.n / D) * (g.k + 3 * D - 2)
        return g.batch * g.m * g.n * ceil(g.k / L) + 3

    rec = recurrent_layers(info) if cls == "recurrent" else None
    if cls == "gemm":
        k = sum(gemm_klat(g) for g in gemms(info))
    elif rec is not None:               # projection, then each step's GEMM, gates and activations
        T, layers = rec
        k = sum(gemm_klat(lay.projection) + T * (gemm_klat(lay.step) + ceil(lay.step_vector_elements / L) + 3
                                                  + ceil(lay.step_sfu_elements / L) * (R + 2))
                for lay in layers)
    elif cls == "interpolation":
        k = INTERPOLATION_TAPS[base_name(info.op)] * ceil(n_out / L) + 3
    elif cls in ("elementwise", "compare", "copy", "unknown", "reduction", "reduction2", "recurrent"):
        k = ceil(max(n_in, n_out) / L) * (2 if cls == "reduction2" else 1) + 3
    elif cls == "sfu":
        k = ceil(n_out / L) * (R + 2) + 3
    elif cls == "softmax":
        v = ceil(n_in / L)
        k = 4 * v + v * (R + 2) + 5 * 3
    elif cls in ("norm", "batchnorm"):
        v = ceil(n_in / L)
        k = 5 * v + _rows(info) * (R + 2) + 5 * 3
    else:                               # alias: the datapath still handshakes
        k = 0
    return max(rc.klat_min, k)


# --------------------------------------------------------------------------- the run
def run_refcore(nac: NacFile, hw: HardwareConfig, prog: Optional[Program] = None) -> SimResult:
    """Simulate ``nac`` on the reference core. ``prog`` (shapes) is needed only when a cost is
    derived (``klat = "derived"`` or a ``"dma"`` latency)."""
    rc = hw.refcore
    instrs = nac.instructions
    if len(instrs) > (1 << rc.idx_width):
        raise RefcoreError(f"{len(instrs)} instructions; the core indexes {1 << rc.idx_width} "
                           f"(refcore.idx_width = {rc.idx_width}); simulate a core with a wider index: "
                           f"--set refcore.idx_width={max(rc.idx_width + 1, (len(instrs) - 1).bit_length())}")
    needs_shapes = rc.klat == "derived" or "dma" in rc.latency.values()
    if needs_shapes and prog is None:
        raise RefcoreError("derived kernel or DMA latencies need the program's shapes")
    infos = prog.instructions if prog is not None else None
    klat = [(derived_klat(infos[x.index], hw) if rc.klat == "derived" else rc.klat) if x.a >= 10 else 0
            for x in instrs]
    op_table = None
    if rc.op_table == "cmap":
        op_table = set(HARDWIRED_OPS) | set(nac.cmap)
    fetch, commit, orch_done = orch_timeline(instrs, klat, rc.ilat, rc.run_mode == "legacy", op_table,
                                             {a: nac.op_name(a) for a in {x.a for x in instrs if x.a >= 10}})
    slots: dict[int, list] = {}
    for rec in nac.mmap:
        slots.setdefault(rec.tick, []).extend((c.action, c.target) for c in rec.commands)
    executed = len(commit)
    for t in list(slots):
        if t >= executed:
            del slots[t]           # never committed: the engine never reaches it
    nbytes = _value_bytes(infos, hw) if infos is not None else None
    manager = {"ready": 0}
    loaded: set = set()
    dma_log: list = []

    def accept_at(tick, slot, action, target, valid):
        lat = rc.latency.get(ACTION_KEYS.get(action, ""), 0)
        if lat != "dma":
            return valid + lat
        acc = max(valid, manager["ready"])
        if action == MMAP_PRELOAD and target not in loaded:
            b = nbytes[target] if nbytes is not None and 0 <= target < len(nbytes) else 0
            request = acc + rc.dma_request_cycles
            data_done = request + hw.dram.latency + ceil(b / hw.dram.bytes_per_cycle) + 1
            manager["ready"] = data_done + rc.dma_ready_cycles
            loaded.add(target)
            dma_log.append((tick, target, acc, request, data_done, manager["ready"], b))
        else:
            if action == MMAP_FREE:
                loaded.discard(target)
            manager["ready"] = acc + rc.command_cycles
        return acc

    idle, accepts = mmap_drain(commit, slots, rc.slots_per_tick, accept_at)
    done = max(orch_done + 1, idle)
    if rc.watchdog_cycles:
        check_watchdog(instrs, fetch, commit, klat, orch_done, accepts, done, rc.watchdog_cycles,
                       rc.klat == "derived")
    tl = RefcoreTimeline(fetch, commit, klat[:executed], orch_done, idle, done, load_cycles(instrs),
                         accepts, [], dma_log)
    if rc.memory_semantics == "accept":
        tl.hazards = _accept_hazards(nac, tl)
    return _to_result(nac, hw, prog, tl, nbytes)


def _value_bytes(infos: list, hw: HardwareConfig) -> list:
    out = []
    for x in infos:
        if x.kind == "param" and x.stored is not None:
            out.append(x.stored.numel * hw.element_bytes(x.stored.dtype))
        else:
            out.append(sum(t.numel * hw.element_bytes(t.dtype) for t in x.outputs))
    return out


def _accept_hazards(nac: NacFile, tl: RefcoreTimeline) -> list:
    """What goes wrong when MMAP effects land at their accept cycle (the RTL's behaviour)."""
    n = len(tl.commit)
    du = nac.def_use()     # readers past the last committed tick are filtered below (u < n)
    data_ready = {d[1]: d[4] for d in tl.dma}
    out = []
    for a in tl.accepts:
        if a.action == "forward" and a.target < n and a.accept_cycle >= tl.commit[a.target]:
            out.append({"kind": "forward_overwrite", "tick": a.tick, "target": a.target,
                        "cycle": a.accept_cycle,
                        "message": f"FORWARD v{a.tick}→v{a.target} accepted at {a.accept_cycle}, after v{a.target} "
                                   f"committed at {tl.commit[a.target]}: descriptor {a.target} now holds "
                                   f"v{a.tick}'s"})
        elif a.action == "free":
            late = [u for u in du.users(a.target) if u < n and tl.fetch[u] + 1 >= a.accept_cycle
                    and u != a.tick]
            if late:
                out.append({"kind": "read_after_free", "tick": a.tick, "target": a.target,
                            "cycle": a.accept_cycle,
                            "message": f"FREE v{a.target} accepted at {a.accept_cycle} before v{late[0]} "
                                       f"reads it (kernel start {tl.fetch[late[0]] + 1})"})
        elif a.action == "preload":
            ready = data_ready.get(a.target, a.accept_cycle)
            users = [u for u in du.users(a.target) if u < n]
            first = min(users) if users else None
            if first is not None and tl.fetch[first] + 1 < ready:
                out.append({"kind": "preload_late", "tick": a.tick, "target": a.target, "cycle": ready,
                            "message": f"PRELOAD v{a.target} lands at {ready}, after v{first}'s kernel "
                                       f"start {tl.fetch[first] + 1} (no scoreboard: the kernel reads "
                                       f"it anyway)"})
    return out


def _to_result(nac: NacFile, hw: HardwareConfig, prog: Optional[Program], tl: RefcoreTimeline,
               nbytes: Optional[list]) -> SimResult:
    rc = hw.refcore
    records = []
    busy = {"core": 0, "systolic": 0, "vector": 0, "sfu": 0, "mover": 0}
    infos = prog.instructions if prog is not None else None
    for x, f, c, k in zip(nac.instructions, tl.fetch, tl.commit, tl.klat):
        name = nac.instruction_name(x)
        if x.a >= 10:
            cls = op_class(name)
            unit = "systolic" if cls in ("gemm", "recurrent") and rc.systolic_dim > 0 else "vector"
            busy[unit] += k
            kind, compute = "op", k
            detail = {"klat": k, "klat_source": "derived" if rc.klat == "derived" else "given",
                      "kernel_start": f + 1}
        else:
            cls, unit, detail = ("load" if x.a == OP_INPUT else "output"), "core", {}
            compute = rc.ilat if x.a == OP_INPUT else 0
            kind = "input" if x.a == OP_INPUT else "output"
            if infos is not None:
                kind = infos[x.index].kind
        # fetch to commit; what is not kernel (or input-provider) time is ORCH overhead
        records.append(InstrRecord(x.index, name, kind, unit, cls, f, f, c, compute, 0,
                                   dispatch_cycles=c - f - compute,
                                   out_bytes=nbytes[x.index] if nbytes else 0, detail=detail))
    transfers = []
    for n_, (tick, target, acc, request, data_done, ready, b) in enumerate(tl.dma):
        transfers.append(Transfer(n_, "preload", target, tick, 0, acc, request, data_done, b, "dram", "sram",
                                  0))
    # SRAM occupancy from the commands' effects (accept cycle, or the tick's commit)
    events = []
    live: dict[int, int] = {}
    for a in tl.accepts:
        at = a.accept_cycle if rc.memory_semantics == "accept" else tl.commit[a.tick]
        b = nbytes[a.target] if nbytes is not None and 0 <= a.target < len(nbytes) else 0
        if a.action in ("preload", "save_result") and a.target not in live:
            live[a.target] = b
            events.append((at, b))
        elif a.action == "free" and a.target in live:
            events.append((at, -live.pop(a.target)))
    events.sort(key=lambda e: e[0])
    cycles, series, cur, peak = [0], [0], 0, 0
    for at, d in events:
        cur += d
        peak = max(peak, cur)
        if cycles[-1] == at:
            series[-1] = cur
        else:
            cycles.append(at)
            series.append(cur)
    total = tl.done
    util = {k: (v / total if total else 0.0) for k, v in busy.items()}
    reads = sum(t.bytes for t in transfers)
    refinfo = {"fetch": tl.fetch, "commit": tl.commit, "klat": tl.klat, "orch_done": tl.orch_done,
               "mmap_idle": tl.mmap_idle, "done": tl.done, "load_cycles": tl.load_cycles,
               "memory_semantics": rc.memory_semantics, "run_mode": rc.run_mode,
               "slots_per_tick": rc.slots_per_tick,
               "accepts": [a.__dict__ for a in tl.accepts], "hazards": tl.hazards,
               "derived": ([] if rc.klat != "derived" else ["kernel latencies"])
               + [f"{a} ready latency" for a, v in rc.latency.items() if v == "dma"]}
    return SimResult(
        program=prog.name if prog is not None else (nac.path or "program"), hardware=hw.name,
        mode="refcore", clock_hz=hw.clock_hz, total_cycles=total, instructions=records,
        transfers=transfers, sram_cycles=cycles, sram_bytes=series, sram_capacity=hw.sram.bytes,
        peak_sram_bytes=peak, dram_read_bytes=reads, dram_write_bytes=0,
        dram_bytes_by_kind={"preload": reads, "on_demand": 0, "spill_read": 0, "spill_write": 0,
                            "writeback": 0},
        utilization=util, busy_cycles=busy,
        stall_cycles_by_cause={"preload_late": 0, "dma_busy": 0, "on_demand": 0, "sram_full": 0},
        core_cycles=tl.orch_done, drain_cycles=total - tl.orch_done,
        warnings=[h["message"] for h in tl.hazards] + (prog.notes if prog is not None else []),
        shape_source=prog.shape_source if prog is not None else "none", refcore=refinfo)


__all__ = ["run_refcore", "orch_timeline", "mmap_drain", "load_cycles", "rtl_instruction_bytes",
           "derived_klat", "check_watchdog", "RefcoreError", "RefcoreRunError", "RefcoreOrchError",
           "RefcoreWatchdog", "RefcoreTimeline", "HARDWIRED_OPS"]
