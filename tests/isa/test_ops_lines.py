"""The .ops listing is the same whichever way its lines are made: by encoding (a template per
distinct encoding, a block's lines one %-format), one by one (a block of distinct encodings),
and without the per-shape memo (textops' templates kept per op, signature, constants and
reference pattern, or that its lines are raw): each line then made and read back on its own, as
format_instruction always did. On the corpus, crafted files, seeded mutants, tables that make
lines ambiguous, and random small files; and a listing reassembles to the same bytes."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from nac_engine import read, write
from nac_engine.format.model import Constant, Instruction
from nac_engine.text import disasm, textops
from nac_engine.text.asm import assemble
from tests.format.test_decoder_cost import _ops_cases, crafted
from tests.format.test_regressions import small_file
from tests.isa.ops_mutants import _ops_mutants

LINEAR, SOFTMAX = 32, 33


class _Forgetful(dict):
    """A memo that keeps nothing: every line is made and read back on its own."""

    def __setitem__(self, key, value):
        pass


def _listings(data: bytes, repeats: int, memo: bool, monkeypatch) -> list:
    with monkeypatch.context() as m:
        m.setattr(disasm, "TEMPLATE_REPEATS", repeats)
        if not memo:
            refresh = textops.Tables.refresh

            def forgetful(self):
                refresh(self)
                self.templates = _Forgetful()
            m.setattr(textops.Tables, "refresh", forgetful)
        nac = read(data, strict=False)
        return [disasm.disassemble(nac, mmap_comments=mc) for mc in (False, True)]


def _same_every_way(data: bytes, monkeypatch) -> None:
    plain = _listings(data, 10 ** 9, False, monkeypatch)        # one by one, nothing kept
    assert _listings(data, 10 ** 9, True, monkeypatch) == plain  # one by one, per-shape memos
    assert _listings(data, 1, True, monkeypatch) == plain        # every block by encoding
    assert _listings(data, disasm.TEMPLATE_REPEATS, True, monkeypatch) == plain   # the default


@pytest.mark.parametrize("name, data", _ops_cases() + [("ops_distinct", crafted("ops_distinct", 1))],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_the_listing_is_the_same_every_way(name, data, monkeypatch):
    _same_every_way(data, monkeypatch)


def test_the_listing_is_the_same_every_way_on_mutants(monkeypatch):
    """Line by line from nothing kept against the default (by encoding, or line by line with
    the memos); the four ways are compared on the unmutated files above."""
    datas = (_ops_mutants(crafted("ops_distinct", 1), 8, seed=7) + _ops_mutants(_ambiguous()[0], 16, seed=8)
             + _ops_mutants(dict(_ops_cases())["variety"], 2, seed=9))     # (138 KB: 1 s each)
    for data in datas:
        assert _listings(data, disasm.TEMPLATE_REPEATS, True, monkeypatch) == \
            _listings(data, 10 ** 9, False, monkeypatch)


# -- tables that make lines ambiguous ---------------------------------------------------------------
def _ambiguous() -> tuple:
    """A file whose instructions each try one way a line can be ambiguous or not read back;
    returns (bytes, {tick: whether the line could be made without reading it back})."""
    nac = small_file()
    nac.cmap.update({34: "dup.op", 35: "dup.op", 36: "raw", 37: "two words", 38: "na\u00efve", 39: "pct%op",
                     40: "semi;colon", 41: "input"})
    nac.perms.update({4: "Ti", 5: "Tf", 6: "Ts", 7: "Tb", 8: "TS", 9: "Ti", 10: "Tc", 11: "TA", 12: "Q",
                      13: "TT"})
    nac.constants.update({
        20: Constant(20, 2, 7), 21: Constant(21, 2, 7),                 # one literal, two constants
        22: Constant(22, 3, 1.0), 23: Constant(23, 3, float("nan")), 24: Constant(24, 3, float("nan")),
        25: Constant(25, 3, -0.0), 26: Constant(26, 3, float("inf")), 27: Constant(27, 4, 'say "hi"'),
        28: Constant(28, 4, "50% off"), 29: Constant(29, 4, "ok_name"), 30: Constant(30, 4, "caf\u00e9"),
        31: Constant(31, 0, None), 32: Constant(32, 1, False, 2), 33: Constant(33, 5, (1, 2)),
        34: Constant(34, 2, 1), 35: Constant(35, 1, False, 3), 36: Constant(36, 2, 2 ** 40),
        37: Constant(37, 3, 2.5), 38: Constant(38, 4, "a,b"), 39: Constant(39, 4, "x)<i>"),
        40: Constant(40, 6, (0.5, 2.0)), 41: Constant(41, 2, 12), 42: Constant(42, 3, 12.0),
    })
    cases = [   # (a, b, c, d, made in columns)
        (LINEAR, 2, None, (-1, -2), True),
        (SOFTMAX, 3, (2, 3, 2), (-1, 0, 0), True),
        (34, 2, None, (-1, -1), True),              # a shared name: dup.op#34
        (36, 2, None, (-1, -1), False),             # a word of the grammar
        (37, 2, None, (-1, -1), False),             # a space
        (38, 2, None, (-1, -1), False),             # not ASCII
        (39, 2, None, (-1, -1), False),             # '%'
        (40, 2, None, (-1, -1), False),             # ';'
        (41, 2, None, (-1, -1), False),             # a word of the grammar
        (SOFTMAX, 4, (1, 20), (-1, 0), False),      # 7 names two constants: c20
        (SOFTMAX, 4, (1, 22), (-1, 0), False),      # 1.0 used as an int: a coercion note
        (SOFTMAX, 5, (1, 22), (-1, 0), True),       # 1.0 as a float
        (SOFTMAX, 5, (1, 23), (-1, 0), False),      # nan names two constants
        (SOFTMAX, 5, (1, 25), (-1, 0), True),       # -0.0
        (SOFTMAX, 5, (1, 26), (-1, 0), True),       # inf
        (SOFTMAX, 5, (1, 34), (-1, 0), False),      # int 1 used as a float: a coercion note
        (SOFTMAX, 5, (1, 37), (-1, 0), True),
        (SOFTMAX, 6, (1, 27), (-1, 0), False),      # quotes inside a string
        (SOFTMAX, 6, (1, 28), (-1, 0), False),      # '%' and a space
        (SOFTMAX, 6, (1, 29), (-1, 0), True),
        (SOFTMAX, 6, (1, 30), (-1, 0), False),      # not ASCII
        (SOFTMAX, 6, (1, 38), (-1, 0), False),      # a comma
        (SOFTMAX, 6, (1, 39), (-1, 0), False),      # a bracket and a signature-like text
        (SOFTMAX, 10, (1, 31), (-1, 0), True),      # None
        (SOFTMAX, 10, (1, 35), (-1, 0), False),     # False twice, odd length fields: c35
        (SOFTMAX, 7, (1, 32), (-1, 0), False),      # False with an odd length field: c32
        (SOFTMAX, 7, (1, 34), (-1, 0), False),      # int 1 used as a bool
        (SOFTMAX, 7, (1, 2), (-1, 0), True),
        (SOFTMAX, 8, (1, 33), (-1, 0), True),       # [1, 2]
        (SOFTMAX, 8, (1, 40), (-1, 0), True),       # [0.5, 2.0]f32
        (SOFTMAX, 4, (1, 36), (-1, 0), True),       # 2**40
        (SOFTMAX, 9, (1, 3), (-1, 0), True),        # a shared signature: <#9>
        (SOFTMAX, 4, (1, 3), (-1, 0), True),        # ... and <#4>
        (SOFTMAX, 11, (1, 3), (-1, 0), True),       # derived Ti, declared TA: <TA>
        (SOFTMAX, 12, None, (-1,), True),           # derived T, declared Q: <Q>
        (SOFTMAX, 4, (1, 999), (-1, 0), False),     # no such constant
        (SOFTMAX, 4, (1, 41), (-1, 0), True),       # 12 ...
        (SOFTMAX, 5, (1, 42), (-1, 0), True),       # ... and 12.0: different literals
        (250, 2, None, (-1, -1), False),            # no such op
        (SOFTMAX, 200, None, None, False),          # no such signature
        (SOFTMAX, 3, (2, 3, 2), (-1, -1, 0), False),   # C counts two constants, D has one
        (SOFTMAX, 3, (0,), (-1, -1, -1), True),     # no constants at all, C says so
        (SOFTMAX, 13, None, (-1, 5), True),         # a reference forward
        (SOFTMAX, 13, None, (-1, -300), False),     # a reference before tick 0
    ]
    body = [Instruction(2 + i, a, b, c, d) for i, (a, b, c, d, _) in enumerate(cases)]
    n = len(body) + 2
    nac.instructions = nac.instructions[:2] + body + [Instruction(n, 3, 0, (1, 0), (-1,))]
    return write(nac), {2 + i: made for i, (*_, made) in enumerate(cases)}


def test_ambiguous_tables_list_the_same_every_way(monkeypatch):
    data, _ = _ambiguous()
    _same_every_way(data, monkeypatch)


def test_a_shape_seen_first_on_a_reference_before_tick_0_does_not_decide_later_ones(monkeypatch):
    """v2 refers before tick 0 (raw); the same op, signature and constants later refer back
    properly and must be readable, and vice versa the readable verdict must not make v2's line."""
    nac = small_file()
    nac.perms[4] = "TT"
    body = [Instruction(2, LINEAR, 4, None, (-1, -5)), Instruction(3, LINEAR, 4, None, (-1, -2)),
            Instruction(4, LINEAR, 4, None, (-1, -9))]
    nac.instructions = nac.instructions[:2] + body + [Instruction(5, 3, 0, (1, 0), (-1,))]
    data = write(nac)
    _same_every_way(data, monkeypatch)
    text = disasm.disassemble(read(data, strict=False))
    assert "v2 = raw" in text and "v4 = raw" in text and "v3 = raw" not in text


def test_a_string_that_is_not_utf8_lists_the_same_every_way(monkeypatch):
    nac = small_file()
    nac.cmap[34] = "zzz.op"
    nac.perms[4] = "Ts"
    nac.constants[20] = Constant(20, 4, "qqq")
    nac.instructions = nac.instructions[:4] + [Instruction(4, 34, 2, None, (-1, -2)),
                                               Instruction(5, SOFTMAX, 4, (1, 20), (-1, 0)),
                                               Instruction(6, 3, 0, (1, 0), (-1,))]
    data = write(nac).replace(b"zzz", b"\xed\xa0\x80").replace(b"qqq", b"q\xffq")
    _same_every_way(data, monkeypatch)


def test_a_percent_sign_in_a_line_with_notes_of_its_tick_is_shown_once():
    """A line with notes of its own tick (an MMAP comment) was escaped twice by the template
    path: "%" listed as "%%" (and read back as a different constant)."""
    nac = small_file()
    nac.perms[10] = "A"
    nac.constants[12] = Constant(12, 4, "%")
    nac.instructions = nac.instructions[:2] + [Instruction(2, LINEAR, 10, (1, 12), (0,)),
                                               Instruction(3, 3, 0, (1, 0), (-1,))]
    text = disasm.disassemble(read(write(nac)), mmap_comments=True)
    assert [ln for ln in text.splitlines() if ln.startswith("v2 ")] == \
        ['v2 = aten.linear.default("%")<A>   ; FORWARD v3']


# -- random small files ---------------------------------------------------------------------------
_VALUES = st.one_of(
    st.tuples(st.just(2), st.integers(-2 ** 63, 2 ** 63 - 1) | st.integers(-3, 3)),
    st.tuples(st.just(3), st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1.0, 2.0])),
    st.tuples(st.just(1), st.booleans()),
    st.tuples(st.just(0), st.none()),
    st.tuples(st.just(4), st.text(st.sampled_from('ab_ ,%"\\)<é1'), max_size=5)),
    st.tuples(st.just(5), st.lists(st.integers(-5, 5), max_size=3).map(tuple)),
)


@given(consts=st.lists(_VALUES, min_size=1, max_size=8),
       sigs=st.lists(st.text(st.sampled_from("TifbAsScQ"), min_size=1, max_size=4), min_size=1, max_size=4),
       picks=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1), st.lists(st.integers(-4, 9), max_size=4),
                                st.lists(st.integers(0, 9), max_size=4)), min_size=1, max_size=30))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_random_files_list_the_same_every_way(consts, sigs, picks, monkeypatch):
    nac = small_file()
    for k, sig in enumerate(sigs):
        nac.perms[10 + k] = sig
    for k, (typ, value) in enumerate(consts):
        nac.constants[10 + k] = Constant(10 + k, typ, value)
    body = []
    for i, (s, op, refs, cids) in enumerate(picks, start=2):
        sig = sigs[s % len(sigs)]
        d = tuple(-(1 + (r % i)) if r >= 0 else 0 for r in (refs + [0] * len(sig))[:len(sig)])
        zeros = sum(1 for x in d if x == 0)
        c = ((zeros,) + tuple(10 + x % len(consts) for x in (cids + [0] * zeros)[:zeros])
             if any(ch in "ifbAsSc" for ch in sig) else None)
        body.append(Instruction(i, LINEAR + op, 10 + s % len(sigs), c, d))
    nac.instructions = nac.instructions[:2] + body + [Instruction(len(body) + 2, 3, 0, (1, 0), (-1,))]
    try:
        data = write(nac)
    except (ValueError, UnicodeEncodeError, OverflowError):
        return
    _same_every_way(data, monkeypatch)


# -- the listing assembles back to the same bytes --------------------------------------------------
@pytest.mark.parametrize("repeats", [1, 10 ** 9])
@pytest.mark.parametrize("name", ["ops_distinct", "ambiguous"])
def test_listing_reassembles_byte_identical(name, repeats, monkeypatch):
    data = crafted("ops_distinct", 1) if name == "ops_distinct" else _ambiguous()[0]
    monkeypatch.setattr(disasm, "TEMPLATE_REPEATS", repeats)
    nac = read(data, strict=False)
    text = disasm.disassemble(nac, mmap_comments=True)
    assert write(assemble(text, weights=nac)) == data


def test_corpus_listings_made_one_by_one_reassemble_byte_identical(monkeypatch):
    from tests.corpus_paths import NAC_FILES
    if not NAC_FILES:
        pytest.skip("../shared/corpus is absent")
    monkeypatch.setattr(disasm, "TEMPLATE_REPEATS", 10 ** 9)
    for path in NAC_FILES:
        with read(path) as nac:
            text = disasm.disassemble(nac, mmap_comments=True)
        assert write(assemble(text, weights=str(path))) == path.read_bytes(), path
