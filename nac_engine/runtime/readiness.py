"""What a run would refuse before computing anything: an op the interpreter has no kernel for.

``format.verify`` judges the bytes (and runs without torch, as the Studio's window does); this
adds the one check that needs the interpreter: every distinct op a regular instruction names is
resolved the way a run resolves it (``Kernels``: ``nac.*``, ``torch.ops.aten.*``, Tensor methods,
operators). ``nac verify`` reports both, so a file it calls clean fails a run only for reasons
that depend on the values (a shape a constant makes impossible, an index out of range).
"""
from __future__ import annotations

import numpy as np

from ..errors import NacFormatError
from ..format.instruction_table import InstructionTable
from ..format.model import NacFile
from .errors import NotSupported
from .kernels import Kernels

_FIRST_REGULAR_OP = 10       # below: system ops (INPUT, OUTPUT, CONTROL_FLOW, ...), run by the session


def kernel_problems(nac: NacFile) -> list[NacFormatError]:
    """One problem per distinct op with no kernel, at the first instruction that names it."""
    firsts = _first_use_of_each_op(nac)
    kernels = Kernels("cpu")
    out = []
    for a, tick in sorted(firsts.items(), key=lambda item: item[1]):
        name = nac.op_name(a)
        try:
            kernels(name)
        except NotSupported as e:
            ins = nac.instructions[tick]
            out.append(NacFormatError("OPS", ins.offset, f"instruction {tick}: {e.args[0] if e.args else e}; "
                                                        f"a run stops here"))
    return out


def _first_use_of_each_op(nac: NacFile) -> dict[int, int]:
    instrs = nac.instructions
    encoded = instrs.encoded() if isinstance(instrs, InstructionTable) else None
    if encoded is not None:
        ops = encoded.column(0)
        values, first = np.unique(ops, return_index=True)
        return {int(a): int(i) for a, i in zip(values, first) if a >= _FIRST_REGULAR_OP}
    firsts: dict[int, int] = {}
    for ins in instrs:
        if ins.a >= _FIRST_REGULAR_OP:
            firsts.setdefault(ins.a, ins.index)
    return firsts
