"""Compare the document's hardware run with a second ``.nac`` simulated on the same configuration.

Two files are matched instruction by instruction: by tick when both programs have the same number
of instructions (two compiles of one model, a quantised variant), otherwise by the op sequence
(``difflib`` over the op names of the compute instructions: the longest common runs pair up, the
rest are left unmatched). The comparison says which it used. The second file is simulated on the
inputs of the first when both take the same number of inputs (same model: a fair comparison),
else on its own input signature.

Qt-free: the engine host simulates the other file (``nac/simulateFile``); :func:`comparison_from_host` matches it and the Hardware pane draws
:class:`FileComparison` (per-instruction Δ cycles, totals side by side).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class FileComparison:
    path: str                      # the other file
    run: Any                       # simulation_state.SimRun of the other file
    mode: str                      # "tick" | "op sequence"
    pairs: list = field(default_factory=list)    # (tick in this file, tick in the other)
    inputs: str = ""               # where the other file's inputs came from
    against: Any = None            # the SimRun of this file it was matched against

    @property
    def name(self) -> str:
        return Path(self.path).name

    def other_cycles(self) -> dict[int, int]:
        """This file's tick -> cycles of the matched instruction in the other file."""
        by_tick = {r.tick: r.end_cycle - r.issue_cycle for r in self.run.result.instructions}
        return {a: by_tick[b] for a, b in self.pairs if b in by_tick}

    def describe(self) -> str:
        how = "by tick (same length)" if self.mode == "tick" else "by op sequence (the lengths differ)"
        return f"{self.name}: {len(self.pairs)} instructions matched {how}"


def match_instructions(records_a: list, records_b: list, count_a: int, count_b: int) -> tuple[str, list]:
    """``(mode, [(tick_a, tick_b), ...])`` for two runs' instruction records; ``count_*`` are the
    programs' instruction counts (equal: matched by tick)."""
    a = [r for r in records_a if r.kind != "skipped"]
    b = [r for r in records_b if r.kind != "skipped"]
    if count_a == count_b:
        ticks_b = {r.tick for r in b}
        return "tick", [(r.tick, r.tick) for r in a if r.tick in ticks_b]
    ops_a = [r for r in a if r.kind == "op"]
    ops_b = [r for r in b if r.kind == "op"]
    sm = difflib.SequenceMatcher(None, [r.op for r in ops_a], [r.op for r in ops_b], autojunk=False)
    pairs = []
    for blk in sm.get_matching_blocks():
        pairs += [(ops_a[blk.a + k].tick, ops_b[blk.b + k].tick) for k in range(blk.size)]
    return "op sequence", pairs


def comparison_from_host(path: str, body: dict, this_run: Any, label: str, this_count: int) -> FileComparison:
    """The engine host's ``nac/simulateFile`` answer for ``path``, matched against this run."""
    from nac_engine.sim.result import SimResult

    from .simulation_state import SimRun
    res = SimResult.from_data(body["result"])
    run = SimRun(f"{Path(path).name} on {label}", this_run.hardware, dict(this_run.overrides), res,
                 float(body["seconds"]))
    mode, pairs = match_instructions(this_run.result.instructions, res.instructions, this_count, int(body["count"]))
    return FileComparison(str(path), run, mode, pairs, body.get("inputs", ""))


def totals_side_by_side_html(name_a: str, run_a, cmp: FileComparison) -> str:
    """Both files' totals in two columns with the difference."""
    a, b = run_a.result, cmp.run.result

    def row(label, va, vb, fmt="{:,}"):
        d = "" if not isinstance(va, (int, float)) else \
            (f"{va - vb:+,}" if isinstance(va, int) and isinstance(vb, int) else f"{va - vb:+.1%}")
        return (f"<tr><td>{label}</td><td align=right>{fmt.format(va)}</td><td align=right>{fmt.format(vb)}</td>"
                f"<td align=right style='color:#888'>{d}</td></tr>")
    rows = [row("Total cycles", a.total_cycles, b.total_cycles),
            row("MACs", a.macs, b.macs),
            row("DRAM → SRAM B", a.dram_read_bytes, b.dram_read_bytes),
            row("SRAM → DRAM B", a.dram_write_bytes, b.dram_write_bytes),
            row("SRAM peak B", a.peak_sram_bytes, b.peak_sram_bytes),
            row("Stall cycles", a.stall_cycles, b.stall_cycles)]
    for unit in sorted(set(a.utilization) | set(b.utilization)):
        rows.append(row(f"Utilisation {unit}", a.utilization.get(unit, 0.0), b.utilization.get(unit, 0.0),
                        "{:.1%}"))
    head = (f"<tr><th></th><th align=right>{name_a}</th><th align=right>{cmp.name}</th>"
            f"<th align=right>Δ</th></tr>")
    return (f"<p>{cmp.describe()}; inputs: {cmp.inputs}; configuration {cmp.run.label.split(' on ', 1)[-1]}</p>"
            f"<table cellspacing=0 cellpadding=3>{head}{''.join(rows)}</table>")


__all__ = ["FileComparison", "match_instructions", "comparison_from_host", "totals_side_by_side_html"]
