"""Text form of constant values and names, shared by the disassembler and assembler.

One literal grammar, parsed by hand (no ``eval``): ``None``, ``True``/``False``, ints,
floats (Python ``repr``, including ``inf``/``nan``), JSON strings, and bracketed lists of
numbers. A float list carries an ``f32`` suffix (``[0.5, 2.0]f32``) so ``[]``, ``[1, 2]``
and float lists stay distinct. Each literal maps to exactly one CNST type.
"""
from __future__ import annotations

import json
import math
import re
import struct
from typing import Any

from ..format import layout as L

_BARE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-:/\[\]]*$")


#: ``json.dumps(name, ensure_ascii=False)`` without making an encoder per call (a third of the
#: listing's time on a table of 65k names)
_QUOTED = json.JSONEncoder(ensure_ascii=False).encode


def format_float(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return repr(x)
    return repr(float(x))


def format_f32(x: float) -> str:
    # repr of the double that holds an f32 value is the shortest text that maps back to it
    return format_float(struct.unpack("<f", struct.pack("<f", x))[0])


def format_literal(type_code: int, value: Any) -> str:
    if type_code == L.CONST_NULL:
        return "None"
    if type_code == L.CONST_BOOL:
        return "True" if value else "False"
    if type_code == L.CONST_INT64:
        return str(int(value))
    if type_code == L.CONST_FLOAT64:
        s = format_float(value)
        return s if any(ch in s for ch in ".enai") else s + ".0"
    if type_code == L.CONST_STRING:
        return _QUOTED(value)
    if type_code == L.CONST_LIST_I32:
        return str(list(map(int, value)))      # "[1, 2]": C-level loops (lists run to 65,535 values)
    if type_code == L.CONST_LIST_F32:
        return "[" + ", ".join(map(format_f32, value)) + "]f32"
    raise ValueError(f"unknown constant type {type_code}")


def parse_literal(text: str) -> tuple[int, Any]:
    """Literal text → (CNST type code, value). Raises ValueError on anything else."""
    s = text.strip()
    if s == "None":
        return L.CONST_NULL, None
    if s in ("True", "False"):
        return L.CONST_BOOL, s == "True"
    if s.startswith('"'):
        v = json.loads(s)
        if not isinstance(v, str):
            raise ValueError(f"not a string literal: {text!r}")
        return L.CONST_STRING, v
    if s.startswith("["):
        is_f32 = s.endswith("]f32")
        body = s[1:-4] if is_f32 else s[1:-1]
        if not (is_f32 or s.endswith("]")):
            raise ValueError(f"unterminated list literal: {text!r}")
        items = [x.strip() for x in body.split(",")] if body.strip() else []
        if is_f32:
            return L.CONST_LIST_F32, tuple(_f32(float(x)) for x in items)
        return L.CONST_LIST_I32, tuple(int(x) for x in items)
    if re.fullmatch(r"[+-]?\d+", s):
        return L.CONST_INT64, int(s)
    try:
        return L.CONST_FLOAT64, float(s)
    except ValueError:
        raise ValueError(f"not a literal: {text!r}") from None


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def format_name(name: str) -> str:
    return name if _BARE_NAME.match(name) and name not in ("None", "True", "False") else _QUOTED(name)


def parse_name(text: str) -> str:
    s = text.strip()
    return json.loads(s) if s.startswith('"') else s


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets and JSON strings."""
    if '"' not in text and "[" not in text and "(" not in text:     # nothing nests: a plain split
        return [p.strip() for p in text.split(sep)] if text.strip() or sep in text else []
    parts, depth, cur, i, n = [], 0, [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    tail = "".join(cur).strip()
    if tail or parts:
        parts.append(tail)
    return parts


def strip_comment(line: str) -> str:
    """Drop a ``;`` comment that is not inside a JSON string."""
    if '"' not in line:
        return line.split(";", 1)[0].rstrip()
    in_str, i = False, 0
    while i < len(line):
        ch = line[i]
        if in_str:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == ";":
            return line[:i].rstrip()
        i += 1
    return line.rstrip()
