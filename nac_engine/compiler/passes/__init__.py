"""Optimiser passes over :class:`~nac_engine.compiler.graph.Graph`, one module each.

Each pass is ``fn(graph) -> int`` (number of rewrites) and leaves dead nodes behind; the
:func:`optimize` driver removes those after every pass, so the instruction counts it records
(before → after) belong to the pass that made the change. Passes repeat in rounds until a
round changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..graph import Graph
from .algebraic import simplify_algebra
from .constant_index import simplify_constant_index
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_constants import fold_constants
from .identities import remove_identities
from .inverse_pairs import remove_inverse_pairs

PASSES: dict[str, Callable[[Graph], int]] = {
    "dead_code": eliminate_dead_code,
    "identities": remove_identities,
    "inverse_pairs": remove_inverse_pairs,
    "algebraic": simplify_algebra,
    "fold_constants": fold_constants,
    "constant_index": simplify_constant_index,
    "cse": eliminate_common_subexpressions,
}
DEFAULT_ORDER = tuple(PASSES)
MAX_ROUNDS = 8


@dataclass
class PassStat:
    name: str
    round: int
    before: int        # instructions before the pass
    after: int         # instructions after it (and the dead code it left)
    rewrites: int


def optimize(graph: Graph, order: Optional[Sequence[str]] = None, max_rounds: int = MAX_ROUNDS) -> list[PassStat]:
    """Run the passes in ``order`` until nothing changes; one :class:`PassStat` per pass run."""
    order = tuple(order or DEFAULT_ORDER)
    unknown = [n for n in order if n not in PASSES]
    if unknown:
        raise ValueError(f"unknown pass(es) {unknown}; known: {', '.join(PASSES)}")
    stats: list[PassStat] = []
    for rnd in range(1, max_rounds + 1):
        changed = False
        for name in order:
            before = graph.instruction_count()
            rewrites = PASSES[name](graph)
            if rewrites and name != "dead_code":
                eliminate_dead_code(graph)
            after = graph.instruction_count()
            stats.append(PassStat(name, rnd, before, after, rewrites))
            changed = changed or rewrites > 0
        if not changed:
            break
    graph.check()
    return stats


__all__ = ["PASSES", "DEFAULT_ORDER", "PassStat", "optimize"] + [f.__name__ for f in PASSES.values()]
