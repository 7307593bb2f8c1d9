"""Semantic checks on a decoded TVMR program, in the spirit of ternsig's ``validator.rs``: the
messages a debugger user needs (no HALT at the end, compute before ``load_input``, jump targets out
of range, undeclared extensions, unknown opcodes, shape mismatches, duplicate thermogram keys)."""
from __future__ import annotations

from ...errors import NacFormatError
from ..base import PeerWarning
from . import isa

_BRANCHES = {0x6006, 0x6008, 0x6009, 0x600A}


def semantic_checks(f) -> list[NacFormatError]:
    out: list[NacFormatError] = []
    if f.legacy:
        return out
    ins = f.instructions
    declared = {e.ext_id for e in f.extensions}
    if ins and not (ins[-1].ext_id == 0 and ins[-1].opcode == 0x0001):
        out.append(PeerWarning("instructions", ins[-1].offset, "Program does not end with HALT"))
    seen_input = False
    for i in ins:
        op = i.op
        where = f"instructions[{i.index}]"
        if op is None:
            out.append(NacFormatError(where, i.offset, f"Opcode {i.opcode:#06x} not found in extension "
                                                       f"{i.ext_id:#06x} ({isa.ext_name(i.ext_id)})"))
            continue
        if i.ext_id and i.ext_id not in declared:
            out.append(PeerWarning(where, i.offset, f"Extension {i.ext_id:#06X} used but not declared in .requires "
                                                    "section"))
        if i.ext_id == 0 and i.opcode == 0x1007:
            seen_input = True
        elif (i.ext_id == 0 and 0x3000 <= i.opcode < 0x5000) or i.ext_id in isa.COMPUTE_EXTENSIONS:
            if not seen_input:
                out.append(PeerWarning(where, i.offset, "Compute instruction before load_input"))
                seen_input = True       # once is enough
        if op.pattern == "RegRegReg" and i.operands[3]:
            out.append(PeerWarning(where, i.offset + 7, "RegRegReg pattern has non-zero byte 3"))
        if i.ext_id == 0 and i.opcode in _BRANCHES:
            tgt = int.from_bytes(i.operands[2:4], "big")
            if tgt >= len(ins):
                out.append(NacFormatError(where, i.offset + 6, f"JUMP target {tgt} out of bounds "
                                                               f"({len(ins)} instructions)"))
        if (i.ext_id, i.opcode) in ((0, 0x4000), (2, 0x0000)):
            w, x = f.register(i.operands[1]), f.register(i.operands[2])
            if w and x and len(w.dims) == 2 and x.dims and w.dims[1] != x.dims[0]:
                out.append(PeerWarning(where, i.offset, f"Shape mismatch in TERNARY_MATMUL: weights {w.dims} @ "
                                                        f"input {x.dims} — inner dims {w.dims[1]} != {x.dims[0]}"))
    keys: dict[bytes, int] = {}
    for r in f.registers:
        if r.key and r.key in keys:
            out.append(PeerWarning(f"registers/{r.name}", r.offset, f"Duplicate thermogram key "
                                                                    f"{r.key_text!r} (also {isa.reg_name(keys[r.key])})"))
        keys.setdefault(r.key, r.reg)
    return out
