"""Hypothesis: generated MIND modules round-trip parse -> print -> parse, canonicalise idempotently,
convert and run equal to the numpy evaluator; generated invalid modules give the broken rule's code."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nac_engine.peers.mind import decode
from nac_engine.peers.mind.canonical import canonical_text, canonicalize, print_module
from nac_engine.peers.mind.evaluator import evaluate, random_inputs
from nac_engine.peers.mind.parser import parse
from nac_engine.peers.mind.verifier import RULES, verify_module
from tests.peers.mind_strategies import invalid_modules, valid_modules

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _key(mod):
    return ([(i.vid, i.opcode, i.operands, i.params, i.attrs, i.type) for i in mod.instrs], mod.outputs)


@SETTINGS
@given(valid_modules(dtypes=("f32", "i64")))
def test_round_trip_parse_print_parse(mod):
    text = print_module(mod)
    parsed = parse(text.encode(), strict=True).module
    assert _key(parsed) == _key(mod)
    assert print_module(parsed) == text
    assert verify_module(parsed).problems == []


@SETTINGS
@given(valid_modules(dtypes=("f32", "i64")))
def test_canonicalise_is_idempotent_and_keeps_values(mod):
    once = canonical_text(mod)
    again = parse(once.encode(), strict=True).module
    assert canonical_text(again) == once
    canon = canonicalize(mod)
    # inputs first, ids dense, commutative operands ascending
    kinds = [i.opcode == "Input" for i in canon.instrs]
    assert kinds == sorted(kinds, reverse=True)
    assert [i.vid for i in canon.instrs] == list(range(len(canon.instrs)))
    for i in canon.instrs:
        if i.opcode == "BinOp" and i.params["op"] in ("Add", "Mul"):
            assert i.operands == sorted(i.operands)
    x = random_inputs(mod, seed=1)
    for a, b in zip(evaluate(mod, x), evaluate(canon, x)):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_modules(dtypes=("f32", "i64", "i32", "f64")), st.integers(0, 2 ** 16))
def test_convert_and_run_equal_to_evaluator(mod, seed):
    import nac_engine
    from nac_engine.peers.mind.convert import convert_module
    res = convert_module(mod)
    x = random_inputs(mod, seed=seed)
    ref = evaluate(mod, x)
    got = nac_engine.run(res.nac, inputs=x)
    for r, g in zip(ref, got):
        assert r.shape == g.shape and r.dtype == g.dtype, (r.shape, g.shape, r.dtype, g.dtype)
        finite = np.abs(r[np.isfinite(r)]) if r.dtype.kind == "f" else np.abs(r)
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * (1 + float(np.max(finite, initial=0))))
    # every tick of the program maps to the line of an IR instruction or the outputs line
    assert set(res.tick_lines) == set(range(len(res.nac.instructions)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(invalid_modules())
def test_one_broken_rule_gives_its_code(case):
    text, rule = case
    f = decode(text.encode())
    rules = {p.rule for p in f.problems}
    assert rules == {rule}, (rules, text)
    assert {p.code for p in f.problems} == {RULES[rule][0]}


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_modules(max_ops=12, dtypes=("f32", "i64", "i32", "f64")), st.integers(0, 2 ** 16))
def test_convert_and_run_equal_to_evaluator_long(mod, seed):
    test_convert_and_run_equal_to_evaluator.hypothesis.inner_test(mod, seed)
