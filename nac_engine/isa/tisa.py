"""TISA tokenizer manifest, the payload of the PROC section: decode and list.

Facts: research note upstream_format.md §13.1, seed 000 §6.2. The manifest is ``TISA``,
a version byte (1), then records of u8 opcode, u32 payload length, payload; integers are
little-endian, strings UTF-8 behind a u8 or u16 byte-length prefix.

Because every record states its payload length, a record we cannot read (unknown opcode,
bad payload) is skipped by that length and the rest still decodes. Lengths are checked
against the bytes that remain before anything is sliced; problems are returned as
``NacFormatError("PROC/manifest", absolute_offset, reason)``, never raised.
"""
from __future__ import annotations

import json
import struct
from contextlib import contextmanager
from dataclasses import dataclass, field
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

from ..errors import NacFormatError
from ..spans import Span

SECTION = "PROC/manifest"
MAGIC = b"TISA"
KNOWN_VERSION = 1
RECORD_HEADER = 5   # u8 opcode + u32 payload length

TISA_OPCODES = {
    0x01: "LOWERCASE", 0x02: "UNICODE_NORM", 0x03: "REPLACE", 0x04: "FILTER_CATEGORY",
    0x07: "PREPEND", 0x10: "PARTITION_RULES", 0x15: "BYTE_ENCODE", 0x20: "BPE_ENCODE",
    0x21: "WORDPIECE_ENCODE", 0x22: "UNIGRAM_ENCODE", 0x30: "COMPOSE",
}
# PARTITION_RULES rule flags and behaviours
RULE_PROTECTED, RULE_HAS_BEHAVIOR, RULE_HAS_TRIM = 0x01, 0x02, 0x04
RULE_BEHAVIORS = {1: "REMOVE", 2: "ISOLATE"}


@dataclass
class TisaRecord:
    offset: int          # absolute offset of the record's opcode byte
    opcode: int
    name: str            # "OP_0xNN" for opcodes we do not know
    length: int          # payload length as stated in the record
    fields: dict         # decoded payload; {"payload": bytes} when kept raw


@dataclass
class TisaManifest:
    version: int
    records: Sequence = field(default_factory=list)    # a read manifest's: TisaRecords


# -- bounds-checked payload reader that remembers a span tree for what it read -----------------
class _Bad(Exception):
    """Internal: payload unreadable at absolute offset args[0] for reason args[1]."""


@dataclass
class _Node:
    offset: int
    length: int
    name: str
    type: str = ""
    value: Any = None
    children: list = field(default_factory=list)

    def attach(self, parent: Span) -> None:
        span = parent.add(self.offset, self.length, self.name, self.type, self.value)
        for child in self.children:
            child.attach(span)


class _Reader:
    """A record's payload, field by field; with ``nodes`` it also notes each field's bytes (the
    span tree's leaves), which only a span builder asks for."""

    def __init__(self, buf: bytes, pos: int, end: int, base: int, nodes: bool = True):
        self.buf, self.pos, self.end, self.base, self.nodes = buf, pos, end, base, nodes
        self.stack = [_Node(base + pos, 0, "payload")]

    def _take(self, n: int, name: str, type_: str, value_of) -> Any:
        if n > self.end - self.pos:
            raise _Bad(self.base + self.pos, f"truncated payload: {name} needs {n} bytes, "
                                             f"{self.end - self.pos} left")
        raw = self.buf[self.pos:self.pos + n]
        value = value_of(raw, self.base + self.pos)
        if n and self.nodes:   # an empty string has no bytes of its own: its length prefix covers it
            self.stack[-1].children.append(_Node(self.base + self.pos, n, name, type_, value))
        self.pos += n
        return value

    def u8(self, name: str) -> int:
        return self._take(1, name, "u8", lambda raw, at: raw[0])

    def u16(self, name: str) -> int:
        return self._take(2, name, "u16", lambda raw, at: struct.unpack("<H", raw)[0])

    def i32(self, name: str) -> int:
        return self._take(4, name, "i32", lambda raw, at: struct.unpack("<i", raw)[0])

    def text(self, name: str, prefix: str = "u8") -> str:
        n = self.u8(f"{name}_len") if prefix == "u8" else self.u16(f"{name}_len")

        def utf8(raw: bytes, at: int) -> str:
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _Bad(at, f"{name} is not valid UTF-8 ({e.reason})") from None
        return self._take(n, name, "utf8", utf8)

    @contextmanager
    def group(self, name: str):
        if not self.nodes:
            yield
            return
        node = _Node(self.base + self.pos, 0, name)
        self.stack[-1].children.append(node)
        self.stack.append(node)
        try:
            yield
        finally:
            self.stack.pop()
            node.length = self.base + self.pos - node.offset


# -- payload decoders, one per opcode ---------------------------------------------------------
def _unicode_norm(r: _Reader) -> dict:
    return {"form": r.text("form")}


def _replace(r: _Reader) -> dict:
    return {"pattern": r.text("pattern", "u16"), "replacement": r.text("replacement", "u16")}


def _filter_category(r: _Reader) -> dict:
    n = r.u8("count")
    return {"categories": [r.text(f"category[{i}]") for i in range(n)]}


def _prepend(r: _Reader) -> dict:
    return {"text": r.text("text", "u16")}


def _partition_rules(r: _Reader) -> dict:
    rules = []
    for i in range(r.u16("count")):
        with r.group(f"rule[{i}]"):
            flags = r.u8("flags")
            rule = {"flags": flags, "protected": bool(flags & RULE_PROTECTED),
                    "pattern": r.text("pattern", "u16"), "behavior": None, "trim": None}
            if flags & RULE_HAS_BEHAVIOR:
                rule["behavior"] = r.u8("behavior")
            if flags & RULE_HAS_TRIM:
                rule["trim"] = r.text("trim")
        rules.append(rule)
    return {"rules": rules}


def _bpe_encode(r: _Reader) -> dict:
    return {"suffix": r.text("suffix")}      # "" = no end-of-word suffix


def _wordpiece_encode(r: _Reader) -> dict:
    return {"prefix": r.text("prefix")}


def _compose(r: _Reader) -> dict:
    items = []
    for i in range(r.u8("count")):
        with r.group(f"item[{i}]"):
            item: dict = {"fixed": bool(r.u8("is_fixed"))}
            if item["fixed"]:
                if r.u8("is_int"):
                    item["id"] = r.i32("id")
                else:
                    item["token"] = r.text("token")   # the token string, e.g. "[CLS]", not an id
        items.append(item)
    return {"items": items}


def _empty(r: _Reader) -> dict:
    return {}


_PAYLOAD_DECODERS = {
    0x01: _empty, 0x02: _unicode_norm, 0x03: _replace, 0x04: _filter_category, 0x07: _prepend,
    0x10: _partition_rules, 0x15: _empty, 0x20: _bpe_encode, 0x21: _wordpiece_encode,
    0x22: _empty, 0x30: _compose,
}


_OPCODE_NAMES = tuple(TISA_OPCODES.get(op, f"OP_0x{op:02X}") for op in range(256))


def opcode_name(opcode: int) -> str:
    return _OPCODE_NAMES[opcode]


# -- manifest ---------------------------------------------------------------------------------
def _read_record(buf: bytes, pos: int, base_offset: int, nodes: bool) -> tuple:
    """The whole record at ``buf[pos:]`` (its header fits, and its stated payload): (record, its
    payload's span nodes, [(offset, reason)] of what is wrong with it). A payload that cannot be
    read is kept raw."""
    problems = []
    opcode = buf[pos]
    (length,) = struct.unpack_from("<I", buf, pos + 1)
    start, end = pos + RECORD_HEADER, pos + RECORD_HEADER + length
    name = opcode_name(opcode)
    decoder = _PAYLOAD_DECODERS.get(opcode)
    if decoder is _empty and start == end:         # no payload to read (a hostile manifest's shortest)
        return TisaRecord(base_offset + pos, opcode, name, 0, {}), [], problems
    if decoder is None:
        problems.append((base_offset + pos, f"unknown TISA opcode 0x{opcode:02X}; payload kept raw"))
        raw = [_Node(base_offset + start, length, "payload", "bytes", buf[start:start + 32])] if length and nodes else []
        return TisaRecord(base_offset + pos, opcode, name, length, {"payload": buf[start:end]}), raw, problems
    reader = _Reader(buf, start, end, base_offset, nodes=nodes)
    try:
        fields = decoder(reader)
        if reader.pos < end:
            problems.append((base_offset + reader.pos, f"{name}: {end - reader.pos} unused bytes at the end "
                                                       f"of its payload"))
            reader.stack[0].children.append(
                _Node(base_offset + reader.pos, end - reader.pos, "unused", "bytes", buf[reader.pos:end]))
        payload_nodes = reader.stack[0].children
    except _Bad as bad:
        problems.append((bad.args[0], bad.args[1]))
        fields = {"payload": buf[start:end]}
        payload_nodes = [_Node(base_offset + start, length, "payload", "bytes", buf[start:start + 32])] \
            if length and nodes else []
    return TisaRecord(base_offset + pos, opcode, name, length, fields), payload_nodes, problems


class TisaRecords(Sequence):
    """A read manifest's records, each decoded when asked for (a record is 5 bytes at its
    shortest: an object and a span tree each took up to 400 B of RAM per manifest byte)."""

    __slots__ = ("_buf", "_base", "_starts")

    def __init__(self, buf: bytes, base_offset: int, starts: array):
        self._buf, self._base, self._starts = buf, base_offset, starts

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return _read_record(self._buf, self._starts[i], self._base, False)[0]

    def __iter__(self) -> Iterator[TisaRecord]:
        buf, base = self._buf, self._base
        return (_read_record(buf, pos, base, False)[0] for pos in self._starts)

    def span(self, parent: Span, i: int) -> Span:
        """Record ``i``'s span tree under ``parent`` (not added to its children)."""
        pos = self._starts[i]
        record, payload_nodes, _ = _read_record(self._buf, pos, self._base, True)
        node = parent.detached(record.offset, RECORD_HEADER + record.length, f"rec[{i}]", "tisa", _describe(record))
        node.add(record.offset, 1, "opcode", "opcode", record.name)
        node.add(record.offset + 1, 4, "length", "u32", record.length)
        for child in payload_nodes:
            child.attach(node)
        return node


def decode_tisa(manifest: bytes, base_offset: int = 0, span: Optional[Span] = None,
                report: Optional[Callable[[str, int, str], None]] = None
                ) -> tuple[Optional[TisaManifest], list[NacFormatError]]:
    """Decode a manifest; ``None`` when it does not start with ``TISA`` + version.

    ``base_offset`` is the absolute file offset of ``manifest[0]``. Every record is checked;
    the manifest's ``records`` decode each one when asked for. With ``span``, child spans
    cover every manifest byte exactly once: ``magic``, ``version``, one ``rec[i]`` per record
    (``opcode``, ``length``, then the payload fields; made when first asked for), ``trailing``
    for bytes that do not form a whole record. ``report(section, offset, reason)`` takes the
    problems instead of the returned list (a reader's capped list: a hostile manifest has a
    problem every 5 bytes).
    """
    buf = bytes(manifest)
    problems: list[NacFormatError] = []

    def problem(offset: int, reason: str) -> None:
        if report is not None:
            report(SECTION, offset, reason)
        else:
            problems.append(NacFormatError(SECTION, offset, reason))

    def leaf(offset: int, length: int, name: str, type_: str = "bytes", value: Any = None) -> None:
        if span is not None and length > 0:
            span.add(base_offset + offset, length, name, type_, value)

    if len(buf) < len(MAGIC) + 1 or buf[:len(MAGIC)] != MAGIC:
        problem(base_offset, f"manifest does not start with {MAGIC.decode()} + version byte "
                             f"(starts with {buf[:5]!r})")
        leaf(0, len(buf), "data", value=buf[:32])
        return None, problems
    leaf(0, 4, "magic", "tag", MAGIC.decode())
    version = buf[4]
    leaf(4, 1, "version", "u8", version)
    if version != KNOWN_VERSION:
        problem(base_offset + 4, f"TISA version {version} is unknown; decoded as version {KNOWN_VERSION}")

    starts = array("I" if len(buf) < 1 << 32 else "Q")
    records = TisaRecords(buf, base_offset, starts)
    if span is not None:
        span.set_index(starts.__len__, lambda i: base_offset + starts[i], lambda i: records.span(span, i))
    pos = 5
    while pos < len(buf):
        if len(buf) - pos < RECORD_HEADER:
            problem(base_offset + pos, f"{len(buf) - pos} bytes at the end do not hold a record header")
            leaf(pos, len(buf) - pos, "trailing", value=buf[pos:])
            break
        (length,) = struct.unpack_from("<I", buf, pos + 1)
        end = pos + RECORD_HEADER + length
        if end > len(buf):
            problem(base_offset + pos + 1, f"{opcode_name(buf[pos])} payload length {length} exceeds the "
                                           f"{len(buf) - pos - RECORD_HEADER} bytes left")
            leaf(pos, len(buf) - pos, "trailing", value=buf[pos:pos + 32])
            break
        for offset, reason in _read_record(buf, pos, base_offset, False)[2]:
            problem(offset, reason)
        starts.append(pos)
        pos = end
    return TisaManifest(version, records), problems


# -- listing ----------------------------------------------------------------------------------
def _quote(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _regex(s: str) -> str:
    # Regex text reads best unescaped; escaping control characters keeps the line one line
    # and does not change what the pattern matches.
    return "/" + "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s) + "/"


def _rule_text(rule: dict) -> str:
    parts = ["protected" if rule["protected"] else "rule", _regex(rule["pattern"])]
    if rule["behavior"] is not None:
        parts.append(RULE_BEHAVIORS.get(rule["behavior"], f"behavior={rule['behavior']}"))
    if rule["trim"] is not None:
        parts.append(f"trim={_quote(rule['trim'])}")
    if rule["flags"] & ~(RULE_PROTECTED | RULE_HAS_BEHAVIOR | RULE_HAS_TRIM):
        parts.append(f"flags=0x{rule['flags']:02X}")
    return " ".join(parts)


#: A record's arguments as text, by opcode name (its decoded fields in)
_ARGUMENTS = {
    "UNICODE_NORM": lambda f: f["form"],
    "REPLACE": lambda f: f"{_quote(f['pattern'])} -> {_quote(f['replacement'])}",
    "FILTER_CATEGORY": lambda f: " ".join(f["categories"]),
    "PREPEND": lambda f: _quote(f["text"]),
    "PARTITION_RULES": lambda f: f"{len(f['rules'])} rules",
    "BPE_ENCODE": lambda f: f"suffix={_quote(f['suffix'])}" if f["suffix"] else "suffix=none",
    "WORDPIECE_ENCODE": lambda f: f"prefix={_quote(f['prefix'])}",
    "COMPOSE": lambda f: " ".join(
        "$sequence" if not it["fixed"] else f"id={it['id']}" if "id" in it else _quote(it["token"])
        for it in f["items"]),
}


def _describe(record: TisaRecord) -> str:
    f = record.fields
    if "payload" in f:
        raw = f["payload"]
        return f'{record.name} payload=x"{raw[:32].hex()}"' + ("…" if len(raw) > 32 else "")
    args = _ARGUMENTS.get(record.name)
    return f"{record.name} {args(f)}" if args else record.name


def format_tisa(manifest: TisaManifest) -> Iterator[str]:
    """Readable listing: a title line, then one line per record (offset, name, arguments),
    with PARTITION_RULES followed by one indented line per rule."""
    yield f"TISA version {manifest.version}, {len(manifest.records)} records"
    for record in manifest.records:
        yield f"{record.offset:6d}  {_describe(record)}"
        for i, rule in enumerate(record.fields.get("rules", ()) if "payload" not in record.fields else ()):
            yield f"{'':6}    [{i}] {_rule_text(rule)}"
