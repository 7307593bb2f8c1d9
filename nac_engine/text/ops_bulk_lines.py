"""The ``.ops`` lines of plain regular instructions, made column by column with numpy.

A crafted 1 MB OPS section can hold 100k instructions whose encodings all differ (random earlier
references, random constant ids): each then made its line, and read it back, on its own
(``textops.format_instruction``, ~50 us). Most lines, though, are of one grammar whose text is a
pure function of the encoded fields and whose parse is its exact inverse::

    vN = OP(ARG, ...)[<SIG> | <#B>]        ARG = vK (a reference) | the constant's literal

Such a line is *plain* when (each rule mirrors a branch of ``_readable`` / ``parse_instruction``):

* its op (A >= 10) has a name of the conservative form ``[A-Za-z_][A-Za-z0-9_.]*`` (no word the
  grammar reserves), shown as ``name`` when the name is unique, else ``name#A``;
* its signature (B) is declared, 1..``MAX_ARGS`` codes from the signature alphabet, and the
  instruction's bytes are laid out as that signature says: D holds one value per code, C (present
  exactly when a code is a constant code) counts the zero D values and nothing else;
* each reference (a non-zero D value) lands on tick 0 or later (``v-3`` is no reference);
* each constant argument is *safe*: it exists, its literal is short, of a conservative character
  set, parses back to its own type and the same literal, is the one constant with that literal
  (``textops._const_arg`` prints it rather than ``cID``), and the op uses it as stored (no
  coercion note: the code wants its type exactly, or is not a scalar code);
* the tick has no notes of its own (inputs, MMAP comments, source map): those lines go the
  general way.

Every other line keeps the general path (templates read back, ``raw``). Plain lines are laid
out in fixed columns (``vN``, `` = OP(``, each argument's ``[, ]vK`` and ``[, ]LITERAL``, the
tail) padded with 0xFF, gathered as 8-byte words from small per-file tables (numbers, heads per
A, tails per B, literals of the constants judged so far), and the filler deleted. ``disasm``
uses it for sections of 256 instructions or more, on blocks that do not repeat their encodings
(those are cheaper by %-template). Why it exists beside the template path: an OPS section whose
encodings all differ (crafted: random references and constants) lists at 0.17 MB/s by template
(a line made and read back per encoding) and at 15-20 MB/s here; the decoders' contract is
>= 1 MB/s on such files.
``tests/isa/test_ops_bulk_lines.py`` holds the text equal to the general path's on the corpus,
crafted and mutated files, and ambiguous tables, and the text re-assembling to the same bytes.
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np

from ..format import layout as L
from ..isa.coerce import CODE_TYPES
from .literals import format_literal, parse_literal
from ..isa.optable import CONST_CODES, SIGNATURE_CODES
from .textops import _LITERAL_CODE, Tables, _const_arg

MAX_ARGS = 16            # longer signatures go the general way (bounds the columns)
MAX_LITERAL = 32         # longer constant literals go the general way (bounds the row width)

_COMMA_V = np.frombuffer(b", v", dtype=np.uint8)
_LITERAL_ROW = MAX_LITERAL + 8      # ", " + literal, read as 8-byte words from byte 0 or 2
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_RESERVED = frozenset({"raw", "input", "param", "lifted", "state", "saved", "target", "return",
                       "subreturn", "None", "True", "False", "inf", "nan"})
# literals whose text holds no character the line grammar gives a meaning to (',', '(', ')',
# '<', '>', ';', '%', quotes inside strings, whitespace other than the list separator)
_SAFE_LITERAL = re.compile(r"-?\d+|-?(?:\d+\.\d*(?:e[+-]?\d+)?|\d+e[+-]?\d+|inf|nan)|True|False|None"
                           r'|"[A-Za-z0-9_./:+\-]*"'
                           r"|\[(?:-?\d+(?:, -?\d+)*)?\]"
                           r"|\[(?:-?[0-9.e+\-infa]+(?:, -?[0-9.e+\-infa]+)*)?\]f32")
# the type class an op wants (signature code) and a stored scalar has, for the coercion rule
_CLASS_OF_TYPE = {int: 1, bool: 2, float: 3}
_CLASS_OF_CODE = {code: _CLASS_OF_TYPE[typ] for code, typ in CODE_TYPES.items()}
_UNKNOWN, _SAFE, _UNSAFE = 0, 1, 2


_FILL = 0xFF       # never a byte of UTF-8 text: the padding that is deleted at the end
_FILL_BYTE = bytes((_FILL,))


def digit_rows(values: np.ndarray, n_digits: int) -> np.ndarray:
    """Each value's decimal digits right-aligned in ``n_digits`` bytes, 0xFF filler before
    them; -1: filler only."""
    rows = np.empty((len(values), n_digits), dtype=np.uint8)
    rest = np.maximum(values, 0)
    for c in range(n_digits):
        rest, digit = np.divmod(rest, 10)
        digit += 48
        if c:
            digit[values < 10 ** c] = _FILL
        else:
            digit[values < 0] = _FILL
        rows[:, n_digits - 1 - c] = digit
    return rows


class PlainOpsLines:
    """Per-file tables for the plain lines of one encoded OPS section (see module docstring)."""

    def __init__(self, t: Tables, code: bytes, count: int):
        self.t = t
        # numbers: ticks below ``count`` and references up to 32,767 past one
        self.count = count
        self.n_digits = len(str(max(count - 1, 0) + 32767))
        self.number_rows = np.zeros((0, 8), dtype=np.uint8)
        self.u8 = np.frombuffer(code, dtype=np.uint8)
        self.i16 = np.frombuffer(code, dtype="<i2", count=len(code) // 2)
        heads = [None] * 256
        for a in range(10, 256):
            name = t.op_names.get(a)
            if name is None or name in _RESERVED or not _OP_NAME.fullmatch(name):
                continue
            op = name if t.op_ids.get(name) == [a] else f"{name}#{a}"
            heads[a] = f" = {op}(".encode()
        self.op_ok = np.array([h is not None for h in heads])
        self.heads = _rows([h or b"" for h in heads], pad=8)
        self.head_width = max(len(h or b"") for h in heads)
        sig_len = np.zeros(256, dtype=np.int64)
        has_const = np.zeros(256, dtype=bool)
        codes = np.zeros((256, MAX_ARGS), dtype=np.uint8)
        classes = np.zeros((256, MAX_ARGS), dtype=np.uint8)
        tails = [b")\n"] * 512              # (B, the derived codes differ from the signature)
        for b, sig in t.nac.perms.items():
            if not (0 <= b < 256 and isinstance(sig, str) and 1 <= len(sig) <= MAX_ARGS
                    and set(sig) <= SIGNATURE_CODES):
                continue
            sig_len[b] = len(sig)
            has_const[b] = any(ch in CONST_CODES for ch in sig)
            codes[b, :len(sig)] = np.frombuffer(sig.encode(), dtype=np.uint8)
            classes[b, :len(sig)] = [_CLASS_OF_CODE.get(ch, 0) for ch in sig]
            if t.sig_ids.get(sig) != [b]:
                tails[2 * b] = tails[2 * b + 1] = f")<#{b}>\n".encode()
            else:
                tails[2 * b + 1] = f")<{sig}>\n".encode()
        self.sig_len, self.has_const = sig_len, has_const
        self.codes = [np.ascontiguousarray(codes[:, k]) for k in range(MAX_ARGS)]       # per argument position
        self.classes = [np.ascontiguousarray(classes[:, k]) for k in range(MAX_ARGS)]
        self.tails = _rows(tails, pad=8)
        self.tail_width = max(map(len, tails))
        # constants, judged on first use: state, derived code, class of the stored scalar, literal row
        # (slot: constant id - the least id C can name; the last slot stands for every id C holds
        # that no constant has, and is unsafe)
        self.first_id, last_id = _id_range(t.nac.constants)
        n_slots = max(last_id - self.first_id + 1, 0) + 1
        self.const_state = np.zeros(n_slots, dtype=np.uint8)
        self.const_state[-1] = _UNSAFE
        self.const_code = np.zeros(n_slots, dtype=np.uint8)
        self.const_class = np.zeros(n_slots, dtype=np.uint8)
        self.const_row = np.zeros(n_slots, dtype=np.int32)
        self.literals = np.full((64, _LITERAL_ROW), _FILL, dtype=np.uint8)     # row 0: filler
        self.literal_len = np.zeros(64, dtype=np.int64)
        self.n_literals = 1

    # ------------------------------------------------------------------ per block
    def plain(self, ticks: np.ndarray, starts: np.ndarray, ends: np.ndarray, special: np.ndarray):
        """Which of the block's lines are plain, and the block's plain lines: (mask, text of
        the plain lines in order, each ending in a newline). Arguments are handled a column (an
        argument position) at a time: a signature has a few, a block thousands of lines."""
        a = self.u8[starts]
        b = self.u8[starts + 1]
        n_args = self.sig_len[b]
        hc = self.has_const[b]
        c_len = (ends - starts - 2) // 2 - n_args
        ok = self.op_ok[a] & (n_args > 0) & ~special & np.where(hc, c_len >= 1, c_len == 0)
        sel = np.flatnonzero(ok)
        if not sel.size:
            return ok, ""
        a, b, n_args, hc, c_len = a[sel], b[sel], n_args[sel], hc[sel], c_len[sel]
        tk, s16 = ticks[sel], starts[sel] // 2
        d_at = ends[sel] // 2 - n_args
        width = int(n_args.max())
        # D: one value per code (past a line's codes: 1, neither a constant nor a bad reference);
        # constant argument j (the j-th zero of D) is C value 1 + j
        ds, zeros, slots = [], [], []
        n_zero = np.zeros(len(sel), dtype=np.int64)
        good = np.ones(len(sel), dtype=bool)
        last = len(self.const_state) - 1
        for k in range(width):
            used = n_args > k
            dk = self.i16[np.where(used, d_at + k, 0)].astype(np.int64)
            dk[~used] = 1
            good &= tk + dk >= 0           # every reference on tick 0 or later
            zk = dk == 0
            if zk.any():
                slot = self.i16[np.where(zk, s16 + 2 + n_zero, 0)] - np.int64(self.first_id)
                slot[(slot < 0) | (slot > last) | ~zk] = last
            else:
                slot = None
            n_zero += zk
            ds.append(dk)
            zeros.append(zk)
            slots.append(slot)
        count = np.where(hc, self.i16[np.where(hc, s16 + 1, 0)], 0)
        good &= np.where(hc, (count == c_len - 1) & (count == n_zero), n_zero == 0)
        present = [x for x in slots if x is not None]
        if present:
            present = np.concatenate(present)
            new = present[self.const_state[present] == _UNKNOWN]
            if new.size:
                self._judge(np.unique(new))
        differs = np.zeros(len(sel), dtype=bool)
        for k in range(width):
            used, zk, slot = n_args > k, zeros[k], slots[k]
            # derived codes ('T' for a reference, the literal's code for a constant) against the signature
            code = self.codes[k][b]
            if slot is None:
                differs |= used & (code != ord("T"))
                continue
            want, cls = self.classes[k][b], self.const_class[slot]
            good &= ~zk | ((self.const_state[slot] == _SAFE) & ((want == 0) | (cls == 0) | (cls == want)))
            differs |= used & (np.where(zk, self.const_code[slot], ord("T")) != code)
        if not good.all():
            ok[sel[~good]] = False
            keep = np.flatnonzero(good)
            if not keep.size:
                return ok, ""
            a, b, tk, n_args, differs = a[keep], b[keep], tk[keep], n_args[keep], differs[keep]
            ds, zeros = [x[keep] for x in ds], [x[keep] for x in zeros]
            slots = [x[keep] if x is not None else None for x in slots]
        return ok, self._assemble(a, b, tk, n_args, ds, zeros, slots, differs)

    def _assemble(self, a, b, tk, n_args, ds, zeros, slots, differs) -> str:
        """The lines in fixed columns: tick, head, each argument's ``[, ]vK`` and ``[, ]LITERAL``
        (a column left out when no line has one there), tail. Each column is written as 8-byte
        words gathered from its table (a row's text left-aligned, filler after it), left to right:
        a word running past its column is overwritten by the next one; 8 bytes of filler end
        each row. Deleting the filler leaves the text."""
        m, width = len(tk), int(n_args.max())
        refs = [(n_args > k) & ~zeros[k] for k in range(width)]
        values = [np.where(ref, tk + dk, -1) for ref, dk in zip(refs, ds)]
        top = max([int(tk[-1])] + [int(v.max()) for v in values])
        if top <= 4 * self.count + 4096:
            table = self._numbers(top)
            tick_at, ref_at = tk, values
        else:       # far forward references (a small crafted file): the block's numbers on their own
            table = self._number_rows(np.concatenate([tk] + values))
            tick_at = np.arange(m)
            ref_at = [np.arange(m * (k + 1), m * (k + 2)) for k in range(width)]
        none = len(table) - 1             # the row of filler
        ref_at = [np.where(ref, at, none) for at, ref in zip(ref_at, refs)]
        num_w = self.n_digits + 1
        fields = [(table, 2, num_w, tick_at), (self.heads, 0, self.head_width, a)]
        for k in range(width):
            skip = 0 if k else 2          # no ", " before the first argument
            if refs[k].any():
                fields.append((table, skip, num_w + 2 - skip, ref_at[k]))
            if slots[k] is not None:
                rows = np.where(zeros[k], self.const_row[slots[k]], 0)
                w = int(self.literal_len[rows].max())
                if w:
                    fields.append((self.literals, skip, w + 2 - skip, rows))
        fields.append((self.tails, 0, self.tail_width, 2 * b.astype(np.int64) + differs))
        # a row ends where the tail's last word does: every byte of it is written
        stride = sum(f[2] for f in fields[:-1]) + 8 * -(-self.tail_width // 8)
        out = np.empty((m, stride), dtype=np.uint8)
        at = 0
        for source, skip, w, rows in fields:
            for j in range(0, w, 8):
                word = np.ndarray((len(source),), dtype="<u8", buffer=source, offset=skip + j,
                                  strides=(source.shape[1],))
                np.ndarray((m,), dtype="<u8", buffer=out, offset=at + j, strides=(stride,))[...] = word[rows]
            at += w
        return out.tobytes().translate(None, _FILL_BYTE).decode("ascii")

    def _numbers(self, top: int) -> np.ndarray:
        """Rows ``", v"`` + the digits of 0, 1, ... (at least up to ``top``), right-aligned in the
        file's widest number, and a last row of filler; grown by doubling."""
        table = self.number_rows
        if len(table) - 1 > top:
            return table
        # first the section's ticks (most references are to earlier ones), then by doubling
        size = max(top + 1, 2 * (len(table) - 1), self.count)
        self.number_rows = table = self._counting_rows(size)
        return table

    def _counting_rows(self, count: int) -> np.ndarray:
        """:meth:`_number_rows` of 0, 1, ..., count - 1, digit column by digit column: the digit
        of 10**c cycles through 0-9 every 10**(c + 1) values and is filler below 10**c (but
        the units of 0)."""
        table = self._empty_number_rows(count)
        digits = np.arange(48, 58, dtype=np.uint8)
        for c in range(self.n_digits):
            unit = 10 ** c
            if unit >= count and c:
                break
            cycle = np.repeat(digits, unit)
            column = np.tile(cycle, -(-count // cycle.size))[:count]
            if c:
                column[:unit] = _FILL
            table[:-1, 2 + self.n_digits - c] = column
        return table

    def _number_rows(self, values: np.ndarray) -> np.ndarray:
        """``", v"`` + the digits of each value (>= 0), and a last row of filler."""
        table = self._empty_number_rows(len(values))
        for c0 in range(0, len(values), 16384):       # (digit_rows' temporaries: 8 bytes a value)
            part = values[c0:c0 + 16384].astype(np.int64)
            table[c0:c0 + len(part), 3:self.n_digits + 3] = digit_rows(part, self.n_digits)
        return table

    def _empty_number_rows(self, count: int) -> np.ndarray:
        """``count`` rows of ``", v"`` then filler where the digits go, and a last row of filler;
        wide enough to be read as 8-byte words from byte 0 or 2."""
        num_w = self.n_digits + 1
        width = max(2 + 8 * -(-num_w // 8), 8 * -(-(num_w + 2) // 8))
        table = np.full((count + 1, width), _FILL, dtype=np.uint8)
        table[:-1, :3] = _COMMA_V
        return table

    def _judge(self, slots: np.ndarray) -> None:
        """Judge the constants at ``slots`` not judged yet (see the module docstring's rule)."""
        new = slots[self.const_state[slots] == _UNKNOWN].tolist()
        if not new:
            return
        t, first = self.t, self.first_id
        constants, const_ids, int64 = t.nac.constants, t.const_ids, L.CONST_INT64
        safe, texts, codes, classes = [], [], [], []
        int_code = ord(_LITERAL_CODE[int64])
        for s in new:
            cid = s + first
            const = constants.get(cid)
            if const is None:
                continue
            value = const.value
            if type(value) is int and const.type == int64:
                # the common case, inline: str() of an int is what _const_arg prints (when the
                # literal names this constant alone) and parse_literal reads back exactly
                text = str(value)
                ids = const_ids.get(text)
                if len(text) > MAX_LITERAL or ids is None or len(ids) != 1 or ids[0] != cid:
                    continue
                codes.append(int_code)
                classes.append(1)
            elif type(value) in (bool, float, str, tuple, type(None)):
                text = _const_arg(cid, t)
                if not (len(text) <= MAX_LITERAL and _SAFE_LITERAL.fullmatch(text)
                        and text != f"c{cid}" and _reads_back(text, const, t, cid)):
                    continue
                codes.append(ord(_LITERAL_CODE.get(const.type, "c")))
                classes.append(_CLASS_OF_TYPE.get(type(value), 0))
            else:
                continue
            safe.append(s)
            texts.append(b", " + text.encode("ascii"))
        self.const_state[new] = _UNSAFE
        if not safe:
            return
        safe_slots = np.array(safe, dtype=np.int64)
        self.const_state[safe_slots] = _SAFE
        self.const_code[safe_slots] = codes
        self.const_class[safe_slots] = classes
        n = self.n_literals
        self.const_row[safe_slots] = np.arange(n, n + len(safe))
        if n + len(safe) > len(self.literals):     # grown by doubling: each row copied O(1) times
            grown = np.full((max(2 * len(self.literals), n + len(safe)), _LITERAL_ROW), _FILL, dtype=np.uint8)
            grown[:n] = self.literals[:n]
            self.literals = grown
            self.literal_len = np.concatenate((self.literal_len, np.zeros(len(grown) - len(self.literal_len),
                                                                          dtype=np.int64)))
        self.literals[n:n + len(safe)] = _rows(texts, _LITERAL_ROW)
        self.literal_len[n:n + len(safe)] = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) - 2
        self.n_literals = n + len(safe)


def _id_range(constants: dict) -> tuple:
    """The least and greatest constant ids that C's i16 values can name (min/max over the keys
    in C: a 65k-entry table is not walked in Python)."""
    try:
        lo, hi = min(constants, default=0), max(constants, default=-1)
    except TypeError:       # (ids of mixed types: only a table built in memory)
        ids = [cid for cid in constants if isinstance(cid, int)]
        lo, hi = min(ids, default=0), max(ids, default=-1)
    return max(int(lo), -32768), min(int(hi), 32767)


def _reads_back(text: str, const, t: Tables, cid: int) -> bool:
    """The literal parses to the constant's own type and literal, which names it alone (what
    ``textops._const_ref`` does with it, and the derived code the parse takes from it)."""
    try:
        typ, value = parse_literal(text)
        again = format_literal(typ, value)
    except ValueError:
        return False
    return typ == const.type and again == text and t.const_ids.get(text) == [cid] and \
        const.type in (L.CONST_NULL, L.CONST_BOOL, L.CONST_INT64, L.CONST_FLOAT64, L.CONST_STRING,
                       L.CONST_LIST_I32, L.CONST_LIST_F32)


def _rows(texts: list, width: Optional[int] = None, pad: int = 1) -> np.ndarray:
    """Byte strings as rows of one uint8 matrix, left-aligned, filler after them (``width``:
    the rows' width, else the longest text's rounded up to a multiple of ``pad``)."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    width = -(-int(lengths.max(initial=0)) // pad) * pad if width is None else width
    rows = np.full((len(texts), width), _FILL, dtype=np.uint8)
    pool = np.frombuffer(b"".join(texts), dtype=np.uint8)
    if pool.size:
        row_start = np.arange(len(texts), dtype=np.int64) * width - (np.cumsum(lengths) - lengths)
        rows.ravel()[np.repeat(row_start, lengths) + np.arange(pool.size)] = pool
    return rows
