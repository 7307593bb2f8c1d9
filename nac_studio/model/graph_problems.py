"""Which instructions to mark as damaged on the graph (no Qt here).

Problems arrive as ``(section, offset, reason)``; the document already knows which record
owns a byte (:meth:`Document.tick_of` on the offset's selection), so a problem inside an
instruction or its MMAP record marks that tick. A parameter load whose tensor record is
missing marks its tick too: the Structure and Problems views say *what* is wrong, the
graph shows *where*.
"""
from __future__ import annotations

from typing import Optional

from nac_engine.isa.optable import OP_INPUT

#: Problems looked at (a hostile file can have hundreds of thousands; the first are enough).
MAX_PROBLEMS = 5000


def problem_ticks(doc) -> dict[int, str]:
    """Tick → the first reason it is marked for."""
    out: dict[int, str] = {}
    for p in doc.problems[:MAX_PROBLEMS]:
        tick = _tick_of_problem(doc, p)
        if tick is not None and tick not in out:
            out[tick] = str(getattr(p, "reason", p))
    nac = doc.nac
    for ins in nac.instructions:
        if ins.a == OP_INPUT and ins.b == 1 and ins.index not in out:
            pid = ins.c[1] if ins.c and len(ins.c) >= 2 else None
            if nac.param_for(ins) is None:
                out[ins.index] = f"parameter #{pid} has no tensor record" if pid is not None else \
                    "parameter load without a parameter id"
    return out


def _tick_of_problem(doc, p) -> Optional[int]:
    offset = getattr(p, "offset", None)
    if not isinstance(offset, int):
        return None
    try:
        return doc.tick_of(doc.selection_at(offset))
    except Exception:   # noqa: BLE001 - a problem the span tree cannot place marks nothing
        return None
