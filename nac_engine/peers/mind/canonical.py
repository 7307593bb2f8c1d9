"""Seed 001 canonicalisation, and the printer of the reference encoding.

``canonicalize(module)`` (the module must verify clean) does, in this order:

1. aliases (``%8 = %7``) are resolved: readers use the value itself;
2. constant folding of ``BinOp`` on two constants, only where safe: integer results that fit their
   dtype, float results that are finite, at most ``FOLD_LIMIT`` elements (a broadcast of two
   constants can be large; the seed says MAY, and unsafe folds MUST NOT happen);
3. dead-instruction pruning: only what an output needs is kept, plus every ``Input`` (the interface);
4. renumbering: inputs first in file order, then the rest in file order, ids 0..n-1;
5. operands of commutative BinOps (``Add``, ``Mul``) in ascending ValueId; ``Sub``/``Div`` untouched.

Every instruction is printed with its inferred result type. The output re-parses to the same
module, so canonicalising twice changes nothing (property-tested).
"""
from __future__ import annotations

import copy
import functools
from typing import Optional

import numpy as np

from .errors import MindError
from .ir import ALIAS, COMMUTATIVE, CONST_OPS, Instr, Module, TensorType, literal_text
from .parser import Ident, escape
from .verifier import _VID, _fits_float, flat_data, verify_module

FOLD_LIMIT = 4096
_SCALAR_CONST = {"i64": "ConstI64", "f32": "ConstF32", "f64": "ConstF64"}
_NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16, "i32": np.int32,
       "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}


def _const_value(ins: Instr, t: TensorType) -> Optional[np.ndarray]:
    dt = _NP.get(t.dtype)
    if dt is None:
        return None
    if ins.opcode in ("ConstI64", "ConstF32", "ConstF64"):
        return np.array(ins.params["value"], dtype=dt)
    if "fill" in ins.params:
        return np.full(tuple(t.shape), ins.params["fill"], dtype=dt)
    vals = flat_data(ins.params["data"])
    with np.errstate(over="ignore", invalid="ignore"):
        return np.array(vals, dtype=np.float64 if np.issubdtype(dt, np.floating) else object).astype(dt).reshape(t.shape)


def _fold(ins: Instr, a: np.ndarray, b: np.ndarray, t: TensorType) -> Optional[Instr]:
    """The folded constant instruction, or None when folding is not safe."""
    if not t.static or t.numel() > FOLD_LIMIT:
        return None
    kind = ins.params["op"]
    if kind == "Div":
        return None                 # not Core v1; never fold what the seed says to reject
    if np.issubdtype(a.dtype, np.integer):
        exact = {"Add": lambda x, y: x + y, "Sub": lambda x, y: x - y, "Mul": lambda x, y: x * y}[kind](
            a.astype(object), b.astype(object))
        info = np.iinfo(a.dtype)
        flat = np.asarray(exact, dtype=object).reshape(-1)
        if any(not info.min <= int(v) <= info.max for v in flat):
            return None             # would overflow: unsafe
        value = np.asarray(exact, dtype=object).astype(a.dtype)
    elif np.issubdtype(a.dtype, np.floating):
        with np.errstate(all="ignore"):
            value = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[kind](a, b)
        if not np.all(np.isfinite(value)):
            return None
    else:
        return None
    out = Instr(vid=ins.vid, opcode="", operands=[], line=ins.line, column=ins.column, offset=ins.offset,
                length=ins.length, type=t)
    if t.rank == 0 and t.dtype in _SCALAR_CONST:
        out.opcode = _SCALAR_CONST[t.dtype]
        out.params = {"value": int(value) if t.dtype == "i64" else float(value)}
    else:
        out.opcode = "ConstTensor"
        out.params = {"data": _to_nested(value)}
    return out


def _to_nested(arr: np.ndarray):
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(object).tolist() if arr.ndim else int(arr)
    return arr.astype(np.float64).tolist() if arr.ndim else float(arr)


_IMMUTABLE = frozenset({str, Ident, int, float, bool, type(None)})


def _own_copy(ins: Instr, type_: TensorType) -> Instr:
    """``copy.copy`` of an instruction (attrs shared, as copy.copy shares them) with its own params (a
    shallow copy where every value is immutable, the common case, else a deep copy) and type ``type_``."""
    p = ins.params
    params = p.copy() if all(map(_IMMUTABLE.__contains__, map(type, p.values()))) else copy.deepcopy(p)
    return Instr(ins.vid, ins.opcode, ins.operands, params, ins.attrs, type_, ins.line, ins.column, ins.offset,
                 ins.length, ins.name, ins.arg_error, ins.dialect_op)


def canonicalize(module: Module, *, fold: bool = True, prune: bool = True, verified=None) -> Module:
    """``verified``: the module's :func:`verify_module` result when the caller has it (saves a pass)."""
    ver = verified if verified is not None else verify_module(module)
    if ver.problems:
        p = ver.problems[0]
        raise MindError(p.line, p.column, p.offset, f"cannot canonicalise a module that does not verify: {p.reason}",
                        code=p.code, rule=p.rule)
    types = ver.types
    alias: dict[int, int] = {}
    body: list[Instr] = []
    consts: dict[int, np.ndarray] = {}
    # what the outputs reach before folding: folding only cuts edges, so nothing outside it can be live
    # after; the rest is neither copied nor valued (1 MB of dead constants costs a walk, not a copy each)
    reach = _reachable(module) if prune else None
    for ins in module.instrs:
        if ins.opcode == ALIAS:
            src = ins.operands[0]
            alias[ins.vid] = alias.get(src, src)
            continue
        if reach is not None and ins.vid not in reach and ins.opcode != "Input":
            continue
        ins = _own_copy(ins, types[ins.vid])
        if alias:
            ins.operands = [alias.get(v, v) for v in ins.operands]
        if fold and consts and ins.opcode == "BinOp" and all(v in consts for v in ins.operands):
            folded = _fold(ins, consts[ins.operands[0]], consts[ins.operands[1]], ins.type)
            if folded is not None:
                ins = folded
        if ins.opcode in CONST_OPS:
            v = _const_value(ins, ins.type)
            if v is not None:
                consts[ins.vid] = v
        body.append(ins)
    outputs = [alias.get(v, v) for v in module.outputs]
    if prune:
        live = _live(outputs, {i.vid: i.operands for i in body})
        body = [i for i in body if i.vid in live or i.opcode == "Input"]
    order = [i for i in body if i.opcode == "Input"] + [i for i in body if i.opcode != "Input"]
    renum = {ins.vid: k for k, ins in enumerate(order)}
    for k, ins in enumerate(order):     # copies made above: no tokens, no operand positions
        ins.vid = k
        ins.name = f"%{k}"
        ins.operands = [renum[v] for v in ins.operands]
        if ins.opcode == "BinOp" and ins.params["op"] in COMMUTATIVE:
            ins.operands.sort()
    return Module(instrs=order, outputs=[renum[v] for v in outputs], dialect="spec")


def _reachable(module: Module) -> set:
    """The values the outputs depend on (through aliases too) in a module that verifies."""
    return _live(module.outputs, {i.vid: i.operands for i in module.instrs})


def _live(outputs, operands_of: dict) -> set:
    """The values ``outputs`` depend on, following ``operands_of`` (value -> its operands)."""
    live: set = set()
    stack = list(outputs)
    while stack:
        v = stack.pop()
        if v in live or v not in operands_of:
            continue
        live.add(v)
        stack.extend(operands_of[v])
    return live


# ----------------------------------------------------------------------------- printing
def _data_text(data, dtype: str) -> str:
    if isinstance(data, list):
        return "[" + ", ".join(_data_text(x, dtype) for x in data) + "]"
    if dtype.startswith(("f", "b")) and dtype != "bool":
        return _float_text(float(data), dtype)
    if isinstance(data, bool):
        return "true" if data else "false"
    return str(int(data))


def _float_text(x: float, dtype: str) -> str:
    if dtype in ("f32", "f16") and _fits_float(x, dtype):   # out of range (an invalid module): as written
        x = float(np.float32(x) if dtype == "f32" else np.float16(x))
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return literal_text(x)


def instr_text(ins: Instr, type_: Optional[TensorType] = None) -> str:
    """One instruction in the reference encoding, with ``type_`` (default: its own) as result type."""
    op, p = ins.opcode, ins.params
    t = ins.type if type_ is None else type_
    refs = [f"%{v}" for v in ins.operands]
    if op == ALIAS:
        return f"%{ins.vid} = {refs[0]}"
    dtype = t.dtype if t is not None else "f64"
    if op == "Input":
        args = []
    elif op == "ConstI64":
        args = [str(p["value"])]
    elif op in ("ConstF32", "ConstF64"):
        args = [_float_text(p["value"], "f32" if op == "ConstF32" else "f64")]
    elif op == "ConstTensor" and "fill" in p:
        # not expanded (a short line may stand for millions of elements): the Rust printer's
        # form, which this parser reads back in any dialect, with the result type after it
        fill = literal_text(p["fill"]) if not isinstance(p["fill"], float) else _float_text(p["fill"], dtype)
        return (f"%{ins.vid} = const.tensor {dtype} {literal_text(list(t.shape))} fill={fill}"
                + (f" : {_type_text(t)}" if t is not None else ""))
    elif op == "ConstTensor":
        args = [_data_text(p["data"], dtype)]
    elif op == "BinOp":
        args = [p["op"]] + refs
    elif op in ("Sum", "Mean"):
        args = refs + [literal_text(p["axes"]), literal_text(p["keepdims"])]
    elif op == "Reshape":
        args = refs + [literal_text(p["new_shape"])]
    elif op == "Transpose":
        args = refs + ([literal_text(p["permutation"])] if p.get("permutation") is not None else [])
    elif op in ("ExpandDims", "Squeeze"):
        args = refs + [literal_text(p["axes"])]
    elif op == "Index":
        args = refs + [literal_text(p["indices"])]
    elif op == "Slice":
        args = refs + [literal_text(p["starts"]), literal_text(p["ends"]), literal_text(p["steps"])]
    elif op == "Conv2d":
        pad = p["padding"]
        pad_text = pad if isinstance(pad, str) else f"Custom({literal_text([list(x) for x in pad])})"
        args = refs + [literal_text(p["strides"]), pad_text]
    else:
        args = refs + [literal_text(a) for a in p.get("args", [])]
    text = f"%{ins.vid} = {op}({', '.join(args)})"
    if ins.attrs:
        parts = []
        for k, v in ins.attrs.items():
            val = f'"{escape(v)}"' if isinstance(v, str) else literal_text(v)
            parts.append(f"{k}: {val}")
        text += " {" + ", ".join(parts) + "}"
    if t is not None:
        text += f" : {_type_text(t)}"
    return text


@functools.lru_cache(maxsize=1024)
def _type_text(t: TensorType) -> str:
    return t.text()


def print_module(module: Module) -> str:
    """The reference encoding: one instruction per line, then ``outputs: …``."""
    lines = [instr_text(i) for i in module.instrs]
    lines.append("outputs: " + ", ".join(f"%{v}" for v in module.outputs))
    return "\n".join(lines) + "\n"


def canonical_text(module: Module, verified=None, fast=None) -> str:
    """``fast``: the parser's :class:`~.parser.FastColumns` of ``module``, straight from parsing it (its
    fast-path lines are then checked and printed from the columns)."""
    ver = verified if verified is not None else verify_module(module, fast)
    if not ver.problems and fast is not None and fast.count == len(module.instrs):
        text = _text_in_bulk(module, ver.types, fast)
        if text is not None:
            return text + "outputs: " + ", ".join(f"%{v}" for v in module.outputs) + "\n"
    if not ver.problems and _is_canonical(module):
        # canonicalize() would copy every instruction and change nothing but the written types
        lines = _instr_lines(module.instrs, ver.types)
        lines.append("outputs: " + ", ".join(f"%{v}" for v in module.outputs))
        return "\n".join(lines) + "\n"
    return print_module(canonicalize(module, verified=ver))


_VID_MARK = -999_999
_OPERAND_MARK = -1_000_001        # operand k prints as %-10000(01+k): same width, no mark a prefix of another


def _instr_lines(instrs: list, types: dict) -> list[str]:
    """``instr_text(i, types[i.vid])`` per instruction; lines differing only in their ids (same params
    dict, opcode, type: the parser shares them per spelling) are printed through one %-template."""
    memo: dict = {}
    lines = []
    add = lines.append
    for i in instrs:
        t = types[i.vid]
        if i.attrs:
            add(instr_text(i, t))
            continue
        key = (id(i.params), i.opcode, id(t), len(i.operands))
        tmpl = memo.get(key, False)
        if tmpl is False:
            tmpl = memo[key] = _template(i, t)
        add(tmpl % (i.vid, *i.operands) if tmpl is not None else instr_text(i, t))
    return lines


def _template(ins: Instr, t: TensorType) -> Optional[str]:
    """``instr_text`` of ``ins`` as a %-template over (vid, *operands), which it prints in that order;
    None where the marks do not come out exactly once each, in order (the line is then printed directly)."""
    n = len(ins.operands)
    probe = Instr(_VID_MARK, ins.opcode, [_OPERAND_MARK - k for k in range(n)], ins.params, ins.attrs, t)
    text = instr_text(probe, t)
    marks = [f"%{_VID_MARK}"] + [f"%{_OPERAND_MARK - k}" for k in range(n)]
    if not text.startswith(marks[0] + " = ") or any(text.count(mk) != 1 for mk in marks):
        return None
    at = [text.index(mk) for mk in marks]
    if at != sorted(at):
        return None
    tmpl = text.replace("%", "%%")
    for mk in marks:
        tmpl = tmpl.replace("%" + mk, "%%%d", 1)       # the escaped mark: a literal % then the number
    if tmpl % (ins.vid, *ins.operands) != instr_text(ins, t):
        return None
    return tmpl


def _is_canonical(module: Module) -> bool:
    """Whether :func:`canonicalize` leaves a verified module's instructions as they are: no aliases, no
    BinOp of two constants (a possible fold), every instruction live, inputs first, ids 0..n-1 in order,
    commutative operands ascending."""
    used = set(module.outputs)
    consts: set = set()
    seen_other = False
    for k, ins in enumerate(module.instrs):
        op = ins.opcode
        if ins.vid != k or op == ALIAS:
            return False
        if op == "Input":
            if seen_other:
                return False
        else:
            seen_other = True
        ops = ins.operands
        used.update(ops)
        if op == "BinOp":
            if ops[0] in consts and ops[1] in consts:
                return False
            if ins.params["op"] in COMMUTATIVE and ops[0] > ops[1]:
                return False
        elif op in CONST_OPS:
            consts.add(k)
    # every non-Input used or an output means none is dead: a dead one without a user would exist
    return all(ins.opcode == "Input" or ins.vid in used for ins in module.instrs)


def _text_in_bulk(module: Module, types: dict, fast) -> Optional[str]:
    """The instruction lines (each ending in a newline) :func:`_instr_lines` gives for a verified module
    that :func:`_is_canonical` accepts, both done from the parser's columns for the fast-path lines
    (each run of one spelling printed through one %-template) and one by one for the rest; None where
    the module is not canonical as it is, or a fast-path line's type is not the one written (the
    caller then takes the general road)."""
    instrs = module.instrs
    n = len(instrs)
    at, shape, nops = fast.at, fast.shape, fast.nops
    if (nops > 2).any():
        return None
    is_fast = np.zeros(n, bool)
    is_fast[at] = True
    rest = np.flatnonzero(~is_fast).tolist()
    others = [instrs[k] for k in rest]
    if any(i.opcode == ALIAS or len(i.operands) > 2 or not isinstance(i.vid, int) for i in others):
        return None
    vids = np.zeros(n, np.int64)
    vids[at] = fast.vids
    vids[rest] = [i.vid if 0 <= i.vid < n else -1 for i in others]
    if (vids != np.arange(n)).any():
        return None
    spellings = fast.shapes

    def flags(of_spelling, of_instr) -> np.ndarray:
        out = np.zeros(n, bool)
        out[at] = np.array([of_spelling(*sp) for sp in spellings], bool)[shape]
        out[rest] = [of_instr(i) for i in others]
        return out
    is_input = flags(lambda op, t, p, e: op == "Input", lambda i: i.opcode == "Input")
    is_const = flags(lambda op, t, p, e: op in CONST_OPS, lambda i: i.opcode in CONST_OPS)
    is_binop = flags(lambda op, t, p, e: op == "BinOp", lambda i: i.opcode == "BinOp")
    commutative = flags(lambda op, t, p, e: op == "BinOp" and p.get("op") in COMMUTATIVE,
                        lambda i: i.opcode == "BinOp" and i.params.get("op") in COMMUTATIVE)
    first = np.full(n, -1, np.int64)
    second = np.full(n, -1, np.int64)
    first[at], second[at] = fast.op0, fast.op1
    first[rest] = [i.operands[0] if i.operands else -1 for i in others]
    second[rest] = [i.operands[1] if len(i.operands) > 1 else -1 for i in others]
    if not is_input.all() and is_input[int(np.argmin(is_input)):].any():
        return None                                 # an Input after another instruction
    a, b = first[is_binop], second[is_binop]
    if (a < 0).any() or (b < 0).any() or (a >= n).any() or (b >= n).any():
        return None
    if (is_const[a] & is_const[b]).any():
        return None                                 # a BinOp of two constants: canonicalize may fold it
    swapped = commutative & (first > second)        # canonicalize sorts them: printed swapped
    if swapped[rest].any():
        return None                                 # not a fast-path line: printed as it is, so not here
    used = np.zeros(n, bool)
    for values in (first, second):
        used[values[(values >= 0) & (values < n)]] = True
    used[[v for v in module.outputs if isinstance(v, int) and 0 <= v < n]] = True
    if not (used | is_input).all():
        return None                                 # a dead instruction: canonicalize prunes it
    # the text: each run of lines of one spelling through its template (one %-format per chunk of the
    # run: C does the per-line work, no str per line), when they all have the type written
    written = np.array([id(sp[1]) for sp in spellings], np.int64)
    if (np.fromiter(map(id, map(types.__getitem__, map(_VID, instrs))), np.int64, n)[at] != written[shape]).any():
        return None
    op0, op1 = fast.op0, fast.op1
    if swapped.any():
        flip = swapped[at]
        op0, op1 = np.where(flip, op1, op0), np.where(flip, op0, op1)
    kind = np.full(n, -1, np.int64)
    kind[at] = shape
    row = np.zeros(n, np.int64)
    row[at] = np.arange(len(at))
    bounds = np.flatnonzero(kind[1:] != kind[:-1]) + 1
    if len(bounds) > n // 16:
        return _interleaved_text(instrs, types, fast, kind, row, op0, op1)
    templates: dict = {}
    pieces = []
    for lo, hi in zip([0] + bounds.tolist(), bounds.tolist() + [n]):
        s = int(kind[lo])
        if s >= 0 and s not in templates:
            tmpl = _template(instrs[int(at[row[lo]])], spellings[s][1])
            templates[s] = None if tmpl is None or "\n" in tmpl else tmpl + "\n"
        tmpl = templates.get(s)
        if tmpl is None:
            pieces += [instr_text(ins, types[ins.vid]) + "\n" for ins in instrs[lo:hi]]
            continue
        rows = row[lo:hi]
        values = np.stack([fast.vids[rows], op0[rows], op1[rows]][:int(nops[rows[0]]) + 1], axis=1)
        for c in range(0, hi - lo, _CHUNK):
            part = values[c:c + _CHUNK]
            pieces.append(tmpl * len(part) % tuple(part.ravel().tolist()))
    return "".join(pieces)


def _interleaved_text(instrs: list, types: dict, fast, kind: np.ndarray, row: np.ndarray, op0: np.ndarray,
                      op1: np.ndarray) -> str:
    """:func:`_text_in_bulk`'s text where spellings alternate (runs of a line or two): each spelling's
    lines made by one %-format over all of them, split, and put in place (a str per line, but no
    per-line Python work)."""
    n = len(instrs)
    out = np.empty(n, dtype=object)
    spellings = fast.shapes
    for s in np.unique(kind).tolist():
        where = np.flatnonzero(kind == s)
        tmpl = None
        if s >= 0:
            tmpl = _template(instrs[int(where[0])], spellings[s][1])
            if tmpl is not None and "\n" in tmpl:
                tmpl = None
        if tmpl is None:
            out[where] = [instr_text(instrs[k], types[instrs[k].vid]) for k in where.tolist()]
            continue
        rows = row[where]
        values = np.stack([fast.vids[rows], op0[rows], op1[rows]][:int(fast.nops[rows[0]]) + 1], axis=1)
        lines = []
        for c in range(0, len(rows), _CHUNK):
            part = values[c:c + _CHUNK]
            lines += ((tmpl + "\n") * len(part) % tuple(part.ravel().tolist())).split("\n")[:-1]
        out[where] = lines
    return "\n".join(out.tolist()) + "\n"


_CHUNK = 2048
