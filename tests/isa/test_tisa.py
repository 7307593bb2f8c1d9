"""TISA tokenizer manifest (PROC): the real BERT manifest, every opcode, hostile bytes."""
from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from nac_engine.errors import NacFormatError
from nac_engine.spans import Span
from nac_engine.isa.tisa import TisaManifest, decode_tisa, format_tisa

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "nac"
PROC_SLOT = 6          # PROC's offset-table slot in every header generation
OFFSET_TABLE = 12


def _proc(path: Path) -> tuple[bytes, int]:
    """(manifest, its absolute offset) of a file's PROC section."""
    data = path.read_bytes()
    (proc,) = struct.unpack_from("<Q", data, OFFSET_TABLE + 8 * PROC_SLOT)
    assert data[proc:proc + 4] == b"PROC"
    (length,) = struct.unpack_from("<I", data, proc + 4)
    return data[proc + 8:proc + 8 + length], proc + 8


def _assert_leaves_tile(root: Span, start: int, length: int) -> None:
    pos = start
    for leaf in root.leaves():
        assert leaf.offset == pos, f"gap or overlap at {leaf!r} (expected offset {pos})"
        assert leaf.length > 0
        pos = leaf.end
    assert pos == start + length


# -- a tiny writer for hand-made manifests ---------------------------------------------------
def s8(s: str) -> bytes:
    b = s.encode()
    return bytes([len(b)]) + b


def s16(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def rec(opcode: int, payload: bytes = b"") -> bytes:
    return bytes([opcode]) + struct.pack("<I", len(payload)) + payload


def manifest(*records: bytes, version: int = 1) -> bytes:
    return b"TISA" + bytes([version]) + b"".join(records)


# -- the real manifest ------------------------------------------------------------------------
@pytest.fixture
def wordpiece():
    path = CORPUS / "tok_wordpiece" / "tok_wordpiece.nac"
    if not path.is_file():
        pytest.skip("shared corpus not present")
    return _proc(path)


def test_wordpiece_manifest_records(wordpiece):
    data, base = wordpiece
    man, problems = decode_tisa(data, base)
    assert problems == []
    assert man.version == 1
    got = [(r.name, r.fields) for r in man.records]
    rules = got[7][1]["rules"]
    assert got[:7] == [
        ("REPLACE", {"pattern": "\t", "replacement": " "}),
        ("REPLACE", {"pattern": "\r", "replacement": " "}),
        ("REPLACE", {"pattern": "\n", "replacement": " "}),
        ("FILTER_CATEGORY", {"categories": ["Cc", "Cf"]}),
        ("LOWERCASE", {}),
        ("UNICODE_NORM", {"form": "NFD"}),
        ("FILTER_CATEGORY", {"categories": ["Mn"]}),
    ]
    assert got[7][0] == "PARTITION_RULES" and len(rules) == 8
    assert rules[0] == {"flags": 2, "protected": False, "pattern": r"\s+", "behavior": 1, "trim": None}
    # the special tokens are protected rules with neither behaviour nor trim
    assert [r["pattern"] for r in rules[1:6]] == [rf"(?: ?)\[{t}\]" for t in ("MASK", "UNK", "PAD", "SEP", "CLS")]
    assert all(r["flags"] == 1 and r["protected"] and r["behavior"] is None for r in rules[1:6])
    assert (rules[6]["pattern"], rules[6]["behavior"]) == (r"\p{P}", 2)
    assert rules[7]["pattern"].startswith(r"[\u4E00-\u9FFF") and rules[7]["behavior"] == 2
    assert got[8:] == [
        ("WORDPIECE_ENCODE", {"prefix": "##"}),
        ("COMPOSE", {"items": [{"fixed": True, "token": "[CLS]"}, {"fixed": False},
                               {"fixed": True, "token": "[SEP]"}]}),
    ]
    # offsets are absolute and lengths are the payload lengths in the file
    assert man.records[0].offset == base + 5 and man.records[0].length == 6
    assert man.records[4].length == 0
    assert sum(5 + r.length for r in man.records) == len(data) - 5


def test_wordpiece_listing(wordpiece):
    data, base = wordpiece
    lines = list(format_tisa(decode_tisa(data, base)[0]))
    assert lines[0] == "TISA version 1, 10 records"
    bodies = [re.sub(r"^\s*\d+ ", "", line).strip() for line in lines[1:]]   # drop the offset column
    assert bodies[:9] == [
        'REPLACE "\\t" -> " "', 'REPLACE "\\r" -> " "', 'REPLACE "\\n" -> " "', "FILTER_CATEGORY Cc Cf",
        "LOWERCASE", "UNICODE_NORM NFD", "FILTER_CATEGORY Mn", "PARTITION_RULES 8 rules",
        r"[0] rule /\s+/ REMOVE",
    ]
    assert r"[1] protected /(?: ?)\[MASK\]/" in bodies
    assert bodies[-2:] == ['WORDPIECE_ENCODE prefix="##"', 'COMPOSE "[CLS]" $sequence "[SEP]"']


def test_wordpiece_spans_cover_every_byte(wordpiece):
    data, base = wordpiece
    root = Span(base, len(data), "manifest")
    decode_tisa(data, base, root)
    _assert_leaves_tile(root, base, len(data))
    names = [c.name for c in root.children]
    assert names[:3] == ["magic", "version", "rec[0]"] and len(names) == 12
    assert [c.name for c in root.find("rec[0]").children] == [
        "opcode", "length", "pattern_len", "pattern", "replacement_len", "replacement"]
    rule = root.find("rec[7]/rule[1]")
    assert [c.name for c in rule.children] == ["flags", "pattern_len", "pattern"]
    assert rule.find("pattern").value == r"(?: ?)\[MASK\]"
    assert root.find("rec[9]/item[0]/token").value == "[CLS]"


def test_a_read_file_gives_the_manifest_its_field_spans_when_asked(wordpiece):
    """read() decodes PROC without its records' field spans (a tokenizer's manifest is most of
    a small file's decode); the structure view and `nac span` still get every field, made on
    first access and equal to an eager decode's."""
    from nac_engine import read
    data, base = wordpiece
    eager = Span(base, len(data), "manifest")
    decode_tisa(data, base, eager)
    nac = read(CORPUS / "tok_wordpiece" / "tok_wordpiece.nac")
    man = nac.spans.find("PROC/manifest")
    assert man.has_children and [c.name for c in man.eager_children] == ["magic", "version"]   # no record's

    def tree(sp: Span) -> list:
        return [(c.offset, c.length, c.name, c.type, c.value, tree(c)) for c in sp.children]
    assert tree(man) == tree(eager)
    assert nac.spans.span_at(base + 5).name == "opcode"           # a byte inside rec[0] finds its field
    _assert_leaves_tile(man, base, len(data))


def test_wordpiece_truncated_at_every_offset(wordpiece):
    data, base = wordpiece
    whole, _ = decode_tisa(data, base)
    boundaries = {5} | {r.offset - base + 5 + r.length for r in whole.records}
    for cut in range(len(data)):
        root = Span(base, cut, "manifest")
        man, problems = decode_tisa(data[:cut], base, root)
        # a cut between records leaves a valid, shorter manifest
        assert bool(problems) != (cut in boundaries), f"cut at {cut}"
        assert all(isinstance(p, NacFormatError) and p.section == "PROC/manifest" for p in problems)
        assert all(base <= p.offset <= base + cut for p in problems)
        assert (man is None) == (cut < 5)
        if cut:
            _assert_leaves_tile(root, base, cut)


# -- every opcode, hand-made ------------------------------------------------------------------
def test_every_known_opcode():
    data = manifest(
        rec(0x01), rec(0x02, s8("NFKC")), rec(0x03, s16("a") + s16("bc")), rec(0x04, b"\x00"),
        rec(0x07, s16("▁")),
        rec(0x10, struct.pack("<H", 2) + b"\x06" + s16(" ") + b"\x02" + s8("▁") + b"\x00" + s16("x")),
        rec(0x15), rec(0x20, s8("</w>")), rec(0x20, s8("")), rec(0x21, s8("##")), rec(0x22),
        rec(0x30, b"\x03" + b"\x01\x01" + struct.pack("<i", -7) + b"\x00" + b"\x01\x00" + s8("</s>")),
    )
    root = Span(0, len(data), "manifest")
    man, problems = decode_tisa(data, 0, root)
    assert problems == []
    assert [(r.name, r.fields) for r in man.records] == [
        ("LOWERCASE", {}), ("UNICODE_NORM", {"form": "NFKC"}),
        ("REPLACE", {"pattern": "a", "replacement": "bc"}), ("FILTER_CATEGORY", {"categories": []}),
        ("PREPEND", {"text": "▁"}),
        ("PARTITION_RULES", {"rules": [
            {"flags": 6, "protected": False, "pattern": " ", "behavior": 2, "trim": "▁"},
            {"flags": 0, "protected": False, "pattern": "x", "behavior": None, "trim": None}]}),
        ("BYTE_ENCODE", {}), ("BPE_ENCODE", {"suffix": "</w>"}), ("BPE_ENCODE", {"suffix": ""}),
        ("WORDPIECE_ENCODE", {"prefix": "##"}), ("UNIGRAM_ENCODE", {}),
        ("COMPOSE", {"items": [{"fixed": True, "id": -7}, {"fixed": False}, {"fixed": True, "token": "</s>"}]}),
    ]
    _assert_leaves_tile(root, 0, len(data))
    lines = list(format_tisa(man))
    assert any(line.endswith('PREPEND "▁"') for line in lines)
    assert any(line.endswith('[0] rule / / ISOLATE trim="▁"') for line in lines)
    assert any(line.endswith("BPE_ENCODE suffix=none") for line in lines)
    assert any(line.endswith('COMPOSE id=-7 $sequence "</s>"') for line in lines)


def test_unknown_opcode_is_skipped_by_its_length():
    data = manifest(rec(0x01), rec(0x99, b"\xde\xad\xbe\xef"), rec(0x21, s8("##")))
    root = Span(100, len(data), "manifest")
    man, problems = decode_tisa(data, 100, root)
    assert [r.name for r in man.records] == ["LOWERCASE", "OP_0x99", "WORDPIECE_ENCODE"]
    assert man.records[1].fields == {"payload": b"\xde\xad\xbe\xef"}
    assert len(problems) == 1 and problems[0].offset == 100 + 10 and "0x99" in problems[0].reason
    assert root.find("rec[1]/payload").length == 4
    _assert_leaves_tile(root, 100, len(data))
    assert "OP_0x99" in list(format_tisa(man))[2]


def test_bad_payloads_are_reported_and_kept_raw():
    bad_utf8 = rec(0x02, b"\x02\xff\xfe")
    short = rec(0x03, s16("abc"))                       # replacement missing
    overlong = rec(0x04, b"\x01" + s8("Mn") + b"zz")    # two unused bytes
    data = manifest(bad_utf8, short, overlong, rec(0x01))
    root = Span(0, len(data), "manifest")
    man, problems = decode_tisa(data, 0, root)
    assert [r.name for r in man.records] == ["UNICODE_NORM", "REPLACE", "FILTER_CATEGORY", "LOWERCASE"]
    assert man.records[0].fields == {"payload": b"\x02\xff\xfe"}
    assert man.records[1].fields == {"payload": s16("abc")}
    assert man.records[2].fields == {"categories": ["Mn"]}
    reasons = [p.reason for p in problems]
    assert "UTF-8" in reasons[0] and problems[0].offset == 5 + 5 + 1
    assert "truncated" in reasons[1]
    assert "2 unused bytes" in reasons[2]
    _assert_leaves_tile(root, 0, len(data))


def test_hostile_lengths_do_not_allocate_or_raise():
    data = manifest(rec(0x01)) + b"\x10" + struct.pack("<I", 0xFFFFFFFF) + b"\x00\x00"
    man, problems = decode_tisa(data, 7)
    assert [r.name for r in man.records] == ["LOWERCASE"]
    assert "exceeds" in problems[0].reason and problems[0].offset == 7 + 10 + 1
    huge_count = manifest(rec(0x10, b"\xff\xff"))
    man, problems = decode_tisa(huge_count)
    assert man.records[0].fields == {"payload": b"\xff\xff"} and "truncated" in problems[0].reason


@pytest.mark.parametrize("data", [b"", b"TIS", b"TISA", b"ABCD\x01", b"\x00" * 20])
def test_not_a_manifest(data):
    root = Span(0, len(data), "manifest")
    man, problems = decode_tisa(data, 0, root)
    assert man is None and len(problems) == 1
    if data:
        _assert_leaves_tile(root, 0, len(data))


def test_unknown_version_is_flagged_but_decoded():
    man, problems = decode_tisa(manifest(rec(0x01), version=2))
    assert man.version == 2 and [r.name for r in man.records] == ["LOWERCASE"]
    assert len(problems) == 1 and problems[0].offset == 4


@given(st.binary(max_size=80), st.integers(0, 1 << 20))
@settings(max_examples=400)
def test_any_bytes_after_the_magic_never_raise(tail, base):
    data = b"TISA\x01" + tail
    root = Span(base, len(data), "manifest")
    man, problems = decode_tisa(data, base, root)
    assert isinstance(man, TisaManifest)
    assert all(base <= p.offset < base + len(data) for p in problems)
    _assert_leaves_tile(root, base, len(data))
    list(format_tisa(man))


@given(st.data())
@settings(max_examples=200)
def test_mutated_real_shape_never_raises(data):
    good = manifest(rec(0x03, s16("\t") + s16(" ")), rec(0x04, b"\x02" + s8("Cc") + s8("Cf")),
                    rec(0x10, struct.pack("<H", 1) + b"\x07" + s16(r"\s+") + b"\x01" + s8(" ")),
                    rec(0x30, b"\x02\x01\x00" + s8("[CLS]") + b"\x00"))
    buf = bytearray(good)
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(5, len(buf) - 1))] = data.draw(st.integers(0, 255))
    root = Span(0, len(buf), "manifest")
    man, _ = decode_tisa(bytes(buf), 0, root)
    _assert_leaves_tile(root, 0, len(buf))
    list(format_tisa(man))
