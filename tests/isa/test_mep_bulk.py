"""The bulk MEP paths against the one-instruction-at-a-time ones they stand for: the decode walk
(16 instructions per Python step, 64 KB windows) against a walk with the field decoder, and the
listing made a block at a time from the bytes (isa/mep_bulk_text.py) against format_mep of each
decoded instruction: every opcode, op-dependent tails, enum values with and without names, key
lists short and too long for a matrix row, jumps before 0 and past the end, pool comments
present, missing, non-ASCII and too long, keys that only equal ints, several blocks, shapes too
rare for a block, repeated programs, an undecodable tail."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from nac_engine.isa import mep_bulk_text
from nac_engine.isa.mep import (MEP_OPCODES, MepStream, OpTail, _decode_one, _Undecodable, decode_mep, format_mep,
                                format_mep_blocks)


def _instruction(rnd: random.Random, opcode: int, small: bool) -> bytes:
    """One valid instruction of ``opcode`` with random operands (mostly small with ``small``)."""
    _, layout = MEP_OPCODES[opcode]
    out = bytearray([opcode])
    pending, op = list(layout), None
    while pending:
        f = pending.pop(0)
        if isinstance(f, OpTail):
            pending = list(f.by_op.get(op, f.default) or ()) + pending
            continue
        if f.kind == "keys":
            n = rnd.choice([0, 1, 1, 2, 3, 5]) if rnd.random() < 0.9 else rnd.randrange(256)
            out += bytes([n]) + bytes(rnd.randrange(256) for _ in range(n))
        elif f.kind == "raw":
            out += bytes(rnd.randrange(256) for _ in range(f.size))
        elif f.kind in ("c16", "i16"):
            out += (rnd.randrange(16) if small else rnd.randrange(65536)).to_bytes(2, "little")
        else:
            tail = layout[-1] if isinstance(layout[-1], OpTail) else None
            if f.name == "op" and tail is not None:
                v = rnd.choice(list(tail.by_op) + ([rnd.randrange(256)] if tail.default is not None else []))
            elif f.names and rnd.random() < 0.8:
                v = rnd.choice(list(f.names))
            else:
                v = rnd.randrange(8) if small else rnd.randrange(256)
            if f.name == "op":
                op = v
            out.append(v)
    return bytes(out)


def _stream(seed: int, n: int, small: bool = False, opcodes=None, garbage: bool = False) -> bytes:
    rnd = random.Random(seed)
    opcodes = opcodes or sorted(MEP_OPCODES)
    data = b"".join(_instruction(rnd, rnd.choice(opcodes), small) for _ in range(n))
    return data + (bytes([0x00, 9, 9]) if garbage else b"")


POOLS = [
    None,
    {},
    {0: "zero", 1: 12, 2: [1, 2], 3: "é\u2603 \"q\"", 5: None, 7: 1.5, 9: b"\x00\x01", 11: "x" * 300,
     13: "a\x01b\nc", 4: True, 6: "%d %s", 65535: "last"},
    {True: "one", 2.0: "two", 3: "three"},          # keys equal to ints without being ints
    {i: f"p{i}" for i in range(0, 65536, 3)},
]


def _general(stream: MepStream, pool, prefix: str) -> str:
    return "\n".join(prefix + format_mep(ins, pool) for ins in stream)


def _bulk(stream: MepStream, pool, prefix: str) -> str:
    return "\n".join(format_mep_blocks(stream, pool, prefix))


@pytest.mark.parametrize("seed", range(6))
def test_bulk_listing_equals_format_mep_of_each_instruction(seed):
    data = _stream(seed, 4000 if seed % 3 else 30_000, small=seed % 2 == 0, garbage=seed % 3 == 1)
    stream, problems = decode_mep(data)
    assert bool(problems) == (seed % 3 == 1)
    for pool in POOLS:
        for prefix in ("", ".mep ", "é; "):
            assert _bulk(stream, pool, prefix) == _general(stream, pool, prefix), (pool and len(pool), prefix)


def test_bulk_listing_with_tiny_blocks(monkeypatch):
    """Blocks of 7 lines: shapes too rare for their block, splices at block edges."""
    monkeypatch.setattr(mep_bulk_text, "BLOCK_LINES", 7)
    stream, _ = decode_mep(_stream(11, 3000, small=True, garbage=True))
    for pool in POOLS[:3]:
        assert _bulk(stream, pool, ".mep ") == _general(stream, pool, ".mep ")


@pytest.mark.parametrize("extra", [b"", bytes([0xA8, 1, 0xF0, 0xFF]), bytes([0xFE, 9]) + bytes(range(9))])
def test_repeated_programs_copy_one_row_per_encoding(extra):
    """A block of a few distinct encodings is made from one row per encoding, unless it holds a
    jump (its target differs per line) or an instruction over 8 bytes: same text every way."""
    program = bytes.fromhex("100000001400010080000100010162000201040302005f020300fe0101") + extra
    rnd = random.Random(len(extra))
    many = b"".join(_instruction(rnd, 0x59, False) for _ in range(100))      # 100 distinct SYS_COPYs
    for data in (program * 3000, program * 2000 + many * 30 + program * 500):
        stream, problems = decode_mep(data)
        assert not problems
        for pool in (None, POOLS[2]):
            assert _bulk(stream, pool, ".mep ") == _general(stream, pool, ".mep ")


@pytest.mark.parametrize("pool", [{0: "a", 1: "bb", 3: "y" * 2000, 5: 7, 9: None},
                                  {i: f"value number {i}" for i in range(0, 16, 2)}])
def test_pool_comments_of_many_lines(pool):
    """Thousands of lines of one shape take their comments from u16-wide tables: a pool value,
    an id the pool lacks, a value too long for the matrix (its line made alone)."""
    for opcode in (0x04, 0x5F, 0x82):
        stream, problems = decode_mep(_stream(opcode, 6000, small=True, opcodes=[opcode]))
        assert not problems
        assert _bulk(stream, pool, ".mep ") == _general(stream, pool, ".mep "), hex(opcode)


def test_wide_rows_make_smaller_blocks(monkeypatch):
    """A block whose matrix would pass MATRIX_BYTES is made again with fewer lines (and the size
    grows back): same text."""
    monkeypatch.setattr(mep_bulk_text, "MATRIX_BYTES", 20_000)
    stream, _ = decode_mep(_stream(12, 6000, small=True))
    blocks = list(format_mep_blocks(stream, POOLS[2], ".mep "))
    assert len(blocks) > 20
    assert "\n".join(blocks) == _general(stream, POOLS[2], ".mep ")


def test_one_opcode_streams_and_jumps_far_and_negative():
    for opcode in sorted(MEP_OPCODES):
        stream, problems = decode_mep(_stream(opcode, 200, opcodes=[opcode]))
        assert not problems
        assert _bulk(stream, POOLS[2], ".mep ") == _general(stream, POOLS[2], ".mep "), hex(opcode)
    jumps = b"".join(bytes([0xA8, k]) + rel.to_bytes(2, "little", signed=True)
                     for k, rel in [(1, -32768), (2, 32767), (3, 0), (4, -5), (5, -4)] * 3000)
    stream, _ = decode_mep(jumps)
    assert "0: FLOW_BRANCH_IF cond=k1 jump=@-32764" in _bulk(stream, None, "")
    assert _bulk(stream, None, "") == _general(stream, None, "")


def test_prefix_with_the_splice_byte_or_nul_takes_the_general_path():
    stream, _ = decode_mep(_stream(3, 500))
    for prefix in ("\x01", "a\0b"):
        assert _bulk(stream, POOLS[2], prefix) == _general(stream, POOLS[2], prefix)


@given(st.lists(st.one_of(st.sampled_from(sorted(MEP_OPCODES)), st.integers(0, 7), st.integers(0, 255)),
                max_size=400).map(bytes))
@settings(max_examples=300, deadline=None)
def test_bulk_listing_of_any_bytes(data):
    stream, _ = decode_mep(data)
    for pool in (None, POOLS[2]):
        assert _bulk(stream, pool, ".mep ") == _general(stream, pool, ".mep ")


# -- the decode walk -----------------------------------------------------------------------------
def _reference_starts(buf: bytes):
    """Instruction starts found one instruction at a time, and where decoding stopped (None: end)."""
    out, ip = [], 0
    while ip < len(buf):
        try:
            ins = _decode_one(buf, ip, want_leaves=False)[0]
        except _Undecodable:
            return out, ip
        out.append(ip)
        ip += ins.length
    return out, None


@pytest.mark.parametrize("seed", range(8))
def test_walk_across_windows_matches_the_instruction_walk(seed):
    """Streams over several 64 KB windows, a bad byte or a cut somewhere (near a window edge for
    some): the same starts, the same place to stop."""
    rnd = random.Random(seed)
    data = bytearray(_stream(100 + seed, 45_000, small=seed % 2 == 0))
    if seed % 4 == 1:
        at = rnd.choice([65_536, 131_072, 65_535, 131_073]) + rnd.randrange(-8, 8)
        data[at] = 0x00                       # no opcode 0x00: decoding stops at or before it
    elif seed % 4 == 2:
        del data[rnd.randrange(len(data) - 600, len(data)):]      # cut short near the end
    data = bytes(data)
    stream, problems = decode_mep(data, 1000)
    starts, stop = _reference_starts(data)
    assert list(stream.starts) == starts
    if stop is None:
        assert stream.tail is None and not problems
    else:
        assert stream.tail.ip == stop and [p.offset for p in problems] == [1000 + stop]


def test_walk_of_one_byte_instructions_and_all_halts():
    data = b"\xff" * 200_000 + b"\x05\x01" * 1000
    stream, problems = decode_mep(data)
    assert not problems and list(stream.starts) == _reference_starts(data)[0]


def test_listing_check_is_bounded_by_the_stream_size(monkeypatch):
    """The exact read-back check parses each distinct encoding (~25 us each) only up to one per
    EXACT_TEXT_CHECK_BYTES of stream: 5,000 distinct instructions in ~25 KB fall back to one per
    (opcode, op) kind, and the listing is still the readable one."""
    from nac_engine.text import disasm
    rnd = random.Random(7)
    distinct: set = set()
    while len(distinct) < 5_000:
        distinct.add(bytes([0x04]) + bytes(rnd.randrange(256) for _ in range(3)))
    stream, _ = decode_mep(b"".join(sorted(distinct)))
    parsed = []
    real = disasm.parse_mep
    monkeypatch.setattr(disasm, "parse_mep", lambda text: parsed.append(text) or real(text))
    assert disasm._text_reads_back(stream, {})
    budget = max(disasm.EXACT_TEXT_CHECK_MIN, len(stream.bytecode) // disasm.EXACT_TEXT_CHECK_BYTES)
    assert 0 < len(parsed) <= budget
    # a stream under the budget is checked one encoding at a time
    parsed.clear()
    small, _ = decode_mep(b"".join(sorted(distinct)[:100]))
    assert disasm._text_reads_back(small, {}) and len(parsed) == 100
