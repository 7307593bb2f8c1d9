"""What a simulation returns: per-instruction records, DMA transfers, SRAM occupancy, totals.

Plain dataclasses; :meth:`SimResult.to_json` is what ``nac sim --json`` prints (the keys the
issue lists first, more after), :meth:`SimResult.to_csv` the per-instruction table.

Stall causes (``stall_breakdown`` keys, cycles):

* ``preload_late`` — the operand's PRELOAD was issued too late for its transfer to finish;
* ``dma_busy`` — the transfer waited for a DMA engine or the DRAM channel (queueing);
* ``on_demand`` — an ``<INPUT>`` with no PRELOAD was fetched when the core reached it;
* ``sram_full`` — the value had been spilled (it did not fit in SRAM) and is read back.

``stall_cause`` is a readable line naming the largest part and the value (``vN``) involved.
"""
from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

STALL_KINDS = ("preload_late", "dma_busy", "on_demand", "sram_full")


@dataclass
class InstrRecord:
    tick: int
    op: str
    kind: str                 # op | input | param | state | lifted | output | subreturn | control | skipped
    unit: str                 # core | systolic | vector | sfu | mover
    op_class: str
    issue_cycle: int          # the core reaches this tick; its MMAP commands issue
    start_cycle: int          # operands ready, work begins
    end_cycle: int
    compute_cycles: int
    stall_cycles: int
    stall_cause: Optional[str] = None
    stall_target: Optional[int] = None
    stall_breakdown: dict = field(default_factory=dict)
    dispatch_cycles: int = 0
    macs: int = 0
    out_bytes: int = 0
    sram_read_bytes: int = 0
    sram_write_bytes: int = 0
    route: str = ""           # saved | forwarded | output | kept | discarded | spilled | loaded | preloaded | streamed
    detail: dict = field(default_factory=dict)


@dataclass
class Transfer:
    id: int
    kind: str                 # preload | on_demand | spill_read | spill_write | writeback
    value: int                # the tick whose value moves
    tick: int                 # the tick that issued it
    engine: int
    issue_cycle: int
    start_cycle: int          # an engine took it
    end_cycle: int
    bytes: int
    src: str                  # dram | sram | core
    dst: str
    queue_cycles: int = 0     # end − (issue + latency + bytes/bandwidth): waiting on busy DMA/DRAM


@dataclass
class SimResult:
    program: str
    hardware: str
    mode: str                                 # event | refcore
    clock_hz: float
    total_cycles: int
    instructions: list
    transfers: list
    sram_cycles: list                         # occupancy step series: bytes from sram_cycles[i] on
    sram_bytes: list
    sram_capacity: int
    peak_sram_bytes: int
    dram_read_bytes: int
    dram_write_bytes: int
    dram_bytes_by_kind: dict
    utilization: dict                         # unit -> busy fraction of total_cycles
    busy_cycles: dict
    stall_cycles_by_cause: dict
    core_cycles: int = 0                      # when the last instruction ends
    drain_cycles: int = 0                     # DMA still running after it
    macs: int = 0
    spills: list = field(default_factory=list)
    unknown_ops: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    shape_source: str = "meta"
    refcore: Optional[dict] = None
    buffers: list = field(default_factory=list)   # SRAM buffers: dicts value, bytes, alloc, free, kind

    @property
    def time_s(self) -> float:
        return self.total_cycles / self.clock_hz

    @property
    def stall_cycles(self) -> int:
        return sum(r.stall_cycles for r in self.instructions)

    def cycles_by_tick(self) -> dict[int, int]:
        """tick -> cycles from issue to end, for every instruction that ran (not skipped)."""
        return {r.tick: r.end_cycle - r.issue_cycle for r in self.instructions if r.kind != "skipped"}

    def to_json(self) -> dict:
        """The ``--json`` document: the issue's keys first, then everything else."""
        return {
            "total_cycles": self.total_cycles,
            "instructions": [{"tick": r.tick, "op": r.op, "start_cycle": r.start_cycle,
                              "end_cycle": r.end_cycle, "compute_cycles": r.compute_cycles,
                              "stall_cycles": r.stall_cycles, "stall_cause": r.stall_cause,
                              "unit": r.unit, "kind": r.kind, "issue_cycle": r.issue_cycle,
                              "stall_breakdown": r.stall_breakdown, "stall_target": r.stall_target,
                              "macs": r.macs, "out_bytes": r.out_bytes, "route": r.route,
                              "sram_read_bytes": r.sram_read_bytes, "sram_write_bytes": r.sram_write_bytes,
                              "op_class": r.op_class, "detail": _plain(r.detail)}
                             for r in self.instructions],
            "dram_read_bytes": self.dram_read_bytes,
            "dram_write_bytes": self.dram_write_bytes,
            "peak_sram_bytes": self.peak_sram_bytes,
            "utilization": self.utilization,
            "program": self.program,
            "hardware": self.hardware,
            "mode": self.mode,
            "clock_hz": self.clock_hz,
            "time_s": self.time_s,
            "core_cycles": self.core_cycles,
            "drain_cycles": self.drain_cycles,
            "macs": self.macs,
            "dram_bytes_by_kind": self.dram_bytes_by_kind,
            "busy_cycles": self.busy_cycles,
            "stall_cycles_by_cause": self.stall_cycles_by_cause,
            "sram_capacity": self.sram_capacity,
            "sram_occupancy": {"cycles": list(self.sram_cycles), "bytes": list(self.sram_bytes)},
            "transfers": [asdict(t) for t in self.transfers],
            "spills": self.spills,
            "unknown_ops": self.unknown_ops,
            "warnings": self.warnings,
            "shape_source": self.shape_source,
            "refcore": _plain(self.refcore),
        }

    def to_data(self) -> dict:
        """Every field as plain data (:meth:`from_data` gives the same result back): how a
        result crosses from the Studio's engine host to its window."""
        return _plain(asdict(self))

    @classmethod
    def from_data(cls, d: dict) -> "SimResult":
        d = dict(d)
        d["instructions"] = [InstrRecord(**r) for r in d.get("instructions") or []]
        d["transfers"] = [Transfer(**t) for t in d.get("transfers") or []]
        return cls(**d)

    CSV_COLUMNS = ("tick", "op", "kind", "unit", "op_class", "issue_cycle", "start_cycle", "end_cycle",
                   "compute_cycles", "stall_cycles", "stall_cause", "dispatch_cycles", "macs",
                   "out_bytes", "sram_read_bytes", "sram_write_bytes", "route")

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.CSV_COLUMNS + tuple(f"stall_{k}" for k in STALL_KINDS))
        for r in self.instructions:
            w.writerow([getattr(r, c) if getattr(r, c) is not None else "" for c in self.CSV_COLUMNS]
                       + [r.stall_breakdown.get(k, 0) for k in STALL_KINDS])
        return buf.getvalue()

    def summary(self) -> str:
        lines = [f"{self.program} on {self.hardware} ({self.mode}): {self.total_cycles:,} cycles "
                 f"= {self.time_s * 1e6:,.3f} µs at {self.clock_hz / 1e6:g} MHz",
                 f"  core {self.core_cycles:,} cycles, DMA drain {self.drain_cycles:,}; "
                 f"stalls {self.stall_cycles:,} (" + ", ".join(
                     f"{k} {v:,}" for k, v in self.stall_cycles_by_cause.items() if v) + ")",
                 f"  DRAM read {self.dram_read_bytes:,} B, write {self.dram_write_bytes:,} B (" + ", ".join(
                     f"{k} {v:,}" for k, v in self.dram_bytes_by_kind.items() if v) + ")",
                 f"  SRAM peak {self.peak_sram_bytes:,} of {self.sram_capacity:,} B; "
                 f"{len(self.spills)} spill(s)",
                 "  utilisation " + ", ".join(f"{k} {v:.1%}" for k, v in self.utilization.items())]
        if self.unknown_ops:
            lines.append("  costed by a fallback (no cost model: one element-wise pass each): " + ", ".join(
                f"{k} ×{v}" for k, v in sorted(self.unknown_ops.items())))
        for w in self.warnings[:20]:
            lines.append(f"  warning: {w}")
        if len(self.warnings) > 20:
            lines.append(f"  ... {len(self.warnings) - 20} more warning(s)")
        return "\n".join(lines)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)
