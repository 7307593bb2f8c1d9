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
from typing import Any, Optional

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
    records: list = field(default_factory=list)


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


def opcode_name(opcode: int) -> str:
    return TISA_OPCODES.get(opcode, f"OP_0x{opcode:02X}")


# -- manifest ---------------------------------------------------------------------------------
def decode_tisa(manifest: bytes, base_offset: int = 0, span: Optional[Span] = None
                ) -> tuple[Optional[TisaManifest], list[NacFormatError]]:
    """Decode a manifest; ``None`` when it does not start with ``TISA`` + version.

    ``base_offset`` is the absolute file offset of ``manifest[0]``. With ``span``, child
    spans cover every manifest byte exactly once: ``magic``, ``version``, one ``rec[i]`` per
    record (``opcode``, ``length``, then the payload fields), ``trailing`` for bytes that do
    not form a whole record.
    """
    buf = bytes(manifest)
    problems: list[NacFormatError] = []

    def problem(offset: int, reason: str) -> None:
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

    result = TisaManifest(version)
    pos = 5
    while pos < len(buf):
        if len(buf) - pos < RECORD_HEADER:
            problem(base_offset + pos, f"{len(buf) - pos} bytes at the end do not hold a record header")
            leaf(pos, len(buf) - pos, "trailing", value=buf[pos:])
            break
        opcode = buf[pos]
        (length,) = struct.unpack_from("<I", buf, pos + 1)
        start, end = pos + RECORD_HEADER, pos + RECORD_HEADER + length
        name = opcode_name(opcode)
        if end > len(buf):
            problem(base_offset + pos + 1, f"{name} payload length {length} exceeds the "
                                           f"{len(buf) - start} bytes left")
            leaf(pos, len(buf) - pos, "trailing", value=buf[pos:pos + 32])
            break

        reader = _Reader(buf, start, end, base_offset, nodes=span is not None)
        decoder = _PAYLOAD_DECODERS.get(opcode)
        try:
            if decoder is None:
                raise _Bad(base_offset + pos, f"unknown TISA opcode 0x{opcode:02X}; payload kept raw")
            fields = decoder(reader)
            if reader.pos < end:
                problem(base_offset + reader.pos, f"{name}: {end - reader.pos} unused bytes at the end "
                                                  f"of its payload")
                reader.stack[0].children.append(
                    _Node(base_offset + reader.pos, end - reader.pos, "unused", "bytes", buf[reader.pos:end]))
            payload_nodes = reader.stack[0].children
        except _Bad as bad:
            problem(bad.args[0], bad.args[1])
            fields = {"payload": buf[start:end]}
            payload_nodes = [_Node(base_offset + start, length, "payload", "bytes", buf[start:start + 32])]
            if not length:
                payload_nodes = []

        record = TisaRecord(base_offset + pos, opcode, name, length, fields)
        result.records.append(record)
        if span is not None:
            node = span.add(base_offset + pos, end - pos, f"rec[{len(result.records) - 1}]", "tisa",
                            _describe(record))
            node.add(base_offset + pos, 1, "opcode", "opcode", name)
            node.add(base_offset + pos + 1, 4, "length", "u32", length)
            for child in payload_nodes:
                child.attach(node)
        pos = end
    return result, problems


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


def _describe(record: TisaRecord) -> str:
    f = record.fields
    if "payload" in f:
        raw = f["payload"]
        return f'{record.name} payload=x"{raw[:32].hex()}"' + ("…" if len(raw) > 32 else "")
    args = {
        "UNICODE_NORM": lambda: f["form"],
        "REPLACE": lambda: f"{_quote(f['pattern'])} -> {_quote(f['replacement'])}",
        "FILTER_CATEGORY": lambda: " ".join(f["categories"]),
        "PREPEND": lambda: _quote(f["text"]),
        "PARTITION_RULES": lambda: f"{len(f['rules'])} rules",
        "BPE_ENCODE": lambda: f"suffix={_quote(f['suffix'])}" if f["suffix"] else "suffix=none",
        "WORDPIECE_ENCODE": lambda: f"prefix={_quote(f['prefix'])}",
        "COMPOSE": lambda: " ".join(
            "$sequence" if not it["fixed"] else f"id={it['id']}" if "id" in it else _quote(it["token"])
            for it in f["items"]),
    }.get(record.name)
    return f"{record.name} {args()}" if args else record.name


def format_tisa(manifest: TisaManifest) -> list[str]:
    """Readable listing: a title line, then one line per record (offset, name, arguments),
    with PARTITION_RULES followed by one indented line per rule."""
    lines = [f"TISA version {manifest.version}, {len(manifest.records)} records"]
    for record in manifest.records:
        lines.append(f"{record.offset:6d}  {_describe(record)}")
        for i, rule in enumerate(record.fields.get("rules", ()) if "payload" not in record.fields else ()):
            lines.append(f"{'':6}    [{i}] {_rule_text(rule)}")
    return lines
