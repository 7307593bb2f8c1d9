"""Part of a weight without reading the rest: rows ``start:stop:step`` of its first axis.

What a viewer of a multi-GB model needs: a 32000×4096 embedding's statistics in chunks, every
32nd row for a heatmap that fits the screen, the exact 200×300 corner the user zoomed into, a
page of the values table. Each reads only the bytes of the rows asked for: from the file's
private buffer, with ``pread`` from a mapped file or from the external ``.safetensors``, or from a
compiled model's payload.

Values are what :meth:`Parameter.array` gives (dequantised float32; float16 widened; integers as
stored), row for row. Encodings whose rows do not stand alone (BLOCK_FP8's blocks run across
rows) are read whole and sliced, which is what ``array()`` costs anyway.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import NacFormatError
from . import layout as L
from .mapped import is_mapped, read_at
from .quant import dequantize
from .tensor_rules import tensor_problems
from .weights import _opened, dequantized_tensor, external_metas, raw_tensor

#: A contiguous run of rows is read with one call when the rows in between cost at most this
#: much more than the rows wanted (a stride of small rows reads the block and slices it).
_GAP_BYTES = 1 << 16


def value_shape(p) -> tuple:
    """The shape of ``p.array()`` without reading it (the metadata, or the external header)."""
    if p.meta is None:
        _meta(p)
    return tuple(p.meta.logical_shape)


def value_rows(p, start: int, stop: int, step: int = 1) -> np.ndarray:
    """``p.array()[start:stop:step]`` reading only those rows (module docstring)."""
    meta = _meta(p)
    shape = tuple(meta.logical_shape)
    if not shape:
        return dequantized_tensor(p).reshape(1)[start:stop:step]
    rows = range(*slice(start, stop, step).indices(shape[0]))
    if meta.quant == L.QUANT_BLOCK_FP8:
        return dequantized_tensor(p)[rows.start:rows.stop:rows.step]
    stored = _stored_rows(p, meta, rows)
    if meta.quant == L.QUANT_INT8_CHANNEL and (meta.axis or 0) == 0 and meta.scales is not None:
        meta = dataclasses.replace(meta, scales=np.asarray(meta.scales)[rows.start:rows.stop:rows.step])
    return dequantize(stored, meta)


def _meta(p):
    if p.meta is None and p._file is not None and p._file.weights_path:
        external_metas(p._file)             # from the .safetensors header: no data read
    if p.meta is None:
        raise NacFormatError("DATA", 0, f"parameter {p.name!r} has no tensor metadata")
    return p.meta


def _stored_rows(p, meta, rows: range) -> np.ndarray:
    dt = L.storage_dtype(meta.dtype)
    shape = tuple(meta.shape)
    row_items = math.prod(shape[1:])
    row_bytes = row_items * dt.itemsize
    out_shape = (len(rows),) + shape[1:]
    if p._payload is not None:
        return raw_tensor(p)[rows.start:rows.stop:rows.step]
    nac = p._file
    if p.data_offset >= 0:            # a record of this file
        problems = tensor_problems(meta, p.data_length)
        if problems:
            raise NacFormatError("DATA/tensors", p.data_offset, f"tensor {p.name!r}: {problems[0]}")
        if not is_mapped(nac):
            return raw_tensor(p)[rows.start:rows.stop:rows.step]

        def read(first_row: int, count: int) -> np.ndarray:
            off = p.data_offset + first_row * row_bytes
            return read_at(nac, off, count * row_bytes, "DATA/tensors", f"tensor {p.name!r}").view(dt)
    else:                             # external weights: the .safetensors
        f, _problem = _opened(nac.weights_path)
        if f is None or p.name not in f:
            return raw_tensor(p)[rows.start:rows.stop:rows.step]    # raises the error a run would
        with f.opened() as fd:
            def read_external(first_row: int, count: int) -> np.ndarray:
                return f.read_bytes(p.name, first_row * row_bytes, count * row_bytes, fd).view(dt)
            return _gather(read_external, rows, row_items, dt, out_shape)
    return _gather(read, rows, row_items, dt, out_shape)


def _gather(read, rows: range, row_items: int, dt, out_shape: tuple) -> np.ndarray:
    out = np.empty((len(rows), row_items), dt)
    if len(rows) and (rows.step == 1 or (rows.step - 1) * row_items * dt.itemsize <= _GAP_BYTES):
        block = read(rows.start, rows[-1] - rows.start + 1).reshape(-1, row_items)
        out[:] = block[::rows.step]
    else:
        for i, r in enumerate(rows):
            out[i] = read(r, 1)
    return out.reshape(out_shape)
