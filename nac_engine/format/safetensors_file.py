"""safetensors files read one tensor at a time with ``pread``, and written one tensor at a time.

Why not the ``safetensors`` library for these two jobs: its reader memory-maps the whole file,
and a mapped page that another program truncates raises SIGBUS inside its Rust code, which kills
the process (the Studio, the engine host); its NumPy getter cannot return bfloat16; and its
writer takes every tensor in one dict, i.e. the whole model in memory. A multi-GB checkpoint or
external-weights file is exactly where those matter. The format is small (research §11; the
library's own specification): 8 bytes little-endian header length N, N bytes of JSON
``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}``,
optionally padded with spaces, then the data, offsets relative to its start.

Reader: :class:`SafetensorsFile` checks the header before allocating anything for a tensor
(size limit, bounded JSON, known dtypes, offsets inside the file, bytes == shape × item size) and
raises :class:`~nac_engine.errors.NacFormatError` naming the tensor otherwise. :meth:`read` returns a
fresh 64-byte-aligned array of the stored values (bfloat16 as its ``uint16`` bits); a file that has
shrunk since it was opened is a :class:`~nac_engine.format.mapped.FileChangedError`.

Writer: :func:`write_safetensors` takes ``(name, dtype, shape, produce)`` entries whose headers are
known before their values, writes the header first, then calls each ``produce()`` in turn and
writes what it returns: memory holds one tensor at a time. Tensors keep the given order; the
header is padded to a multiple of 8 bytes, as the library pads it, so every float32 tensor
starts 8-aligned when the ones before it are.
"""
from __future__ import annotations

import json
import math
import os
import struct
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import numpy as np

from ..errors import NacFormatError
from ..files import open_regular
from . import bounded_json

#: safetensors' own limit on the JSON header (its readers refuse more).
MAX_HEADER = 100_000_000

#: safetensors dtype names and the NumPy dtype their bytes are read as (BF16: its bits).
DTYPES = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"),
          "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
          "U8": np.dtype("u1"), "BOOL": np.dtype("?")}
_NAME_OF = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32",
            "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL"}


def dtype_name(dt) -> str:
    """safetensors' name for NumPy dtype ``dt`` (``"BF16"`` passes through)."""
    if isinstance(dt, str) and dt in DTYPES:
        return dt
    name = _NAME_OF.get(np.dtype(dt).name)
    if name is None:
        raise ValueError(f"dtype {dt} has no safetensors name")
    return name


@dataclass(frozen=True)
class Entry:
    name: str
    dtype: str            # safetensors name: F32, BF16, ...
    shape: tuple
    begin: int            # absolute file offsets
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


class SafetensorsFile:
    """The header of a safetensors file, and its tensors read one at a time (module docstring)."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        section = "weights"
        with open_regular(self.path, section=section) as fh:
            self.size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if len(head) < 8:
                raise NacFormatError(section, 0, f"{self.path} holds {self.size} bytes, too few for a "
                                                 "safetensors header")
            n = struct.unpack("<Q", head)[0]
            if n > MAX_HEADER:
                raise NacFormatError(section, 0, f"{self.path}: safetensors header of {n} bytes is above "
                                                 f"the {MAX_HEADER} readers accept")
            if 8 + n > self.size:
                raise NacFormatError(section, 0, f"{self.path}: safetensors header of {n} bytes runs past "
                                                 f"the end of the {self.size}-byte file (truncated?)")
            raw = fh.read(n)
        try:
            header = bounded_json.loads(raw, what="safetensors header")
        except ValueError as e:
            raise NacFormatError(section, 8, f"{self.path}: {e}") from None
        if not isinstance(header, dict):
            raise NacFormatError(section, 8, f"{self.path}: the safetensors header is not a JSON object")
        md = header.pop("__metadata__", None) or {}
        if not isinstance(md, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in md.items()):
            raise NacFormatError(section, 8, f"{self.path}: __metadata__ must map strings to strings")
        self.metadata: dict = md
        self.data_start = 8 + n
        self.entries: dict[str, Entry] = {}
        for name, e in header.items():
            self.entries[name] = self._entry(name, e)

    def _entry(self, name: str, e) -> Entry:
        where = f"weights/{name}"
        try:
            dtype, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
            shape = tuple(int(d) for d in shape)
            begin, end = int(begin), int(end)
        except (TypeError, KeyError, ValueError) as ex:
            raise NacFormatError(where, 8, f"{self.path}: malformed header entry ({type(ex).__name__})") from None
        if dtype not in DTYPES:
            raise NacFormatError(where, 8, f"{self.path}: dtype {str(dtype)[:20]!r} is not one this reader knows")
        if any(d < 0 for d in shape) or len(shape) > 64:
            raise NacFormatError(where, 8, f"{self.path}: shape {list(shape)[:8]} is not a tensor shape")
        want = math.prod(shape) * DTYPES[dtype].itemsize
        if not 0 <= begin <= end or end - begin != want:
            raise NacFormatError(where, 8, f"{self.path}: data_offsets [{begin}, {end}] do not hold the "
                                           f"{want} bytes of a {dtype}{list(shape)}")
        if self.data_start + end > self.size:
            raise NacFormatError(where, self.data_start + begin,
                                 f"{self.path}: bytes {begin}..{end} lie past the end of the file (truncated?)")
        return Entry(name, dtype, shape, self.data_start + begin, self.data_start + end)

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def keys(self):
        return self.entries.keys()

    def read(self, name: str) -> np.ndarray:
        """Tensor ``name``'s stored values in a fresh, writable, 64-byte-aligned array."""
        e = self.entries[name]
        return self.read_bytes(name, 0, e.nbytes).view(DTYPES[e.dtype]).reshape(e.shape)

    def read_bytes(self, name: str, start: int, n: int, fd: Optional[int] = None) -> np.ndarray:
        """Bytes ``[start, start + n)`` of tensor ``name``'s data (a fresh, aligned ``uint8`` array).
        ``fd``: a descriptor of the file from :meth:`opened`, for many reads in a row."""
        from .mapped import FileChangedError, pread_aligned
        e = self.entries[name]
        if not 0 <= start <= start + n <= e.nbytes:
            raise ValueError(f"bytes {start}..{start + n} are outside tensor {name!r}'s {e.nbytes}")
        with self.opened() if fd is None else nullcontext(fd) as fd:
            out = pread_aligned(fd, e.begin + start, n)
            if out is None:
                raise FileChangedError(f"weights/{name}", e.begin,
                                       f"{self.path} is now {os.fstat(fd).st_size} bytes, too short "
                                       f"for bytes {e.begin}..{e.end}; it changed on disk after it was opened")
        return out

    @contextmanager
    def opened(self):
        """A descriptor of the file for several :meth:`read_bytes` (a heatmap's 300 strided rows):
        one open, not one per read. Each system call lets the engine host's other lanes take
        Python's lock, and a view waited for it behind a busy lane at every one of them."""
        with open_regular(self.path, buffering=0, section="weights") as fh:
            yield fh.fileno()


@dataclass
class Pending:
    """One tensor to write: its header fields, and ``produce()`` giving its values when its turn comes."""
    name: str
    dtype: str
    shape: tuple
    produce: Callable[[], np.ndarray]


def header_bytes(entries: Iterable[Pending], metadata: Optional[dict] = None) -> bytes:
    """The length prefix and JSON header (padded with spaces to a multiple of 8) for ``entries``."""
    header: dict = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for p in entries:
        if p.name in header or p.name == "__metadata__":
            raise ValueError(f"two tensors are named {p.name!r}; safetensors keys must be unique")
        n = math.prod(p.shape) * DTYPES[p.dtype].itemsize
        header[p.name] = {"dtype": p.dtype, "shape": [int(d) for d in p.shape], "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    if len(text) > MAX_HEADER:
        raise ValueError(f"the safetensors header would be about {len(text) / 1e6:.0f} MB (quantisation "
                         f"scales); readers refuse more than {MAX_HEADER / 1e6:.0f} MB. Store these weights "
                         "internally.")
    return struct.pack("<Q", len(text)) + text


def write_safetensors(fh, entries: list, metadata: Optional[dict] = None,
                      progress: Optional[Callable[[str, int], None]] = None) -> int:
    """Write ``entries`` (:class:`Pending`) to the binary file object ``fh``; returns bytes written.
    Each ``produce()`` must return an array of exactly the announced dtype and shape."""
    head = header_bytes(entries, metadata)
    fh.write(head)
    total = len(head)
    for p in entries:
        arr = np.ascontiguousarray(p.produce())
        want = DTYPES[p.dtype]
        if arr.dtype.itemsize != want.itemsize or tuple(arr.shape) != tuple(p.shape):
            raise ValueError(f"tensor {p.name!r}: produced {arr.dtype}{list(arr.shape)}, announced "
                             f"{p.dtype}{list(p.shape)}")
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        fh.write(memoryview(arr).cast("B"))
        total += arr.nbytes
        if progress is not None:
            progress(p.name, arr.nbytes)
        del arr
    return total


__all__ = ["SafetensorsFile", "Entry", "Pending", "write_safetensors", "header_bytes", "dtype_name", "DTYPES",
           "MAX_HEADER"]
