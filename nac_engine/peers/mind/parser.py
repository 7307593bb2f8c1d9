"""Text → :class:`~.ir.Module` for every MIND Core IR dialect, keeping a byte span per token.

Dialects (research note peer_formats.md §1.3), told apart line by line, so one parser reads all:

* the spec's reference encoding: ``%3 = BinOp(Add, %0, %1) {k: v} : Tensor<f32, [2, 3]>``,
  ``outputs: %3``, ``#`` comments, and the alias lines ``%8 = %7`` the autodiff sample uses;
* the Python reference tool: ``%2 = Add (%0, %1) : tensor<f32[2, 4]>``, ``{name=x}``;
* the Rust printer: ``module { … %4 = const.i64 7 … output %4 }  // next_id = 5`` with lower-case
  ops, ``key=value`` parameters and no result types;
* ``mic@2``: a header line, ``T<i> dtype dims…`` types, ``a``/``p`` values, ``m 0 1``-style nodes
  with implicit ids and one ``O <id>`` line.

Hostile text is bounded before anything is built: literals nest at most ``MAX_DEPTH`` deep,
integers have at most ``MAX_INT_DIGITS`` digits, a tensor type has at most ``MAX_RANK`` dims, a
file at most ``MAX_LINES`` lines. Problems are :class:`~.errors.MindError` (line, column, offset);
lenient parsing skips the bad line and goes on, strict parsing raises the first.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from .errors import MindError
from .limit import ProblemLimit
from .ir import ALIAS, BINOPS, CORE_OPS, DTYPES, Instr, Module, TensorType, Token, literal_text

MAX_DEPTH = 64
MAX_INT_DIGITS = 40
MAX_RANK = 32
MAX_LINES = 1_000_000
MAX_LIST_ITEMS = 1 << 22

_TOKEN = re.compile(rb"""
 (?P<ws>[ \t\r\f\v]+)
|(?P<comment>\#[^\n]*|//[^\n]*)
|(?P<value>%[A-Za-z0-9_]+)
|(?P<ident>[A-Za-z_][A-Za-z0-9_.@]*)
|(?P<punct>[()\[\]{}<>,:=;?*])
|(?P<float>[-+]?(?:[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+|\.[0-9]+(?:[eE][-+]?[0-9]+)?))
|(?P<int>[-+]?[0-9]+)
|(?P<sign>[/+\-])
|(?P<string>"[^"\\\n]*(?:\\.[^"\\\n]*)*")
|(?P<bad>.)
""", re.VERBOSE | re.DOTALL)  # most frequent first; numbers before the sign so "-1" is one token

#: how each dialect spells an opcode -> (Core opcode, BinOp kind or None)
_OPCODES: dict[str, tuple] = {op: (op, None) for op in CORE_OPS}
_OPCODES.update({k: ("BinOp", k) for k in BINOPS})                         # Python tool: ``Add (…)``
_OPCODES.update({k.lower(): ("BinOp", k) for k in BINOPS})                 # Rust printer: ``add``
_OPCODES.update({
    "input": ("Input", None), "const.i64": ("ConstI64", None), "const.f32": ("ConstF32", None),
    "const.f64": ("ConstF64", None), "const.tensor": ("ConstTensor", None), "sum": ("Sum", None),
    "mean": ("Mean", None), "reshape": ("Reshape", None), "transpose": ("Transpose", None),
    "expand_dims": ("ExpandDims", None), "expanddims": ("ExpandDims", None), "squeeze": ("Squeeze", None),
    "index": ("Index", None), "slice": ("Slice", None), "gather": ("Gather", None), "dot": ("Dot", None),
    "matmul": ("MatMul", None), "conv2d": ("Conv2d", None), "relu": ("Relu", None), "neg": ("Neg", None),
    "exp": ("Exp", None), "log": ("Log", None),
})
#: keyword spellings of parameters (``axes=[1] keepdims=true``, ``shape=[…]``)
_PARAM_ALIASES = {"shape": "new_shape", "perm": "permutation", "dims": "axes", "keep_dims": "keepdims",
                  "stride": "strides", "value": "value"}
_LIST_PARAMS = frozenset({"axes", "new_shape", "permutation", "indices", "starts", "ends", "steps", "strides"})


class _Line:
    """The tokens of one source line (comments and whitespace dropped) and where it starts."""

    def __init__(self, number: int, start: int, end: int, tokens: list, comment: Optional[Token]):
        self.number = number
        self.start = start
        self.end = end            # offset just past the line's newline (or end of file)
        self.tokens = tokens
        self.comment = comment
        self.pos = 0

    def err(self, tok: Optional[Token], reason: str) -> MindError:
        off = tok.offset if tok is not None else (self.tokens[-1].offset + self.tokens[-1].length
                                                  if self.tokens else self.start)
        return MindError(self.number, off - self.start + 1, off, reason, length=tok.length if tok else 0)

    def peek(self, k: int = 0) -> Optional[Token]:
        i = self.pos + k
        return self.tokens[i] if i < len(self.tokens) else None

    def next(self, what: str) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.err(None, f"line ends where {what} was expected")
        self.pos += 1
        return tok

    def expect(self, text: str) -> Token:
        tok = self.peek()
        if tok is None or tok.text != text or tok.kind in ("string", "comment"):
            raise self.err(tok, f"expected {text!r}" + (f", found {_show(tok.text)}" if tok else " before the end of the line"))
        self.pos += 1
        return tok

    def accept(self, text: str) -> Optional[Token]:
        tok = self.peek()
        if tok is not None and tok.text == text and tok.kind == "punct":
            self.pos += 1
            return tok
        return None

    @property
    def done(self) -> bool:
        return self.pos >= len(self.tokens)


def _show(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def split_lines(data: bytes):
    """(number, start, end_with_newline, content_end) per line; at most ``MAX_LINES``."""
    start, number, n = 0, 0, len(data)
    while start < n:
        number += 1
        if number > MAX_LINES:
            raise MindError(number, 1, start, f"more than {MAX_LINES:,} lines")
        nl = data.find(b"\n", start)
        end = n if nl < 0 else nl + 1
        yield number, start, end, (n if nl < 0 else nl)
        start = end


_new_token = tuple.__new__       # Token(...) through tuple.__new__: a third of NamedTuple's call cost


def tokenize_line(data: bytes, number: int, start: int, stop: int) -> tuple[list, Optional[Token]]:
    tokens: list[Token] = []
    comment = None
    append = tokens.append
    raw = data[start:stop]
    text_line = raw.decode("latin-1") if raw.isascii() else None    # ASCII: one decode for the line
    for m in _TOKEN.finditer(data, start, stop):
        kind = m.lastgroup
        if kind == "ws":
            continue
        pos, end = m.span()
        if kind == "bad":
            ch = data[pos:pos + 1]
            if ch == b'"':
                raise MindError(number, pos - start + 1, pos, "unterminated string (no closing '\"' on this line)",
                                length=stop - pos)
            raise MindError(number, pos - start + 1, pos, f"unexpected character {ch!r}", length=1)
        if text_line is not None:
            text = text_line[pos - start:end - start]
        else:
            try:
                text = m.group().decode("utf-8")
            except UnicodeDecodeError:
                raise MindError(number, pos - start + 1, pos, "text is not valid UTF-8", length=end - pos) from None
        if kind == "sign":
            kind = "punct"
        if kind == "comment":
            comment = _new_token(Token, (kind, text, pos, end - pos))
        else:
            append(_new_token(Token, (kind, text, pos, end - pos)))
    return tokens, comment


# ----------------------------------------------------------------------------- literal values
def unescape(text: str) -> str:
    """``\\"`` -> ``"``, ``\\\\`` -> ``\\`` (the printer's two escapes; others keep the escaped char)."""
    return re.sub(r"\\(.)", r"\1", text)


def escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


# Literal values print as they were written (``__str__``: literal_text's fallback): the listing of a
# module with problems shows them where a check refused them, never an object's repr.
class Ref:
    __slots__ = ("name", "tok")

    def __init__(self, name: str, tok: Token):
        self.name, self.tok = name, tok

    def __str__(self) -> str:
        return self.name


class Ident(str):
    """A bare word (``Add``, ``Same``); kept apart from strings."""


class Call:
    __slots__ = ("name", "args")

    def __init__(self, name: str, args: list):
        self.name, self.args = name, args

    def __str__(self) -> str:
        return f"{self.name}({', '.join(literal_text(a) for a in self.args)})"


class Range:
    __slots__ = ("start", "end", "step")

    def __init__(self, start, end, step):
        self.start, self.end, self.step = start, end, step

    def __str__(self) -> str:
        parts = ["" if v is None else str(v) for v in (self.start, self.end, self.step)]
        return ":".join(parts if self.step is not None else parts[:2])


def _int(line: _Line, tok: Token) -> int:
    digits = tok.text.lstrip("+-")
    if len(digits) > MAX_INT_DIGITS:
        raise line.err(tok, f"integer literal of {len(digits):,} digits (at most {MAX_INT_DIGITS})")
    return int(tok.text)


def _float(line: _Line, tok: Token) -> float:
    if len(tok.text) > 400:
        raise line.err(tok, f"number literal of {len(tok.text):,} characters")
    return float(tok.text)


def parse_value(line: _Line, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise line.err(line.peek(), f"literal nested more than {MAX_DEPTH} deep")
    tok = line.next("a value")
    k = tok.kind
    if k == "value":
        return Ref(tok.text, tok)
    if k == "int":
        v = _int(line, tok)
        return _maybe_range(line, v, depth)
    if k == "float":
        return _float(line, tok)
    if k == "string":
        return unescape(tok.text[1:-1])
    if k == "ident":
        low = tok.text.lower()
        if low in ("true", "false"):
            return low == "true"
        if low in ("inf", "nan"):
            return float(low)
        if line.accept("("):
            return Call(tok.text, _items(line, ")", depth + 1))
        return Ident(tok.text)
    if tok.text == "-" and line.peek() is not None and line.peek().text.lower() == "inf":
        line.pos += 1
        return float("-inf")
    if tok.text == "[":
        return _items(line, "]", depth + 1)
    if tok.text == "(":
        return tuple(_items(line, ")", depth + 1))
    if tok.text == ":":            # ``[:3]`` style range with an omitted start
        line.pos -= 1
        return _maybe_range(line, None, depth)
    raise line.err(tok, f"expected a value, found {_show(tok.text)}")


def _maybe_range(line: _Line, first, depth: int):
    if not line.accept(":"):
        return first
    parts = [first]
    while True:
        tok = line.peek()
        if tok is not None and tok.kind == "int":
            line.pos += 1
            parts.append(_int(line, tok))
        else:
            parts.append(None)
        if len(parts) == 3 or not line.accept(":"):
            break
    while len(parts) < 3:
        parts.append(None)
    return Range(*parts)


def _items(line: _Line, close: str, depth: int) -> list:
    if depth > MAX_DEPTH:
        raise line.err(line.peek(), f"literal nested more than {MAX_DEPTH} deep")
    items: list = []
    if line.accept(close):
        return items
    while True:
        if len(items) >= MAX_LIST_ITEMS:
            raise line.err(line.peek(), f"more than {MAX_LIST_ITEMS:,} items in one list")
        items.append(parse_value(line, depth))
        if line.accept(close):
            return items
        line.expect(",")


def parse_type(line: _Line) -> TensorType:
    head = line.next("a tensor type")
    if head.kind == "ident" and head.text in DTYPES:       # a bare dtype: a scalar
        return TensorType(head.text, ())
    if head.kind != "ident" or head.text.lower() != "tensor":
        raise line.err(head, f"expected a tensor type like Tensor<f32, [2, 3]>, found {_show(head.text)}")
    line.expect("<")
    dt = line.next("a dtype")
    if dt.kind != "ident" or dt.text not in DTYPES:
        raise line.err(dt, f"unknown dtype {_show(dt.text)} (expected one of {', '.join(DTYPES)})")
    line.accept(",")
    dims: list = []
    if line.accept("["):
        if not line.accept("]"):
            while True:
                d = line.next("a dimension")
                if len(dims) >= MAX_RANK:
                    raise line.err(d, f"tensor type with more than {MAX_RANK} dimensions")
                if d.kind == "int":
                    dims.append(_int(line, d))
                elif d.kind == "ident" or d.text == "?":
                    dims.append(d.text)
                else:
                    raise line.err(d, f"expected a dimension, found {_show(d.text)}")
                if line.accept("]"):
                    break
                line.expect(",")
    line.expect(">")
    return TensorType(dt.text, tuple(dims))


def _attrs(line: _Line, ins: Instr) -> None:
    """``{name: "a", k: v}`` or ``{name=a}``."""
    line.expect("{")
    if line.accept("}"):
        return
    while True:
        key = line.next("an attribute name")
        if key.kind not in ("ident", "string"):
            raise line.err(key, f"expected an attribute name, found {_show(key.text)}")
        sep = line.next("':' or '='")
        if sep.text not in (":", "="):
            raise line.err(sep, f"expected ':' or '=' after attribute {key.text!r}")
        val_tok = line.peek()
        value = parse_value(line)
        if isinstance(value, Ref):
            raise line.err(val_tok, "an attribute cannot be a value reference")
        name = key.text.strip('"')
        ins.attrs[name] = str(value) if isinstance(value, Ident) else value
        ins.tokens.append((f"attr {name}", key))
        if line.accept("}"):
            return
        line.expect(",")


# ----------------------------------------------------------------------------- instruction lines
def _vid(line: _Line, tok: Token) -> int:
    name = tok.text[1:]
    if name.isdigit():
        if len(name) > MAX_INT_DIGITS:
            raise line.err(tok, f"value id of {len(name):,} digits")
        return int(name)
    return -1     # ``%x``: numbered by the module after parsing


def _instruction(line: _Line, result: Token, dialect: str) -> tuple[Instr, str]:
    ins = Instr(vid=_vid(line, result), opcode="", operands=[], name=result.text, line=line.number,
                column=result.offset - line.start + 1, offset=result.offset)
    ins.tokens.append(("result", result))
    line.pos = 1
    line.expect("=")
    op = line.next("an opcode")
    if op.kind == "value":                         # ``%8 = %7``
        ins.opcode = ALIAS
        ins.dialect_op = "="
        ins.operands.append(op.text)
        ins.operand_cols.append((line.number, op.offset - line.start + 1, op.offset))
        ins.tokens.append(("operand[0]", op))
        _finish(line, ins)
        return ins, dialect
    if op.kind != "ident":
        raise line.err(op, f"expected an opcode, found {_show(op.text)}")
    ins.dialect_op = op.text
    ins.tokens.append(("opcode", op))
    core, binop = _OPCODES.get(op.text, (op.text, None))
    ins.opcode = core
    positional: list = []
    keyword: dict = {}
    if line.accept("("):
        if dialect == "spec" and op.text != core and binop is not None:
            dialect = "python"
        args = _items(line, ")", 1)
        positional = args
    else:
        if op.text.islower() and dialect == "spec":
            dialect = "module"
        while not line.done and line.peek().text not in (":", "{"):
            t = line.peek()
            if t.kind == "ident" and line.peek(1) is not None and line.peek(1).text == "=":
                line.pos += 2
                keyword[_PARAM_ALIASES.get(t.text, t.text)] = parse_value(line)
                ins.tokens.append((f"param {t.text}", t))
            else:
                positional.append(parse_value(line))
            line.accept(",")
    if not line.done and line.peek().text == "{":
        _attrs(line, ins)
    if line.accept(":"):
        tstart = line.peek()
        ins.type = parse_type(line)
        if tstart is not None:
            last = line.tokens[line.pos - 1]
            ins.tokens.append(("type", Token("type", "", tstart.offset, last.offset + last.length - tstart.offset)))
    _finish(line, ins)
    _bind(line, ins, binop, positional, keyword)
    return ins, dialect


def _finish(line: _Line, ins: Instr) -> None:
    if not line.done:
        raise line.err(line.peek(), f"unexpected {_show(line.peek().text)} after the instruction")
    last = line.tokens[-1]
    ins.length = last.offset + last.length - ins.offset


def _bind(line: _Line, ins: Instr, binop: Optional[str], positional: list, keyword: dict) -> None:
    """Split arguments into value operands and the op's named literal parameters."""
    literals = []
    for i, v in enumerate(positional):
        if isinstance(v, Ref):
            ins.operands.append(v.name)
            ins.operand_cols.append((line.number, v.tok.offset - line.start + 1, v.tok.offset))
            ins.tokens.append((f"operand[{len(ins.operands) - 1}]", v.tok))
        else:
            literals.append(v)
    for v in keyword.values():
        if isinstance(v, Ref):
            ins.arg_error = "a parameter cannot be a value reference"
    _bind_literals(ins, binop, literals, keyword)


def _bind_literals(ins: Instr, binop: Optional[str], literals: list, keyword: dict) -> None:
    """The op's named literal parameters from its positional literals and keywords."""
    if ins.opcode not in CORE_OPS:
        ins.params = {"args": literals, **keyword}
        return
    if ins.opcode == "ConstTensor" and "fill" in keyword:
        _bind_fill(ins, literals, keyword)
        return
    if "axis" in keyword and ins.opcode in ("ExpandDims", "Squeeze"):    # ``expand_dims %x axis=0``
        axis = keyword.pop("axis")
        keyword["axes"] = [axis] if isinstance(axis, int) and not isinstance(axis, bool) else axis
    names = list(CORE_OPS[ins.opcode])
    if binop is not None:
        ins.params["op"] = binop
        names.remove("op")
    if ins.opcode == "Slice" and len(literals) == 1 and isinstance(literals[0], list) and \
            all(isinstance(r, Range) for r in literals[0]):
        ranges = literals[0]
        literals = [[r.start for r in ranges], [r.end for r in ranges], [1 if r.step is None else r.step for r in ranges]]
        if any(s is None for s in literals[0] + literals[1]):
            ins.arg_error = "a slice range needs both start and end"
            return
    if len(literals) > len(names):
        ins.arg_error = f"{ins.opcode} takes {len(names)} literal parameter(s), {len(literals)} given"
        return
    raw = dict(zip(names, literals))
    raw.update(keyword)
    for name in names:
        if name not in raw:
            if name == "keepdims":
                raw[name] = False
            elif name in ("axes",) and ins.opcode in ("Sum", "Mean"):
                raw[name] = []
            else:
                ins.arg_error = f"{ins.opcode} is missing its {name!r} parameter"
                return
    for name, v in raw.items():
        err = _check_param(ins, name, v)
        if err:
            ins.arg_error = err
            return


def _bind_fill(ins: Instr, literals: list, keyword: dict) -> None:
    """The Rust printer's filled constant: ``const.tensor F32 ["2", "3"] fill=1.5`` (dtype and
    shape as positional literals, dims quoted because they may be symbols). Kept as a fill value
    and a type, never expanded here: a short line may stand for millions of elements."""
    fill = keyword.pop("fill")
    extra = [k for k in keyword if k not in ("dtype", "shape", "new_shape")]
    dtype = keyword.get("dtype", literals[0] if literals and isinstance(literals[0], (Ident, str)) else None)
    shape = keyword.get("shape", keyword.get("new_shape", literals[-1] if literals and isinstance(literals[-1], list) else None))
    if extra or len(literals) > 2:
        ins.arg_error = "const.tensor takes a dtype, a shape and fill=<value>"
        return
    if isinstance(fill, bool) or not isinstance(fill, (int, float)):
        ins.arg_error = f"const.tensor fill must be a number, not {fill!r}"
        return
    t = ins.type
    if dtype is not None or shape is not None:
        if dtype is None or shape is None or str(dtype).lower() not in DTYPES:
            ins.arg_error = f"const.tensor needs a dtype ({', '.join(DTYPES)}) and a shape"
            return
        dims = tuple(_dim(d) for d in shape)
        if any(d is None for d in dims) or len(dims) > MAX_RANK:
            ins.arg_error = f"const.tensor shape {shape!r} is not a list of at most {MAX_RANK} dimensions"
            return
        stated = TensorType(str(dtype).lower(), dims)
        if t is not None and t != stated:
            ins.arg_error = f"const.tensor says {stated.text()} and its type {t.text()}"
            return
        ins.type = stated
    elif t is None:
        ins.arg_error = "const.tensor needs a dtype and a shape"
        return
    ins.params["fill"] = fill


def _dim(d: Any) -> Any:
    """A dimension written as an int or a string (``"6"``, a symbol, ``"?"``); None if neither."""
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    if isinstance(d, str) and d:
        return _str_int(d) if _str_int(d) is not None else d
    return None


def _str_int(v: str) -> Optional[int]:
    """``"6"`` or ``"-1"`` as an int (the Rust printer quotes dims); None for anything else."""
    body = v[1:] if v[:1] == "-" else v
    return int(v) if body.isdigit() and body.isascii() and len(body) <= MAX_INT_DIGITS else None


def _check_param(ins: Instr, name: str, v: Any) -> Optional[str]:
    op = ins.opcode
    if name in _LIST_PARAMS and isinstance(v, (list, tuple)) and any(isinstance(x, str) for x in v):
        # quoted dims (``reshape %x ["6"]``): the Rust printer's spelling of static dims
        v = [_str_int(x) if isinstance(x, str) and _str_int(x) is not None else x for x in v]
    if name in _LIST_PARAMS:
        if not isinstance(v, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return f"{op} parameter {name!r} must be a list of integers"
        ins.params[name] = [int(x) for x in v]
    elif name == "keepdims":
        if not isinstance(v, bool):
            return f"{op} parameter 'keepdims' must be true or false"
        ins.params[name] = v
    elif name == "op":
        if not isinstance(v, Ident) or str(v) not in BINOPS:
            return f"BinOp kind must be one of {', '.join(BINOPS)}, not {v!r}"
        ins.params[name] = str(v)
    elif name == "value":
        if op == "ConstI64":
            if not isinstance(v, int) or isinstance(v, bool):
                return "ConstI64 needs an integer literal"
            ins.params[name] = int(v)
        else:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                return f"{op} needs a number literal"
            ins.params[name] = float(v)
    elif name == "data":
        if not _numeric_nest(v, 0):
            return "ConstTensor data must be a number or nested lists of numbers"
        ins.params[name] = v
    elif name == "padding":
        pad = _padding(v)
        if pad is None:
            return "Conv2d padding must be Valid, Same or Custom([[top, bottom], [left, right]])"
        ins.params[name] = pad
    else:
        ins.params[name] = v
    return None


def _numeric_nest(v: Any, depth: int) -> bool:
    if isinstance(v, bool):
        return True
    if isinstance(v, (int, float)):
        return True
    if isinstance(v, list) and depth < MAX_DEPTH:
        return all(_numeric_nest(x, depth + 1) for x in v)
    return False


def _padding(v: Any):
    if isinstance(v, Ident) and v.lower() in ("same", "valid"):
        return v.capitalize()
    if isinstance(v, Call) and v.name.lower() == "custom" and len(v.args) == 1:
        v = v.args[0]
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                  for x in p) for p in v):
        return (tuple(v[0]), tuple(v[1]))
    return None


def _outputs(line: _Line, first: Token, mod: Module) -> None:
    if not mod.outputs_line:         # where the outputs start (the first of several lines)
        mod.outputs_line = line.number
        mod.outputs_column = first.offset - line.start + 1
        mod.outputs_offset = first.offset
    line.accept(":")
    while not line.done:
        tok = line.next("an output value")
        if tok.kind != "value":
            raise line.err(tok, f"expected an output value like %3, found {_show(tok.text)}")
        mod.outputs.append(tok.text)
        mod.output_cols.append((line.number, tok.offset - line.start + 1, tok.offset))
        line.accept(",")


# ----------------------------------------------------------------------------- module
class Parsed:
    """What :func:`parse` returns: the module, the per-line records for the span tree, problems."""

    def __init__(self, module: Module, lines: list, problems: list, data: bytes = b"",
                 limit: Optional[ProblemLimit] = None):
        self.module = module
        # (kind, number, start, end, payload) per line; a line made from a remembered one (see
        # _LineMemo) is its Instr alone (a tuple per line is 5% of a big file's RAM): read them
        # through record()/records()
        self.lines = lines
        self.problems = problems
        self.limit = limit       # what kept ``problems`` (it counts the syntax errors left out of them)
        self.data = data

    def record(self, k: int) -> tuple:
        """``(kind, number, start, end, payload)`` of line record ``k``."""
        r = self.lines[k]
        if type(r) is tuple:
            return r
        start = r.offset - r.column + 1
        nl = self.data.find(b"\n", r.offset)
        return ("instr", r.line, start, len(self.data) if nl < 0 else nl + 1, r)

    def records(self, first: int = 0, stop: Optional[int] = None):
        for k in range(first, len(self.lines) if stop is None else stop):
            yield self.record(k)

    def kind(self, k: int) -> str:
        r = self.lines[k]
        return r[0] if type(r) is tuple else "instr"


def is_mic2(head: bytes) -> bool:
    """The first line that is not blank or a ``#`` comment is ``mic@2`` (looks at 4 KiB at most)."""
    for line in head[:4096].split(b"\n"):
        text = line.split(b"#", 1)[0].strip()
        if text:
            return text == b"mic@2"
    return False


def parse(data: bytes, strict: bool = False) -> Parsed:
    """The text dialects (spec and ``module { }``); ``mic@2`` is :func:`.mic2.parse_mic2`'s."""
    mod = Module(instrs=[], outputs=[], dialect="spec")
    records: list = []
    lim = ProblemLimit()         # syntax errors past its limit are counted (their lines' records keep them)
    dialect = "spec"
    general: list = []           # instructions read token by token (only they can name ``%x``)
    instrs = mod.instrs
    memo = _LineMemo(data)
    for number, start, end, stop in split_lines(data):
        ins = memo.instruction(number, start, stop, dialect)
        if ins is not None:
            instrs.append(ins)
            records.append(ins)
            continue
        try:
            tokens, comment = tokenize_line(data, number, start, stop)
            line = _Line(number, start, end, tokens, comment)
            if not tokens:
                records.append(("comment" if comment else "blank", number, start, end, comment))
                continue
            head = tokens[0]
            if head.kind == "value":
                ins, after = _instruction(line, head, dialect)
                memo.learn(ins, start, stop, dialect, after)
                dialect = after
                instrs.append(ins)
                general.append(ins)
                records.append(("instr", number, start, end, ins))
            elif head.kind == "ident" and head.text in ("outputs", "output"):
                # the Rust printer writes one ``output %N`` line per function result: every
                # outputs line adds its values, in file order (the reference verifier asks for
                # at least one output, not for one line)
                line.pos = 1
                _outputs(line, head, mod)
                records.append(("outputs", number, start, end, line))
            elif head.kind == "ident" and head.text == "module" and len(tokens) == 2 and tokens[1].text == "{":
                dialect = "module"
                records.append(("module", number, start, end, None))
            elif head.text == "}" and len(tokens) == 1:
                records.append(("module_end", number, start, end, None))
            else:
                raise line.err(head, f"expected an instruction (%N = …) or an outputs line, found {_show(head.text)}")
        except MindError as e:
            if strict:
                raise
            lim.add(e)
            records.append(("error", number, start, end, e))
    mod.dialect = dialect
    _number_values(mod, general)
    return Parsed(mod, records, lim.problems(), data, lim)


# ----------------------------------------------------------------------------- remembered lines
#: a value reference written with digits; ``split`` gives the text around them and the digits
_NUMBERED_REF = re.compile(rb"%([0-9]+)")
#: distinct line shapes remembered per file (a hostile file of all-different lines stays bounded)
MEMO_MAX = 4096


class _LineMemo:
    """Lines that differ only in their numbered value ids (``%7 = BinOp(Add, %0, %6) : …`` and
    ``%8 = BinOp(Add, %0, %7) : …``) read the same way: each such shape is read token by token
    once, and its other lines are made from it with their own ids, numbers and offsets; their
    tokens and operand positions are found from the line when first asked for (``Instr._source``);
    they share its ``params`` and ``attrs`` (read-only once parsed).
    A shape is remembered only when reading it was clean and every ``%<digits>`` of the line is
    the result or a top-level operand, in that order (not one inside a literal, a string or a
    comment), so what is made is what reading the line would give. This is what keeps a big file
    linear and quick: the token-by-token reading costs about 60 µs a line."""

    def __init__(self, data: bytes):
        self.data = data
        self.shapes: dict = {}
        self.source = (data, reparse_positions)

    def instruction(self, number: int, start: int, stop: int, dialect: str) -> Optional[Instr]:
        """The line's instruction made from its remembered shape, or None (read it token by token)."""
        if not self.shapes:
            return None
        parts = _NUMBERED_REF.split(self.data[start:stop])
        if len(parts) < 3:
            return None
        digits = parts[1::2]
        shape = self.shapes.get((dialect, *parts[0::2]))
        if shape is None or max(map(len, digits)) > MAX_INT_DIGITS:
            return None
        t, written = shape
        name = "%" + digits[0].decode("ascii")
        return Instr(int(digits[0]), t.opcode, list(map(int, digits[1:])), t.params, t.attrs, t.type,
                     number, t.column, start + t.column - 1, t.length + sum(map(len, digits)) - written, name,
                     t.arg_error, t.dialect_op, None, None, self.source)

    def learn(self, ins: Instr, start: int, stop: int, dialect: str, after: str) -> None:
        """Remember the shape of a line just read token by token, when it may stand for others (not
        one that switched the dialect: what its first reading decided is not the line's own)."""
        if len(self.shapes) >= MEMO_MAX or after != dialect:
            return
        parts = _NUMBERED_REF.split(self.data[start:stop])
        texts, digits = parts[0::2], parts[1::2]
        if len(digits) != 1 + len(ins.operands) or ins.name != "%" + digits[0].decode("ascii"):
            return
        if any(o != "%" + d.decode("ascii") for o, d in zip(ins.operands, digits[1:])):
            return
        # every reference is a value token of the instruction, in order: not one in a comment,
        # a string or a literal (those are not operands), nor one glued to a word (``%7abc``)
        values = [tok for role, tok in ins.tokens if role == "result" or role.startswith("operand[")]
        at, where = start, []
        for text, d in zip(texts, digits):
            at += len(text)
            where.append((at, len(d) + 1))
            at += len(d) + 1
        if [(tok.offset, tok.length) for tok in values] != where:
            return
        self.shapes.setdefault((dialect, *texts), (ins, sum(map(len, digits))))


def reparse_positions(data: bytes, ins: Instr) -> tuple[list, list]:
    """``(tokens, operand_cols)`` of an instruction made from a remembered line, from its line."""
    start = ins.offset - ins.column + 1
    nl = data.find(b"\n", start)
    stop = len(data) if nl < 0 else nl
    tokens, comment = tokenize_line(data, ins.line, start, stop)
    line = _Line(ins.line, start, stop + 1, tokens, comment)
    full, _ = _instruction(line, tokens[0], "spec")
    return full.tokens, full.operand_cols


def _number_values(mod: Module, general: list) -> None:
    """Value names -> integer ids: ``%12`` keeps 12, a named ``%x`` gets the next id past the largest.
    ``general``: the instructions read token by token; those made from remembered lines hold numbered ids only."""
    top = None
    names: dict[str, int] = {}

    def fresh() -> int:
        nonlocal top
        if top is None:          # first asked before any name is numbered: the largest written id
            top = max((i.vid for i in mod.instrs), default=-1)
        top += 1
        return top
    for ins in general:
        if ins.vid < 0:
            if ins.name not in names:
                names[ins.name] = fresh()
            ins.vid = names[ins.name]

    def resolve(name: str) -> int:
        n = name[1:]
        if n.isdigit():
            return int(n)
        if name not in names:
            names[name] = fresh()          # undefined: a fresh id the verifier reports as never defined
        return names[name]
    for ins in general:
        ops = ins.operands
        for k, o in enumerate(ops):
            if isinstance(o, str):
                ops[k] = resolve(o)
    mod.outputs = [resolve(o) if isinstance(o, str) else o for o in mod.outputs]
