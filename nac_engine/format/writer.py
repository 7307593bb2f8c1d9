"""NacFile → bytes. Encodes every section from the model; nothing is copied wholesale
except tensor/resource payloads, which are opaque data.

Sections are written back to back in ``nacfile.layout`` order (the physical order the
file was read with), so ``write(read(f)) == f`` for every file the reference writes.
Writing to another version re-lays the file out in that version's order and keeps the
meaning: ops that are standard in v1.8 but not in v1.6 (IDs 20-31) get CMAP entries.

Every value is range-checked before packing: where the reference writer silently leaves a
truncated file (research §7), we raise :class:`NacEncodeError` and write nothing.
"""
from __future__ import annotations

import errno
import math
import os
import re
import stat
import struct
import tempfile
from collections.abc import Mapping
from typing import Optional

import numpy as np

from ..errors import NacEncodeError
from ..files import kind_of
from ..isa.optable import standard_ops
from . import layout as L
from .const_table import constant_values
from .deferred_values import DeferredValues
from .lazy_records import walk_records
from .name_tables import parameter_names
from .model import Constant, Instruction, NacFile, Orch, TensorMeta

_RANGES = {"B": (0, 0xFF), "H": (0, 0xFFFF), "I": (0, 0xFFFFFFFF), "Q": (0, 2 ** 64 - 1),
           "h": (-0x8000, 0x7FFF), "i": (-2 ** 31, 2 ** 31 - 1), "q": (-2 ** 63, 2 ** 63 - 1)}


class _Out:
    def __init__(self):
        self.parts: list = []
        self.size = 0

    def put(self, fmt: str, value, what: str) -> None:
        lo_hi = _RANGES.get(fmt)
        if lo_hi is not None and not (lo_hi[0] <= value <= lo_hi[1]):
            raise NacEncodeError(f"{what} = {value} does not fit its field ({fmt}: {lo_hi[0]}..{lo_hi[1]})")
        self.raw(struct.pack("<" + fmt, value))

    def many(self, fmt: str, values, what: str) -> None:
        lo, hi = _RANGES[fmt]
        for v in values:
            if not lo <= v <= hi:
                raise NacEncodeError(f"{what} holds {v}, which does not fit int16/uint field ({lo}..{hi})")
        if values:
            self.raw(struct.pack(f"<{len(values)}{fmt}", *values))

    def raw(self, b) -> None:
        self.parts.append(b)
        self.size += len(b)

    def text(self, s: str, len_fmt: str, what: str) -> None:
        b = s.encode("utf-8")
        self.put(len_fmt, len(b), f"length of {what} {s[:40]!r}")
        self.raw(b)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)   # one copy: join takes memoryviews of payloads as they are


def write(nac: NacFile, path=None, *, version: Optional[str] = None) -> bytes:
    """Encode ``nac``; with ``path``, also save atomically (temp file, fsync, rename)."""
    data = encode(nac, version)
    if path is not None:
        atomic_write(os.fspath(path), data)
    return data


def atomic_write(path: str, data: bytes) -> None:
    atomic_produce(path, lambda fh, _tmp: fh.write(data))


def atomic_produce(path: str, produce, prefix: str = ".nac-") -> None:
    """Write ``path`` all or nothing: ``produce(fh, tmp_path)`` fills a temp file in the same
    directory (through ``fh``, opened ``wb``, or by name for writers that want a path), which is
    fsynced and renamed over ``path``; the directory is fsynced so the rename survives a
    crash. On any error the temp file is removed and ``path`` is untouched.

    The result has the mode an ordinary ``open(path, "w")`` would give it: an existing file's
    mode is kept, a new file gets 0666 less the umask (``mkstemp`` alone makes 0600). Temp names
    carry our process id, so a save killed before its rename leaves a temp that the next save
    into the same directory recognises as orphaned (its process is gone) and deletes.

    A symlink is written through, as editors do: the link stays, its target gets the new bytes
    (renaming over the link would replace it with a regular file). A target that exists and is
    not a regular file (a FIFO, a device, a directory) is refused."""
    path = os.path.realpath(os.fspath(path)) if os.path.islink(path) else os.fspath(path)
    try:
        st_mode = os.stat(path).st_mode
    except OSError:
        st_mode = None
    if st_mode is not None and not stat.S_ISREG(st_mode):
        raise OSError(errno.EINVAL, f"it is {kind_of(st_mode)}, not a regular file: not replaced", path)
    directory = os.path.dirname(os.path.abspath(path))
    remove_orphaned_temps(directory, prefix)
    mode = _target_mode(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", suffix=".tmp", dir=directory)
    except OSError as e:
        raise _about(e, path) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            produce(fh, tmp)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and tmp in (e.filename, e.filename2):
            raise _about(e, path) from None
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _about(e: OSError, path: str) -> OSError:
    """The same error naming the file the user asked for: temp names mean nothing to them."""
    return type(e)(e.errno, e.strerror or str(e), path)


def _target_mode(path: str) -> int:
    """The permission bits ``path`` should end with: its current ones, or the umask's."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process umask, read without changing it where Linux tells it (``os.umask`` can only
    be read by setting it, which would race with other threads creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_TEMP_NAME = re.compile(r"^(?P<prefix>\.nac-(?:[a-z]+-)?)(?P<pid>\d+)-[A-Za-z0-9_]+\.tmp$")


def remove_orphaned_temps(directory: str, prefix: str = ".nac-") -> list[str]:
    """Delete temp files of ``prefix`` in ``directory`` whose writing process no longer exists
    (a save killed between creating its temp and renaming it). Temps of live processes, and
    anything not named like ours, are left alone. Returns the paths removed."""
    removed = []
    try:
        entries = os.scandir(directory)
    except OSError:
        return removed
    with entries:
        for entry in entries:
            m = _TEMP_NAME.match(entry.name)
            if m is None or m.group("prefix") != prefix or _process_alive(int(m.group("pid"))):
                continue
            try:
                if entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)
                    removed.append(entry.path)
            except OSError:
                pass
    return removed


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True      # exists but is not ours, or unknowable: keep its file
    return True


def encode(nac: NacFile, version: Optional[str] = None) -> bytes:
    src_version = nac.header.version
    version = version or src_version
    if version not in L.LAYOUTS:
        raise NacEncodeError(f"unknown NAC version {version!r} (known: {', '.join(L.LAYOUTS)})")
    lay = L.LAYOUTS[version]
    same = version == src_version
    cmap = nac.cmap                 # read only: a read file's table is walked, not copied
    if not same:
        _check_convertible(nac, version)
        cmap = _converted_cmap(nac, version)
    order = _section_order(nac, lay, same)
    header_gap = len(nac.trailing.get("header", b"")) if same else 0
    if lay.version != "1.6" and (not order or order[0] != "MMAP" or header_gap):
        # v1.7 and v1.8 share a version byte; readers tell them apart by the MMAP offset
        # (92 or 100), so MMAP must be the first section, right after the header.
        raise NacEncodeError(f"v{lay.version} needs MMAP as the first section directly after the header "
                             f"(layout {order}, {header_gap} bytes after the header)")
    if lay.version == "1.6" and header_gap == 2 and order and order[0] == "MMAP":
        raise NacEncodeError("v1.6 with MMAP at offset 90 would read as the pre-v1.6 90-byte header")
    encoders = {"MMAP": _mmap, "OPS": _ops, "CMAP": lambda n, o: _cmap(cmap, o), "CNST": _cnst,
                "PERM": _perm, "DATA": _data, "PROC": _proc, "ORCH": _orch, "RSRC": _rsrc,
                "TRNG": _trng, "ARRS": _arrs}
    # Sections are encoded first (payloads stay views, nothing is copied), then the header
    # with the offsets they landed at, then everything is joined once.
    out = _Out()
    out.size = lay.size
    if same and "header" in nac.trailing:
        out.raw(nac.trailing["header"])
    offsets = {}
    for tag in order:
        offsets[tag] = out.size
        out.raw(L.tag_bytes(tag))
        encoders[tag](nac, out)
        if same and tag in nac.trailing:
            out.raw(nac.trailing[tag])
    out.parts.insert(0, _header(nac, lay, offsets, same))
    return out.getvalue()


def _section_order(nac: NacFile, lay: L.HeaderLayout, same: bool) -> list:
    present = {"PROC": nac.proc is not None, "ORCH": nac.orch is not None, "RSRC": nac.rsrc is not None,
               "TRNG": nac.trng is not None, "ARRS": nac.arrs is not None}
    if same and nac.layout:
        order = [t for t in nac.layout if present.get(t, True)]
        missing = [t for t in lay.default_order if present.get(t) and t not in order]
        for t in missing:   # sections added after reading go where a new file would have them
            order.insert(_default_pos(order, t, lay), t)
        return order
    always = L.ALWAYS_WRITTEN[lay.version]
    order = [t for t in lay.default_order if t in always or present.get(t)]
    if "RSRC" in order and not nac.header.weights_internal and not nac.rsrc:
        order.remove("RSRC")
    return order


def _default_pos(order: list, tag: str, lay: L.HeaderLayout) -> int:
    rank = {t: i for i, t in enumerate(lay.default_order)}
    for i, t in enumerate(order):
        if rank.get(t, 99) > rank[tag]:
            return i
    return len(order)


def _check_convertible(nac: NacFile, version: str) -> None:
    if version == "1.6":
        if nac.trng:
            raise NacEncodeError("v1.6 has no TRNG section; this file has a training graph")
        if nac.arrs:
            raise NacEncodeError("v1.6 has no ARRS section; this file has named arrays")
    if version == "1.7" and nac.arrs:
        raise NacEncodeError("v1.7 has no ARRS section; this file has named arrays")


def _converted_cmap(nac: NacFile, version: str) -> dict:
    """Keep every op's meaning when the target version's standard table differs."""
    src = nac.op_names
    target_std = standard_ops(version)
    cmap = dict(nac.cmap)
    used = {ins.a for ins in nac.instructions} | {ins.a for ins in (nac.trng or [])}
    for a in sorted(used):
        if a < 10 or a in cmap:
            continue
        name = src.get(a)
        if name is not None and target_std.get(a) != name:
            cmap[a] = name
    # Entries that merely restate the target's standard table carry no meaning there: drop them,
    # so v1.8 → v1.6 → v1.8 comes back byte for byte.
    return {a: n for a, n in sorted(cmap.items()) if target_std.get(a) != n}


def _header(nac: NacFile, lay: L.HeaderLayout, offsets: dict, same: bool) -> bytes:
    h = nac.header
    trng = h.trng_flag if same else (nac.trng is not None)
    if lay.trng_flag == 0 and trng:
        raise NacEncodeError("v1.6 has no TRNG flag")
    qmax = lay.quant_mask
    if not 0 <= h.quant_method <= qmax:
        raise NacEncodeError(f"header quantisation method {h.quant_method} does not fit v{lay.version} (max {qmax})")
    flags = (0x80 if h.weights_internal else 0) | (lay.trng_flag if trng else 0) | h.quant_method
    out = _Out()
    out.raw(L.MAGIC)
    out.put("B", lay.version_byte, "version")
    out.put("B", flags, "flags")
    out.put("H", h.num_inputs, "header input count")
    out.put("H", h.num_outputs, "header output count")
    out.put("B", h.reserved, "header reserved byte")
    out.put("H", h.d_model, "d_model")
    for tag in lay.slots:
        out.put("Q", offsets.get(tag, 0), f"{tag} offset")
    if lay.version == "1.6":
        pad = h.padding if same and len(h.padding) == 4 else b"\0\0\0\0"
        out.raw(pad)
    data = out.getvalue()
    assert len(data) == lay.size
    return data


# --------------------------------------------------------------------------- sections
def _mmap(nac: NacFile, out: _Out) -> None:
    out.put("I", len(nac.mmap), "MMAP record count")
    for rec in walk_records(nac.mmap):       # a read or assembled schedule: one record at a time
        out.put("H", rec.tick, "MMAP tick")
        out.put("B", len(rec.commands), f"MMAP command count at tick {rec.tick}")
        for c in rec.commands:
            out.put("B", c.action, f"MMAP action at tick {rec.tick}")
            out.put("H", c.target, f"MMAP target at tick {rec.tick}")


def _instructions(instrs: list, out: _Out, label: str) -> None:
    out.put("I", len(instrs), f"{label} instruction count")
    for ins in instrs:
        encode_instruction(ins, out, label)


def encode_instruction(ins: Instruction, out: _Out, label: str = "OPS") -> None:
    what = f"{label} instruction {ins.index}"
    out.put("B", ins.a, f"{what} op id A")
    out.put("B", ins.b, f"{what} signature/variant B")
    if ins.c:
        out.many("h", ins.c, f"{what} C")
    if ins.d:
        out.many("h", ins.d, f"{what} D")


def _ops(nac: NacFile, out: _Out) -> None:
    _instructions(nac.instructions, out, "OPS")


def _trng(nac: NacFile, out: _Out) -> None:
    _instructions(nac.trng or [], out, "TRNG")


def _cmap(cmap: Mapping, out: _Out) -> None:
    out.put("I", len(cmap), "CMAP count")
    for oid, name in cmap.items():
        out.put("H", oid, "CMAP op id")
        out.text(name, "B", "CMAP op name")


def _perm(nac: NacFile, out: _Out) -> None:
    out.put("I", len(nac.perms), "PERM count")
    for sid, s in nac.perms.items():
        out.put("H", sid, "PERM signature id")
        out.text(s, "B", "PERM signature")


def _cnst(nac: NacFile, out: _Out) -> None:
    out.put("I", len(nac.constants), "CNST count")
    for c in constant_values(nac.constants):
        encode_constant(c, out, "CNST")


def encode_constant(c: Constant, out: _Out, label: str) -> None:
    what = f"{label} constant {c.id}"
    out.put("H", c.id, f"{label} constant id")
    out.put("B", c.type, f"{what} type")
    t, v = c.type, c.value
    if t == L.CONST_NULL:
        out.put("H", c.length_field or 0, f"{what} length")
    elif t == L.CONST_BOOL:
        out.put("H", 1 if c.length_field is None else c.length_field, f"{what} length")
        out.put("B", 1 if v else 0, what)
    elif t == L.CONST_INT64:
        out.put("H", 8, f"{what} length")
        out.put("q", int(v), what)
    elif t == L.CONST_FLOAT64:
        out.put("H", 8, f"{what} length")
        out.raw(struct.pack("<d", float(v)))
    elif t == L.CONST_STRING:
        out.text(str(v), "H", what)
    elif t == L.CONST_LIST_I32:
        vals = [int(x) for x in v]
        out.put("H", len(vals), f"{what} element count")
        out.many("i", vals, what)
    elif t == L.CONST_LIST_F32:
        vals = [float(x) for x in v]
        out.put("H", len(vals), f"{what} element count")
        try:
            out.raw(struct.pack(f"<{len(vals)}f", *vals))
        except OverflowError:
            raise NacEncodeError(f"{what}: a value is out of float32 range") from None
    else:
        raise NacEncodeError(f"{what}: unknown constant type code {t}")


def _data(nac: NacFile, out: _Out) -> None:
    out.put("I", len(nac.params), "DATA parameter count")
    for pid, name in parameter_names(nac.params):
        out.put("H", pid, "DATA parameter id")
        out.text(name, "H", "parameter name")
    out.put("I", len(nac.input_names), "DATA input-name count")
    for n in walk_records(nac.input_names):
        out.put("H", n.index, f"DATA input index of {n.name!r}")
        out.text(n.name, "H", "input name")
    if not nac.header.weights_internal:
        return
    order = list(nac.tensor_order) or [pid for pid, p in nac.params.items() if p.meta is not None]
    order += [pid for pid, p in nac.params.items() if p.meta is not None and pid not in order]
    out.put("I", len(order), "DATA tensor count")
    for pid in order:
        p = nac.params[pid]
        if p.meta is None:
            raise NacEncodeError(f"parameter {p.name!r} has no tensor metadata; internal weights need it")
        meta = encode_tensor_meta(p.meta)
        if nac.align_tensors:       # the data after the 14-byte record head and the metadata lands on 64
            meta += bytes(-(out.size + 14 + len(meta)) % TENSOR_ALIGN)
        payload = param_payload(nac, p)
        out.put("H", pid, "tensor parameter id")
        out.put("I", len(meta), f"metadata length of {p.name!r}")
        out.put("Q", len(payload), f"data length of {p.name!r}")
        out.raw(meta)
        out.raw(payload)


#: File-offset alignment of the tensor data the compiler writes (what torch's allocator gives a copy).
TENSOR_ALIGN = 64


def param_payload(nac: NacFile, p) -> memoryview:
    if p._payload is not None:
        pl = p._payload
        if isinstance(pl, DeferredValues):
            pl = pl.load()
        if isinstance(pl, np.ndarray):
            return memoryview(np.ascontiguousarray(pl).view(np.uint8).reshape(-1))
        return memoryview(pl)
    if p.data_offset >= 0 and nac._buf is not None:
        from .mapped import is_mapped, read_at
        if is_mapped(nac):      # never through the mapping: a file shrunk meanwhile would SIGBUS
            return memoryview(read_at(nac, p.data_offset, p.data_length, "DATA/tensors", f"tensor {p.name!r}"))
        return memoryview(nac._buf)[p.data_offset:p.data_offset + p.data_length]
    raise NacEncodeError(f"parameter {p.name!r} has no data to write")


def encode_tensor_meta(m: TensorMeta) -> bytes:
    out = _Out()
    what = "tensor metadata"
    out.put("B", m.dtype, f"{what} dtype")
    out.put("B", len(m.shape), f"{what} rank")
    out.many("I", list(m.shape), f"{what} shape")
    out.put("B", m.quant, f"{what} quant code")
    if m.quant == L.QUANT_INT8_TENSOR:
        out.raw(m.scale_bits if m.scale_bits is not None else struct.pack("<f", m.scale))
    elif m.quant == L.QUANT_INT8_CHANNEL:
        out.put("B", m.axis or 0, f"{what} axis")
        scales = np.asarray(m.scales, dtype="<f4")
        out.put("I", scales.size, f"{what} scale count")
        out.raw(scales.tobytes())
    elif m.quant == L.QUANT_BLOCK_FP8:
        out.put("H", m.block_size, f"{what} block size")
        oshape = list(m.original_shape or ())
        if math.prod(oshape) > math.prod(m.shape):
            raise NacEncodeError(f"{what}: BLOCK_FP8 original shape {oshape} holds more values than "
                                 f"the {math.prod(m.shape)} stored (the reader refuses such a file)")
        out.put("B", len(oshape), f"{what} original rank")
        out.many("I", oshape, f"{what} original shape")
        scales = np.asarray(m.scales, dtype="<f4")
        out.put("I", scales.size, f"{what} scale count")
        out.raw(scales.tobytes())
    out.raw(m.extra)
    return out.getvalue()


def _proc(nac: NacFile, out: _Out) -> None:
    out.put("I", len(nac.proc.manifest), "PROC manifest length")
    out.raw(nac.proc.manifest)


def _orch(nac: NacFile, out: _Out) -> None:
    orch = nac.orch or Orch()   # an empty plan: the reference always writes ORCH
    out.put("I", len(orch.bytecode), "ORCH bytecode length")
    out.put("I", len(orch.pool), "ORCH constant count")
    out.raw(orch.bytecode)
    for c in walk_records(orch.pool):
        encode_constant(c, out, "ORCH pool")


def _rsrc(nac: NacFile, out: _Out) -> None:
    files = nac.rsrc or []
    out.put("I", len(files), "RSRC file count")
    for r in walk_records(files):
        out.text(r.name, "H", "resource name")
        data = r.data
        out.put("I", len(data), f"size of resource {r.name!r}")
        out.raw(data)


def _arrs(nac: NacFile, out: _Out) -> None:
    out.put("I", len(nac.arrs or ()), "ARRS count")
    for a in walk_records(nac.arrs):
        out.text(a.name, "H", "array name")
        out.put("B", a.dtype, f"dtype of array {a.name!r}")
        out.put("B", len(a.shape), f"rank of array {a.name!r}")
        out.many("I", list(a.shape), f"shape of array {a.name!r}")
        data = a.data
        out.put("Q", len(data), f"size of array {a.name!r}")
        out.raw(data)
