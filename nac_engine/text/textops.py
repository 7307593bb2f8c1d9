"""One instruction ↔ one line of text, in both directions.

Grammar (``vN`` is instruction N; the line for instruction N must say ``vN``)::

    vN = OP[#A](ARG, ...)[<SIG> | <#B>]     regular op; ARG = vK | cID | literal
    vN = input [NAME]                        <INPUT B=0>
    vN = param NAME | param #ID              <INPUT B=1>, C = [1, id]
    vN = state ID | saved ID | target ID     <INPUT B=2|4|5>, C = [1, id]
    vN = lifted LITERAL | lifted cID         <INPUT B=3>, C = [1, const id]
    vN = return vK, ... | subreturn vK, ...  <OUTPUT B=0|1>, C = [n, 0...]
    vN = raw A=a B=b [C=[...]] [D=[...]]     anything else, field by field

The signature is printed only when it cannot be derived from the arguments (a reference
``vK`` derives ``T``; a literal derives ``c b i f s S`` from its type), and ``#A``/``<#B>``
only when a name or signature maps to more than one ID. The disassembler re-encodes every
line it prints and uses ``raw`` whenever the readable form would not give the same bytes,
so text → bytes is exact by construction.
"""
from __future__ import annotations

import re
from typing import NamedTuple, Optional

from ..format import layout as L
from ..format.model import Constant, Instruction, NacFile
from ..format.const_table import constant_values
from ..format.name_records import byte_ids
from ..format.name_tables import parameter_name, parameter_names
from ..isa.coerce import CODE_TYPES, InexactCoercion, as_used, differs, is_scalar
from .literals import format_literal, format_name, parse_literal, parse_name, split_top, strip_comment
from ..isa.optable import (OP_INPUT, OP_OUTPUT, SYSTEM_OPS, count_const_codes, standard_ops)

_LITERAL_CODE = {L.CONST_NULL: "c", L.CONST_BOOL: "b", L.CONST_INT64: "i", L.CONST_FLOAT64: "f",
                 L.CONST_STRING: "s", L.CONST_LIST_I32: "S", L.CONST_LIST_F32: "S"}
_SCALAR_TYPE_CODE = {bool: L.CONST_BOOL, int: L.CONST_INT64, float: L.CONST_FLOAT64}
_INPUT_WORDS = {"state": 2, "saved": 4, "target": 5}
_INPUT_WORD_OF = {v: k for k, v in _INPUT_WORDS.items()}


class TextError(ValueError):
    """A line of assembly that cannot be encoded; ``line`` is 1-based (0: the text as a whole,
    and the message names no line)."""

    def __init__(self, line: int, reason: str):
        self.line = line
        self.reason = reason
        super().__init__(f"line {line}: {reason}" if line else reason)


class Tables:
    """Name ↔ ID lookups over a file's tables; the assembler grows them for new names."""

    def __init__(self, nac: NacFile):
        self.nac = nac
        self.version = nac.header.version
        self.refresh()

    def refresh(self) -> None:
        nac = self.nac
        self.op_names = dict(SYSTEM_OPS)
        self.op_names.update(standard_ops(self.version))
        self.op_names.update(byte_ids(nac.cmap))       # A is a byte
        self.op_ids = _reverse(self.op_names)
        self.sig_ids = _reverse(byte_ids(nac.perms))    # and so is B
        # literal text of each constant, in nac.constants' order (a list: a 65k table's dict
        # of texts cost more RAM than the table itself)
        # literal text -> the id of the one constant written so, or a list of several (an int
        # each: a 65k table's lists cost more RAM than the table); a read file's constants are
        # made one at a time and none kept
        self.const_ids: dict = {}
        ids = self.const_ids
        for c in constant_values(nac.constants):
            key = const_literal(c)
            got = ids.get(key)
            if got is None:
                ids[key] = c.id
            elif type(got) is int:
                ids[key] = [got, c.id]
            else:
                got.append(c.id)
        # parameter name -> the first id it names, and the names of more than one id (a read
        # file's parameters are walked, not made: a hostile DATA names 65k in 4 bytes each)
        self.param_ids: dict[str, int] = {}
        self.shared_param_names: set = set()
        for pid, name in parameter_names(nac.params):
            if self.param_ids.setdefault(name, pid) != pid:
                self.shared_param_names.add(name)
        self._used_ids: dict = {}
        self.templates: dict = {}       # an instruction's shape -> its template (instruction_template)
        # at most one kept per 16 instructions (a real program has a few hundred shapes; a crafted
        # file of distinct ones must not hold more than its own size in templates)
        self.templates_max = max(512, len(nac.instructions) // 16)

    def consts_written(self, literal: str) -> tuple:
        """Ids of the constants whose literal text is ``literal``, in table order."""
        ids = self.const_ids.get(literal)
        return () if ids is None else (ids,) if type(ids) is int else tuple(ids)

    def used_const_id(self, value, code: str) -> Optional[int]:
        """The one constant that the op uses as ``value`` under signature ``code`` though it is
        stored in another type (``1`` under ``A`` → the stored ``1.0``); None when none or
        several do. Lets the readable form show dims as dims and still re-encode exactly."""
        table = self._used_ids.get(code)
        if table is None:
            table = self._used_ids[code] = {}
            for c in constant_values(self.nac.constants):
                cid = c.id
                if not is_scalar(c.value) or c.type not in (L.CONST_BOOL, L.CONST_INT64, L.CONST_FLOAT64):
                    continue
                try:
                    used = as_used(c.value, code)
                except InexactCoercion:
                    continue
                if differs(c.value, used):
                    table.setdefault((type(used), used), []).append(cid)
        ids = table.get((type(value), value))
        return ids[0] if ids and len(ids) == 1 else None

    # lookups that allocate on a miss (hand-written assembly may introduce new names)
    def op_id(self, name: str) -> int:
        ids = self.op_ids.get(name)
        if ids:
            return ids[0]
        new = max([max(standard_ops(self.version)) + 1] + [a + 1 for a in self.nac.cmap])
        self.nac.cmap[new] = name
        self.nac.invalidate()
        self.refresh()
        return new

    def sig_id(self, sig: str) -> int:
        if sig == "":
            return 0
        ids = self.sig_ids.get(sig)
        if ids:
            return ids[0]
        new = max([1] + [b + 1 for b in self.nac.perms])
        self.nac.perms[new] = sig
        self.refresh()
        return new

    def const_id(self, type_code: int, value) -> int:
        ids = self.consts_written(format_literal(type_code, value))
        if ids:
            return ids[0]
        new = max([2] + [c + 1 for c in self.nac.constants])
        self.nac.constants[new] = Constant(new, type_code, value)
        self.refresh()
        return new


def const_literal(c: Constant) -> str:
    """:func:`const_key`, int64 ones (most of a big table) inline."""
    return str(c.value) if c.type == L.CONST_INT64 and type(c.value) is int else const_key(c)


def const_key(c: Constant) -> str:
    try:
        return format_literal(c.type, c.value)
    except ValueError:
        return f"<type {c.type}>"


def _reverse(d: dict) -> dict:
    out = {v: [k] for k, v in d.items()}      # the common case: every value once
    if len(out) != len(d):
        out = {}
        for k, v in d.items():
            out.setdefault(v, []).append(k)
    return out


# --------------------------------------------------------------------------- formatting
def format_instruction(ins: Instruction, t: Tables, input_names: Optional[dict] = None,
                       notes_out: Optional[list] = None) -> str:
    """Readable line if it re-encodes exactly, else the ``raw`` form.

    A constant stored in another type than its use (a reference file's shared ``1.0`` where a
    dim is meant, ``isa/coerce.py``) is shown as the op uses it, and the stored form goes to a
    comment: into ``notes_out`` when given, else appended as ``; ...``."""
    if ins.d and ins.index + min(ins.d) < 0:
        return raw_line(ins)         # a reference before tick 0 has no readable form (v-3)
    notes: list = []
    line = _checked(ins, t, _readable(ins, t, input_names or {}, notes))
    if line is None and notes:       # (without notes the plain text is the same one)
        notes = []
        line = _checked(ins, t, _readable(ins, t, input_names or {}, None))
    if line is None:
        return raw_line(ins)
    if notes_out is not None:
        notes_out.extend(notes)
        return line
    return line + ("   ; " + "; ".join(notes) if notes else "")


def _checked(ins: Instruction, t: Tables, line: Optional[str]) -> Optional[str]:
    """``line`` if it reads back (as the assembler reads it) to exactly ``ins``'s encoding."""
    if line is None:
        return None
    try:       # a ';' outside a string starts a comment
        enc = parse_instruction(strip_comment(line) if ";" in line else line, ins.index, t, dry_run=True)
    except (TextError, ValueError):
        return None
    return line if enc.same_encoding(ins) else None


class LineTemplate(NamedTuple):
    """:func:`format_instruction`'s line for one encoding at any tick ``j`` with
    ``j + min_delta >= 0``: ``text % tuple(j + x for x in deltas)``, and its notes."""
    text: str
    deltas: tuple
    notes: tuple
    min_delta: int


_SLOT = "\0"


def instruction_template(ins: Instruction, t: Tables, input_names: Optional[dict] = None
                         ) -> Optional[LineTemplate]:
    """The line :func:`format_instruction` makes for ``ins``, as a template over the tick.

    A line depends on the tick only through ``vN`` references (its own and ``N + D``), and
    its read-back check only through whether each reference is a tick (``N + D >= 0``); so the
    choice (readable, coerced or raw) and the check made at ``ins.index`` hold for every tick
    where that stays true. None when ``ins`` itself refers before tick 0 (no such guarantee)."""
    min_delta = min(ins.d) if ins.d else 0
    if ins.index + min_delta < 0 or (ins.a == OP_INPUT and ins.b == 0 and input_names):
        return None      # (an input's name is looked up by its tick)
    d = ins.d or ()
    # an op's or an output's template depends on its references only through which arguments
    # are references: kept per that shape (False: its lines are raw), so a section of distinct
    # encodings that repeat a few shapes makes and reads back each one once
    output = ins.a == OP_OUTPUT
    shape = None
    if output:                # every argument of an output is a reference
        shape = (ins.a, ins.b, ins.c, len(d))
    elif ins.a >= 10:         # an op's arguments are references where D is not 0
        shape = (ins.a, ins.b, ins.c, bytes(map(bool, d)))
    known = t.templates.get(shape) if shape is not None else None
    if known is False:
        return _raw_template(ins, min_delta)
    refs = d if output else tuple(filter(None, d))
    if known is not None:
        text, notes = (known, ()) if type(known) is str else known
        return LineTemplate(text, (0,) + refs, notes, min_delta)
    deltas: list = []

    def slot(delta):
        deltas.append(delta)
        return "v" + _SLOT

    judged = True            # both forms were read back (else: format_instruction decides)
    for notes in ([], None):      # as format_instruction: with the coerced constants first
        deltas.clear()
        text = _readable(ins, t, input_names or {}, notes, ref=slot)
        parts = text.split(_SLOT) if text is not None else ()
        if len(parts) == len(deltas) + 1:
            template = LineTemplate("%d".join(p.replace("%", "%%") for p in parts), tuple(deltas),
                                    tuple(notes or ()), min_delta)
            if _checked(ins, t, template.text % tuple(ins.index + x for x in deltas)) is not None:
                if shape is not None and deltas == [0, *refs]:
                    _keep(t, shape, (template.text, template.notes) if notes else template.text)
                return template
        elif text is not None:
            judged = False
        if not notes:
            break
    if judged:
        if shape is not None:
            _keep(t, shape, False)
        return _raw_template(ins, min_delta)
    line = format_instruction(ins, t, input_names)
    if line.startswith(f"v{ins.index} = raw "):
        return _raw_template(ins, min_delta)
    return None


def _raw_template(ins: Instruction, min_delta: int) -> LineTemplate:
    line = raw_line(ins)
    return LineTemplate("v%d" + line[len(f"v{ins.index}"):].replace("%", "%%"), (0,), (), min_delta)


def _keep(t: Tables, key, value) -> None:
    """Into the bounded template memo: emptied when full (only a crafted file has that many shapes)."""
    if len(t.templates) >= t.templates_max:
        t.templates.clear()
    t.templates[key] = value


def raw_line(ins: Instruction) -> str:
    parts = [f"v{ins.index} = raw A={ins.a} B={ins.b}"]
    if ins.c is not None:
        parts.append("C=[" + ",".join(map(str, ins.c)) + "]")
    if ins.d is not None:
        parts.append("D=[" + ",".join(map(str, ins.d)) + "]")
    return " ".join(parts)


def _readable(ins: Instruction, t: Tables, input_names: dict,
              coerced_notes: Optional[list] = None, ref=None) -> Optional[str]:
    """``ref(delta)`` writes the reference to tick ``index + delta`` (0: the line's own)."""
    i, a, b, c, d = ins.index, ins.a, ins.b, ins.c, ins.d
    if ref is None:
        def ref(delta):
            return f"v{i + delta}"
    head = ref(0) + " = "
    if a == OP_INPUT:
        if b == 0 and c is None and d is None:
            name = input_names.get(i)
            return head + "input" + (f" {format_name(name)}" if name is not None else "")
        if c is None or len(c) != 2 or c[0] != 1 or d is not None:
            return None
        if b == 1:
            pname = parameter_name(t.nac.params, c[1])
            if pname is not None and t.param_ids.get(pname) == c[1] and pname not in t.shared_param_names:
                return head + "param " + format_name(pname)
            return head + f"param #{c[1]}"
        if b == 3:
            return head + "lifted " + _const_arg(c[1], t)
        if b in _INPUT_WORD_OF:
            return head + f"{_INPUT_WORD_OF[b]} {c[1]}"
        return None
    if a == OP_OUTPUT and b in (0, 1):
        if d is None or c is None or len(c) != len(d) + 1 or c[0] != len(d) or any(c[1:]):
            return None
        return head + ("return " if b == 0 else "subreturn ") + ", ".join(ref(x) for x in d)
    if a < 10:
        return None
    name = t.op_names.get(a)
    if name is None:
        return None
    op = name if t.op_ids.get(name) == [a] else f"{name}#{a}"
    sig = t.nac.perms.get(b, "" if b == 0 else None)
    if sig is None:
        return None
    if not sig:
        args, derived = [], ""
        return head + f"{op}()" + ("" if b == 0 else f"<#{b}>")
    cids = iter(ins.const_ids)
    args, derived = [], []
    for code, dv in zip(sig, d or ()):
        if dv != 0:
            args.append(ref(dv))
            derived.append("T")
        else:
            cid = next(cids, None)
            if cid is None:
                return None
            text, note, literal_code = _const_argument(cid, code, coerced_notes is not None, t)
            if note is not None:
                coerced_notes.append(f"argument {len(args) + 1}{note}")
            args.append(text)
            derived.append(literal_code)
    text = head + f"{op}(" + ", ".join(args) + ")"
    if t.sig_ids.get(sig) != [b]:
        text += f"<#{b}>"
    elif "".join(derived) != sig:
        text += f"<{sig}>"
    return text


def _const_argument(cid: int, code: str, coerced: bool, t: Tables) -> tuple:
    """(text, note after "argument N" or None, literal's signature code) of constant ``cid`` as
    an argument under ``code``; ``coerced``: as the op uses it (see format_instruction)."""
    const = t.nac.constants.get(cid)
    used = _used_literal(const, code) if coerced else None
    note = None
    if used is not None:
        text, note = used, " stored as " + _const_arg(cid, t)
    else:
        text = _const_arg(cid, t)
        if coerced and const is not None and code in CODE_TYPES and is_scalar(const.value):
            try:
                as_used(const.value, code)
            except InexactCoercion as e:
                note = f": {const.value!r} is not usable as {e.wanted.__name__} (the interpreter refuses it)"
    return text, note, (_LITERAL_CODE.get(const.type, "c") if const else "c")


def _used_literal(const: Optional[Constant], code: str) -> Optional[str]:
    """The literal of ``const`` as the op uses it under ``code``, when that differs from the
    stored form; None otherwise (or when the stored value cannot be used exactly)."""
    if const is None or code not in CODE_TYPES or not is_scalar(const.value) \
            or const.type not in (L.CONST_BOOL, L.CONST_INT64, L.CONST_FLOAT64):
        return None
    try:
        used = as_used(const.value, code)
    except InexactCoercion:
        return None
    if not differs(const.value, used):
        return None
    return format_literal(_SCALAR_TYPE_CODE[type(used)], used)


def _const_arg(cid: int, t: Tables) -> str:
    const = t.nac.constants.get(cid)
    if const is None:
        return f"c{cid}"
    key = const_key(const)
    if t.consts_written(key) == (cid,) and (const.type not in (L.CONST_NULL, L.CONST_BOOL) or const.length_field in (None, 0, 1)):
        return key
    return f"c{cid}"


# --------------------------------------------------------------------------- parsing
_LINE = re.compile(r"^v(\d+)\s*=\s*(.*)$")
_REGULAR = re.compile(r"^([^\s(<#]+)(?:#(\d+))?\((.*)\)\s*(?:<(#\d+|[^>]*)>)?$")
_REF = re.compile(r"v\d+")
_CONST_ID = re.compile(r"c\d+")
_RAW_FIELD = re.compile(r"([ABCD])=(\[[^\]]*\]|-?\d+)")


def parse_instruction(line: str, expect_index: int, t: Tables, dry_run: bool = False,
                      lineno: int = 0, names_out: Optional[dict] = None) -> Instruction:
    """Encode one instruction line. ``dry_run`` never grows the tables (used to check
    that a disassembled line is exact)."""
    m = _LINE.match(line.strip())
    if not m:
        raise TextError(lineno, f"expected 'v{expect_index} = ...', got {line.strip()[:60]!r}")
    idx = int(m.group(1))
    if idx != expect_index:
        raise TextError(lineno, f"instruction number v{idx} out of sequence (expected v{expect_index})")
    body = m.group(2).strip()
    word, _, rest = body.partition(" ")
    rest = rest.strip()
    if word == "raw":
        fields = dict(_RAW_FIELD.findall(rest))
        if "A" not in fields or "B" not in fields:
            raise TextError(lineno, "raw needs A= and B=")
        c = _int_list(fields["C"], lineno) if "C" in fields else None
        d = _int_list(fields["D"], lineno) if "D" in fields else None
        return Instruction(idx, int(fields["A"]), int(fields["B"]), c, d)
    if word == "input":
        if rest and names_out is not None:
            names_out[idx] = parse_name(rest)
        return Instruction(idx, OP_INPUT, 0, None, None)
    if word == "param":
        if rest.startswith("#"):
            pid = int(rest[1:])
        else:
            pid = t.param_ids.get(parse_name(rest))
            if pid is None:
                raise TextError(lineno, f"unknown parameter {rest!r} (declare it with .param)")
        return Instruction(idx, OP_INPUT, 1, (1, pid), None)
    if word == "lifted":
        return Instruction(idx, OP_INPUT, 3, (1, _const_ref(rest, t, dry_run, lineno)), None)
    if word in _INPUT_WORDS:
        return Instruction(idx, OP_INPUT, _INPUT_WORDS[word], (1, int(rest)), None)
    if word in ("return", "subreturn"):
        refs = [_ref(x, lineno) - idx for x in split_top(rest)] if rest else []
        return Instruction(idx, OP_OUTPUT, 0 if word == "return" else 1, (len(refs),) + (0,) * len(refs),
                           tuple(refs))
    m = _REGULAR.match(body)
    if not m:
        raise TextError(lineno, f"cannot parse instruction {body[:60]!r}")
    name, explicit_a, argtext, sigtext = m.groups()
    if explicit_a is not None:
        a = int(explicit_a)
    elif dry_run:
        ids = t.op_ids.get(name)
        if not ids:
            raise TextError(lineno, f"unknown op {name!r}")
        a = ids[0]
    else:
        a = t.op_id(name)
    args = split_top(argtext) if argtext.strip() else []
    # an explicit signature tells each constant's use (a dim shown as 1 may be a stored 1.0)
    early_sig = None
    if sigtext is not None:
        early_sig = t.nac.perms.get(int(sigtext[1:])) if sigtext.startswith("#") else sigtext
    kinds, derived = [], []
    for pos, arg in enumerate(args):
        if _REF.fullmatch(arg):
            kinds.append(("ref", int(arg[1:]) - idx))
            derived.append("T")
        else:
            code = early_sig[pos] if early_sig and pos < len(early_sig) else None
            cid = _const_ref(arg, t, dry_run, lineno, code)
            const = t.nac.constants.get(cid)
            kinds.append(("const", cid))
            derived.append(_LITERAL_CODE.get(const.type, "c") if const else "c")
    if sigtext is not None and sigtext.startswith("#"):
        b = int(sigtext[1:])
        sig = t.nac.perms.get(b, "" if b == 0 else None)
        if sig is None:
            raise TextError(lineno, f"signature id {b} is not declared")
    else:
        sig = sigtext if sigtext is not None else "".join(derived)
        if dry_run:
            b = 0 if sig == "" else (t.sig_ids.get(sig) or [None])[0]
            if b is None:
                raise TextError(lineno, f"signature {sig!r} is not declared")
        else:
            b = t.sig_id(sig)
    if len(sig) != len(kinds):
        raise TextError(lineno, f"{name} has {len(kinds)} arguments but signature {sig!r} has {len(sig)}")
    if not sig:
        return Instruction(idx, a, b, None, None)
    consts = [v for k, v in kinds if k == "const"]
    if consts and count_const_codes(sig) == 0:
        raise TextError(lineno, f"signature {sig!r} has no constant code, so C is never read; "
                                f"constant arguments cannot be encoded")
    c = (len(consts),) + tuple(consts) if count_const_codes(sig) else None
    d = tuple(v if k == "ref" else 0 for k, v in kinds)
    return Instruction(idx, a, b, c, d)


def _ref(text: str, lineno: int) -> int:
    if not _REF.fullmatch(text.strip()):
        raise TextError(lineno, f"expected an instruction reference vN, got {text!r}")
    return int(text.strip()[1:])


def _const_ref(text: str, t: Tables, dry_run: bool, lineno: int, code: Optional[str] = None) -> int:
    text = text.strip()
    if _CONST_ID.fullmatch(text):
        return int(text[1:])
    try:
        typ, val = parse_literal(text)
    except ValueError as e:
        raise TextError(lineno, str(e)) from None
    if code in CODE_TYPES and is_scalar(val) and not t.consts_written(format_literal(typ, val)):
        shared = t.used_const_id(val, code)
        if shared is not None:
            return shared
    if dry_run:
        ids = t.consts_written(format_literal(typ, val))
        if not ids:
            raise TextError(lineno, f"constant {text} is not declared")
        return ids[0]
    return t.const_id(typ, val)


def _int_list(text: str, lineno: int) -> tuple:
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise TextError(lineno, f"expected [..], got {text!r}")
    inner = body[1:-1].strip()
    try:
        return tuple(int(x) for x in inner.split(",")) if inner else ()
    except ValueError:
        raise TextError(lineno, f"expected integers in {text!r}") from None
