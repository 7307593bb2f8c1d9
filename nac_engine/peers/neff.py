"""AWS Neuron NEFF (seed 003): the 1024-byte header, then a (gzip'ed) tar, read from disk as a stream.

The header has no magic number; a NEFF is recognised structurally (``pkg_version`` 1 or 2 and
``header_size`` 1024). The payload is a GNU tar — raw for pkg_version 1, gzip'ed for 2, followed
by zero padding — and is never extracted to disk nor held whole: the file is read with ``pread`` as
needed (never mapped: a file shrunk by another program gives short reads, not SIGBUS), the gzip
stream is inflated as the tar is walked (under a ratio limit), and the tar is walked header
by header with ``tarfile``; every member is checked before its data is touched (no absolute or
``..`` names, no links, devices or sparse members, sizes inside the archive, a member-count
limit). Members up to ``KEEP_MEMBER`` bytes are kept (the manifests, the engine streams of small
models) within a ``KEEP_TOTAL`` budget; a larger one (a multi-GB model's weights) keeps its first
bytes and its slot-opcode counts, and is read again from the file when asked for
(:meth:`NeffFile.member_bytes`, at most ``MAX_MEMBER_READ``). What the archive holds is decoded
where the format is documented: ``neff.json`` (a TVM graph: inputs, one ``__kelf`` op per kelf,
heads), ``kelf-*.json`` (subgraphs), each ``sgNN/def.json`` (variables and DMA queue sets), engine
JSONs (DMA descriptors), ``.npy`` constants (header-checked, never unpickled) and the engine
instruction streams (64-byte slots; no public ISA, so shown raw with an opcode histogram).
"""
from __future__ import annotations

import hashlib
import io
import posixpath
import struct
import tarfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..errors import NacFormatError
from ..format.mapped import FileBytes
from ..spans import Span
from .base import DetailItem, PeerEdge, PeerFile, PeerGraph, PeerNode, PeerWarning, decode_into
from .safe_json import load_json

FORMAT = "neff"
EXTENSIONS = (".neff",)

HEADER_SIZE = 1024
#: (name, offset, size, kind): the official neff_header_t, little-endian
HEADER_FIELDS = (
    ("pkg_version", 0x000, 8, "u64"),
    ("header_size", 0x008, 8, "u64"),
    ("data_size", 0x010, 8, "u64"),
    ("neff_version_major", 0x018, 8, "u64"),
    ("neff_version_minor", 0x020, 8, "u64"),
    ("build_version", 0x028, 128, "str"),
    ("num_tpb", 0x0A8, 4, "u32"),
    ("hash", 0x0AC, 32, "bytes"),
    ("uuid", 0x0CC, 16, "bytes"),
    ("name", 0x0DC, 256, "str"),
    ("requested_tpb_count", 0x1DC, 4, "u32"),
    ("tpb_per_node", 0x1E0, 64, "bytes"),
    ("feature_bits", 0x220, 8, "u64"),
    ("lnc_size", 0x228, 4, "u32"),
    ("pad", 0x22C, 468, "bytes"),
)

#: Limits on what an archive may make us do or hold (the file alone cannot be trusted to say).
MAX_MEMBERS = 10_000
MAX_INFLATE_RATIO = 64            # inflated bytes per compressed byte, past INFLATE_FLOOR (the work bound)
INFLATE_FLOOR = 64 << 20
MAX_MEMBER_READ = 256 << 20       # one member's bytes read whole on request (export, .npy, listing)
KEEP_MEMBER = 4 << 20             # a member up to this size is kept from the walk ...
KEEP_TOTAL = 64 << 20             # ... while all kept members stay within this
HEAD_BYTES = 4096                 # what a member not kept keeps: its first bytes (a .npy header)
STREAM_CHUNK = 1 << 20            # bytes inflated or read at a time
SLOT = 64                         # engine instruction slot (bytes)
ENGINE_KEYS = {"pe": "PE", "act": "Activation", "pool": "Pool", "dve": "DVE", "sp": "SP"}


def sniff(head: bytes) -> bool:
    if len(head) < 24:
        return False
    pkg, hsize = struct.unpack_from("<QQ", head, 0)
    return pkg in (1, 2) and hsize == HEADER_SIZE


@dataclass
class Member:
    """One tar member as listed (never extracted). ``data``: its bytes when kept from the walk;
    otherwise ``head`` (its first bytes) and ``opcodes`` (the first byte of each 64-byte slot,
    counted) stand for it, and :meth:`NeffFile.member_bytes` reads it again from the file."""
    name: str
    size: int
    kind: str                      # "file", "dir", or why it was refused ("symlink", "device", …)
    data: Optional[bytes] = None
    refused: str = ""              # non-empty: the member was not read, and why
    offset_data: int = -1          # where its bytes start in the (inflated) tar
    head: bytes = b""
    opcodes: Optional[dict] = None


@dataclass
class Subgraph:
    name: str
    definition: str
    kelf: str = ""
    variables: dict[str, dict] = field(default_factory=dict)
    queues: dict[str, dict] = field(default_factory=dict)
    engines: dict[str, dict] = field(default_factory=dict)   # engine -> {"slots", "opcodes", "dma"}


class NeffFile(PeerFile):
    format = FORMAT
    title = "AWS Neuron NEFF"

    def __init__(self, data: bytes, path: Optional[str] = None):
        super().__init__(data, path)
        self.header: dict[str, Any] = {}
        self.compressed = False
        self.members: dict[str, Member] = {}
        self.member_order: list[str] = []
        self.hash_ok: Optional[bool] = None
        self.graph_json: Optional[dict] = None
        self.subgraphs: list[Subgraph] = []
        self.target: Optional[str] = None

    # -- public accessors ------------------------------------------------------------------
    def member_bytes(self, name: str) -> bytes:
        """The bytes of one archive member (for export/inspection): kept from the walk, or read
        again from the file (inflating the gzip stream up to it); KeyError if absent, refused or
        larger than ``MAX_MEMBER_READ``."""
        m = self.members[name]
        if m.data is not None:
            return m.data
        if m.refused or m.kind != "file" or m.offset_data < 0:
            raise KeyError(f"{name}: {m.refused or 'not a regular file'}")
        if m.size > MAX_MEMBER_READ:
            raise KeyError(f"{name}: {m.size:,} bytes is more than the {MAX_MEMBER_READ:,} read at once")
        return _read_member(self, m)

    def constant(self, name: str) -> np.ndarray:
        """A ``.npy`` member as an array (header-checked, ``allow_pickle=False``)."""
        return load_npy(self.member_bytes(name), f"payload/{name}")

    def summary(self) -> dict[str, Any]:
        h = self.header
        g = self.graph()
        return {
            "format": FORMAT, "file": self.path, "size": self.size,
            "pkg_version": h.get("pkg_version"),
            "neff_version": f"{h.get('neff_version_major')}.{h.get('neff_version_minor')}",
            "name": h.get("name"), "build_version": h.get("build_version"),
            "num_tpb": h.get("num_tpb"), "lnc_size": h.get("lnc_size"),
            "feature_bits": hex(h["feature_bits"]) if "feature_bits" in h else None,
            "hash_check": {True: "match", False: "mismatch",
                           None: "not checked (what real compilers hash is not public)"}[self.hash_ok],
            "payload": "gzip+tar" if self.compressed else "tar",
            "members": len(self.members), "target": self.target,
            "subgraphs": [{"name": s.name, "variables": len(s.variables), "queues": len(s.queues),
                           "engines": {e: v["slots"] for e, v in s.engines.items()}} for s in self.subgraphs],
            "inputs": [n.attrs for n in g.nodes if n.kind == "input"] if g else [],
            "outputs": [n.attrs for n in g.nodes if n.kind == "output"] if g else [],
            "problems": len(self.problems),
        }

    def format_summary(self) -> str:
        s = self.summary()
        lines = [f"{self.path or '<bytes>'}: AWS Neuron NEFF, {s['size']:,} bytes",
                 f"  header      pkg_version {s['pkg_version']}, NEFF {s['neff_version']}, name {s['name']!r}, "
                 f"num_tpb {s['num_tpb']}, lnc_size {s['lnc_size']}, features {s['feature_bits']}",
                 f"  hash        {s['hash_check']}",
                 f"  payload     {s['payload']}, {s['members']} members, target {s['target']}"]
        for sg in s["subgraphs"]:
            eng = ", ".join(f"{e} {n} slots" for e, n in sg["engines"].items())
            lines.append(f"  {sg['name']:<10}  {sg['variables']} variables, {sg['queues']} queue sets; {eng}")
        for io_ in ("inputs", "outputs"):
            for a in s[io_]:
                lines.append(f"  {io_[:-1]:<10}  {a.get('name')}: {a.get('dtype')}{list(a.get('shape') or [])}")
        for p in self.problems:
            lines.append(f"  {'warning' if getattr(p, 'severity', '') == 'warning' else 'problem'}: {p}")
        return "\n".join(lines)

    def graph(self) -> Optional[PeerGraph]:
        """Coarse dataflow: graph inputs -> one node per kelf subgraph -> outputs, with sizes."""
        g = self.graph_json
        if not isinstance(g, dict) or not isinstance(g.get("nodes"), list):
            return None
        nodes_js = g["nodes"]
        attrs = g.get("attrs") if isinstance(g.get("attrs"), dict) else {}
        shapes = _attr_list(attrs, "shape")
        dtypes = _attr_list(attrs, "dltype")
        row_ptr = g.get("node_row_ptr") if isinstance(g.get("node_row_ptr"), list) else None

        def entry(node: int, out: int) -> int:
            if row_ptr and 0 <= node < len(row_ptr) and isinstance(row_ptr[node], int):
                return row_ptr[node] + out
            return node + out

        def describe(e: int) -> tuple:
            shape = shapes[e] if 0 <= e < len(shapes) and isinstance(shapes[e], list) else None
            dtype = dtypes[e] if 0 <= e < len(dtypes) and isinstance(dtypes[e], str) else None
            return shape, dtype

        out = PeerGraph()
        # kelf op node index -> the graph node ids standing for it (one per subgraph it runs)
        kelf_nodes: dict[int, list[int]] = {}
        next_id = len(nodes_js) + len(g.get("heads") or []) if isinstance(g.get("heads"), list) else len(nodes_js)
        for i, n in enumerate(nodes_js[:MAX_MEMBERS]):
            if not isinstance(n, dict):
                continue
            name = str(n.get("name", f"node{i}"))
            if n.get("op") == "null":
                shape, dtype = describe(entry(i, 0))
                out.nodes.append(PeerNode(i, name, "input", {"name": name, "shape": shape, "dtype": dtype,
                                                             "detail": _edge_label(shape, dtype)}))
                kelf_nodes[i] = [i]
                continue
            a = n.get("attrs") if isinstance(n.get("attrs"), dict) else {}
            op = str(a.get("func_name", n.get("op")))
            sgs = [s for s in self.subgraphs if s.kelf == a.get("kelf")] if a.get("kelf") else []
            ids = []
            for s in sgs or [None]:
                nid = i if not ids else next_id
                if ids:
                    next_id += 1
                ids.append(nid)
                if s is None:
                    out.nodes.append(PeerNode(nid, f"{name} ({op})", "other", {"op": op}))
                else:
                    slots = {e: v["slots"] for e, v in s.engines.items()}
                    label = f"{s.name} ({op} {a.get('kelf')})"
                    out.nodes.append(PeerNode(nid, label, "matmul", {
                        "detail": " · ".join(f"{e} {v}" for e, v in slots.items()) + " slots",
                        "op": op, "kelf": a.get("kelf"), "subgraph": s.name, "engine_slots": slots,
                        "variables": {k: v.get("size") for k, v in s.variables.items()}}))
            kelf_nodes[i] = ids
            for src in n.get("inputs", []) if isinstance(n.get("inputs"), list) else []:
                if isinstance(src, list) and len(src) >= 2 and all(isinstance(v, int) for v in src[:2]):
                    shape, dtype = describe(entry(src[0], src[1]))
                    for s_id in kelf_nodes.get(src[0], [src[0]]):
                        for d_id in ids:
                            out.edges.append(PeerEdge(s_id, d_id, _edge_label(shape, dtype)))
        heads = g.get("heads") if isinstance(g.get("heads"), list) else []
        base = len(nodes_js)
        names = [_head_name(nodes_js, h, k) for k, h in enumerate(heads[:MAX_MEMBERS])]
        for k, h in enumerate(heads[:MAX_MEMBERS]):
            if isinstance(h, list) and len(h) >= 2 and all(isinstance(v, int) for v in h[:2]):
                shape, dtype = describe(entry(h[0], h[1]))
                srcs = kelf_nodes.get(h[0], [h[0]])
                # with one output per subgraph (LNC=2 splits the work), output k comes from subgraph k
                same = len(srcs) > 1 and len(srcs) == sum(1 for x in heads if isinstance(x, list) and x[:1] == [h[0]])
                # the file's own name; where two outputs share it, the one that makes it says which
                # (shown beside the name, which stays the file's)
                name = names[k]
                shown = name
                if names.count(name) > 1:
                    sg = self.subgraphs[h[1]].name if same and 0 <= h[1] < len(self.subgraphs) else None
                    shown = f"{name} ({sg})" if sg else f"{name} (#{k})"
                out.nodes.append(PeerNode(base + k, f"output {shown}", "output",
                                          {"name": shown, "file_name": name, "shape": shape, "dtype": dtype,
                                           "detail": _edge_label(shape, dtype)}))
                for s_id in ([srcs[h[1]]] if same and 0 <= h[1] < len(srcs) else srcs):
                    out.edges.append(PeerEdge(s_id, base + k, _edge_label(shape, dtype)))
        return out

    def details(self) -> list[DetailItem]:
        items = [DetailItem("header", None, [DetailItem.of(k, v) for k, v in self.header.items()], (0, HEADER_SIZE))]
        archive = DetailItem("archive", f"{len(self.members)} members")
        for name in self.member_order:
            m = self.members[name]
            archive.children.append(DetailItem(name, m.refused or f"{m.size:,} bytes ({m.kind})"))
        items.append(archive)
        for sg in self.subgraphs:
            node = DetailItem(sg.name, sg.definition)
            node.children.append(DetailItem("variables", None, [DetailItem.of(k, v) for k, v in sg.variables.items()]))
            node.children.append(DetailItem("dma_queue", None, [DetailItem.of(k, v) for k, v in sg.queues.items()]))
            for eng, info in sg.engines.items():
                node.children.append(DetailItem(
                    eng, f"{info['slots']} slots", [DetailItem(f"opcode {op:#04x}", n)
                                                    for op, n in sorted(info["opcodes"].items())]
                    + [DetailItem.of(f"dma[{i}]", d) for i, d in enumerate(info["dma"])]))
            items.append(node)
        return items

    def disassemble(self) -> Optional[str]:
        """Engine streams as raw 64-byte slots (no public field-level ISA exists)."""
        lines = []
        for sg in self.subgraphs:
            for eng, info in sg.engines.items():
                try:
                    data = self.member_bytes(info["member"])
                except KeyError:
                    continue
                lines.append(f"; {info['member']}: {info['slots']} slots")
                for k in range(0, len(data) // SLOT * SLOT, SLOT):
                    slot = data[k:k + SLOT]
                    lines.append(f"{eng}[{k // SLOT:5d}]  op={slot[0]:#04x}  {slot.hex(' ')}")
        return "\n".join(lines) + "\n" if lines else None


def _edge_label(shape, dtype) -> str:
    if shape is None and dtype is None:
        return ""
    return f"{dtype or '?'}[{', '.join(str(d) for d in shape)}]" if shape is not None else str(dtype)


def _attr_list(attrs: dict, key: str) -> list:
    v = attrs.get(key)
    if isinstance(v, list) and len(v) == 2 and isinstance(v[1], list):
        return v[1]
    return []


def load_npy(data: bytes, section: str) -> np.ndarray:
    """A ``.npy`` payload as an array: header parsed by numpy without pickles, the payload size
    checked against shape × itemsize before anything is allocated."""
    shape, fortran, dtype, start = npy_header(data, len(data), section)
    count = 1
    for d in shape:
        count *= d
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=start)
    return arr.reshape(shape, order="F" if fortran else "C")


def npy_header(head: bytes, size: int, section: str) -> tuple:
    """(shape, fortran, dtype, data start) of a ``.npy`` member of ``size`` bytes from its first
    bytes ``head``: parsed by numpy without pickles, shape × itemsize checked against the size."""
    from numpy.lib import format as npf
    buf = io.BytesIO(head)
    try:
        version = npf.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = npf.read_array_header_1_0(buf, max_header_size=10000)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = npf.read_array_header_2_0(buf, max_header_size=10000)
        else:
            raise ValueError(f"npy version {version}")
    except Exception as e:   # numpy parses the header with Python's tokenizer: any of its errors can surface
        raise NacFormatError(section, 0, f"not a .npy file: {type(e).__name__}: {str(e)[:200]}") from None
    if dtype.hasobject:
        raise NacFormatError(section, 0, "object arrays (pickles) are not read")
    if len(shape) > 64 or any(not isinstance(d, int) or d < 0 for d in shape):
        raise NacFormatError(section, 0, f"bad .npy shape {shape!r}")
    count = 1
    for d in shape:
        count *= d
    start = buf.tell()
    if count * dtype.itemsize != size - start:
        raise NacFormatError(section, start, f".npy shape {tuple(shape)} × {dtype.itemsize} bytes does not match "
                                             f"the {size - start:,} bytes stored")
    return shape, fortran, dtype, start


# ------------------------------------------------------------------------------ decoding
#: open_peer hands a FileBytes (pread on demand) instead of the whole file: a real model's NEFF is gigabytes
READS_ON_DEMAND = True


def decode(data, path: Optional[str] = None, strict: bool = False) -> NeffFile:
    """``data``: the file's bytes, or a :class:`FileBytes` that reads them with ``pread`` as they
    are needed (kept, never read whole; a file shrunk meanwhile gives short reads, not SIGBUS)."""
    return decode_into(NeffFile(data if isinstance(data, (bytes, FileBytes)) else bytes(data), path), _decode,
                       strict)


class _Window:
    """Bytes ``[start, stop)`` of a file's data (bytes or FileBytes), sliced into bytes on demand."""

    def __init__(self, data, start: int, stop: int):
        self.data, self.start, self.stop = data, start, max(start, min(stop, len(data)))

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, key: slice) -> bytes:
        a, b, _step = key.indices(len(self))
        return bytes(self.data[self.start + a:self.start + max(a, b)])


def _decode(f: NeffFile) -> None:
    d = f.data
    if len(d) < HEADER_SIZE:
        raise NacFormatError("header", len(d), f"file is {len(d)} bytes; a NEFF header alone is {HEADER_SIZE}")
    hdr = f.root.add(0, HEADER_SIZE, "header", "neff_header_t")
    for name, off, size, kind in HEADER_FIELDS:
        raw = d[off:off + size]
        if kind == "u64":
            value: Any = struct.unpack_from("<Q", raw)[0]
        elif kind == "u32":
            value = struct.unpack_from("<I", raw)[0]
        elif kind == "str":
            value = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        else:
            value = raw.hex() if name in ("hash", "uuid") else None
        hdr.add(off, size, name, kind if kind != "bytes" else f"u8[{size}]", value if value is not None else raw[:16])
        if name != "pad":
            f.header[name] = value if value is not None else list(raw.rstrip(b"\0"))
    h = f.header
    if h["pkg_version"] not in (1, 2):
        raise NacFormatError("header", 0, f"pkg_version {h['pkg_version']} is neither 1 (sha256) nor 2 (md5)")
    if h["header_size"] != HEADER_SIZE:
        raise NacFormatError("header", 8, f"header_size {h['header_size']} is not {HEADER_SIZE}")
    if h["neff_version_major"] > 2:
        f.problems.append(PeerWarning("header", 0x18, f"NEFF major version {h['neff_version_major']} is newer "
                                                       "than the runtime's loader accepts (≤ 2)"))
    if h["feature_bits"] & 0x7FFFFFFFF8000000:
        f.problems.append(PeerWarning("header", 0x220, f"feature bits {h['feature_bits']:#x} set bits the "
                                                        "runtime's loader refuses"))
    room = len(d) - HEADER_SIZE
    size = h["data_size"]
    if size > room:
        f.problems.append(NacFormatError("header", 0x10, f"data_size {size:,} is past the end of the file "
                                                         f"({room:,} bytes follow the header)"))
        size = room
    payload = _Window(d, HEADER_SIZE, HEADER_SIZE + size)       # (read a chunk at a time, never whole)
    _check_hash(f, payload)
    if payload[:2] == b"\x1f\x8b":
        f.compressed = True
        stream = _Inflating(payload, HEADER_SIZE)
        try:
            _read_tar(f, stream, None)
            used, inflated = stream.finish()
        except NacFormatError as e:      # damaged, cut or past the inflate limit: what was read stays
            f.problems.append(e)
            used, inflated = len(payload), stream.total
        f.root.add(HEADER_SIZE, used, "payload", "gzip member (tar inside)", f"{inflated:,} bytes inflated")
        first = _first_nonzero(payload, used)
        if first is not None:
            f.problems.append(NacFormatError("payload", HEADER_SIZE + first,
                                             "non-zero bytes after the gzip member"))
        elif used < len(payload):
            f.root.add(HEADER_SIZE + used, len(payload) - used, "padding", "zero bytes")
    else:
        _read_tar(f, _ViewReader(payload), f.root.add(HEADER_SIZE, len(payload), "payload", "tar"))
    if HEADER_SIZE + size < len(d):
        tail = len(d) - HEADER_SIZE - size
        kind = "zero bytes" if _first_nonzero(_Window(d, 0, len(d)), HEADER_SIZE + size) is None \
            else "bytes past data_size"
        f.root.add(HEADER_SIZE + size, tail, "trailing", kind)
    _decode_manifests(f)


def _first_nonzero(view: _Window, start: int) -> Optional[int]:
    """Offset in ``view`` of the first non-zero byte from ``start`` on (None: all zero), a chunk at a time."""
    for pos in range(start, len(view), STREAM_CHUNK):
        chunk = np.frombuffer(view[pos:pos + STREAM_CHUNK], dtype=np.uint8)
        hit = np.flatnonzero(chunk)
        if hit.size:
            return pos + int(hit[0])
    return None


def _head_name(nodes: list, head, k: int) -> str:
    """The name the graph gives output ``k`` (its producer's ``output_names``); ``output{k}`` only
    where the file names none."""
    if isinstance(head, list) and len(head) >= 2 and isinstance(head[0], int) and 0 <= head[0] < len(nodes):
        node = nodes[head[0]]
        names = node.get("output_names") if isinstance(node, dict) else None
        if isinstance(names, list) and isinstance(head[1], int) and 0 <= head[1] < len(names) \
                and isinstance(names[head[1]], str) and names[head[1]]:
            return names[head[1]][:256]
    return f"output{k}"


def _check_hash(f: NeffFile, payload: bytes) -> None:
    """A stored hash equal to the payload's md5 (sha256 for package version 1) is a match. Any
    other value is "not checked", never a mismatch: what real compilers hash is not public
    (their files match neither digest, research note §3.2), so a difference proves nothing,
    and the runtime verifies it only on request."""
    stored = f.data[0xAC:0xAC + 32]
    h = hashlib.sha256() if f.header["pkg_version"] == 1 else hashlib.md5()
    for pos in range(0, len(payload), STREAM_CHUNK):      # a chunk at a time: a payload can be gigabytes
        h.update(payload[pos:pos + STREAM_CHUNK])
    ok = h.digest() == (stored if f.header["pkg_version"] == 1 else stored[:16])
    f.hash_ok = True if ok else None


class _ViewReader(io.RawIOBase):
    """A seekable file over a window of the file (an uncompressed payload): tarfile reads headers
    and members from it without the payload ever being read whole."""

    def __init__(self, view: _Window):
        self.view, self.pos = view, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        chunk = self.view[self.pos:self.pos + len(b)]
        b[:len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = max(0, offset if whence == 0 else self.pos + offset if whence == 1 else len(self.view) + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos


class _Inflating(io.RawIOBase):
    """The gzip member at the start of ``payload`` inflated as it is read, ``STREAM_CHUNK`` at a
    time: never held whole, and never more than ``MAX_INFLATE_RATIO`` times the compressed bytes
    (past ``INFLATE_FLOOR``), which bounds the work a small hostile file can cause."""

    def __init__(self, payload: _Window, base: int):
        self.payload, self.base = payload, base
        self.limit = max(INFLATE_FLOOR, len(payload) * MAX_INFLATE_RATIO)
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.read_pos = 0              # compressed bytes handed to zlib
        self.pending = b""             # compressed bytes zlib has not taken yet
        self.buf = bytearray()
        self.total = 0                 # bytes inflated so far

    def readable(self) -> bool:
        return True

    def _more(self) -> bool:
        if self.z.eof:
            return False
        if not self.pending:
            if self.read_pos >= len(self.payload):
                raise NacFormatError("payload", self.base + len(self.payload), "gzip stream ends early (truncated file?)")
            self.pending = self.payload[self.read_pos:self.read_pos + STREAM_CHUNK]
            if not self.pending:       # the file is shorter than when it was opened
                raise NacFormatError("payload", self.base + self.read_pos, "the file ends before the gzip stream "
                                                                           "does (changed on disk?)")
            self.read_pos += len(self.pending)
        try:
            piece = self.z.decompress(self.pending, STREAM_CHUNK)
        except zlib.error as e:
            raise NacFormatError("payload", self.base, f"gzip stream is damaged: {e}") from None
        self.pending = self.z.unconsumed_tail
        self.total += len(piece)
        if self.total > self.limit:
            raise NacFormatError("payload", self.base, f"gzip payload inflates past {self.limit:,} bytes "
                                                       f"({MAX_INFLATE_RATIO}x its size); not read")
        self.buf += piece
        return True

    def readinto(self, b) -> int:
        while len(self.buf) < len(b) and self._more():
            pass
        n = min(len(b), len(self.buf))
        b[:n] = self.buf[:n]
        del self.buf[:n]
        return n

    def finish(self) -> tuple[int, int]:
        """Inflate to the end of the gzip member (the tar's end blocks and padding); returns
        (compressed bytes it took, bytes it inflated to)."""
        self.buf.clear()
        while self._more():
            self.buf.clear()
        used = self.read_pos - len(self.pending) - len(self.z.unused_data)
        return used, self.total


def _read_tar(f: NeffFile, stream: io.RawIOBase, span: Optional[Span]) -> None:
    """Walk the archive's members from ``stream`` (a seekable view of a raw tar, with its spans,
    or the inflating stream of a gzip'ed one, sequentially), checking each before its data is
    read; members up to ``KEEP_MEMBER`` are kept within ``KEEP_TOTAL``, the others leave their
    first bytes and slot-opcode counts."""
    section = "payload"
    base = HEADER_SIZE if span is not None else 0     # offsets are file offsets only for a raw tar
    tar_size = len(stream.view) if isinstance(stream, _ViewReader) else None
    try:
        tf = tarfile.open(fileobj=stream, mode="r:" if tar_size is not None else "r|")
    except (tarfile.TarError, EOFError, ValueError) as e:
        raise NacFormatError(section, HEADER_SIZE, f"payload is not a tar archive: {e}") from None
    count = 0
    kept = 0
    while True:
        try:
            m = tf.next()
        except (tarfile.TarError, EOFError, ValueError, OverflowError) as e:
            f.problems.append(NacFormatError(section, HEADER_SIZE, f"tar archive damaged after {count} members: "
                                                                   f"{str(e)[:200]}"))
            break
        if m is None:
            break
        count += 1
        if count > MAX_MEMBERS:
            f.problems.append(NacFormatError(section, HEADER_SIZE, f"more than {MAX_MEMBERS:,} members; the rest "
                                                                   "were not read"))
            break
        refused, kind = _refusal(m, tar_size)
        name = m.name
        if name in f.members:
            refused = refused or "a second member with this name (the first one is kept)"
            name = f"{name} (#{count})"
        member = Member(name, m.size, kind, None, refused, m.offset_data)
        ended = False
        if not refused and kind == "file":
            keep = m.size <= KEEP_MEMBER and kept + m.size <= KEEP_TOTAL
            try:
                _walk_member(tf, m, member, keep)
            except (tarfile.TarError, EOFError, OSError) as e:     # the stream ended inside the member
                member.refused = f"the archive ends inside this member ({str(e)[:120]})"
                ended = True            # nothing follows (and skipping its claimed size would only spin)
            if member.data is not None:
                kept += m.size
        f.members[name] = member
        f.member_order.append(name)
        if member.refused:
            f.problems.append(NacFormatError(f"payload/{m.name[:200]}", base + m.offset,
                                             f"member refused: {member.refused}"))
        if span is not None:
            ms = span.add(base + m.offset, min(m.offset_data - m.offset + _padded(m.size), tar_size - m.offset),
                          f"member[{count - 1}]", "tar member", m.name[:200])
            ms.add(base + m.offset, m.offset_data - m.offset, "header", "tar header", m.name[:200])
            inside = m.offset_data + m.size <= tar_size
            if m.size and inside:
                ms.add(base + m.offset_data, m.size, "data", kind if not refused else "refused member data",
                       f"{m.size:,} bytes")
            pad = min(_padded(m.size), tar_size - m.offset_data) - m.size
            if pad > 0 and inside:
                ms.add(base + m.offset_data + m.size, pad, "padding", "zero padding to 512")
        if ended:
            break
    if span is not None:
        end = tf.offset
        if end < tar_size:
            span.add(base + end, tar_size - end, "end", "tar end-of-archive blocks")


def _walk_member(tf: tarfile.TarFile, m: tarfile.TarInfo, member: Member, keep: bool) -> None:
    """Read one member's bytes once, a chunk at a time: kept whole, or its head and the first
    byte of every whole 64-byte slot counted (what the engine streams' opcode histogram needs)."""
    fh = tf.extractfile(m)
    if fh is None:
        return
    if keep:
        data = fh.read(m.size)
        if len(data) != m.size:
            raise EOFError(f"{len(data):,} of {m.size:,} bytes")
        member.data = data
        return
    counts = np.zeros(256, dtype=np.int64)
    done = 0
    while done < m.size:
        chunk = fh.read(min(STREAM_CHUNK, m.size - done))      # a multiple of 64: slots stay aligned
        if not chunk:
            raise EOFError(f"{done:,} of {m.size:,} bytes")
        if done < HEAD_BYTES:
            member.head += chunk[:HEAD_BYTES - done]
        whole = len(chunk) // SLOT * SLOT          # a partial last slot is not an instruction
        counts += np.bincount(np.frombuffer(chunk, dtype=np.uint8)[:whole:SLOT], minlength=256)
        done += len(chunk)
    member.opcodes = {int(op): int(n) for op, n in enumerate(counts.tolist()) if n}


def _read_member(f: NeffFile, m: Member) -> bytes:
    """A member not kept from the walk, read again: a slice of the mapped file for a raw tar, the
    gzip stream inflated again up to it (and past it no further) for a compressed one."""
    payload = _Window(f.data, HEADER_SIZE, HEADER_SIZE + f.header.get("data_size", 0))
    if not f.compressed:
        data = payload[m.offset_data:m.offset_data + m.size]
        if len(data) != m.size:
            raise KeyError(f"{m.name}: the file is shorter than when it was opened (changed on disk?)")
        return data
    stream = _Inflating(payload, HEADER_SIZE)
    try:
        skip = m.offset_data
        while skip > 0:
            got = stream.read(min(STREAM_CHUNK, skip))
            if not got:
                raise KeyError(f"{m.name}: the archive ends before it")
            skip -= len(got)
        data = stream.read(m.size)
    except NacFormatError as e:      # the file changed on disk since it was opened (cut, rewritten)
        raise KeyError(f"{m.name}: {e.reason} — the file changed on disk after it was opened?") from None
    if len(data) != m.size:
        raise KeyError(f"{m.name}: the archive ends inside it")
    return data


def _padded(n: int) -> int:
    return (n + 511) // 512 * 512


def _refusal(m: tarfile.TarInfo, tar_size: Optional[int]) -> tuple[str, str]:
    """Why a member is not read ('' when it is fine) and its kind (``tar_size``: None for a
    stream, whose end shows only when a member's bytes run out)."""
    if m.issym():
        return f"symbolic link to {m.linkname[:200]!r}", "symlink"
    if m.islnk():
        return f"hard link to {m.linkname[:200]!r}", "hardlink"
    if m.ischr() or m.isblk() or m.isfifo():
        return "device or fifo", "device"
    if m.issparse():
        return "sparse member", "sparse"
    if m.isdir():
        kind = "dir"
    elif m.isreg():
        kind = "file"
    else:
        return f"unknown member type {m.type!r}", "other"
    name = m.name
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "absolute path", kind
    if ".." in parts:
        return "path leaves the archive ('..')", kind
    if posixpath.normpath(name).startswith(".."):
        return "path leaves the archive", kind
    if m.size < 0 or (tar_size is not None and m.offset_data + m.size > tar_size):
        return f"size {m.size:,} runs past the end of the archive", kind
    return "", kind


def _json_member(f: NeffFile, name: str) -> Any:
    m = f.members.get(name)
    if m is None or m.data is None:
        return None
    try:
        return load_json(m.data, f"payload/{name}")
    except NacFormatError as e:
        f.problems.append(e)
        return None


def _decode_manifests(f: NeffFile) -> None:
    g = _json_member(f, "neff.json")
    if isinstance(g, dict):
        f.graph_json = g
    kelfs = sorted(n for n in f.members if posixpath.dirname(n) == "" and n.startswith("kelf-")
                   and n.endswith(".json"))
    if isinstance(g, dict) and isinstance(g.get("nodes"), list):   # the kelfs the graph names, in order
        named = [n.get("attrs", {}).get("kelf") for n in g["nodes"] if isinstance(n, dict)
                 and isinstance(n.get("attrs"), dict)]
        kelfs = [k for k in named if isinstance(k, str)] or kelfs
    for kelf in kelfs:
        k = _json_member(f, kelf)
        if not isinstance(k, dict):
            continue
        f.target = f.target or (k.get("target") if isinstance(k.get("target"), str) else None)
        for gr in k.get("graphs", []) if isinstance(k.get("graphs"), list) else []:
            if not isinstance(gr, dict):
                continue
            sg = Subgraph(str(gr.get("name")), str(gr.get("definition")), kelf)
            _decode_subgraph(f, sg)
            f.subgraphs.append(sg)


def _decode_subgraph(f: NeffFile, sg: Subgraph) -> None:
    d = _json_member(f, sg.definition)
    if not isinstance(d, dict):
        return
    folder = posixpath.dirname(sg.definition)
    if isinstance(d.get("var"), dict):
        sg.variables = {str(k): v for k, v in d["var"].items() if isinstance(v, dict)}
    if isinstance(d.get("dma_queue"), dict):
        sg.queues = {str(k): v for k, v in d["dma_queue"].items() if isinstance(v, dict)}
    for key, eng in ENGINE_KEYS.items():
        instr = d.get(f"{key}_instr")
        if not isinstance(instr, str):
            continue
        member = posixpath.join(folder, instr)
        m = f.members.get(member)
        info = {"member": member, "slots": 0, "opcodes": {}, "dma": []}
        if m is not None and (m.data is not None or m.opcodes is not None):
            if m.size % SLOT:
                f.problems.append(PeerWarning(f"payload/{member}", 0, f"{m.size} bytes is not a whole number "
                                                                      f"of {SLOT}-byte instruction slots"))
            info["slots"] = m.size // SLOT
            info["opcodes"] = (dict(Counter(m.data[i] for i in range(0, info["slots"] * SLOT, SLOT)))
                               if m.data is not None else dict(m.opcodes))
        ej = d.get(key)
        if isinstance(ej, str):
            js = _json_member(f, posixpath.join(folder, ej))
            if isinstance(js, dict) and isinstance(js.get("dma"), list):
                info["dma"] = [_dma_descriptor(x) for x in js["dma"][:MAX_MEMBERS] if isinstance(x, dict)]
        sg.engines[eng] = info
    for v in sg.variables.values():       # constants the variables load: shape-checked
        fn = v.get("file_name")
        if isinstance(fn, str) and fn.endswith(".npy"):
            member = posixpath.join(folder, fn)
            m = f.members.get(member)
            if m is not None and not m.refused and m.kind == "file":
                try:      # the header alone (a weight not kept from the walk is not read again for it)
                    shape, _fortran, dtype, _start = npy_header(m.data if m.data is not None else m.head, m.size,
                                                                f"payload/{member}")
                    v["_constant"] = f"{dtype}{list(shape)}"
                except NacFormatError as e:
                    f.problems.append(e)


def _dma_descriptor(x: dict) -> dict:
    """The documented fields of one DMA descriptor (others are kept under their names)."""
    desc = x.get("desc") if isinstance(x.get("desc"), dict) else {}
    out = {k: x[k] for k in ("id", "queue", "instance_name", "event", "semaphore") if k in x}
    for k in ("op", "from", "to", "from_off", "to_off", "from_steps", "to_steps", "from_sizes", "to_sizes",
              "from_dtype", "to_dtype"):
        if k in desc:
            out[k] = desc[k]
    return out
