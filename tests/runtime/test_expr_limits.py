"""Hostile breakpoint conditions: deep nesting is an ExprError with a short message, never a
RecursionError (the recursive-descent parser and the evaluator are bounded)."""
import pytest

from nac_engine.runtime.expr import MAX_NESTING, MAX_TREE_DEPTH, ExprError, compile_expr


@pytest.mark.parametrize("text", ["(" * 150 + "1" + ")" * 150 + " > 2", "not " * 5000 + "x", "-" * 5000 + "x",
                                  "+".join(["1"] * 5000), "max(" * 200 + "x" + ")" * 200])
def test_deep_expressions_are_refused_briefly(text):
    with pytest.raises(ExprError) as info:
        compile_expr(text)
    assert "deep" in str(info.value) and len(str(info.value)) < 300


def test_reasonable_nesting_still_works():
    e = compile_expr("(" * (MAX_NESTING - 1) + "1" + ")" * (MAX_NESTING - 1) + " + " + "+".join(["1"] * 100))
    assert e.evaluate(lambda n: None) == 101
    assert MAX_TREE_DEPTH >= 100
