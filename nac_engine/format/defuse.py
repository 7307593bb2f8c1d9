"""The def-use index of an OPS stream: who reads each value, and what kind each instruction is.

torch.fx keeps ``Node.users`` as the one def-use index every pass reads; :class:`DefUse` is
that for a :class:`~nac_engine.format.model.NacFile`. It is built once per file (on first
use of :meth:`NacFile.def_use`, from the decoded instructions alone: no torch, no spans)
and shared by the MMAP lint, the planners, the interpreter's last-use freeing, the
debugger, the simulator and the Studio's graph and properties panes, instead of each
rebuilding its own consumer map.

Values are named by the tick of the instruction that produces them (``vN`` in the text
form). A producer reference that points outside the stream (a damaged file) is kept as
written: ``users()`` of an out-of-range tick answers like any other, so checkers can report
it; nothing here raises on a bad offset.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

from ..isa.optable import OP_CONVERGENCE, OP_INPUT, OP_OUTPUT

#: Instruction kinds, as the schedule check and planners use them.
KIND_PARAM = "param"        # <INPUT B=1>: a weight
KIND_INPUT = "input"        # any other <INPUT>: user input, state, lifted constant
KIND_OUTPUT = "output"      # <OUTPUT>
KIND_COMPUTE = "compute"    # everything else (regular ops and the other system ops)

_NO_USERS: tuple = ()


def kind_of(a: int, b: int) -> str:
    """The kind of an instruction from its A and B fields."""
    if a == OP_INPUT:
        return KIND_PARAM if b == 1 else KIND_INPUT
    if a == OP_OUTPUT:
        return KIND_OUTPUT
    return KIND_COMPUTE


class DefUse:
    """Readers of every value and the kind of every instruction.

    * ``users(v)`` — ticks of the instructions that read ``v``, ascending, each once
      (an instruction reading ``v`` twice is one user);
    * ``first_use(v)`` / ``last_use(v)`` — the first and last of those, ``None`` if unread;
    * ``kind(v)`` — ``"param"``, ``"input"``, ``"output"`` or ``"compute"``;
    * ``outputs`` — the values the final ``<OUTPUT B=0>`` returns (a frozenset);
    * ``n`` — the number of instructions.

    Treat it as read-only: it is shared by everything that asked the same file.
    """

    __slots__ = ("n", "_users", "_kinds", "outputs")

    def __init__(self, instructions: Sequence, outputs: Iterable[int] = ()):
        self.n = len(instructions)
        users: dict[int, list[int]] = {}
        kinds: list[str] = []
        # one pass, inlined (kind_of and Instruction.producers, per instruction): a cold run of a
        # small model builds this index once per file, and it showed in its time
        for ins in instructions:
            a = ins.a
            kinds.append(KIND_COMPUTE if a > OP_OUTPUT or a < OP_INPUT else KIND_OUTPUT if a == OP_OUTPUT
                         else KIND_PARAM if ins.b == 1 else KIND_INPUT)
            d = ins.d
            if not d or a == OP_CONVERGENCE:     # <CONVERGENCE>'s D is not a list of producers
                continue
            i = ins.index
            for x in d:
                if x:
                    lst = users.get(i + x)
                    if lst is None:
                        users[i + x] = [i]
                    elif lst[-1] != i:           # read twice by one instruction: one user
                        lst.append(i)
        self._users = {p: tuple(u) for p, u in users.items()}
        self._kinds = kinds
        self.outputs = frozenset(outputs)

    @classmethod
    def of(cls, nac) -> "DefUse":
        """Build from a NacFile (prefer ``nac.def_use()``, which caches it)."""
        return cls(nac.instructions, nac.output_producers())

    def users(self, v: int) -> tuple:
        return self._users.get(v, _NO_USERS)

    def first_use(self, v: int) -> Optional[int]:
        u = self._users.get(v)
        return u[0] if u else None

    def last_use(self, v: int) -> Optional[int]:
        u = self._users.get(v)
        return u[-1] if u else None

    def kind(self, v: int) -> Optional[str]:
        return self._kinds[v] if 0 <= v < self.n else None

    def read_values(self) -> Iterable[int]:
        """Every value somebody reads (in no particular order)."""
        return self._users.keys()

    def last_uses(self) -> dict[int, list[int]]:
        """tick → values whose last reader is that tick: what an interpreter can drop after it."""
        out: dict[int, list[int]] = {}
        for v, u in self._users.items():
            out.setdefault(u[-1], []).append(v)
        return out
