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
    if ins:
        flagged, compute_warning_at = _flagged(f, declared)
        for k in flagged:
            _instruction_problems(f, ins[k], declared, k == compute_warning_at, out)
    keys: dict[bytes, int] = {}
    for r in f.registers:
        if r.key and r.key in keys:
            out.append(PeerWarning(f"registers/{r.name}", r.offset, f"Duplicate thermogram key "
                                                                    f"{r.key_text!r} (also {isa.reg_name(keys[r.key])})"))
        keys.setdefault(r.key, r.reg)
    return out


def _instruction_problems(f, i, declared: set, compute_before_input: bool, out: list) -> None:
    """The problems of one instruction, in the validator's order."""
    op = i.op
    where = f"instructions[{i.index}]"
    if op is None:
        out.append(NacFormatError(where, i.offset, f"Opcode {i.opcode:#06x} not found in extension "
                                                   f"{i.ext_id:#06x} ({isa.ext_name(i.ext_id)})"))
        return
    if i.ext_id and i.ext_id not in declared:
        out.append(PeerWarning(where, i.offset, f"Extension {i.ext_id:#06X} used but not declared in .requires "
                                                "section"))
    if compute_before_input:
        out.append(PeerWarning(where, i.offset, "Compute instruction before load_input"))
    if op.pattern == "RegRegReg" and i.operands[3]:
        out.append(PeerWarning(where, i.offset + 7, "RegRegReg pattern has non-zero byte 3"))
    if i.ext_id == 0 and i.opcode in _BRANCHES:
        tgt = int.from_bytes(i.operands[2:4], "big")
        if tgt >= len(f.instructions):
            out.append(NacFormatError(where, i.offset + 6, f"JUMP target {tgt} out of bounds "
                                                           f"({len(f.instructions)} instructions)"))
    if (i.ext_id, i.opcode) in _MATMULS:
        w, x = f.register(i.operands[1]), f.register(i.operands[2])
        if _shape_mismatch(w, x):
            out.append(PeerWarning(where, i.offset, f"Shape mismatch in TERNARY_MATMUL: weights {w.dims} @ "
                                                    f"input {x.dims} — inner dims {w.dims[1]} != {x.dims[0]}"))


_MATMULS = ((0, 0x4000), (2, 0x0000))


def _shape_mismatch(w, x) -> bool:
    return bool(w and x and len(w.dims) == 2 and x.dims and w.dims[1] != x.dims[0])


def _flagged(f, declared: set):
    """Indices of the instructions :func:`_instruction_problems` reports on, in order, and the index of
    the compute instruction that comes before any ``load_input`` (or -1). An instruction's problems
    depend on its 8 bytes alone (a jump's target against the program's length, a matmul's registers
    against their shapes), so each distinct record is judged once."""
    ins = f.instructions
    verdicts: dict = {}        # record -> (has a problem, is compute, is load_input)
    flagged, warn_at, loaded = [], -1, False
    for k, word in enumerate(ins.words()):
        verdict = verdicts.get(word)
        if verdict is None:
            i = ins[k]
            found: list = []
            _instruction_problems(f, i, declared, False, found)
            e, o = i.ext_id, i.opcode
            compute = i.op is not None and ((e == 0 and 0x3000 <= o < 0x5000) or e in isa.COMPUTE_EXTENSIONS)
            verdict = (bool(found), compute, i.op is not None and e == 0 and o == 0x1007)
            if len(verdicts) < 65536:
                verdicts[word] = verdict
        bad, compute, load = verdict
        loaded = loaded or load
        if compute and not loaded and warn_at < 0:
            warn_at = k
            bad = True
        if bad:
            flagged.append(k)
    return flagged, warn_at
