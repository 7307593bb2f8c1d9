"""The debugger's expression language: our own parser, a fixed function whitelist, no eval."""
import math

import pytest
import torch

from nac_engine.runtime.expr import Expr, ExprError, compile_expr


def ev(text, x=None, **ticks):
    env = {"x": x, **ticks}
    return compile_expr(text).evaluate(lambda name: env[name])


X = torch.tensor([[1.0, -2.0], [3.0, -4000.0]])


@pytest.mark.parametrize("text, want", [
    ("max(abs(x)) > 1e3", True),
    ("mean(x) < 0", True),
    ("any(isnan(x))", False),
    ("not any(isnan(x)) and all(isfinite(x))", True),
    ("count_nan(x) == 0 or 1/0 > 0", True),
    ("min(x) >= -4000", True),
    ("-(1 + 2) * 3 == -9", True),
    ("2 - 3 - 4 == -5", True),       # left-associative
    ("8 / 2 / 2 == 2", True),
    ("numel(x) != 4", False),
    ("max(min(x), -1) == -1", True),
    ("(.5 + 1.5e0) <= 2", True),
])
def test_examples_evaluate(text, want):
    assert compile_expr(text).test(lambda name: X) is want


def test_values_and_functions():
    assert ev("sum(x)", X).item() == pytest.approx(1 - 2 + 3 - 4000)
    assert ev("std(x)", X).item() == pytest.approx(X.double().std(correction=0).item())
    assert ev("norm(x)", X).item() == pytest.approx(float(torch.linalg.vector_norm(X.double())))
    assert ev("mean(x)", torch.tensor([1, 2], dtype=torch.int64)).item() == 1.5   # ints reduce as float
    assert ev("count_nan(log(x))", torch.tensor([1.0, -1.0])).item() == 1
    assert math.isinf(ev("1 / 0")) and math.isnan(ev("nan"))
    assert ev("t3 + 1", t3=torch.tensor(2.0)).item() == 3.0


def test_names_reported():
    assert compile_expr("x + t12 > t3").names == {"x", "t12", "t3"}


@pytest.mark.parametrize("text, column, words", [
    ("__import__('os')", 1, "unknown function"),
    ("x.__class__", 2, "attribute access"),
    ("foo(x)", 1, "unknown function"),
    ("y > 1", 1, "unknown name"),
    ("max(x", 6, "expected ')'"),
    ("1 +", 4, "end of expression"),
    ("x < 1 < 2", 7, "chained"),
    ("mean(x) ; 1", 9, "character ';'"),
    ("abs(x, x)", 1, "takes 1"),
    ("x[0]", 2, "character '['"),
    ("lambda: 1", 1, "unknown name"),
    ("", 1, "end of expression"),
    ("x ** 2", 4, "symbol '*'"),
])
def test_bad_input_names_the_column(text, column, words):
    with pytest.raises(ExprError) as err:
        Expr(text)
    assert err.value.column == column
    assert words in str(err.value)


def test_multi_element_condition_is_an_error_not_a_guess():
    with pytest.raises(ExprError, match="any\\(\\) or all\\(\\)"):
        compile_expr("x > 0").test(lambda name: X)


def test_evaluation_errors_are_expr_errors():
    with pytest.raises(ExprError) as err:
        ev("max(x)", torch.tensor([]))
    assert err.value.column is None
