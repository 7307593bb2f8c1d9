"""The interpreter's read of a ``.nac``: what running needs, no byte spans, the rest on first access.

:func:`~nac_engine.format.reader.read` decodes every section and records a span for every
field, which is what the tools need (hex and structure views, ``dis``, ``verify``); on a small
model it costs more than running the model. :func:`read_for_run` decodes the header and the
sections a run reads — CMAP, CNST, PERM, OPS and DATA's names and tensor metadata — without
spans (one ``struct`` call per record; OPS by read()'s own instruction decoder, which builds its
spans only when asked), and returns a :class:`RunFile`: a
:class:`~nac_engine.format.model.NacFile` whose other parts (``mmap``, ``proc``, ``orch``,
``rsrc``, ``trng``, ``arrs``, ``trailing``, ``spans``) are decoded on first access by
``read()``'s own section decoders. It is strict like ``read()``: a broken run section raises at
once; a broken MMAP/ORCH/RSRC raises when (and each time) that part is touched.

One error for one defect: the fast decoders below only recognise well-formed records. Anything
else (a truncated record, a duplicate id, a bad bool byte, a size mismatch...) hands the whole
section to ``read()``'s decoder, which raises the :class:`~nac_engine.errors.NacFormatError`
``read()`` would raise (same section, offset and reason). Counts are checked against the bytes
left before anything is allocated, as ``read()`` does.

The bytes: a file up to :data:`WHOLE_READ_MAX` is read with one call into a private buffer
aligned to 64 bytes (what torch's allocator gives), so the session that owns the file may use a
weight in place when its record happens to be aligned, and nothing another program does to the
file afterwards (truncating it) can reach the process. A bigger file is memory-mapped as
``read()`` maps it, and its weights are copied out through the size-checked path
(:mod:`.mapped`).
"""
from __future__ import annotations

import math
import mmap
import os
import struct
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np

from . import layout as L
from .cursor import Cursor
from .model import Constant, InputName, NacFile, Parameter, TensorMeta
from .reader import _Problems, _Reader, read

#: Files up to this size are read into memory whole; bigger ones are memory-mapped.
WHOLE_READ_MAX = 256 << 20
#: Alignment of the in-memory copy's first byte (torch's CPU allocator aligns to 64).
ALIGNMENT = 64

_RUN_SECTIONS = ("CMAP", "CNST", "PERM", "OPS", "DATA")     # read()'s decode order, less MMAP
_TAGS = {tag: L.tag_bytes(tag) for tag in _RUN_SECTIONS}
_LAZY_SECTIONS = {"mmap": "MMAP", "proc": "PROC", "orch": "ORCH", "rsrc": "RSRC", "trng": "TRNG",
                  "arrs": "ARRS"}
_LAZY_DEFAULTS = {"mmap": list, "proc": lambda: None, "orch": lambda: None, "rsrc": lambda: None,
                  "trng": lambda: None, "arrs": lambda: None, "spans": lambda: None, "trailing": dict}
# What each run section fills, for adopting read()'s result when it decodes a section.
_FILLS = {"CMAP": ("cmap",), "CNST": ("constants",), "PERM": ("perms",), "OPS": ("instructions",),
          "DATA": ("params", "input_names", "tensor_order")}
_PERM_CODES = frozenset("QKVMBWTPSAfibsc")

_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_CMAP_REC = struct.Struct("<HB")
_NAME_REC = struct.Struct("<HH")
_CNST_REC = struct.Struct("<HBH")
_TENSOR_REC = struct.Struct("<HIQ")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_F32 = struct.Struct("<f")
_HEADER_FIELDS = struct.Struct("<BHHBH")      # flags, num_inputs, num_outputs, reserved, d_model


class _Invalid(Exception):
    """A record the fast path does not recognise: read()'s decoder judges the section."""


class _Lazy:
    """A NacFile field filled from its section the first time it is read."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name
        self.key = "_v_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        d = obj.__dict__
        if self.key in d:
            return d[self.key]
        value = obj._decode_field(self.name)
        d[self.key] = value
        return value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.key] = value


class RunFile(NacFile):
    """A NacFile from :func:`read_for_run`: the run sections decoded, the others on first access.

    Reading ``mmap``, ``orch``, ``rsrc``... decodes that section with ``read()``'s decoder
    (a broken one raises NacFormatError, every time it is read); ``trailing`` decodes every
    section first; ``spans`` decodes the whole file as ``read()`` does. Assigning a field
    replaces it, as on any NacFile."""

    mmap = _Lazy()
    proc = _Lazy()
    orch = _Lazy()
    rsrc = _Lazy()
    trng = _Lazy()
    arrs = _Lazy()
    trailing = _Lazy()
    spans = _Lazy()

    #: True when ``_buf`` is this object's own copy of the file (not a mapping, not bytes the
    #: caller still holds): nothing outside can change or shrink it.
    private_buffer: bool = False

    def _decode_field(self, name: str) -> Any:
        state = self.__dict__.get("_lazy_state")
        if state is None:                     # made by copy/replace without a file behind it
            return _LAZY_DEFAULTS[name]()
        if name == "spans":
            return read(_bytes_view(self._buf)).spans
        if name == "trailing":
            for field in _LAZY_SECTIONS:
                getattr(self, field)          # each section's trailing bytes (raises if broken)
            return dict(state.trailing)
        tag = _LAZY_SECTIONS[name]
        bounds = state.sections.get(tag)
        if bounds is None:
            return _LAZY_DEFAULTS[name]()
        scratch = _decode_with_reader(self, tag, bounds)
        state.trailing.update(scratch.trailing)
        value = getattr(scratch, name)
        for item in value if name in ("rsrc", "arrs") and value else ():
            item._file = self                 # their data is read from this file
        return value


def read_for_run(source, *, weights: Optional[str] = None) -> RunFile:
    """Decode what running a ``.nac`` needs (see the module docstring). ``source``: a path or a
    bytes-like object; ``weights``: the external ``.safetensors`` (default: beside the file)."""
    path = fd = None
    closer = None
    private = False
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = source
    else:
        path = os.fspath(source)
        fh = open(path, "rb", buffering=0)
        try:
            size = os.fstat(fh.fileno()).st_size
            if size <= WHOLE_READ_MAX:
                buf = _read_whole(fh, size)
                private = True
            else:
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
                if hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
                    mm.madvise(mmap.MADV_RANDOM)
                buf, closer = mm, mm.close
                fd = os.dup(fh.fileno())      # tensor headers by pread, as read() does
        finally:
            fh.close()
    nac = RunFile()
    for name in _LAZY_DEFAULTS:
        nac.__dict__.pop("_v_" + name, None)
    nac._buf, nac._closer, nac.path = buf, closer, path
    nac.private_buffer = private
    try:
        _decode_run_sections(nac, buf, fd)
    except BaseException:
        nac.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    if path is not None and not nac.header.weights_internal:
        nac.weights_path = weights or os.path.splitext(path)[0] + ".safetensors"
    elif weights:
        nac.weights_path = weights
    return nac


def _read_whole(fh, size: int) -> memoryview:
    """The file's bytes in a writable buffer whose first byte is 64-byte aligned. A file that
    shrank since its size was asked gives the bytes it still has."""
    raw = np.empty(size + ALIGNMENT, np.uint8)
    shift = (-raw.__array_interface__["data"][0]) % ALIGNMENT
    view = memoryview(raw[shift:shift + size]).cast("B")
    got = 0
    while got < size:
        n = fh.readinto(view[got:])
        if not n:
            break
        got += n
    return view[:got] if got < size else view


def _bytes_view(buf):
    return buf if isinstance(buf, (bytes, bytearray, memoryview)) else memoryview(buf)


# --------------------------------------------------------------------------- decoding
def _decode_run_sections(nac: RunFile, buf, fd: Optional[int]) -> None:
    size = len(buf)
    state = SimpleNamespace(sections={}, trailing={})
    nac.__dict__["_lazy_state"] = state
    layout, offsets = _header(nac, buf, size)
    nac.header_decoded = True
    regions = _Reader._locate(SimpleNamespace(p=_Problems(True), size=size), layout, offsets)
    header_limit = regions[0][0] if regions else size
    if layout.size < header_limit:
        state.trailing["header"] = bytes(buf[layout.size:header_limit])
    nac.layout = [tag for _, tag in regions]
    for i, (off, tag) in enumerate(regions):
        state.sections[tag] = (off, regions[i + 1][0] if i + 1 < len(regions) else size)
    for tag in _RUN_SECTIONS:
        bounds = state.sections.get(tag)
        if bounds is None:
            continue
        start, end = bounds
        try:
            if end - start < 4 or bytes(buf[start:start + 4]) != _TAGS[tag]:
                raise _Invalid
            pos = _FAST[tag](nac, buf, start + 4, end, fd)
        except (_Invalid, struct.error, UnicodeDecodeError):
            _adopt(nac, tag, _decode_with_reader(nac, tag, bounds))
            continue
        if pos < end:
            state.trailing[tag] = bytes(buf[pos:end])


def _header(nac: NacFile, buf, size: int):
    """Header fields and the offset table; anything unusual goes to read()'s header decoder."""
    layout = None
    if size >= 20 and bytes(buf[0:3]) == L.MAGIC:
        first = struct.unpack_from("<Q", buf, 12)[0]
        if buf[3] == 1 and first != 90:
            layout = L.V16
        elif buf[3] == 2:
            layout = L.V17 if first == 92 else L.V18 if first == 100 else None
    if layout is None or size < layout.size:
        reader = _Reader(NacFile(), buf, _Problems(True))
        reader._header(reader.root.add(0, 0, "header", "header"))
        raise AssertionError("read()'s header decoder accepted a header the run read refused")
    h = nac.header
    h.version = layout.version
    flags, h.num_inputs, h.num_outputs, h.reserved, h.d_model = _HEADER_FIELDS.unpack_from(buf, 4)
    h.weights_internal = bool(flags & 0x80)
    h.quant_method = flags & layout.quant_mask
    h.trng_flag = bool(flags & layout.trng_flag)
    table = struct.unpack_from(f"<{len(layout.slots)}Q", buf, 12)
    if layout.version == "1.6":
        h.padding = bytes(buf[84:88])
    return layout, dict(zip(layout.slots, table))


def _decode_with_reader(nac: NacFile, tag: str, bounds: tuple) -> NacFile:
    """``tag`` decoded by read()'s own decoder (spans recorded, strict), into a scratch NacFile
    that shares the tables decoded so far. Raises what read() raises."""
    scratch = NacFile(header=nac.header, cmap=nac.cmap, perms=nac.perms, constants=nac.constants,
                      instructions=nac.instructions)
    for table in _FILLS.get(tag, ()):
        setattr(scratch, table, type(getattr(scratch, table))())   # the section's own tables start empty
    scratch._buf, scratch.path = nac._buf, nac.path
    reader = _Reader(scratch, nac._buf, _Problems(True))
    start, end = bounds
    reader._section(tag, start, end, reader.root.add(start, end - start, tag, "section"))
    return scratch


def _adopt(nac: RunFile, tag: str, scratch: NacFile) -> None:
    """read()'s decoder took a section the fast path refused without finding an error: use its
    result (the fast path is only ever stricter, never different)."""
    for table in _FILLS[tag]:
        setattr(nac, table, getattr(scratch, table))
    for p in nac.params.values() if tag == "DATA" else ():
        p._file = nac
    if tag == "CMAP":
        nac.invalidate()
    nac.__dict__["_lazy_state"].trailing.update(scratch.trailing)


def _count(buf, pos: int, end: int, min_record: int) -> int:
    if pos + 4 > end:
        raise _Invalid
    n = _U32.unpack_from(buf, pos)[0]
    if n * min_record > end - pos - 4:
        raise _Invalid
    return n


def _text(buf, pos: int, n: int, end: int) -> str:
    if pos + n > end:
        raise _Invalid
    return bytes(buf[pos:pos + n]).decode("utf-8")


def _id_texts(buf, pos: int, end: int, rec: struct.Struct) -> tuple[list, int]:
    """CMAP, PERM and DATA's name tables share one shape: a u32 count, then records of ``rec``
    (an id and a length) each followed by that many bytes of UTF-8. The (id, text) pairs and
    the position after them."""
    size, unpack = rec.size, rec.unpack_from
    n = _count(buf, pos, end, size)
    pos += 4
    out = []
    for _ in range(n):
        if pos + size > end:
            raise _Invalid
        key, ln = unpack(buf, pos)
        out.append((key, _text(buf, pos + size, ln, end)))
        pos += size + ln
    return out, pos


def _unique_into(table: dict, pairs: list, accept=None) -> None:
    """A repeated id, or a text ``accept`` refuses, is left to ``read()``'s decoder to explain."""
    for key, text in pairs:
        if key in table or (accept is not None and not accept(text)):
            raise _Invalid
        table[key] = text


def _fast_cmap(nac: RunFile, buf, pos: int, end: int, fd) -> int:
    pairs, pos = _id_texts(buf, pos, end, _CMAP_REC)
    _unique_into(nac.cmap, pairs)
    nac.invalidate()
    return pos


def _fast_perm(nac: RunFile, buf, pos: int, end: int, fd) -> int:
    pairs, pos = _id_texts(buf, pos, end, _CMAP_REC)
    _unique_into(nac.perms, pairs, _PERM_CODES.issuperset)
    return pos


def _fast_cnst(nac: RunFile, buf, pos: int, end: int, fd) -> int:
    n = _count(buf, pos, end, 5)
    pos += 4
    constants = nac.constants
    unpack = _CNST_REC.unpack_from
    for _ in range(n):
        if pos + 5 > end:
            raise _Invalid
        cid, typ, ln = unpack(buf, pos)
        pos += 5
        length_field = None
        if typ == L.CONST_NULL:
            value, length_field = None, ln
        elif typ == L.CONST_BOOL:
            if pos + 1 > end or buf[pos] > 1:
                raise _Invalid
            value, length_field = bool(buf[pos]), ln
            pos += 1
        elif typ == L.CONST_INT64 or typ == L.CONST_FLOAT64:
            if ln != 8 or pos + 8 > end:
                raise _Invalid
            value = (_I64 if typ == L.CONST_INT64 else _F64).unpack_from(buf, pos)[0]
            pos += 8
        elif typ == L.CONST_STRING:
            value = _text(buf, pos, ln, end)
            pos += ln
        elif typ == L.CONST_LIST_I32 or typ == L.CONST_LIST_F32:
            if pos + 4 * ln > end:
                raise _Invalid
            value = struct.unpack_from(f"<{ln}{'i' if typ == L.CONST_LIST_I32 else 'f'}", buf, pos)
            pos += 4 * ln
        else:
            raise _Invalid
        if cid in constants:
            raise _Invalid
        constants[cid] = Constant(cid, typ, value, length_field)
    return pos


class _NoSpans:
    """A span sink for read()'s OPS decoder: the run read records none."""
    __slots__ = ()
    length = value = None

    def add(self, *_args, **_kw) -> "_NoSpans":
        return self

    def set_builder(self, _builder) -> None:
        pass


_NO_SPANS = _NoSpans()


def _fast_ops(nac: RunFile, buf, pos: int, end: int, fd) -> int:
    # read()'s instruction decoder already works one struct call per field and records spans
    # lazily: it is used as it is (its problems are errors here, as in a strict read()).
    reader = _Reader.__new__(_Reader)
    reader.nac, reader.buf, reader.size, reader.fd, reader.p = nac, buf, len(buf), None, _Problems(True)
    cur = Cursor(buf, pos, end, "OPS", _NO_SPANS)
    reader._instructions(cur, _NO_SPANS, False, nac.instructions.extend)   # the interpreter's own list
    return cur.pos


def _fast_data(nac: RunFile, buf, pos: int, end: int, fd) -> int:
    params = nac.params
    pairs, pos = _id_texts(buf, pos, end, _NAME_REC)
    for pid, name in pairs:
        if pid in params:
            raise _Invalid
        params[pid] = Parameter(pid, name, _file=nac)
    pairs, pos = _id_texts(buf, pos, end, _NAME_REC)
    nac.input_names.extend(InputName(idx, text) for idx, text in pairs)
    if not nac.header.weights_internal:
        return pos
    t = _count(buf, pos, end, 14)
    pos += 4
    order, seen = nac.tensor_order, set()
    for _ in range(t):
        if pos + 14 > end:
            raise _Invalid
        head = os.pread(fd, 14, pos) if fd is not None else buf
        pid, meta_len, data_len = _TENSOR_REC.unpack_from(head, 0 if fd is not None else pos)
        pos += 14
        if meta_len > end - pos:
            raise _Invalid
        meta = _tensor_meta(os.pread(fd, meta_len, pos) if fd is not None else buf[pos:pos + meta_len])
        pos += meta_len
        param = params.get(pid)
        if data_len > end - pos or param is None or pid in seen:
            raise _Invalid
        if meta.dtype in L.NUMPY_STORAGE and meta.stored_nbytes != data_len:
            raise _Invalid
        param.meta, param.data_offset, param.data_length = meta, pos, data_len
        order.append(pid)
        seen.add(pid)
        pos += data_len
    return pos


def _tensor_meta(mb) -> TensorMeta:
    """DATA block 3 metadata (what reader.read_tensor_meta decodes), from its own bytes."""
    limit = len(mb)
    if limit < 2:
        raise _Invalid
    dt, rank = mb[0], mb[1]
    pos = 2 + 4 * rank
    if pos + 1 > limit:
        raise _Invalid
    shape = struct.unpack_from(f"<{rank}I", mb, 2) if rank else ()
    q = mb[pos]
    pos += 1
    meta = TensorMeta(dt, shape, q)
    if q == L.QUANT_INT8_TENSOR:
        if pos + 4 > limit:
            raise _Invalid
        meta.scale_bits = bytes(mb[pos:pos + 4])
        meta.scale = _F32.unpack(meta.scale_bits)[0]
        pos += 4
    elif q == L.QUANT_INT8_CHANNEL:
        if pos + 5 > limit:
            raise _Invalid
        meta.axis = mb[pos]
        n = _U32.unpack_from(mb, pos + 1)[0]
        pos += 5
        meta.scales, pos = _scales(mb, pos, n, limit)
    elif q == L.QUANT_BLOCK_FP8:
        if pos + 3 > limit:
            raise _Invalid
        meta.block_size = _U16.unpack_from(mb, pos)[0]
        orank = mb[pos + 2]
        pos += 3
        if pos + 4 * orank + 4 > limit:
            raise _Invalid
        meta.original_shape = struct.unpack_from(f"<{orank}I", mb, pos) if orank else ()
        pos += 4 * orank
        if math.prod(meta.original_shape) > math.prod(shape):
            raise _Invalid
        n = _U32.unpack_from(mb, pos)[0]
        meta.scales, pos = _scales(mb, pos + 4, n, limit)
    if pos < limit:
        meta.extra = bytes(mb[pos:limit])
    return meta


def _scales(mb, pos: int, n: int, limit: int):
    if pos + 4 * n > limit:
        raise _Invalid
    return np.frombuffer(bytes(mb[pos:pos + 4 * n]), "<f4").copy(), pos + 4 * n


_FAST = {"CMAP": _fast_cmap, "CNST": _fast_cnst, "PERM": _fast_perm, "OPS": _fast_ops, "DATA": _fast_data}
