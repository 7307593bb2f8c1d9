"""Measured time per instruction on this CPU: the "Profile" run that sits beside the simulator's
cycles (what RenderDoc's and Nsight's users read first: where the time actually goes).

The file runs once untimed (first calls pay for kernel lookups, allocator growth and torch's
lazy initialisation, which are not the instruction's cost), then ``repeat`` times with a clock
read around every instruction; each tick's time is the median of its repeats. Instructions run
as :meth:`Session.execute` runs them (the debugger's Continue, at ``run()``'s cost per
instruction), so the figures are the interpreter's, kernel plus dispatch. Ticks a branch skipped
have no time (NaN).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ..format.model import NacFile

#: the timed runs a profile takes by default (median per tick)
DEFAULT_REPEAT = 3


class ProfileCancelled(Exception):
    pass


@dataclass
class Profile:
    """Seconds per tick (NaN where a tick did not run), and the op name of each tick."""
    seconds: np.ndarray
    ops: list[str]
    repeat: int
    total_seconds: float = 0.0                       # the median run's wall time, end to end
    runs: list[float] = field(default_factory=list)  # each timed run's wall time

    def slowest(self, k: int = 10) -> list[tuple[int, float]]:
        """The ``k`` slowest ticks as (tick, seconds), slowest first (ties: earlier tick)."""
        ran = np.flatnonzero(~np.isnan(self.seconds))
        order = sorted(ran.tolist(), key=lambda t: (-self.seconds[t], t))
        return [(t, float(self.seconds[t])) for t in order[:k]]

    def by_op(self) -> list[tuple[str, float, int]]:
        """(op, seconds, count) summed over the ticks of each op, most time first."""
        acc: dict[str, list] = {}
        for t in np.flatnonzero(~np.isnan(self.seconds)).tolist():
            entry = acc.setdefault(self.ops[t], [0.0, 0])
            entry[0] += float(self.seconds[t])
            entry[1] += 1
        return sorted(((op, s, n) for op, (s, n) in acc.items()), key=lambda e: -e[1])

    def to_data(self) -> dict:
        return {"seconds": [None if np.isnan(s) else float(s) for s in self.seconds], "ops": list(self.ops),
                "repeat": self.repeat, "total_seconds": self.total_seconds, "runs": list(self.runs)}

    @classmethod
    def from_data(cls, d: dict) -> "Profile":
        seconds = np.array([np.nan if s is None else float(s) for s in d["seconds"]], dtype=np.float64)
        return cls(seconds, [str(o) for o in d["ops"]], int(d["repeat"]), float(d.get("total_seconds", 0.0)),
                   [float(r) for r in d.get("runs", [])])


def profile(nacfile: NacFile | str, inputs: Optional[Mapping[str, Any]] = None,
            feeds: Optional[Sequence[Any]] = None, *, repeat: int = DEFAULT_REPEAT,
            cancel: Optional[Callable[[], bool]] = None,
            progress: Optional[Callable[[int, int], None]] = None) -> Profile:
    """Run ``nacfile`` once to warm up, then ``repeat`` times timing every instruction. Without
    ``inputs`` or ``feeds`` the file's recorded input signature gives them (as ``nac run``)."""
    from ..format.input_signature import signature_inputs
    from ..format.reader import read
    from .session import Session
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    if not isinstance(nacfile, NacFile):
        nacfile = read(str(nacfile))
    if inputs is None and feeds is None:
        inputs = signature_inputs(nacfile)
    with Session(nacfile, inputs=inputs, feeds=feeds, keep_results=False) as s:
        n = len(s.instructions)
        times = np.full((repeat, n), np.nan)
        runs = []
        clock = time.perf_counter
        for r in range(-1, repeat):
            s.reset()
            if s.missing_inputs():
                raise s.missing_input_error()
            dead = s.dead_values()
            row = times[r] if r >= 0 else None
            start = clock()
            while not s.finished:
                i = s.tick
                t0 = clock()
                s.execute(i)
                if row is not None and i < n:
                    row[i] = clock() - t0
                for v in dead.get(i, ()):       # what run() frees after the tick: same memory
                    s.results.pop(v, None)
                if i % 64 == 0:
                    if cancel is not None and cancel():
                        raise ProfileCancelled()
                    if progress is not None:
                        progress((r + 1) * n + i, (repeat + 1) * n)
            if r >= 0:
                runs.append(clock() - start)
        ops = [s.nac.instruction_name(ins) for ins in s.instructions]
    with np.errstate(all="ignore"):
        seconds = np.nanmedian(times, axis=0) if repeat > 1 else times[0]
    return Profile(seconds, ops, repeat, float(np.median(runs)), runs)


__all__ = ["DEFAULT_REPEAT", "Profile", "ProfileCancelled", "profile"]
