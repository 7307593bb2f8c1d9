"""The ``mic@2`` compact dialect → :class:`~.ir.Module` (same records as the text parser).

``mic@2`` gives values implicit ids in order of appearance: ``a NAME T<i>`` (an argument),
``p NAME T<i>`` (a parameter: a named input whose data the file does not carry), and nodes
``<opcode> <input ids…> [<literal ints>…]``. Types are ``T<i> dtype dims…`` lines numbered from 0;
``O <id>`` names the output. Opcodes outside Core v1 (softmax, gelu, layer norm…) are kept under
their mic name and the verifier reports them as unknown to Core v1.
"""
from __future__ import annotations

import re

from .errors import MindError
from .limit import ProblemLimit
from .ir import DTYPES, Instr, Module, TensorType, Token
from .parser import MAX_INT_DIGITS, MAX_RANK, Parsed, split_lines

MAX_VALUES = 100_000
_WORD = re.compile(rb"[^ \t\r\n]+")
#: mic opcode -> (Core opcode, BinOp kind, arity)
_OPS = {"m": ("MatMul", None, 2), "+": ("BinOp", "Add", 2), "-": ("BinOp", "Sub", 2), "*": ("BinOp", "Mul", 2),
        "/": ("BinOp", "Div", 2), "r": ("Relu", None, 1), "t": ("Transpose", None, 1), "rshp": ("Reshape", None, 1),
        "sum": ("Sum", None, 1), "mean": ("Mean", None, 1), "gth": ("Gather", None, 2)}
_NON_CORE = {"s": 1, "sig": 1, "th": 1, "gelu": 1, "ln": 1, "max": 1, "cat": -1, "split": 1}


def _int(tok: Token, number: int, start: int) -> int:
    t = tok.text
    if not re.fullmatch(r"-?[0-9]+", t) or len(t.lstrip("-")) > MAX_INT_DIGITS:
        raise MindError(number, tok.offset - start + 1, tok.offset, f"expected an integer, found {t[:40]!r}",
                        length=tok.length)
    return int(t)


def parse_mic2(data: bytes, strict: bool = False) -> Parsed:
    mod = Module(instrs=[], outputs=[], dialect="mic@2")
    records: list = []
    lim = ProblemLimit()         # syntax errors past its limit are counted (their lines' records keep them)
    types: list[TensorType] = []
    header = False
    next_id = 0
    for number, start, end, stop in split_lines(data):
        try:
            try:
                text = data[start:stop].decode("utf-8")
            except UnicodeDecodeError:
                raise MindError(number, 1, start, "text is not valid UTF-8") from None
            body = text.split("#", 1)[0]
            toks = [Token("word", m.group().decode("utf-8"), start + m.start(), m.end() - m.start())
                    for m in _WORD.finditer(data, start, start + len(body.encode("utf-8")))]
            if not toks:
                records.append(("comment" if body != text else "blank", number, start, end, None))
                continue
            head = toks[0]
            col = lambda t: t.offset - start + 1   # noqa: E731
            if not header:
                if head.text != "mic@2" or len(toks) != 1:
                    raise MindError(number, 1, start, "the first line of a mic@2 file must be 'mic@2'")
                header = True
                records.append(("header", number, start, end, None))
                continue
            h = head.text
            if h == "S":
                records.append(("symbol", number, start, end, None))
                continue
            if re.fullmatch(r"T[0-9]+", h):
                idx = int(h[1:]) if len(h) < 12 else -1
                if idx != len(types):
                    raise MindError(number, 1, head.offset, f"type {h} out of order (expected T{len(types)})")
                if len(toks) < 2 or toks[1].text not in DTYPES:
                    raise MindError(number, col(toks[1]) if len(toks) > 1 else 1, head.offset,
                                    "a type line is 'T<i> <dtype> <dims…>'")
                if len(toks) - 2 > MAX_RANK:
                    raise MindError(number, col(toks[2]), toks[2].offset, f"more than {MAX_RANK} dimensions")
                for t in toks[2:]:
                    if not re.fullmatch(r"[0-9]+|[A-Za-z_][A-Za-z0-9_]*|\?", t.text):
                        raise MindError(number, col(t), t.offset, f"a dimension is a size, a symbol or '?', "
                                        f"not {t.text[:40]!r}", length=t.length)
                dims = tuple(_int(t, number, start) if t.text.isdigit() else t.text for t in toks[2:])
                types.append(TensorType(toks[1].text, dims))
                records.append(("type", number, start, end, None))
                continue
            if h == "O":
                if len(toks) != 2:
                    raise MindError(number, 1, head.offset, "an output line is 'O <value id>'")
                mod.outputs.append(_int(toks[1], number, start))
                mod.output_cols.append((number, col(toks[1]), toks[1].offset))
                mod.outputs_line, mod.outputs_column, mod.outputs_offset = number, 1, head.offset
                records.append(("outputs", number, start, end, None))
                continue
            if next_id >= MAX_VALUES:
                raise MindError(number, 1, head.offset, f"more than {MAX_VALUES:,} values")
            ins = Instr(vid=next_id, opcode="", operands=[], name=f"%{next_id}", line=number, column=1,
                        offset=head.offset, length=toks[-1].offset + toks[-1].length - head.offset, dialect_op=h)
            ins.tokens.append(("opcode", head))
            if h in ("a", "p"):
                if len(toks) != 3 or not re.fullmatch(r"T[0-9]+", toks[2].text):
                    raise MindError(number, 1, head.offset, f"'{h}' lines are '{h} <name> T<i>'")
                ti = int(toks[2].text[1:]) if len(toks[2].text) < 12 else -1
                if not 0 <= ti < len(types):
                    raise MindError(number, col(toks[2]), toks[2].offset, f"type {toks[2].text} is not defined")
                ins.opcode = "Input"
                ins.attrs = {"name": toks[1].text} if h == "a" else {"name": toks[1].text, "role": "param"}
                ins.type = types[ti]
                ins.tokens += [("attr name", toks[1]), ("type", toks[2])]
            else:
                core = _OPS.get(h)
                arity = core[2] if core else _NON_CORE.get(h)
                if arity is None:
                    raise MindError(number, 1, head.offset, f"unknown mic@2 opcode {h[:40]!r}")
                ins.opcode = core[0] if core else f"mic:{h}"
                ints = [_int(t, number, start) for t in toks[1:]]
                n_in = arity if arity >= 0 else len(ints)
                if len(ints) < n_in:
                    raise MindError(number, 1, head.offset, f"{h} takes {n_in} input(s), {len(ints)} given")
                ins.operands = ints[:n_in]
                lits = ints[n_in:]
                for k, t in enumerate(toks[1:1 + n_in]):
                    ins.tokens.append((f"operand[{k}]", t))
                    ins.operand_cols.append((number, col(t), t.offset))
                if core and core[1]:
                    ins.params["op"] = core[1]
                elif ins.opcode in ("Sum", "Mean"):
                    ins.params.update(axes=lits, keepdims=False)
                elif ins.opcode == "Transpose":
                    ins.params["permutation"] = lits or None       # None: swap the last two axes
                elif ins.opcode == "Reshape":
                    ins.params["new_shape"] = lits
                elif ins.opcode == "Gather" and lits not in ([], [0]):
                    ins.arg_error = "Core v1 Gather indexes the first axis only"
                elif lits and core:
                    ins.arg_error = f"mic@2 '{h}' takes no literal parameters, {len(lits)} given"
                elif lits:
                    ins.params["args"] = lits
            next_id += 1
            mod.instrs.append(ins)
            records.append(("instr", number, start, end, ins))
        except MindError as e:
            if strict:
                raise
            lim.add(e)
            records.append(("error", number, start, end, e))
    if not header and not lim.found():
        e = MindError(1, 1, 0, "empty mic@2 file (no header)")
        if strict:
            raise e
        lim.add(e)
    return Parsed(mod, records, lim.problems(), limit=lim)
