"""Seed 001's verifier: every rule, each with a stable code, all problems reported (not the first).

Codes. Where the spec's error catalogue (errors.md, via the research note) names a check, its code is
used (``E4001`` use before definition … ``E4011`` gather index dtype). The conformance suite is the
executable authority where the two disagree: its ``reshape_element_count.yaml`` expects ``E4003
"Element count mismatch"`` (the catalogue has E3007 for that and E4003 for an undefined output), so
that rule emits E4003 and names E3007 in its message; an undefined output keeps the catalogue's
E4003. Checks the catalogue has no code for use our own ``M0xx`` codes. Every problem also carries
its ``rule`` name, unique per check, and ``RULES`` says where each one comes from.

Type inference runs alongside: each instruction's result type is inferred from its operands and
compared with the type written in the file (``result-type``); a value whose instruction is invalid
gets no type, so one mistake is reported once, not again at every consumer.
"""
from __future__ import annotations

from typing import Optional

from .errors import MindError
from .limit import ProblemLimit
from .ir import (ALIAS, ARITY, CORE_OPS, FLOAT_DTYPES, INT_DTYPES, Instr, Module, TensorType)

#: rule -> (code, source, what it checks)
RULES = {
    "use-before-def": ("E4001", "spec", "every operand references a previously defined value"),
    "multiple-definition": ("E4002", "spec", "each value is defined exactly once"),
    "undefined-output": ("E4003", "spec catalogue", "declared outputs reference existing values"),
    "input-name": ("E4004", "spec", "an Input carries a name attribute"),
    "const-count": ("E4005", "spec", "ConstTensor element count equals the product of its shape"),
    "index-length": ("E4006", "spec", "Index list length equals the input rank"),
    "slice-lengths": ("E4007", "spec", "Slice starts/ends/steps lengths equal the input rank"),
    "slice-zero-step": ("E4008", "spec", "Slice steps are non-zero"),
    "conv-channels": ("E4009", "spec", "Conv2d input.shape[3] == filter.shape[2]"),
    "conv-strides": ("E4010", "spec", "Conv2d strides are 2 positive integers"),
    "gather-index-dtype": ("E4011", "spec", "Gather indices are i32 or i64"),
    "reshape-element-count": ("E4003", "conformance suite (catalogue: E3007)",
                              "Reshape preserves the element count"),
    "unknown-op": ("M001", "ours", "the opcode is a Core v1 instruction"),
    "operands": ("M002", "ours", "operand count and literal parameter kinds fit the opcode"),
    "dtype-mismatch": ("M010", "spec", "operands of BinOp/Dot/MatMul/Conv2d share a dtype"),
    "dtype-kind": ("M011", "spec", "Relu/Exp/Log need a float dtype, Neg a numeric one"),
    "broadcast": ("M020", "spec", "BinOp operands broadcast (numpy right alignment)"),
    "matmul-shape": ("M021", "spec", "MatMul ranks >= 2, K matches, batch dims broadcast"),
    "dot-shape": ("M022", "spec", "Dot ranks 1/2 with matching inner dimension"),
    "conv-shape": ("M023", "spec", "Conv2d ranks are 4, padding valid, output non-empty"),
    "reduce-axes": ("M030", "spec", "reduction axes in range and distinct"),
    "transpose-perm": ("M031", "spec", "Transpose permutation is a permutation of the axes"),
    "expand-axes": ("M032", "spec", "ExpandDims axes within [0, rank] at insertion"),
    "squeeze-axes": ("M033", "spec", "Squeeze axes in range, distinct, of size 1"),
    "reshape-dims": ("M034", "spec", "Reshape dims positive with at most one -1"),
    "dim-positive": ("M035", "spec", "declared tensor dimensions are positive"),
    "const-dtype": ("M036", "spec", "constant elements are valid values of the dtype"),
    "const-shape": ("M037", "spec", "ConstTensor data nests like its declared shape"),
    "result-type": ("M040", "ours", "the written result type equals the inferred one"),
    "div-not-core": ("M041", "spec", "BinOp Div is not Core v1 (SHOULD be rejected)"),
    "no-outputs": ("M050", "spec", "the module declares its outputs"),
    "missing-type": ("M051", "ours", "an Input or ConstTensor states its tensor type"),
}
I64 = (-(1 << 63), (1 << 63) - 1)
_INT_RANGE = {"i8": (-128, 127), "i16": (-32768, 32767), "i32": (-(1 << 31), (1 << 31) - 1), "i64": I64,
              "u8": (0, 255), "u16": (0, 65535), "u32": (0, (1 << 32) - 1), "u64": (0, (1 << 64) - 1)}


#: largest magnitude that still rounds to a finite value, per float dtype (max + half an ulp, exclusive)
_FLOAT_LIMIT = {"f16": 65520.0, "bf16": 3.3961775292304043e38, "f32": 3.4028235677973366e38}


def _fits_float(v, dtype: str) -> bool:
    """A literal is valid for a float dtype unless it is finite and would round to infinity
    (``inf``/``nan`` literals are written on purpose)."""
    lim = _FLOAT_LIMIT.get(dtype)
    if lim is None:
        return True
    try:
        x = float(v)
    except OverflowError:          # an integer literal too large for any float
        return False
    return x != x or x in (float("inf"), float("-inf")) or abs(x) < lim


class _Fail(Exception):
    def __init__(self, rule: str, message: str):
        self.rule, self.message = rule, message


def problem(rule: str, message: str, line: int, column: int, offset: int, length: int = 0) -> MindError:
    code = RULES[rule][0]
    return MindError(line, column, offset, message, code=code, rule=rule, length=length)


def broadcast(a: tuple, b: tuple) -> tuple:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if isinstance(x, str) or isinstance(y, str):
            out.append(y if x == 1 else x)
        elif x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise _Fail("broadcast", f"shapes {list(a)} and {list(b)} do not broadcast (dim {x} vs {y})")
    return tuple(reversed(out))


def _norm_axes(axes: list, rank: int, rule: str, what: str) -> list:
    out = []
    for a in axes:
        n = a + rank if a < 0 else a
        if not 0 <= n < rank:
            raise _Fail(rule, f"{what} axis {a} is out of range for rank {rank}")
        if n in out:
            raise _Fail(rule, f"{what} axis {a} appears twice")
        out.append(n)
    return out


def flat_data(data) -> list:
    """ConstTensor literal -> flat list (iteratively: literals can be deep)."""
    out, stack = [], [data]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        else:
            out.append(v)
    return out


def data_shape(data) -> Optional[tuple]:
    """The shape a nested literal spells (``None``: ragged), walked level by level."""
    shape = []
    level = [data]
    while level and isinstance(level[0], list):
        n = len(level[0])
        if any(not isinstance(x, list) or len(x) != n for x in level):
            return None
        shape.append(n)
        level = [y for x in level for y in x]
    if any(isinstance(x, list) for x in level):
        return None
    return tuple(shape)


def slice_len(dim: int, start: int, end: int, step: int) -> int:
    """Python slicing's length, by arithmetic (``len(range(...))`` overflows on hostile dims)."""
    lo, hi, st = slice(start, end, step).indices(dim)
    if st > 0:
        return max(0, (hi - lo + st - 1) // st)
    return max(0, (lo - hi - st - 1) // -st)


def conv_out(size: int, k: int, stride: int, padding, axis: int) -> int:
    if padding == "Same":
        return -(-size // stride)
    if padding == "Valid":
        return (size - k) // stride + 1
    lo, hi = padding[axis]
    return (size + lo + hi - k) // stride + 1


def _check_const_element(v, t: TensorType) -> None:
    if t.dtype in INT_DTYPES:
        lo, hi = _INT_RANGE[t.dtype]
        if isinstance(v, float) or isinstance(v, bool) or not lo <= v <= hi:
            raise _Fail("const-dtype", f"ConstTensor element {v!r} is not a valid {t.dtype}")
    elif t.dtype == "bool" and not (isinstance(v, bool) or v in (0, 1)):
        raise _Fail("const-dtype", f"ConstTensor element {v!r} is not a valid bool")
    elif t.dtype != "bool" and not _fits_float(v, t.dtype):
        raise _Fail("const-dtype", f"ConstTensor element {v!r} is outside the {t.dtype} range")


def infer(ins: Instr, ts: list) -> TensorType:
    """The result type of ``ins`` given its operand types (all known); raises _Fail(rule, message)."""
    op, p = ins.opcode, ins.params
    if op == "Input":
        if "name" not in ins.attrs or not str(ins.attrs["name"]):
            raise _Fail("input-name", "Input has no name attribute")
        if ins.type is None:
            raise _Fail("missing-type", "Input has no tensor type")
        return ins.type
    if op == "ConstI64":
        if not I64[0] <= p["value"] <= I64[1]:
            raise _Fail("const-dtype", f"ConstI64 value {p['value']} is outside the i64 range")
        return TensorType("i64", ())
    if op in ("ConstF32", "ConstF64"):
        if op == "ConstF32" and not _fits_float(p["value"], "f32"):
            raise _Fail("const-dtype", f"ConstF32 value {p['value']!r} is outside the f32 range")
        return TensorType("f32" if op == "ConstF32" else "f64", ())
    if op == "ConstTensor":
        t = ins.type
        if t is None and "dtype" in ins.attrs and "shape" in ins.attrs:
            t = TensorType(str(ins.attrs["dtype"]), tuple(ins.attrs["shape"]))
        if t is None:
            raise _Fail("missing-type", "ConstTensor states no dtype and shape")
        if not t.static:
            raise _Fail("dim-positive", f"ConstTensor shape {list(t.shape)} is not static")
        if "fill" in p:         # a filled constant (the Rust printer's const.tensor … fill=)
            if any(d < 0 for d in t.shape):
                raise _Fail("dim-positive", f"ConstTensor shape {list(t.shape)} has a negative dimension")
            _check_const_element(p["fill"], t)
            return t
        vals = flat_data(p["data"])
        if len(vals) != t.numel():
            raise _Fail("const-count", f"ConstTensor has {len(vals)} element(s), its shape {list(t.shape)} "
                                       f"needs {t.numel()}")
        nested = data_shape(p["data"])
        if nested != tuple(t.shape) and not (t.rank == 0 and nested == (1,)):
            raise _Fail("const-shape", f"ConstTensor data nests as {list(nested) if nested is not None else 'ragged'}"
                                       f", its type says {list(t.shape)}")
        for v in vals:
            _check_const_element(v, t)
        return t
    a = ts[0] if ts else None
    if op == "BinOp":
        b = ts[1]
        if a.dtype != b.dtype:
            raise _Fail("dtype-mismatch", f"BinOp {p['op']} mixes {a.dtype} and {b.dtype}")
        return TensorType(a.dtype, broadcast(a.shape, b.shape))
    if op in ("Sum", "Mean"):
        axes = _norm_axes(p["axes"], a.rank, "reduce-axes", op)
        if not axes:
            return TensorType(a.dtype, ())
        if p["keepdims"]:
            return TensorType(a.dtype, tuple(1 if i in axes else d for i, d in enumerate(a.shape)))
        return TensorType(a.dtype, tuple(d for i, d in enumerate(a.shape) if i not in axes))
    if op == "Reshape":
        dims = p["new_shape"]
        if sum(1 for d in dims if d == -1) > 1:
            raise _Fail("reshape-dims", f"Reshape {dims} has more than one -1")
        if any(d == 0 or d < -1 for d in dims):
            raise _Fail("reshape-dims", f"Reshape dims {dims} must be positive (or one -1)")
        if not a.static:
            return TensorType(a.dtype, tuple("?" if d == -1 else d for d in dims))
        n = a.numel()
        known = 1
        for d in dims:
            if d != -1:
                known *= d
        if -1 in dims:
            if known == 0 or n % known:
                raise _Fail("reshape-element-count", f"Element count mismatch: {n} elements of {list(a.shape)} "
                                                     f"cannot fill {dims} (catalogue E3007)")
            dims = [n // known if d == -1 else d for d in dims]
        elif known != n:
            raise _Fail("reshape-element-count", f"Element count mismatch: input {list(a.shape)} has {n} elements, "
                                                 f"new shape {dims} has {known} (catalogue E3007)")
        return TensorType(a.dtype, tuple(dims))
    if op == "Transpose":
        perm = p.get("permutation")
        if perm is None:
            if a.rank < 2:
                raise _Fail("transpose-perm", "Transpose without a permutation needs rank >= 2")
            perm = list(range(a.rank - 2)) + [a.rank - 1, a.rank - 2]
            p["permutation"] = perm
        if len(perm) != a.rank or sorted(perm) != list(range(a.rank)):
            raise _Fail("transpose-perm", f"Transpose permutation {perm} is not a permutation of 0..{a.rank - 1}")
        return TensorType(a.dtype, tuple(a.shape[i] for i in perm))
    if op == "ExpandDims":
        shape = list(a.shape)
        for ax in sorted(p["axes"]):
            if not 0 <= ax <= len(shape):
                raise _Fail("expand-axes", f"ExpandDims axis {ax} is outside [0, {len(shape)}] at insertion")
            shape.insert(ax, 1)
        return TensorType(a.dtype, tuple(shape))
    if op == "Squeeze":
        axes = _norm_axes(p["axes"], a.rank, "squeeze-axes", "Squeeze")
        for ax in axes:
            if a.shape[ax] != 1 and not isinstance(a.shape[ax], str):
                raise _Fail("squeeze-axes", f"Squeeze axis {ax} has size {a.shape[ax]}, not 1")
        return TensorType(a.dtype, tuple(d for i, d in enumerate(a.shape) if i not in axes))
    if op == "Index":
        if len(p["indices"]) != a.rank:
            raise _Fail("index-length", f"Index has {len(p['indices'])} indices for a rank-{a.rank} input")
        return TensorType(a.dtype, ())
    if op == "Slice":
        st, en, sp = p["starts"], p["ends"], p["steps"]
        if not len(st) == len(en) == len(sp) == a.rank:
            raise _Fail("slice-lengths", f"Slice starts/ends/steps have lengths {len(st)}/{len(en)}/{len(sp)}, "
                                         f"the input rank is {a.rank}")
        if any(s == 0 for s in sp):
            raise _Fail("slice-zero-step", f"Slice steps {sp} contain 0")
        return TensorType(a.dtype, tuple(slice_len(d, s, e, k) if isinstance(d, int) else "?"
                                         for d, s, e, k in zip(a.shape, st, en, sp)))
    if op == "Gather":
        idx = ts[1]
        if idx.dtype not in ("i32", "i64"):
            raise _Fail("gather-index-dtype", f"Gather indices are {idx.dtype}, not i32 or i64")
        if a.rank < 1:
            raise _Fail("operands", "Gather needs an input of rank >= 1")
        return TensorType(a.dtype, tuple(idx.shape) + tuple(a.shape[1:]))
    if op in ("Dot", "MatMul"):
        b = ts[1]
        if a.dtype != b.dtype:
            raise _Fail("dtype-mismatch", f"{op} mixes {a.dtype} and {b.dtype}")
        if op == "Dot" and not (a.rank == 2 and b.rank == 2):
            if a.rank not in (1, 2) or b.rank not in (1, 2):
                raise _Fail("dot-shape", f"Dot needs rank-1 or rank-2 operands, not ranks {a.rank} and {b.rank}")
            ka = a.shape[-1]
            kb = b.shape[0]
            if ka != kb and isinstance(ka, int) and isinstance(kb, int):
                raise _Fail("dot-shape", f"Dot inner dimensions differ: {list(a.shape)} · {list(b.shape)}")
            return TensorType(a.dtype, tuple(a.shape[:-1]) + tuple(b.shape[1:]))
        if a.rank < 2 or b.rank < 2:
            raise _Fail("matmul-shape", f"MatMul needs rank >= 2 operands, not ranks {a.rank} and {b.rank}")
        if a.shape[-1] != b.shape[-2] and isinstance(a.shape[-1], int) and isinstance(b.shape[-2], int):
            raise _Fail("matmul-shape", f"MatMul K differs: {list(a.shape)} @ {list(b.shape)}")
        try:
            batch = broadcast(a.shape[:-2], b.shape[:-2])
        except _Fail as e:
            raise _Fail("matmul-shape", f"MatMul batch dims: {e.message}") from None
        return TensorType(a.dtype, batch + (a.shape[-2], b.shape[-1]))
    if op == "Conv2d":
        f = ts[1]
        if a.dtype != f.dtype:
            raise _Fail("dtype-mismatch", f"Conv2d mixes {a.dtype} and {f.dtype}")
        if a.rank != 4 or f.rank != 4:
            raise _Fail("conv-shape", f"Conv2d needs rank-4 input (NHWC) and filter (HWCF), not ranks {a.rank}, {f.rank}")
        if a.shape[3] != f.shape[2] and isinstance(a.shape[3], int) and isinstance(f.shape[2], int):
            raise _Fail("conv-channels", f"Conv2d channel mismatch: input has {a.shape[3]}, filter expects {f.shape[2]}")
        st = p["strides"]
        if len(st) != 2 or any(s <= 0 for s in st):
            raise _Fail("conv-strides", f"Conv2d strides {st} must be 2 positive integers")
        pad = p["padding"]
        if isinstance(pad, tuple) and any(x < 0 for pr in pad for x in pr):
            raise _Fail("conv-shape", f"Conv2d padding {pad} has a negative value")
        hw = []
        for ax in range(2):
            size, k = a.shape[1 + ax], f.shape[ax]
            if not (isinstance(size, int) and isinstance(k, int)):
                hw.append("?")
                continue
            o = conv_out(size, k, st[ax], pad, ax)
            if o < 1:
                raise _Fail("conv-shape", f"Conv2d output {'HW'[ax]} would be {o} (input {size}, kernel {k})")
            hw.append(o)
        return TensorType(a.dtype, (a.shape[0], hw[0], hw[1], f.shape[3]))
    if op in ("Relu", "Exp", "Log"):
        if a.dtype not in FLOAT_DTYPES:
            raise _Fail("dtype-kind", f"{op} needs a float dtype, not {a.dtype}")
        return a
    if op == "Neg":
        if a.dtype == "bool" or a.dtype.startswith("u"):
            raise _Fail("dtype-kind", f"Neg needs a signed numeric dtype, not {a.dtype}")
        return a
    raise _Fail("unknown-op", f"{op!r} is not a Core v1 instruction")


def _types_equal(declared: TensorType, inferred: TensorType) -> bool:
    if declared.dtype != inferred.dtype or declared.rank != inferred.rank:
        return False
    return all(x == y or isinstance(x, str) or isinstance(y, str) for x, y in zip(declared.shape, inferred.shape))


def _judge(ins: Instr, ok: bool, operand_types: list) -> tuple[list, Optional[TensorType]]:
    """((rule, message) problems, result type or None) of one instruction whose operands are looked up."""
    found = []
    if ins.arg_error:
        found.append(("operands", ins.arg_error))
        ok = False
    elif len(ins.operands) != ARITY[ins.opcode]:
        found.append(("operands", f"{ins.opcode} takes {ARITY[ins.opcode]} operand(s), {len(ins.operands)} given"))
        ok = False
    if ins.opcode == "BinOp" and ins.params.get("op") == "Div":
        found.append(("div-not-core", "BinOp Div is not part of Core v1 (the seed says to reject it)"))
    if ins.type is not None:
        bad = [d for d in ins.type.shape if isinstance(d, int) and (d < 0 or (d == 0 and ins.opcode != "Slice"))]
        if bad:
            found.append(("dim-positive", f"type {ins.type.text()} has a non-positive dimension"))
            ok = False
    if not ok or any(t is None for t in operand_types):
        return found, None
    try:
        inferred = infer(ins, operand_types)
    except _Fail as e:
        found.append((e.rule, e.message))
        return found, None
    if ins.type is not None and not _types_equal(ins.type, inferred):
        found.append(("result-type", f"{ins.label()} is written as {ins.type.text()}, it produces {inferred.text()}"))
        return found, None
    return found, (ins.type if ins.type is not None and ins.type.static else inferred)


class Verified:
    """Problems plus the inferred type of every value (``None`` where it could not be inferred).
    ``limit``: the :class:`~.limit.ProblemLimit` that kept ``problems`` (it counts those left out)."""

    def __init__(self, problems: list, types: dict, limit: Optional[ProblemLimit] = None):
        self.problems = problems
        self.types = types
        self.limit = limit


def verify_module(mod: Module) -> Verified:
    _, types, lim = _verify_in_order(mod)
    undefined: dict[int, list] = {}            # one problem per undefined value, at its first mention
    for k, v in enumerate(mod.outputs):
        if v not in types:
            undefined.setdefault(v, []).append(k)
    for v, ks in undefined.items():
        k = ks[0]
        line, col, off = mod.output_cols[k] if k < len(mod.output_cols) else (mod.outputs_line, 1, mod.outputs_offset)
        if lim.wants(line, col, off):
            times = f" (listed {len(ks):,} times)" if len(ks) > 1 else ""
            lim.keep(problem("undefined-output", f"output %{v} is not defined{times}", line, col, off, len(f"%{v}")))
    if not mod.outputs:
        last = mod.instrs[-1] if mod.instrs else None
        line, off = (last.line, last.offset) if last else (1, 0)
        if lim.wants(line, 1, off):
            lim.keep(problem("no-outputs", "the module declares no outputs (an 'outputs: %…' line)", line, 1, off))
    return Verified(lim.problems(), types, lim)


def _unknown_op(ins: Instr) -> str:
    name = ins.dialect_op or ins.opcode
    return f"{name if len(name) <= 40 else name[:37] + '...'!r} is not a Core v1 instruction"


def _verify_in_order(mod: Module) -> tuple[list, dict, ProblemLimit]:
    lim = ProblemLimit()          # problems past its limit are counted, not built
    types: dict[int, Optional[TensorType]] = {}
    first_def: Optional[dict] = None

    def definer(vid: int) -> Optional[Instr]:
        """The first instruction defining ``vid`` (the table is built when a problem first asks)."""
        nonlocal first_def
        if first_def is None:
            first_def = {}
            for i in mod.instrs:
                first_def.setdefault(i.vid, i)
        return first_def.get(vid)

    def at(ins: Instr, rule: str, message) -> None:
        """``message``: the text, or a function of no arguments making it (called only when it is kept)."""
        if not lim.past(ins.line) and lim.wants(ins.line, ins.column, ins.offset):
            lim.keep(problem(rule, message if type(message) is str else message(), ins.line, ins.column, ins.offset,
                             ins.length))

    memo: dict = {}      # lines that differ only in their value ids are judged once
    defined, type_of = types.__contains__, types.__getitem__
    for ins in mod.instrs:
        vid = ins.vid
        if vid in types:
            at(ins, "multiple-definition",
               lambda: f"%{vid} is defined again (first defined at line {definer(vid).line})")
            continue
        operands = ins.operands
        ok = True
        if all(map(defined, operands)):
            operand_types = list(map(type_of, operands))
        else:
            ok = False
            operand_types = [types[v] for v in operands if v in types]
            # past the limit the undefined uses are counted without their columns or wording
            if not lim.past(ins.line, len(operands) - len(operand_types)):
                for k, v in enumerate(operands):
                    if v in types:
                        continue
                    cols = ins.operand_cols
                    line, col, off = cols[k] if k < len(cols) else (ins.line, ins.column, ins.offset)
                    if not lim.wants(line, col, off):
                        continue
                    later = definer(v)
                    where = f" (defined at line {later.line})" if later is not None else " (never defined)"
                    lim.keep(problem("use-before-def", f"instruction at line {ins.line} uses %{v} before "
                                     f"definition{where}", line, col, off, len(f"%{v}")))
        opcode = ins.opcode
        if opcode == ALIAS:
            types[vid] = operand_types[0] if ok else None
            continue
        if opcode not in CORE_OPS:
            at(ins, "unknown-op", _unknown_op(ins))
            types[vid] = None
            continue
        if ins.attrs:        # attributes (Input, ConstTensor) are not keyed
            found, types[vid] = _judge(ins, ok, operand_types)
        else:
            # what _judge depends on, by identity (the parser shares one params dict and one TensorType per
            # spelling, the verifier passes declared types on)
            key = (id(ins.params), opcode, ins.arg_error, len(operands), ok, id(ins.type)) + tuple(
                map(id, operand_types))
            hit = memo.get(key)
            if hit is None:
                hit = _judge(ins, ok, operand_types)
                if len(memo) < 65536:
                    memo[key] = hit + (ins.params, operand_types, ins.type)     # keyed objects pinned: ids stay valid
            found = hit[0]
            types[vid] = hit[1]
        if found:
            for rule, message in found:
                at(ins, rule, message)
    return lim.problems(), types, lim
