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

import functools
from typing import Optional

import numpy as np

from .errors import MindError
from .ir import ALIAS, COMMUTATIVE, CONST_OPS, Instr, Module, TensorType, literal_text
from .parser import escape
from .verifier import _fits_float, flat_data, verify_module

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


def _own_copy(ins: Instr, type_: TensorType) -> Instr:
    """``copy.copy`` of an instruction with type ``type_``: params and attrs shared (read-only once
    parsed, and nothing here changes them; a folded constant is a new instruction), so a module of
    many lines of one shape costs an Instr per line, not a dict more."""
    return Instr(ins.vid, ins.opcode, ins.operands, ins.params, ins.attrs, type_, ins.line, ins.column, ins.offset,
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
    cut = False                  # a fold cut an edge: what is live is found again
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
                cut = True
        if ins.opcode in CONST_OPS:
            v = _const_value(ins, ins.type)
            if v is not None:
                consts[ins.vid] = v
        body.append(ins)
    outputs = [alias.get(v, v) for v in module.outputs]
    if prune and cut:
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


def canonical_text(module: Module, verified=None) -> str:
    ver = verified if verified is not None else verify_module(module)
    if not ver.problems and _is_canonical(module):
        # canonicalize() would copy every instruction and change nothing but the written types and
        # the order of commutative operands, which the lines put ascending themselves
        lines = _instr_lines(module.instrs, ver.types)
        lines.append("outputs: " + ", ".join(f"%{v}" for v in module.outputs))
        return "\n".join(lines) + "\n"
    return print_module(canonicalize(module, verified=ver))


_VID_MARK = -999_999
_OPERAND_MARK = -1_000_001        # operand k prints as %-10000(01+k): same width, no mark a prefix of another


def _instr_lines(instrs: list, types: dict) -> list[str]:
    """``instr_text(i, types[i.vid])`` per instruction, a commutative BinOp's operands ascending (as
    canonicalize sorts them); lines differing only in their ids (same params dict, opcode, type: the
    parser shares them per spelling) are printed through one %-template."""
    memo: dict = {}
    lines = []
    add = lines.append
    for i in instrs:
        t = types[i.vid]
        ops = i.operands
        if i.opcode == "BinOp" and len(ops) == 2 and ops[0] > ops[1] and i.params.get("op") in COMMUTATIVE:
            i = Instr(i.vid, i.opcode, [ops[1], ops[0]], i.params, i.attrs, i.type)
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
    """Whether :func:`canonicalize` leaves a verified module's instructions as they are but for the
    order of commutative operands: no aliases, no BinOp of two constants (a possible fold), every
    instruction live, inputs first, ids 0..n-1 in order."""
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
        elif op in CONST_OPS:
            consts.add(k)
    # every non-Input used or an output means none is dead: a dead one without a user would exist
    return all(ins.opcode == "Input" or ins.vid in used for ins in module.instrs)
