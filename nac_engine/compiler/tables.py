"""Stage 4: CMAP, PERM, CNST and parameter IDs, assigned from the graph alone.

Deterministic by construction: every ID depends only on the *set* of names/signatures/values
this file uses (sorted) or on instruction order — never on a registry, the working directory,
earlier compiles in the process, hash seeds or dict order of anything outside the graph.

* CMAP: non-standard op names sorted alphabetically, numbered from the version's first custom ID
  (20 in v1.6, 32 in v1.8). ``nac.*`` names that the version does not have as standard ops
  (``nac.mul`` in v1.6) are CMAP entries like any other.
* PERM: signatures sorted in ASCII order, numbered from 1; v1.8 also lists ID 0 = ``""``.
* CNST: ``None`` is ID 1 when used (as the reference numbers it); the other values are sorted by
  their text form and numbered from 2. Values are typed by what they are — ``1``, ``1.0`` and
  ``True`` are three constants (the reference merges them by first sighting, research §6.3).
* Parameters: numbered from 1 in the order their ``<INPUT B=1>`` appears.

Limits (research §7): A and B are u8, C holds int16 IDs. Exceeding one raises
:class:`CompileError` naming the limit — the reference writes a truncated file instead.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

from ..format import layout as L
from ..format.model import Constant
from ..text.literals import format_literal
from ..isa.optable import custom_op_start, standard_ops
from .canonicalize import CanonicalOp
from .errors import CompileError

U8_MAX = 0xFF
I16_MAX = 0x7FFF
I32 = (-2 ** 31, 2 ** 31 - 1)
I64 = (-2 ** 63, 2 ** 63 - 1)


@dataclass
class Tables:
    version: str
    op_ids: dict[str, int] = field(default_factory=dict)      # every op name used -> A
    cmap: dict[int, str] = field(default_factory=dict)
    perm_ids: dict[str, int] = field(default_factory=dict)
    perms: dict[int, str] = field(default_factory=dict)
    const_ids: dict[tuple, int] = field(default_factory=dict)  # const_key(type, value) -> id
    constants: dict[int, Constant] = field(default_factory=dict)

    def const_id(self, value: Any, where: str) -> int:
        return self.const_ids[const_key(constant_record(value, where))]


def const_key(rec: tuple) -> tuple:
    """Identity of a stored constant: floats by their bits, so -0.0 ≠ 0.0 and NaN = NaN."""
    t, v = rec
    if isinstance(v, float):
        return t, v.hex()
    if isinstance(v, tuple) and t == L.CONST_LIST_F32:
        return t, tuple(x.hex() for x in v)
    return t, v


def constant_record(value: Any, where: str) -> tuple[int, Any]:
    """Python value → ``(CNST type code, stored value)``; refuses what the type would change."""
    if value is None:
        return L.CONST_NULL, None
    if isinstance(value, bool):
        return L.CONST_BOOL, value
    if isinstance(value, int):
        if not I64[0] <= value <= I64[1]:
            raise CompileError(f"{where}: integer constant {value} does not fit CNST int64", stage="tables")
        return L.CONST_INT64, value
    if isinstance(value, float):
        return L.CONST_FLOAT64, value
    if isinstance(value, str):
        if len(value.encode("utf-8")) > 0xFFFF:
            raise CompileError(f"{where}: string constant of {len(value)} characters exceeds CNST's u16 length",
                               stage="tables")
        return L.CONST_STRING, value
    if isinstance(value, (list, tuple)):
        if len(value) > 0xFFFF:
            raise CompileError(f"{where}: list constant of {len(value)} elements exceeds CNST's u16 length",
                               stage="tables")
        if all(isinstance(x, int) for x in value):     # bools are ints: list[bool] stores 0/1
            ints = tuple(int(x) for x in value)
            if any(not I32[0] <= x <= I32[1] for x in ints):
                raise CompileError(f"{where}: list constant {list(value)} holds a value outside int32 "
                                   f"(CNST list_i32)", stage="tables")
            return L.CONST_LIST_I32, ints
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
            floats = tuple(float(x) for x in value)
            for x in floats:
                if math.isfinite(x) and struct.unpack("<f", struct.pack("<f", x))[0] != x:
                    raise CompileError(f"{where}: list constant {list(value)} is not exact in float32 "
                                       f"(CNST list_f32 would round {x!r})", stage="tables")
            return L.CONST_LIST_F32, floats
        raise CompileError(f"{where}: list constant {list(value)!r} mixes types CNST cannot store",
                           stage="tables")
    raise CompileError(f"{where}: constant {value!r} of type {type(value).__name__} has no CNST encoding",
                       stage="tables")


def _const_sort_key(rec: tuple) -> tuple:
    t, v = rec
    return (format_literal(t, v), t, const_key(rec)[1] if t in (L.CONST_FLOAT64, L.CONST_LIST_F32) else "")


def _where(op: CanonicalOp) -> str:
    return f"{op.node.name} ({op.name})"


def assign(version: str, ops: list[CanonicalOp]) -> Tables:
    t = Tables(version)
    std = {name: a for a, name in standard_ops(version).items()}
    used_names = sorted({op.name for op in ops})
    custom = [n for n in used_names if n not in std]
    first = custom_op_start(version)
    if custom and first + len(custom) - 1 > U8_MAX:
        raise CompileError(f"{len(custom)} op names are not standard NAC ops; with custom IDs starting at {first}, "
                           f"A (u8) can number only {U8_MAX - first + 1} (first over the limit: "
                           f"{custom[U8_MAX - first + 1]!r})", stage="tables")
    for n in used_names:
        if n in std:
            t.op_ids[n] = std[n]
    for k, n in enumerate(custom):
        t.op_ids[n] = first + k
        t.cmap[first + k] = n

    for op in ops:
        if len(op.signature) > U8_MAX:
            raise CompileError(f"{_where(op)} has {len(op.signature)} arguments; a PERM signature is at most "
                               f"{U8_MAX} characters (u8 length)", stage="tables")
    sigs = sorted({op.signature for op in ops if op.signature})
    if len(sigs) > U8_MAX:
        raise CompileError(f"{len(sigs)} distinct signatures; B (u8) can number only {U8_MAX} "
                           f"(first over the limit: {sigs[U8_MAX]!r})", stage="tables")
    if version != "1.6":
        t.perms[0] = ""
    for k, s in enumerate(sigs, 1):
        t.perm_ids[s] = k
        t.perms[k] = s

    records: dict[tuple, tuple] = {}
    for op in ops:
        for a in op.args:
            if not a.is_ref:
                rec = constant_record(a.value, _where(op))
                records.setdefault(const_key(rec), rec)
    ordered = sorted(records.values(), key=lambda r: (r[0] != L.CONST_NULL,) + _const_sort_key(r))
    next_id = 1 if ordered and ordered[0][0] == L.CONST_NULL else 2
    for rec in ordered:
        if next_id > I16_MAX:
            raise CompileError(f"{len(ordered)} distinct constants; C holds int16 IDs, so at most {I16_MAX} "
                               f"can be referenced (first over the limit: {format_literal(*rec)})", stage="tables")
        t.const_ids[const_key(rec)] = next_id
        t.constants[next_id] = Constant(next_id, rec[0], rec[1])
        next_id = max(next_id + 1, 2)
    return t
