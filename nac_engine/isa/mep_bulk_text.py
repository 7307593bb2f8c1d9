"""MEP listing lines of a decoded stream, made a block at a time from its bytes with numpy.

``mep.format_mep_blocks`` formats a :class:`~nac_engine.isa.mep.MepStream` through here. The
instructions of a block are grouped by *shape*: opcode, length and the byte that picks the
layout (the ``op`` selector of a layout with an op-dependent tail, the first count of a layout
with two key lists), so every instruction of a shape has its operands at the same offsets and
its constant text (mnemonic, operand names) at the same columns. A block's lines are the rows
of one uint8 matrix, a shape's rows side by side: each row starts as the shape's constant text
with NULs where values go, and each value is written for all the shape's rows at once as one
*lane*, a 1, 2, 4 or 8-byte column, by table look-up (a key ``k12``, an enum name, two hex
digits, 4-digit groups of a decimal, a pool comment) whose text is NUL-padded. Putting the
rows back in stream order and dropping every NUL gives the text. Per line this costs a few
table look-ups in C, not a decode and a format in Python, so a stream whose instructions all
differ formats about as fast as one that repeats a program.

A line is made the ordinary way (the caller's ``line_text``) and spliced in where the matrix
would not hold it: a shape wider than ``ROW_LIMIT`` bytes (long key lists), a pool comment
longer than ``POOL_TEXT_LIMIT`` or holding a NUL or \\x01, a shape too rare in its block to be
worth its numpy calls. The text is the same either way (tests/isa/test_mep_bulk.py).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping, Optional

import numpy as np

from .mep import (_JUMP_OPCODES, _KEY_MASKS, _KEYS, _TAIL, MEP_OPCODES, MepStream, _decode_one, _layout_of, _plan_of,
                  _show_pool, _Undecodable)

#: Lines formatted per block (one matrix of this many rows).
BLOCK_LINES = 16384
#: Widest instruction text (after the address, NUL-padded values) a matrix row holds; a wider
#: shape's lines are made one by one.
ROW_LIMIT = 1024
#: Longest pool comment (UTF-8 bytes) a matrix row holds.
POOL_TEXT_LIMIT = 1024
#: Bytes a block's matrix may take: a block of wide rows holds fewer lines.
MATRIX_BYTES = 1 << 21
#: A block of at most this many distinct encodings copies one row per encoding to its lines.
REPEATED_DISTINCT = 64

_SPLICE = 1           # the byte that stands for a line made one by one (never in a line's text)
_BY_VALUE_ROWS = 2048  # lines of a shape from which pool comments come from u16-wide tables
_U8 = np.uint8
_LANE_TYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_JUMP_CODES = np.array(sorted(_JUMP_OPCODES), dtype=np.uint64)


# -- value tables ------------------------------------------------------------------------------
class _Table:
    """Texts indexed by a value, as lanes: (byte offset, 1-D array) whose elements' bytes, side
    by side, are each text NUL-padded to ``width`` (1, 2, 4 or a multiple of 8)."""

    def __init__(self, texts: list, wide: bool = False):
        raw = [t.encode() if isinstance(t, str) else t for t in texts] or [b""]
        longest = max(1, max(map(len, raw)))
        width = longest if longest in (1, 2, 4) and not wide else (
            4 if longest == 3 and not wide else -(-longest // 8) * 8)
        rows = np.array(raw, dtype=f"S{width}").view(_U8).reshape(len(raw), width)
        self.width = width
        if width <= 4:
            self.lanes = [(0, rows.view(_LANE_TYPES[width]).ravel())]
        else:
            self.lanes = [(o, np.ascontiguousarray(rows[:, o:o + 8]).view(np.uint64).ravel())
                          for o in range(0, width, 8)]


# 4-digit groups as u32 lanes: 0-9999 with leading zeros as NULs (a number's highest group),
# 10000-19999 zero-filled (a lower group), 20000 all NUL (a group above the number).
_DIGITS = np.array([str(v).rjust(4, "\0").encode() for v in range(10000)] +
                   [f"{v:04d}".encode() for v in range(10000)] + [b""], dtype="S4").view(np.uint32)
_KEY = _Table([f"k{v}" for v in range(256)])                  # a context key
_NEXT_KEY = _Table([f", k{v}" for v in range(256)])          # a key after the first in a list
_NUMBER = _Table([str(v) for v in range(256)])                # a plain u8
_HEX = _Table([f"{v:02x}" for v in range(256)])               # one raw byte


def _decimal(values: np.ndarray, groups: int = 0) -> list:
    """Each value (int64, >= 0) in decimal, right-aligned, leading places NUL, as u32 lanes of 4
    digits, highest first: ``groups`` of them or, when 0, as many as the largest value needs."""
    if not groups:
        top = int(values.max()) if values.size else 0
        groups = max(1, (len(str(top)) + 3) // 4)
    lanes = []
    rest = values
    for g in range(groups - 1, -1, -1):
        low = 10 ** (4 * g)
        chunk = rest // low if g else rest       # this group's 4 digits
        if g:
            rest = rest - chunk * low
        if g + 1 < groups:                       # a lower group: zero-filled
            chunk = chunk + (values >= low * 10000) * 10000
        if g:                                    # above the number: blank
            chunk = chunk + (values < low) * 20000
        lanes.append(np.take(_DIGITS, chunk))
    return lanes


_U16_TABLES: dict = {}     # made on first use: u64 lanes over all 65536 values


def _u16_table(name: str) -> np.ndarray:
    """``"decimal"``: a u16 right-aligned in 8 bytes; ``"unknown"``: '#', its 5 places, '=?'
    (a pool id the pool lacks)."""
    if not _U16_TABLES:
        high, low = _decimal(np.arange(65536, dtype=np.int64), 2)
        decimal = high.astype(np.uint64) | low.astype(np.uint64) << np.uint64(32)
        text = decimal.view(_U8).reshape(65536, 8)
        unknown = np.zeros((65536, 8), dtype=_U8)
        unknown[:, 0] = ord("#")
        unknown[:, 1:6] = text[:, 3:]
        unknown[:, 6:] = np.frombuffer(b"=?", dtype=_U8)
        _U16_TABLES.update(decimal=decimal, unknown=unknown.view(np.uint64).ravel())
    return _U16_TABLES[name]


def _names_table(names: Optional[Mapping[int, str]]) -> _Table:
    if not names:
        return _NUMBER
    return _Table([names.get(v, str(v)) for v in range(256)])


# -- pool comments -----------------------------------------------------------------------------
class _PoolTexts:
    """Comment text of each pool id a listing refers to, made once per id when first needed:
    ``rows[v]`` is its row in ``table``, -1 when ``v`` is not in the pool ("#v=?"), -2 when not
    made yet, -3 when the matrix cannot hold it (too long, or holds a NUL or \\x01)."""

    def __init__(self, pool: Mapping[int, Any]):
        self.pool = pool
        self.rows = np.full(65536, -1, dtype=np.int32)
        plain = [k for k in pool if type(k) is int and 0 <= k < 65536]
        if len(plain) == len(pool):
            self.rows[plain] = -2
        else:       # keys that equal ints without being ints (True, 3.0): ask the mapping itself
            self.rows[:] = -2
        self.texts: list[bytes] = []
        self.table = _Table([], wide=True)
        self.unusable = False           # some id's text is -3
        self._by_value: Optional[list] = None

    def by_value(self) -> list:
        """The comment of every u16 value as lanes (offset, 65536 u64): the pool's text where
        ``rows`` has one, else "#v=?" (an id not yet made or unusable reads as "#v=?": its line
        is judged by ``rows``). Remade when ``table`` changes."""
        if self._by_value is None:
            made = np.flatnonzero(self.rows >= 0)
            lanes = []
            for o, values in self.table.lanes:
                full = _u16_table("unknown").copy() if o == 0 else np.zeros(65536, dtype=np.uint64)
                full[made] = np.take(values, self.rows[made])
                lanes.append((o, full))
            self._by_value = lanes
        return self._by_value

    def lookup(self, values: np.ndarray) -> np.ndarray:
        rows = np.take(self.rows, values)
        if (rows == -2).any():
            for v in np.unique(values[rows == -2]).tolist():
                if v not in self.pool:
                    self.rows[v] = -1
                    continue
                text = _show_pool(self.pool[v]).encode()
                if len(text) > POOL_TEXT_LIMIT or b"\0" in text or bytes([_SPLICE]) in text:
                    self.rows[v] = -3
                    self.unusable = True
                else:
                    self.rows[v] = len(self.texts)
                    self.texts.append(text)
            self.table = _Table(self.texts, wide=True)
            self._by_value = None
            rows = np.take(self.rows, values)
        return rows


# -- shapes --------------------------------------------------------------------------------------
def _shape_selectors() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per opcode: the offset of the byte that picks its layout besides its length (the op
    selector of an op-dependent tail, the first count of a two-list layout; 0: none), a mask
    that keeps that byte (0xFF) or drops it (0), and whether its length varies (key lists)."""
    offset = np.zeros(256, dtype=np.int64)
    mask = np.zeros(256, dtype=np.uint8)
    varies = np.zeros(256, dtype=bool)
    for opcode, (_, layout) in MEP_OPCODES.items():
        plan = _plan_of(layout)
        tails = [s for s in plan if isinstance(s, tuple) and s[0] == _TAIL]
        varies[opcode] = _KEYS in plan
        if tails:
            offset[opcode], mask[opcode] = tails[0][1], 0xFF
        elif plan.count(_KEYS) >= 2 and type(plan[0]) is int and plan[0] > 0:
            offset[opcode], mask[opcode] = 1 + plan[0], 0xFF     # the first count follows the fixed fields
    return offset, mask, varies


_SELECTOR_AT, _SELECTOR_MASK, _LENGTH_VARIES = _shape_selectors()


def _shape_groups(code: np.ndarray, starts: np.ndarray, length: np.ndarray) -> list:
    """(shape key, rows) of each shape among the instructions at ``starts``, rows ascending.
    Grouped by opcode and layout byte (a radix sort of u16), then by length where it varies."""
    opcode = np.take(code, starts)
    selector = np.take(code, starts + np.take(_SELECTOR_AT, opcode)) & np.take(_SELECTOR_MASK, opcode)
    key = opcode.astype(np.uint16) << 8 | selector
    order = np.argsort(key, kind="stable")
    ordered = np.take(key, order)
    cut = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    groups = []
    for k, rows in zip(ordered[np.concatenate(([0], cut))].tolist(), np.split(order, cut)):
        if not _LENGTH_VARIES[k >> 8]:
            groups.append((k << 12, rows))
            continue
        lens = length[rows]
        if not (lens != lens[0]).any():
            groups.append((k << 12 | int(lens[0]), rows))
            continue
        by_len = np.argsort(lens, kind="stable")
        lens = lens[by_len]
        cut2 = np.flatnonzero(lens[1:] != lens[:-1]) + 1
        for n, sub in zip(lens[np.concatenate(([0], cut2))].tolist(), np.split(by_len, cut2)):
            groups.append((k << 12 | n, rows[sub]))
    return groups


class _Shape:
    """The text of every instruction shaped like ``proto`` (its bytes), as pieces: ("text",
    bytes), ("table", offset, _Table), ("keys", offset, n), ("hex", offset, n), ("c16",
    offset), ("jump", offset), ("comment", offset); ``checks`` are the (offset, value) count
    bytes all its instructions share (true of a decoded stream; checked all the same)."""

    def __init__(self, proto: bytes, with_pool: bool):
        instr, _ = _decode_one(proto, 0, want_leaves=False)
        _, fields = _layout_of(instr)
        self.length = instr.length
        self.checks: list = []
        pieces: list = [("text", instr.mnemonic.encode())]
        comments: list = []
        pos = 1
        for f, (name, value) in zip(fields, instr.operands):
            pieces.append(("text", f" {name}=".encode()))
            if f.kind == "k":
                pieces.append(("table", pos, _KEY))
                pos += 1
            elif f.kind == "u8":
                pieces.append(("table", pos, _names_table(f.names)))
                pos += 1
            elif f.kind == "keys":
                self.checks.append((pos, len(value)))
                pieces.append(("text", b"["))
                if value:
                    pieces.append(("keys", pos + 1, len(value)))
                pieces.append(("text", b"]"))
                pos += 1 + len(value)
            elif f.kind == "c16":
                pieces += [("text", b"#"), ("c16", pos)]
                comments.append(pos)
                pos += 2
            elif f.kind == "i16":
                pieces += [("text", b"@"), ("jump", pos)]
                pos += 2
            else:                               # raw bytes
                pieces += [("text", b'x"'), ("hex", pos, f.size), ("text", b'"')]
                pos += f.size
        if with_pool:
            for j, at in enumerate(comments):
                pieces += [("text", b", " if j else b" ; "), ("comment", at)]
        merged: list = []
        for p in pieces:        # adjacent texts as one
            if p[0] == "text" and merged and merged[-1][0] == "text":
                merged[-1] = ("text", merged[-1][1] + p[1])
            else:
                merged.append(p)
        self.pieces = merged
        self.lanes = sum(len(p[2].lanes) if p[0] == "table" else p[2] if p[0] in ("keys", "hex") else
                         3 if p[0] == "jump" else 1 for p in merged if p[0] != "text")
        self.width = sum(len(p[1]) if p[0] == "text" else p[2].width if p[0] == "table" else
                         4 + 8 * (p[2] - 1) if p[0] == "keys" else 2 * p[2] if p[0] == "hex" else
                         13 if p[0] == "jump" else 8 for p in merged)

    def render(self, code: np.ndarray, words: np.ndarray, at: np.ndarray, pool: Optional[_PoolTexts]):
        """The lines of the instructions at ``at`` (their text after the address): the row
        template (constant text, NULs where values go), the value lanes as (column in the
        template, array), and which lines the matrix cannot hold (None: all fit)."""
        bad = None
        for off, count in self.checks:
            differ = np.take(code, at + off) != count
            if differ.any():
                bad = differ if bad is None else bad | differ
        template = bytearray()
        lanes = []
        for piece in self.pieces:
            kind = piece[0]
            col = len(template)
            if kind == "text":
                template += piece[1]
            elif kind == "table":
                idx = np.take(code, at + piece[1])
                lanes += [(col + o, np.take(values, idx)) for o, values in piece[2].lanes]
                template += bytes(piece[2].width)
            elif kind == "keys":
                off, n = piece[1], piece[2]
                lanes.append((col, np.take(_KEY.lanes[0][1], np.take(code, at + off))))
                keys = _NEXT_KEY.lanes[0][1]
                lanes += [(col + 4 + 8 * j, np.take(keys, np.take(code, at + off + 1 + j))) for j in range(n - 1)]
                template += bytes(4 + 8 * (n - 1))
            elif kind == "hex":
                off, n = piece[1], piece[2]
                lanes += [(col + 2 * j, np.take(_HEX.lanes[0][1], np.take(code, at + off + j))) for j in range(n)]
                template += bytes(2 * n)
            elif kind == "c16":
                lanes.append((col, np.take(_u16_table("decimal"), words[at + piece[1]])))
                template += bytes(8)
            elif kind == "jump":
                rel = words[at + piece[1]].astype(np.int64)
                target = at + self.length + rel - (rel & 0x8000) * 2
                lanes.append((col, np.where(target < 0, ord("-"), 0).astype(_U8)))
                digits = _decimal(np.abs(target))
                lanes += [(col + 1 + 4 * j, d) for j, d in enumerate(digits)]
                template += bytes(1 + 4 * len(digits))
            else:                                   # pool comment
                value = words[at + piece[1]]
                rows = pool.lookup(value)
                table = pool.table
                if len(value) >= _BY_VALUE_ROWS and len(table.lanes) <= 2:   # many lines, short values:
                    # one look-up per lane in u16-wide tables (512 KB a lane)
                    lanes += [(col + o, np.take(v, value)) for o, v in pool.by_value()]
                    if pool.unusable:
                        unusable = rows == -3
                        if unusable.any():
                            bad = unusable if bad is None else bad | unusable
                    template += bytes(table.width)
                    continue
                known = rows >= 0
                if known.all():
                    lanes += [(col + o, np.take(v, rows)) for o, v in table.lanes]
                else:
                    where = np.maximum(rows, 0)
                    first = np.where(known, np.take(table.lanes[0][1], where), np.take(_u16_table("unknown"), value))
                    lanes.append((col, first))
                    lanes += [(col + o, np.where(known, np.take(v, where), 0)) for o, v in table.lanes[1:]]
                    unusable = rows == -3
                    if unusable.any():
                        bad = unusable if bad is None else bad | unusable
                template += bytes(table.width)
        return bytes(template), lanes, bad


# -- blocks --------------------------------------------------------------------------------------
def stream_blocks(stream: MepStream, pool: Optional[Mapping[int, Any]], prefix: str,
                  line_text: Callable[[int], str]) -> Iterator[str]:
    """The stream's decoded instructions' lines (``prefix``, ip, ": ", text), in blocks of up to
    ``BLOCK_LINES`` joined by newlines; ``line_text(ip)`` makes a line's text after the address
    where the matrix does not. The undecodable tail is the caller's."""
    buf = stream.bytecode
    code = np.frombuffer(buf, dtype=_U8)
    # the u16 at every offset (an unaligned view of the bytes and one padding byte)
    padded = buf + bytes(8)
    words = np.ndarray((len(buf),), dtype="<u2", buffer=padded, strides=(1,))
    encodings = np.ndarray((len(buf),), dtype="<u8", buffer=padded, strides=(1,))     # as MepStream keys
    all_starts = np.frombuffer(stream.starts, dtype=np.uint32)
    n = len(all_starts)
    limit = stream.tail.ip if stream.tail is not None else len(buf)
    head = prefix.encode()
    pool_texts = _PoolTexts(pool) if pool is not None else None
    shapes: dict = {}
    b0, size = 0, BLOCK_LINES
    while b0 < n:
        starts = all_starts[b0:b0 + size + 1].astype(np.int64)
        if len(starts) == size + 1:
            starts, ends = starts[:-1], starts[1:]
        else:
            ends = np.append(starts[1:], limit)
        text, width = _repeated_block(encodings, starts, ends - starts, head, line_text)
        if text is None:
            text, width = _block(buf, code, words, starts, ends - starts, head, prefix, shapes, pool_texts,
                                 line_text)
        if text is None:        # rows this wide (long pool values, key lists): fewer of them at a time
            size = max(64, MATRIX_BYTES // width)
            continue
        yield text
        b0 += len(starts)
        if size < BLOCK_LINES and 2 * size * width <= MATRIX_BYTES:
            size = min(BLOCK_LINES, 2 * size)


def _repeated_block(encodings: np.ndarray, starts, length, head: bytes, line_text) -> tuple:
    """A block of a few distinct encodings (a program repeated, a loop unrolled): each distinct
    encoding's line is made once (``line_text``) as a matrix row and the rows are copied to
    their lines; (None, 0) when the block is not like that (a quick look at its first 256
    instructions, then all of them), or holds a jump (its text names its own target) or an
    instruction over 8 bytes."""
    m = len(starts)
    sample = encodings[starts[:256]] & np.take(_KEY_MASKS, np.minimum(length[:256], 9))
    if len(np.unique(sample)) > REPEATED_DISTINCT // 2:
        return None, 0
    keys = encodings[starts] & np.take(_KEY_MASKS, np.minimum(length, 9))
    distinct, which = np.unique(keys, return_inverse=True)
    if len(distinct) > REPEATED_DISTINCT or not distinct[0] or \
            np.isin(distinct & np.uint64(0xFF), _JUMP_CODES).any():
        return None, 0
    first = np.full(len(distinct), m, dtype=np.int64)
    np.minimum.at(first, which, np.arange(m))
    texts = [line_text(ip).encode() for ip in starts[first].tolist()]
    if any(b"\0" in t or bytes([_SPLICE]) in t for t in texts):
        return None, 0
    address = _decimal(starts)
    body_at = len(head) + 4 * len(address) + 2
    width = body_at + max(map(len, texts)) + 1
    if m * width > MATRIX_BYTES and m > 64:
        return None, 0
    table = np.zeros((len(texts), width), dtype=_U8)
    table[:, :len(head)] = np.frombuffer(head, dtype=_U8)
    table[:, body_at - 2:body_at] = np.frombuffer(b": ", dtype=_U8)
    table[:, -1] = ord("\n")
    for row, text in zip(table, texts):
        row[body_at:body_at + len(text)] = np.frombuffer(text, dtype=_U8)
    lines = np.take(table, which, axis=0)
    for g, digits in enumerate(address):
        np.ndarray((m,), dtype=digits.dtype, buffer=lines, offset=len(head) + 4 * g, strides=(width,))[:] = digits
    return str(lines[lines != 0], "utf-8")[:-1], width


def _block(buf: bytes, code, words, starts, length, head: bytes, prefix: str, shapes: dict,
           pool: Optional[_PoolTexts], line_text) -> tuple:
    m = len(starts)
    rendered = []            # (template, lanes, first and end row in the matrix)
    placed_rows = []         # stream rows of the matrix rows, shape by shape
    alone = []               # stream rows made one by one: shapes left out, then lines a shape cannot hold
    unfit = []
    placed = 0
    for key, rows in _shape_groups(code, starts, length):
        shape = shapes.get(key, False)
        if shape is False:
            shape = _make_shape(buf, int(starts[rows[0]]), pool is not None)
            if len(shapes) > 4096:
                shapes.clear()
            shapes[key] = shape
        if shape is None or len(rows) < shape.lanes:      # a lane costs about what a line made alone does
            alone.append(rows)
            continue
        template, lanes, bad = shape.render(code, words, np.take(starts, rows), pool)
        rendered.append((template, lanes, placed, placed + len(rows)))
        placed_rows.append(rows)
        if bad is not None:
            unfit.append(rows[bad])
        placed += len(rows)
    order = np.concatenate(placed_rows + alone)     # the stream row of each matrix row
    address = _decimal(starts)
    body_at = len(head) + 4 * len(address) + 2
    width = body_at + max((len(t) for t, _, _, _ in rendered), default=0) + 1
    if m * width > MATRIX_BYTES and m > 64:
        return None, width
    lines = np.empty((m, width), dtype=_U8)
    row = np.zeros(width, dtype=_U8)
    row[:len(head)] = np.frombuffer(head, dtype=_U8)
    row[body_at - 2:body_at] = np.frombuffer(b": ", dtype=_U8)
    row[-1] = ord("\n")

    def lane(col: int, values: np.ndarray) -> np.ndarray:
        return np.ndarray((m,), dtype=values.dtype, buffer=lines, offset=col, strides=(width,))

    for template, lanes, r0, r1 in rendered:
        row[body_at:-1] = 0
        row[body_at:body_at + len(template)] = np.frombuffer(template, dtype=_U8)
        lines[r0:r1] = row
        for col, values in lanes:
            lane(body_at + col, values)[r0:r1] = values
    for g, digits in enumerate(address):
        lane(len(head) + 4 * g, digits)[:placed] = np.take(digits, order[:placed])
    spliced = np.sort(np.concatenate(alone + unfit)) if alone or unfit else np.zeros(0, dtype=np.int64)
    if spliced.size:        # a line made alone stands as one \x01 in the matrix
        blank = np.zeros(width, dtype=_U8)
        blank[0], blank[-1] = _SPLICE, ord("\n")
        lines[placed:] = blank
        if unfit:
            at = np.empty(m, dtype=np.int64)
            at[order] = np.arange(m)
            lines[at[np.concatenate(unfit)]] = blank
    if (order[1:] < order[:-1]).any():      # back in stream order
        back = np.empty(m, dtype=np.int64)
        back[order] = np.arange(m)
        lines = np.take(lines, back, axis=0)
    text = str(lines[lines != 0], "utf-8")[:-1]
    if spliced.size:
        parts = text.split(chr(_SPLICE))
        out = [parts[0]]
        for ip, part in zip(starts[spliced].tolist(), parts[1:]):
            out += [prefix, str(ip), ": ", line_text(ip), part]
        text = "".join(out)
    return text, width


def _make_shape(buf: bytes, ip: int, with_pool: bool) -> Optional[_Shape]:
    """The shape of the instruction at ``ip``, or None when its lines are made one by one."""
    if buf[ip] not in MEP_OPCODES:
        return None
    try:
        length = _decode_one(buf, ip, want_leaves=False)[0].length
        shape = _Shape(buf[ip:ip + length], with_pool)
    except _Undecodable:        # pragma: no cover - every start of a MepStream decodes
        return None
    return shape if shape.width <= ROW_LIMIT else None
