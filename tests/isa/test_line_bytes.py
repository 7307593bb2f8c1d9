"""The ``.ops`` listing assembled as bytes (isa/line_bytes.py) against the %-format it replaced:
``assemble_lines`` against ``template % numbers`` on generated shapes, and the whole listing
with ``disasm.BYTE_LINES`` on and off on crafted files, the corpus and seeded OPS mutants."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nac_engine import read
from nac_engine.text import disasm
from nac_engine.text.line_bytes import assemble_lines, template_parts
from tests.decoder_cost import best_cpu
from tests.format.test_decoder_cost import _ops_cases, crafted

_TEXT = st.text(st.sampled_from("ab %d%%v(), -1é€\U0001F600\t"), max_size=12)


@given(st.lists(st.tuples(st.lists(_TEXT, min_size=1, max_size=4),
                          st.lists(st.integers(-40, 40) | st.integers(-70_000, 70_000), max_size=4)),
                min_size=1, max_size=5),
       st.integers(0, 200_000), st.lists(st.integers(0, 99), min_size=1, max_size=60))
@settings(max_examples=300, deadline=None)
def test_assembled_lines_equal_the_percent_format(shapes, first_tick, picks):
    parts, deltas, templates = [], [], []
    for texts, ds in shapes:
        texts = (texts + [""] * len(ds))[:len(ds) + 1]
        ds = ds[:len(texts) - 1]
        templates.append("%d".join(t.replace("%", "%%") for t in texts))
        assert template_parts(templates[-1]) == texts
        encoded = [t.encode() for t in texts]
        encoded[-1] += b"\n"
        parts.append(tuple(encoded))
        deltas.append(tuple(ds))
    which = np.array([p % len(shapes) for p in picks], dtype=np.int64)
    ticks = np.arange(first_tick, first_tick + len(which), dtype=np.int64)
    got = assemble_lines(parts, deltas, which, ticks, spread=1_000_000)
    numbers = [[int(t) + d for d in deltas[u]] for u, t in zip(which.tolist(), ticks)]
    if any(n < 0 for ns in numbers for n in ns):
        assert got is None
    else:
        assert got == "\n".join(templates[u] % tuple(ns) for u, ns in zip(which.tolist(), numbers))


def test_a_long_line_among_short_ones_is_left_to_the_caller():
    parts = [(b"v", b" = x\n"), (b"long " * 10_000 + b"\n",)]
    which = np.zeros(4096, dtype=np.int64)
    which[7] = 1
    assert assemble_lines(parts, [(0,), ()], which, np.arange(4096, dtype=np.int64)) is None


def _texts(data: bytes) -> list:
    nac = read(data, strict=False)
    return [disasm.disassemble(nac, mmap_comments=mc) for mc in (False, True)]


def _ops_mutants(data: bytes, count: int, seed: int) -> list:
    rnd = random.Random(seed)
    ops = read(data, strict=False).spans.find("OPS")
    out = []
    for _ in range(count):
        b = bytearray(data)
        for _ in range(rnd.randrange(1, 4)):
            b[ops.offset + 8 + rnd.randrange(ops.length - 8)] = rnd.choice((0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF,
                                                                             rnd.randrange(256)))
        out.append(bytes(b))
    return out


def _both_ways(datas, monkeypatch) -> None:
    monkeypatch.setattr(disasm, "BULK_LINES", False)     # every line by encoding (bulk: test_ops_bulk_lines)
    for k, data in enumerate(datas):
        fast = _texts(data)
        with monkeypatch.context() as m:
            m.setattr(disasm, "BYTE_LINES", False)
            slow = _texts(data)
        assert fast == slow, k


def test_listing_as_bytes_equals_the_percent_format(monkeypatch):
    _both_ways([data for _, data in _ops_cases()], monkeypatch)


def test_listing_of_mutated_ops_as_bytes_equals_the_percent_format(monkeypatch):
    cases = _ops_cases()
    datas = _ops_mutants(dict(cases)["variety"], 12, seed=5) + _ops_mutants(crafted("ops", 1), 12, seed=6)
    _both_ways(datas, monkeypatch)


def test_colliding_keys_fall_back_to_sorting_rows(monkeypatch):
    """Every encoding hashed to 0: the groups fail the check and are sorted as rows, same text."""
    monkeypatch.setattr(disasm, "BULK_LINES", False)
    data = dict(_ops_cases())["variety"]
    expect = _texts(data)
    monkeypatch.setattr(disasm, "_MIX", (np.uint64(0), np.uint64(0)))
    calls = []
    real_unique = np.unique
    monkeypatch.setattr(np, "unique", lambda a, **kw: calls.append(a.dtype.kind) or real_unique(a, **kw))
    assert _texts(data) == expect
    assert "V" in calls


def test_listing_as_bytes_costs_less_than_the_percent_format(monkeypatch):
    """The ops listing alone (file read once) with BYTE_LINES on and off: about 0.4x on an idle
    machine; the bound leaves room for a shared one."""
    monkeypatch.setattr(disasm, "BULK_LINES", False)     # the lines by encoding, not in columns
    nac = read(crafted("ops", 16), strict=False)

    def listing(_):
        return sum(map(len, disasm.iter_disassembly(nac)))

    listing(None)
    fast = best_cpu(listing, None, repeat=5)
    monkeypatch.setattr(disasm, "BYTE_LINES", False)
    listing(None)
    slow = best_cpu(listing, None, repeat=5)
    assert fast <= 0.85 * slow, (fast, slow)
