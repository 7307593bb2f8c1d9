"""Lines made of templates over integers, assembled as bytes with numpy.

The ``.ops`` listing of a 1 MB OPS section is 100k lines of a few distinct shapes, each line its
shape's literal text with a few tick numbers (``vN``) in between. %-formatting them costs a
Python-level conversion per number; here the numbers' decimal digits are made column by column
with numpy, and every line's bytes (literal parts and digits) are gathered from one buffer in a
single fancy-indexing pass over the block's output. A block's text is the same as
``"\\n".join(template % numbers)`` for each of its lines.
"""
from __future__ import annotations

import re
from itertools import chain
from typing import Optional, Sequence

import numpy as np

_FIELD = re.compile(r"%%|%d")


def template_parts(template: str) -> list:
    """The literal parts around the ``%d`` fields of a %-template (``%%`` read as ``%``):
    ``template % numbers`` is the parts with the numbers in between."""
    if "%%" not in template:
        return template.split("%d")
    parts, cur, pos = [], [], 0
    for m in _FIELD.finditer(template):
        cur.append(template[pos:m.start()])
        if m.group() == "%%":
            cur.append("%")
        else:
            parts.append("".join(cur))
            cur = []
        pos = m.end()
    cur.append(template[pos:])
    parts.append("".join(cur))
    return parts


_FILL = 0xFF       # never a byte of UTF-8 text: the padding that is deleted at the end
_FILL_BYTE = bytes((_FILL,))


def assemble_lines(parts: Sequence, deltas: Sequence, which: np.ndarray, ticks: np.ndarray,
                   spread: int = 8) -> Optional[str]:
    """Line ``i`` is shape ``u = which[i]``: ``parts[u]`` (UTF-8 bytes, one more than
    ``deltas[u]``, the last ending in a newline) with the decimal ``ticks[i] + deltas[u][k]``
    between parts ``k`` and ``k + 1``. Returns the lines joined by newlines; None when a number
    would be negative, or when padding every line to the block's widest columns would take
    more than ``spread`` times the text (a long line among short ones): the caller formats
    such a block its own way.

    Every line is laid out in the same columns (part 0, number 0, part 1, ..., each as wide as
    its widest in the block, the rest filled with 0xFF): the lines are one row gather of their
    shapes' rows, the numbers' digits are written into their columns, and deleting the filler
    leaves the text."""
    n_shapes, m = len(parts), len(which)
    if m == 0:
        return ""
    width = max(map(len, deltas), default=0)
    # shapes' parts and deltas as flat arrays (shape, index in shape): no loop per shape, a
    # block of all-different encodings has as many shapes as lines
    n_parts = np.fromiter(map(len, parts), dtype=np.int64, count=n_shapes)
    n_deltas = np.fromiter(map(len, deltas), dtype=np.int64, count=n_shapes)
    flat = list(chain.from_iterable(parts))
    flat_len = np.fromiter(map(len, flat), dtype=np.int64, count=len(flat))
    part_shape, part_k = _owners(n_parts)
    part_len = np.zeros((n_shapes, width + 1), dtype=np.int64)
    part_len[part_shape, part_k] = flat_len
    delta_shape, delta_k = _owners(n_deltas)
    delta = np.zeros((n_shapes, width), dtype=np.int64)
    used = np.zeros((n_shapes, width), dtype=bool)
    delta[delta_shape, delta_k] = np.fromiter(chain.from_iterable(deltas), dtype=np.int64, count=len(delta_shape))
    used[delta_shape, delta_k] = True
    # the numbers lie in [lo, top]: the block's first tick plus the least delta, its last plus
    # the greatest (bounds: a shape need not be at either end)
    first_tick, last_tick = int(ticks.min()), int(ticks.max())
    lo = first_tick + int(delta.min(initial=0, where=used))
    top = max(last_tick + int(delta.max(initial=0, where=used)), 0)
    if lo < 0:
        values = ticks[:, None] + np.take(delta, which, axis=0)
        if (values < 0)[np.take(used, which, axis=0)].any():
            return None
        lo = 0
    n_digits = len(str(top))
    col_width = part_len.max(axis=0)
    row_width = int(col_width.sum()) + width * n_digits
    text_size = int(np.bincount(which, minlength=n_shapes) @ part_len.sum(axis=1)) + width * n_digits * m
    if m * row_width > spread * text_size + 65536:
        return None
    # each shape's row: its parts left-aligned in their columns, filler elsewhere
    starts = np.zeros(2 * width + 1, dtype=np.int64)
    starts[1:] = np.cumsum(np.ravel(np.column_stack((col_width[:-1], np.full(width, n_digits))))
                           if width else [])[:2 * width]
    rows = np.full((n_shapes, row_width), _FILL, dtype=np.uint8)
    pool = np.frombuffer(b"".join(flat), dtype=np.uint8)
    if pool.size:
        into = part_shape * row_width + starts[2 * part_k]
        rows.ravel()[np.repeat(into - (np.cumsum(flat_len) - flat_len), flat_len) + np.arange(pool.size)] = pool
    out = np.take(rows, which, axis=0)
    if not width:
        return out.tobytes().translate(None, _FILL_BYTE)[:-1].decode("utf-8")
    # digits, right-aligned in each number's columns; a shorter number (or none) leaves filler.
    # Each value in [lo, top] gets its digits once (the numbers of a block are mostly its ticks
    # plus small deltas) and each column is a row gather from those, at tick - first_tick +
    # (first_tick - lo + delta); an unused slot reads rows of filler after them.
    span = top - lo + 1
    if span > 4 * m + 4096:       # far references: each number's digits made on its own
        values = ticks[:, None] + np.take(delta, which, axis=0)
        values[~np.take(used, which, axis=0)] = -1
        table = digit_rows(values.ravel(), n_digits)
        at = np.arange(values.size, dtype=np.int64).reshape(values.shape)
    else:
        table = np.full((span + last_tick - first_tick + 1, n_digits), _FILL, dtype=np.uint8)
        table[:span] = digit_rows(np.arange(lo, top + 1, dtype=np.int64), n_digits)
        add = np.where(used, delta + (first_tick - lo), span)
        at = np.take(add, which, axis=0)
        at += (ticks - first_tick)[:, None]
    for k in range(width):
        a = int(starts[2 * k + 1])
        out[:, a:a + n_digits] = np.take(table, at[:, k], axis=0)
    return out.tobytes().translate(None, _FILL_BYTE)[:-1].decode("utf-8")


def _owners(counts: np.ndarray):
    """For items counted per owner (``counts[u]`` items of owner ``u``, in order): each item's
    owner and its index within the owner."""
    owner = np.repeat(np.arange(len(counts)), counts)
    return owner, np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)


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
