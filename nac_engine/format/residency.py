"""Which values the MMAP schedule holds in memory after a tick's commands (torch-free).

SAVE_RESULT and PRELOAD (and the reference's 15) put a value in; FREE (and 25) take it out; a
FORWARD value is held until its first consumer runs. The debugger's variables list shows these
beside the interpreter's live set."""
from __future__ import annotations

from . import layout as L


class Residency:
    """``Residency(nac).at(tick)`` -> {value tick: "MMAP SAVE_RESULT" | ...}."""

    def __init__(self, nac):
        self._def_use = nac.def_use()        # the file's one def-use index
        self._commands = sorted((rec.tick, c.action, c.target) for rec in nac.mmap for c in rec.commands)

    def at(self, tick: int) -> dict[int, str]:
        held: dict[int, str] = {}
        for t, action, target in self._commands:
            if t > tick:
                break
            if action in (L.MMAP_SAVE_RESULT, L.MMAP_PRELOAD, 15):
                held[target] = L.MMAP_ACTION_NAMES.get(action, str(action))
            elif action in (L.MMAP_FREE, 25):
                held.pop(target, None)
            elif action == L.MMAP_FORWARD:
                first = self._def_use.first_use(target)
                if (target if first is None else first) > tick:
                    held[target] = "FORWARD"
        return {k: f"MMAP {v}" for k, v in held.items() if k <= tick}

