"""Qt-free stepping state of a TVMR program in the Studio (``tvmr_session_of(doc)``, one per document).

Wraps the engine's :class:`~nac_engine.peers.tvmr.interp.TvmrMachine`. The machine only runs
forward; it records every register write by tick, so stepping back is moving a *position* (how
many steps are shown) over the recorded steps and asking ``registers_at(position)`` — the same
instruction sequence replays from the record when stepping forward again, and the machine runs on
only past the end of the record. Weights are the machine's synthetic ones, seeded (``seed``).

The execution point is the instruction about to run at ``position``: the tick the document is
moved to, so structure, hex, graph and the text form follow it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

#: steps run on the UI thread before a Run moves to a background task
INLINE_STEPS = 256
MAX_RUN_STEPS = 1_000_000


@dataclass
class RegisterRow:
    name: str           # H3, C0
    type: str           # i32, ternary
    shape: str          # [24, 32]
    value: str          # summary of the values at the position (hot) or the weights (cold)
    changed: bool = False   # written by the step just shown


def value_summary(a: np.ndarray, limit: int = 6) -> str:
    """``[1, -4, 0, …] min -4 max 9 nz 12/24``: the first values and the range, one line."""
    flat = np.asarray(a).reshape(-1)
    if flat.size == 0:
        return "[]"
    head = ", ".join(str(int(v)) for v in flat[:limit]) + (", …" if flat.size > limit else "")
    return f"[{head}]  min {int(flat.min())}  max {int(flat.max())}  nonzero {int(np.count_nonzero(flat))}/{flat.size}"


class TvmrSession:
    def __init__(self, peer, seed: int = 0):
        self.peer = peer
        self.seed = seed
        self.error: Optional[str] = None     # why no machine could be built (a register too large…)
        self.busy = False                    # a background Run owns the machine
        self.reset()

    # -- state ------------------------------------------------------------------------------
    def reset(self) -> None:
        from nac_engine.errors import NacFormatError
        self.position = 0
        try:
            self.machine = self.peer.machine(seed=self.seed)
            self.error = None
        except (NacFormatError, ValueError) as e:
            self.machine, self.error = None, str(e)

    @property
    def steps(self) -> list:
        return self.machine.steps if self.machine is not None else []

    @property
    def exec_index(self) -> Optional[int]:
        """The instruction about to run at the position (``None``: the program has ended)."""
        if self.machine is None:
            return None
        if self.position < len(self.machine.steps):
            return self.machine.steps[self.position].index
        return None if self.machine.done else self.machine.pc

    @property
    def last_step(self):
        """The step that brought the machine to the position (``None`` at the start)."""
        return self.steps[self.position - 1] if self.position > 0 else None

    @property
    def at_end(self) -> bool:
        return self.machine is None or (self.position >= len(self.machine.steps) and self.machine.done)

    def can_step(self) -> bool:
        return not self.busy and not self.at_end

    def can_step_back(self) -> bool:
        return not self.busy and self.position > 0

    # -- actions ----------------------------------------------------------------------------
    def step(self) -> bool:
        """One instruction forward (replayed from the record, else executed); False at the end."""
        return self.can_step() and self._advance()

    def _advance(self) -> bool:
        if self.at_end or (self.position >= len(self.machine.steps) and self.machine.step() is None):
            return False
        self.position += 1
        return True

    def step_back(self) -> bool:
        if not self.can_step_back():
            return False
        self.position -= 1
        return True

    def run_inline(self, limit: int = INLINE_STEPS) -> bool:
        """Step up to ``limit`` instructions here; True when the program ended within them."""
        for _ in range(limit):
            if not self.step():
                break
        return self.at_end

    def run(self, check: Callable[[], None] = lambda: None,
            progress: Callable[[int], None] = lambda n: None, max_steps: int = MAX_RUN_STEPS) -> int:
        """Run to the end (HALT, the last instruction, an error) or ``max_steps``: for a worker thread;
        ``check`` raises to cancel (the steps done so far are kept). Returns the steps run."""
        n = 0
        while n < max_steps and self._advance():      # the worker owns the machine (busy) while it runs
            n += 1
            if n % 1024 == 0:
                check()
                progress(n)
        if n >= max_steps and not self.at_end and self.machine is not None:
            self.machine.error = f"stopped after {max_steps:,} steps (no HALT reached)"
        return n

    # -- what the pane shows ----------------------------------------------------------------
    def registers(self) -> list[RegisterRow]:
        """Every register definition with its value at the position (hot: ``registers_at``; cold:
        the weights as polarity × magnitude)."""
        if self.machine is None:
            return []
        hot = self.machine.registers_at(self.position)
        written = set(self.last_step.writes) if self.last_step is not None else set()
        rows = []
        for r in self.peer.registers:
            bank, idx = r.reg >> 6, r.reg & 0x3F
            shape = "[" + ", ".join(map(str, r.dims)) + "]"
            if bank == 0:
                value = hot.get(f"H{idx}")
                text = value_summary(value) if value is not None else "not allocated"
            elif bank == 1 and self.machine.cold[idx] is not None:
                text = "weights " + value_summary(self.machine.cold[idx].effective)
            else:
                text = "not modelled by the interpreter"
            rows.append(RegisterRow(r.name, r.type_name, shape, text, r.name in written))
        return rows

    def host_ops(self) -> list:
        """Host-only operations reached up to the position (reported, not computed)."""
        return [s for s in self.steps[:self.position] if s.status == "host"]

    def status(self) -> str:
        if self.machine is None:
            return f"Cannot run: {self.error}"
        n = len(self.peer.instructions)
        last = self.last_step
        where = (f"next: [{self.exec_index}] {self.peer.instructions[self.exec_index].mnemonic}"
                 if self.exec_index is not None else "ended")
        text = f"tick {self.position} · {where}"
        if last is not None and last.status != "ok":
            text += f" · [{last.index}] {last.mnemonic}: {last.status}" + (f" ({last.message})" if last.message else "")
        if self.at_end:
            if self.machine.error:
                text += f" · {self.machine.error}"
            elif self.machine.output is not None:
                text += f" · output {value_summary(self.machine.output)}"
        if not n:
            text = "No instructions."
        return text


def tvmr_session_of(doc) -> Optional[TvmrSession]:
    """The document's TVMR session, made on first use (``None``: not a TVMR file)."""
    peer = getattr(doc, "peer", None)
    if peer is None or peer.format != "tvmr":
        return None
    s = getattr(doc, "tvmr_session", None)
    if s is None:
        s = doc.tvmr_session = TvmrSession(peer)
    return s
