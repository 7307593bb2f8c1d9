"""Bounded result history and checkpoints for the debugger's step-back.

* :class:`ResultHistory` keeps tick → result up to a byte budget. When over budget it evicts
  the entry farthest from the tick the user is looking at, so stepping back and forth around
  one place stays cheap.
* :class:`Checkpoints` keeps, for some ticks k, the *live set* before k — references to the
  values still needed by instructions ≥ k. Replaying instructions k.. from it is exact (the
  interpreter is deterministic), so an evicted result is recomputed from the nearest
  checkpoint at or before it. Tick 0's checkpoint is empty and always present, so everything
  is always recomputable. Checkpoints hold references, not copies: a value shared by several
  checkpoints (or still live) is counted once; when they exceed their own budget every other
  checkpoint is dropped and the interval doubles (the classic sqrt-N trade of memory for
  replay time).
"""
from __future__ import annotations

import bisect
from typing import Any, Optional

import torch


def nbytes(value: Any) -> int:
    """Bytes a result holds (tensors and tuples of tensors; views counted at their size)."""
    if isinstance(value, torch.Tensor):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(nbytes(v) for v in value)
    return 0


class ResultHistory:
    def __init__(self, budget: Optional[int] = None):
        self.budget = budget            # None: unbounded
        self._values: dict[int, Any] = {}
        self._sizes: dict[int, int] = {}
        self._ticks: list[int] = []     # sorted, so the farthest entry is at one end
        self.total = 0
        self.evicted = 0                # results dropped, or too big to keep (the Studio says so)

    def __contains__(self, tick: int) -> bool:
        return tick in self._values

    def __len__(self) -> int:
        return len(self._values)

    def get(self, tick: int, default: Any = None) -> Any:
        return self._values.get(tick, default)

    def put(self, tick: int, value: Any, focus: int) -> None:
        """Store ``tick``'s result; evict around ``focus`` (the user's current tick)."""
        size = nbytes(value)
        if self.budget is not None and size > self.budget:
            self.discard(tick)          # too big to keep at all; recomputed when asked for
            self.evicted += 1
            return
        if tick in self._values:
            self.discard(tick)
        self._values[tick], self._sizes[tick] = value, size
        ticks = self._ticks
        if not ticks or ticks[-1] < tick:
            ticks.append(tick)          # a run going forward: no search
        else:
            bisect.insort(ticks, tick)
        self.total += size
        while self.budget is not None and self.total > self.budget:
            lo, hi = self._ticks[0], self._ticks[-1]
            victim = lo if abs(focus - lo) >= abs(hi - focus) else hi
            if victim == tick:          # never evict what was just stored
                victim = hi if victim == lo else lo
            self.discard(victim)
            self.evicted += 1

    def discard(self, tick: int) -> None:
        if tick in self._values:
            del self._values[tick]
            self.total -= self._sizes.pop(tick)
            self._ticks.pop(bisect.bisect_left(self._ticks, tick))

    def clear(self) -> None:
        self.__init__(self.budget)


class Checkpoints:
    def __init__(self, every: int = 16, budget: Optional[int] = None):
        self.every = max(1, every)
        self.budget = budget
        self._envs: dict[int, dict[int, Any]] = {0: {}}
        self._refs: dict[int, int] = {}      # producer tick -> number of checkpoints holding it
        self._sizes: dict[int, int] = {}
        self.total = 0

    def due(self, tick: int) -> bool:
        return tick % self.every == 0 and tick not in self._envs

    def add(self, tick: int, live: dict[int, Any]) -> None:
        self._envs[tick] = dict(live)
        for p, v in live.items():
            if self._refs.get(p, 0) == 0:
                self._sizes[p] = nbytes(v)
                self.total += self._sizes[p]
            self._refs[p] = self._refs.get(p, 0) + 1
        while self.budget is not None and self.total > self.budget and len(self._envs) > 1:
            self.every *= 2
            for t in [t for t in self._envs if t % self.every]:
                self._remove(t)

    def _remove(self, tick: int) -> None:
        for p in self._envs.pop(tick):
            self._refs[p] -= 1
            if not self._refs[p]:
                del self._refs[p]
                self.total -= self._sizes.pop(p)

    def nearest(self, tick: int) -> tuple[int, dict[int, Any]]:
        """The latest checkpoint at or before ``tick``: (its tick, a copy of its live set)."""
        best = max(t for t in self._envs if t <= tick)
        return best, dict(self._envs[best])

    @property
    def ticks(self) -> list[int]:
        return sorted(self._envs)
