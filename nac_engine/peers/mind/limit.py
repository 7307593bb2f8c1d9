"""An error limit for MIND problems, as compilers have one: at most ``MAX_PROBLEMS`` problem objects
per file, the first ones in file order; past it problems are only counted, and the list ends with one
summary problem saying how many were left out and where the first of them is.

A producer (the parser, the verifier) asks :meth:`ProblemLimit.wants` with a problem's line, column
and offset BEFORE building it (building and wording thousands of :class:`~.errors.MindError` costs
more than finding them), builds it only when told to, and hands it to :meth:`ProblemLimit.keep`.
The kept ones are the ``limit`` first by (line, column, emission order) — exact even when a producer
emits out of file order (a bounded max-heap) — and come back in emission order, so a file under the
limit yields the very list it yielded before. :func:`merge` joins the parser's and the verifier's
lists in file order and adds the summary.
"""
from __future__ import annotations

import heapq
import sys
from typing import Optional

from .errors import MindError

#: problem objects kept per MIND file (the rest are counted and summarised in one last problem)
MAX_PROBLEMS = 1000
#: the summary problem's rule name
LIMIT_RULE = "problem-limit"


class ProblemLimit:
    """Keeps the ``limit`` first problems in file order, counts the others (see the module doc)."""

    __slots__ = ("limit", "_heap", "_seq", "_pending", "more", "first_more", "_after")

    def __init__(self, limit: Optional[int] = None):
        self.limit = MAX_PROBLEMS if limit is None else limit      # read when made: tests may change it
        self._heap: list = []           # ((-line, -column, -seq), problem): the root is the last kept in file order
        self._seq = 0
        self._pending = 0
        self.more = 0                   # problems found but not kept
        self.first_more: Optional[tuple] = None    # (line, column, seq, offset) of the first of them in file order
        self._after = sys.maxsize       # a problem on a later line is neither kept nor the first left out

    def past(self, line: int, count: int = 1) -> bool:
        """True (and the ``count`` problems counted) when a problem on ``line`` can be neither kept nor the
        first one left out: a producer then need not even work out its column and offset."""
        if line > self._after:
            self.more += count
            return True
        return False

    def wants(self, line: int, column: int, offset: int) -> bool:
        """True: build the problem and :meth:`keep` it. False: it was counted, do not build it."""
        seq = self._seq
        self._seq = seq + 1
        heap = self._heap
        if len(heap) >= self.limit:
            root = heap[0][0]
            if (line, column) >= (-root[0], -root[1]):      # later in file order than every kept one
                self._left_out(line, column, seq, offset)
                return False
        self._pending = seq
        return True

    def keep(self, p: MindError) -> None:
        """Keep the problem just allowed by :meth:`wants` (pushing out the last kept one when full)."""
        entry = ((-p.line, -p.column, -self._pending), p)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, entry)
            return
        (line, column, seq), old = heapq.heapreplace(self._heap, entry)
        self._left_out(-line, -column, -seq, old.offset)

    def add(self, p: MindError) -> None:
        """An already built problem (a raised syntax error): kept or counted."""
        if self.wants(p.line, p.column, p.offset):
            self.keep(p)

    def _left_out(self, line: int, column: int, seq: int, offset: int) -> None:
        self.more += 1
        key = (line, column, seq, offset)
        if self.first_more is None or key < self.first_more:
            self.first_more = key
        self._after = max(-self._heap[0][0][0], self.first_more[0])

    def found(self) -> int:
        """Problems kept plus problems counted."""
        return len(self._heap) + self.more

    def problems(self) -> list:
        """The kept problems in the order they were found."""
        heap = self._heap
        if len(heap) <= 1:
            return [e[1] for e in heap]
        return [e[1] for e in sorted(heap, key=lambda e: e[0][2], reverse=True)]


def summary_problem(count: int, line: int, column: int, offset: int, limit: Optional[int] = None) -> MindError:
    """The one problem that stands for ``count`` problems left out, placed at the first of them."""
    limit = MAX_PROBLEMS if limit is None else limit
    what = "problem" if count == 1 else "problems"
    return MindError(line, column, offset, f"{count} more {what} not listed (limit {limit})", rule=LIMIT_RULE)


def merge(syntax: list, syntax_limit: Optional[ProblemLimit], verified: list,
          verified_limit: Optional[ProblemLimit], limit: Optional[int] = None) -> list:
    """The parser's and the verifier's problems in file order (a stable sort on line, column: the
    parser's first at a tie), at most ``limit`` of them, then a summary problem when any were left out."""
    limit = MAX_PROBLEMS if limit is None else limit
    merged = sorted(syntax + verified, key=lambda p: (p.line, p.column))
    more = len(merged) - limit if len(merged) > limit else 0
    firsts = []
    if more:
        p = merged[limit]
        firsts.append((p.line, p.column, p.offset))
        del merged[limit:]
    for lim in (syntax_limit, verified_limit):
        if lim is not None and lim.more:
            more += lim.more
            line, column, _, offset = lim.first_more
            firsts.append((line, column, offset))
    if more:
        line, column, offset = min(firsts, key=lambda f: f[:2])
        merged.append(summary_problem(more, line, column, offset, limit))
    return merged
