"""A weight as a tensor over its stored bytes, for a session that holds its own copy of the file.

A session that opened the file itself reads it with ``read()``, which reads a small file whole
into one private buffer whose first byte is 64-byte aligned. An unquantised weight
whose stored dtype is the one the kernels compute in then needs no dequantising and no trip
through numpy: a tensor over its bytes is the weight. It is used in place when its record lies
on a 64-byte boundary (as a copy made by torch's allocator would), and copied once otherwise, so
that kernels see the same alignment, and take the same code paths, wherever a record lies.

The metadata rules (``format/tensor_rules.py``) are checked before the bytes are touched, as on
every lazy path, and raise the one error type naming the tensor.
"""
from __future__ import annotations

import math
import mmap
import sys
import warnings

import numpy as np
import torch

from ..errors import NacFormatError
from ..format import layout as L
from ..format.tensor_rules import MAX_RANK, tensor_problems

_NUMPY_DTYPES = {code: L.storage_dtype(code) for code in L.NUMPY_STORAGE}   # bfloat16: its 16 bits
_ITEMSIZE = {code: dt.itemsize for code, dt in _NUMPY_DTYPES.items()}

# Stored dtypes an unquantised weight is used in as it is, whatever the header's quantisation
# (float32, the integers, bool: dequantising returns them unchanged); float64/float16/bfloat16
# only in an unquantised file, where they stay native (the caller's ``native``).
_AS_STORED = frozenset((0, 4, 5, 6, 7, 8, 9))
_LITTLE = sys.byteorder == "little"      # files are little-endian
_ALIGN = 64


def used_as_stored(meta, native) -> bool:
    """Whether the weight of this record is its stored values in their stored dtype (then
    :func:`stored_tensor` gives it; else it goes through dequantising)."""
    return _LITTLE and meta.quant == 0 and (native is not None or meta.dtype in _AS_STORED)


def _checked_record(p, size: int, why: str = "") -> tuple:
    """(offset, length) of ``p``'s record after what tensor_rules checks of an unquantised one,
    inline (it is per weight), and that its bytes lie within the ``size`` bytes the file has."""
    meta = p.meta
    off, n = p.data_offset, p.data_length
    if len(meta.shape) > MAX_RANK or math.prod(meta.shape) * _ITEMSIZE[meta.dtype] != n:
        problems = tensor_problems(meta, n)
        raise NacFormatError("DATA/tensors", off, f"tensor {p.name!r}: {problems[0] if problems else 'unreadable'}")
    if off + n > size:
        raise NacFormatError("DATA/tensors", off, f"tensor {p.name!r}: bytes {off}..{off + n} lie past the end "
                                                  f"of the {size}-byte file{why}")
    return off, n


def _as_tensor(arr: np.ndarray, meta) -> torch.Tensor:
    t = torch.from_numpy(arr)
    return t.view(torch.bfloat16) if meta.dtype == 3 else t


def stored_tensor(p, buf, native) -> torch.Tensor:
    """Parameter ``p`` of an unquantised record as a tensor over ``buf`` (the file's bytes, which
    the caller owns, starting on a 64-byte boundary). ``native``: the float dtype an unquantised
    file keeps (None otherwise)."""
    off, _n = _checked_record(p, len(buf))
    # numpy makes the view and the copy (a torch.frombuffer + clone costs twice as much per
    # weight, and a small model is mostly per-weight overhead)
    arr = np.ndarray(p.meta.shape, _NUMPY_DTYPES[p.meta.dtype], buf, off)
    if off % _ALIGN:          # the buffer itself starts on a 64-byte boundary (reader.read)
        arr = arr.copy()
    return _as_tensor(arr, p.meta)


def mapped_tensor(p, mm: mmap.mmap, size_now: int, native) -> torch.Tensor:
    """Parameter ``p`` of an unquantised record whose bytes start on a 64-byte boundary, as a
    read-only tensor over the file's mapping ``mm`` (no copy: the pages are the page cache's,
    counted as file-backed memory, and shared by every process that maps the file).
    ``size_now``: the file's size now (a record past it was cut off by another program)."""
    off, n = _checked_record(p, size_now, " (it changed on disk after it was opened — reload it)")
    if n >= _WILLNEED_MIN and hasattr(mm, "madvise"):
        # the mapping is MADV_RANDOM (the reader's sparse look-ups); a weight is read whole, so
        # ask for its pages in one go instead of a 4 KB fault at a time from a cold disk
        start = off - off % mmap.PAGESIZE
        try:
            mm.madvise(mmap.MADV_WILLNEED, start, off + n - start)
        except (OSError, ValueError):
            pass
    # frombuffer, not ndarray(buffer=mm): it keeps an export of the mapping for as long as the
    # tensor lives, so closing the file (a reload, a session's end) cannot unmap pages a kernel
    # or a kept result still reads (mmap.close() raises BufferError instead, which NacFile.close
    # takes as "freed with the last view")
    dt = _NUMPY_DTYPES[p.meta.dtype]
    arr = np.frombuffer(mm, dt, n // dt.itemsize, off).reshape(p.meta.shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # read-only: the caller checked nothing writes
        return _as_tensor(arr, p.meta)


#: Records from this size are asked for with MADV_WILLNEED before use.
_WILLNEED_MIN = 1 << 20
