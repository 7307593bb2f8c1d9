"""Which values the MMAP schedule holds in memory after a tick's commands (torch-free).

SAVE_RESULT and PRELOAD (and the reference's 15) put a value in; FREE (and 25) take it out; a
FORWARD value is held until its first consumer runs. The debugger's variables list shows these
beside the interpreter's live set."""
from __future__ import annotations

import bisect

import numpy as np

from . import layout as L

_PUTS = (L.MMAP_SAVE_RESULT, L.MMAP_PRELOAD, 15)
_TAKES = (L.MMAP_FREE, 25)
_ALWAYS = np.iinfo(np.int64).max


class Residency:
    """``Residency(nac).at(tick)`` -> {value tick: "MMAP SAVE_RESULT" | ...}.

    The commands that matter, in the order they apply (tick, then action, then target), as
    columns: after tick T a value's state is the last of its commands up to T that counts (a
    FORWARD counts while its value's first consumer is still ahead). One lookup is a few numpy
    passes over those columns, not a Python walk of the schedule (which the debugger made at
    every stop: 1.2 ms at the end of a 48-layer GPT-2)."""

    def __init__(self, nac):
        first_use = nac.def_use().first_use       # the file's one def-use index
        label_of = {a: i for i, a in enumerate(_PUTS)} | {L.MMAP_FORWARD: len(_PUTS)} | {a: -1 for a in _TAKES}
        self._labels = [f"MMAP {L.MMAP_ACTION_NAMES.get(a, str(a))}" for a in _PUTS] + ["MMAP FORWARD"]
        rows = sorted((rec.tick, c.action, c.target) for rec in nac.mmap for c in rec.commands if c.action in label_of)
        ticks, actions, targets = (list(col) for col in zip(*rows)) if rows else ([], [], [])
        self._ticks = ticks
        self._targets = np.array(targets, np.int64)
        self._label = np.array([label_of[a] for a in actions], np.int64)      # -1: taken out
        # from which tick on a command stops counting: a FORWARD at its value's first consumer
        self._until = np.full(len(rows), _ALWAYS, np.int64)
        forwards = np.flatnonzero(self._label == len(_PUTS))
        self._until[forwards] = [v if first_use(v) is None else first_use(v) for v in self._targets[forwards].tolist()]

    def at(self, tick: int) -> dict[int, str]:
        n = bisect.bisect_right(self._ticks, tick)
        counted = np.flatnonzero(self._until[:n] > tick)[::-1]       # latest first
        targets, latest = np.unique(self._targets[counted], return_index=True)
        labels = self._label[counted[latest]]
        keep = (labels >= 0) & (targets <= tick)
        names = self._labels
        return {int(v): names[k] for v, k in zip(targets[keep].tolist(), labels[keep].tolist())}
