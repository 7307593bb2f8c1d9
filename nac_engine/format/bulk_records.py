"""Bulk decoders for the reader's high-count, regular records: DATA's name tables, DATA's plain
tensor records and CNST's runs of int64/float64 constants.

Each walks its records with the least Python per record that the format allows (a name or a
tensor record's length is only known from the record before it, so the walk itself stays a
loop) and decodes the fields with numpy across all records at once. They only recognise
well-formed records: each returns how far it got, and the reader's own field-by-field decoder
takes over from the first record they refuse, so problems, errors and spans are the reader's
own, in the same order. Nothing here allocates more than the records in the bytes it has
already bounds-checked.
"""
from __future__ import annotations

import math
import struct
from itertools import repeat
from typing import Optional

import numpy as np

from . import layout as L
from .model import Constant

_U16 = struct.Struct("<H")
_TENSOR_LENGTHS = struct.Struct("<IQ")     # DATA tensor record after the id: meta length, data length
_INT64, _FLOAT64 = L.CONST_INT64, L.CONST_FLOAT64
#: A plain record's metadata is at most dtype, rank 255, 255 dims and the quant byte.
_PLAIN_META_MAX = 3 + 4 * 255
#: Tensor records whose fields are decoded by one numpy pass (bounds the temporaries).
_FIELD_CHUNK = 4096
_BYTE8 = np.arange(8)
#: CNST records decoded with numpy in chunks of this many (a chunk's check is one numpy pass)
CONST_CHUNK = 2048
#: Item size of each known dtype code, -1 for unknown codes (their byte count is not judged).
_ITEMSIZE_BY_CODE = np.full(256, -1, dtype=np.int64)
for _code, _s in L.NUMPY_STORAGE.items():
    _ITEMSIZE_BY_CODE[_code] = np.dtype(_s).itemsize


def name_records(buf, pos: int, limit: int, n: int) -> Optional[tuple[np.ndarray, list, list, int]]:
    """DATA block 1/2: ``n`` records of (u16 id, u16 length, UTF-8 name) from ``pos`` (an absolute
    offset into ``buf``). Returns (starts, ids, names, end), or None when any record is truncated
    or not UTF-8 (the reader's loop then says which and where)."""
    length = _U16.unpack_from
    raw: list = []
    add = raw.append
    first, last = pos, limit - 4
    for _ in range(n):
        if pos > last:
            return None
        pos += 4
        end = pos + length(buf, pos - 2)[0]
        add(buf[pos:end])
        pos = end
    if pos > limit:
        return None
    try:
        names = list(map(bytes.decode, raw)) if raw and type(raw[0]) is bytes else \
            list(map(str, raw, repeat("utf-8")))
    except UnicodeDecodeError:
        return None
    starts = np.empty(n, dtype=np.int64)
    if n:
        starts[0] = first
        np.cumsum(np.fromiter(map(len, raw), dtype=np.int64, count=n)[:-1] + 4, out=starts[1:])
        starts[1:] += first
    u8 = np.frombuffer(buf, dtype=np.uint8, count=pos - first, offset=first)
    at = starts - first
    ids = (u8[at].astype(np.int64) | (u8[at + 1].astype(np.int64) << 8)).tolist()
    return starts, ids, names, pos


def plain_tensor_walk(buf, fd, pos: int, limit: int, count: int, pread) -> tuple[list, list, int]:
    """DATA block 3: the longest run of plain records (no quantisation tail, no extra metadata
    bytes, payload inside the section) from ``pos``, up to ``count`` records. ``fd``: read the
    headers by ``pread`` in 4 KB windows (the payloads between them are never touched); None: from
    ``buf`` directly. Returns (starts, header+metadata bytes of each record, position after them)."""
    starts, blobs = [], []
    add_start, add_blob = starts.append, blobs.append
    lengths = _TENSOR_LENGTHS.unpack_from
    if fd is None:
        a0, ahead = 0, buf
        if isinstance(buf, (memoryview, bytearray)):     # slices of bytes and of a mmap are bytes
            ahead = memoryview(buf).toreadonly()
        size = len(ahead)
    else:
        a0, ahead, size = pos, b"", 0
    for _ in range(count):
        off = pos - a0
        if off + 16 > size:
            if fd is None or pos + 16 > limit:
                break
            a0, ahead = pos, pread(fd, 4096, pos)
            size, off = len(ahead), 0
            if size < 16:
                break
        meta_len, data_len = lengths(ahead, off + 2)
        meta_end = off + 14 + meta_len
        if meta_end > size:           # the metadata runs past the window: read it from its record
            if fd is None or off == 0 or meta_len > _PLAIN_META_MAX:
                break
            a0, ahead = pos, pread(fd, 4096, pos)
            size, off, meta_end = len(ahead), 0, 14 + meta_len
            if meta_end > size:
                break
        if meta_len != 3 + 4 * ahead[off + 15] or ahead[meta_end - 1]:     # not plain (quant byte)
            break
        end = pos + 14 + meta_len + data_len
        if end > limit:
            break
        add_start(pos)
        add_blob(ahead[off:meta_end])
        pos = end
    if blobs and type(blobs[0]) is memoryview:
        blobs = list(map(bytes, blobs))
    return starts, blobs, pos


def plain_tensor_fields(starts: list, blobs: list) -> tuple:
    """The fields of plain records (``plain_tensor_walk``'s starts and blobs), decoded with numpy
    a chunk of records at a time: (param ids, data offsets, data lengths, dtype codes, shapes as
    tuples) as lists, and the stored byte count each shape needs (an int64 array: -2 where the
    dtype is unknown, -1 where the count is too big for int64, which the caller works out
    exactly). Equal shapes share one tuple."""
    pids, offsets, lengths, dtypes, shapes = [], [], [], [], []
    needs = np.empty(len(blobs), dtype=np.int64)
    canon: dict = {}
    for c0 in range(0, len(blobs), _FIELD_CHUNK):
        chunk = blobs[c0:c0 + _FIELD_CHUNK]
        k = len(chunk)
        joined = np.frombuffer(b"".join(chunk), dtype=np.uint8)
        rec_len = np.fromiter(map(len, chunk), dtype=np.int64, count=k)
        at = np.zeros(k, dtype=np.int64)
        np.cumsum(rec_len[:-1], out=at[1:])
        pids += (joined[at].astype(np.int64) | (joined[at + 1].astype(np.int64) << 8)).tolist()
        offsets += (np.asarray(starts[c0:c0 + k], dtype=np.int64) + rec_len).tolist()
        lengths += joined[(at + 6)[:, None] + _BYTE8].view("<u8").ravel().tolist()
        dtype = joined[at + 14]
        rank = joined[at + 15]
        dtypes += dtype.tolist()
        itemsize = _ITEMSIZE_BY_CODE[dtype]
        need = needs[c0:c0 + k]
        part: list = [()] * k
        ranks = np.unique(rank)
        for r in ranks.tolist():
            rows = np.flatnonzero(rank == r) if len(ranks) > 1 else np.arange(k)
            if r == 0:
                need[rows] = itemsize[rows]
                continue
            dims = joined[(at[rows] + 16)[:, None] + np.arange(4 * r)].view("<u4").reshape(-1, r)
            # equal shapes found by sorting numbers where a shape fits one (void rows sort slowly)
            keys = dims.ravel() if r == 1 else dims.view("<u8" if r == 2 else f"V{4 * r}").ravel()
            distinct, inverse = np.unique(keys, return_inverse=True)
            tuples = [canon.setdefault(t, t) for t in zip(*distinct.view("<u4").reshape(-1, r).T.tolist())]
            picked = list(map(tuples.__getitem__, inverse.ravel().tolist()))
            if len(ranks) > 1:
                for j, shape in zip(rows.tolist(), picked):
                    part[j] = shape
            else:
                part = picked
            # a product that fits int64 is exact even where a partial product wrapped; a bigger
            # one is marked -1 and computed with Python ints by the caller
            approx = np.prod(dims.astype(np.float64), axis=1) * np.maximum(itemsize[rows], 1)
            exact = np.prod(dims.astype(np.int64), axis=1) * itemsize[rows]
            need[rows] = np.where(approx < 2.0 ** 62, exact, -1)
        need[itemsize < 0] = -2
        shapes += part
        if len(canon) > 65536:
            canon.clear()
    return pids, offsets, lengths, dtypes, shapes, needs


def stored_nbytes(dtype: int, shape: tuple) -> int:
    """The exact byte count of a plain tensor (Python ints: no wrap)."""
    return math.prod(shape) * int(_ITEMSIZE_BY_CODE[dtype])


def scalar_constant_run(buf, pos: int, limit: int, count: int) -> int:
    """How many CNST records from ``pos`` (at most ``count``, checked in one numpy pass) are
    int64/float64 records of the standard 13 bytes (id, type, length 8, value)."""
    m = min(count, (limit - pos) // 13)
    if m <= 0:
        return 0
    rows = np.frombuffer(buf, dtype=np.uint8, count=13 * m, offset=pos).reshape(m, 13)
    typ = rows[:, 2]
    ok = ((typ == _INT64) | (typ == _FLOAT64)) & (rows[:, 3] == 8) & (rows[:, 4] == 0)
    bad = np.flatnonzero(~ok)
    return int(bad[0]) if bad.size else m


def scalar_constants(buf, pos: int, m: int) -> tuple[list, list]:
    """The ids and Constant objects of ``m`` records that ``scalar_constant_run`` accepted."""
    rows = np.frombuffer(buf, dtype=np.uint8, count=13 * m, offset=pos).reshape(m, 13)
    ids = (rows[:, 0].astype(np.int64) | (rows[:, 1].astype(np.int64) << 8)).tolist()
    typ = rows[:, 2]
    raw = rows[:, 5:13].copy()
    ints = raw.view("<i8").ravel()
    if (typ == _INT64).all():
        values = ints.tolist()
        types = repeat(_INT64, m)
    else:
        floats = raw.view("<f8").ravel().tolist()
        values = [f if t == _FLOAT64 else i for t, i, f in zip(typ.tolist(), ints.tolist(), floats)]
        types = typ.tolist()
    return ids, list(map(Constant, ids, types, values))
