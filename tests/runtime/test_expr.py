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
    ("x.__class__", 3, "no attribute '__class__'"),
    ("foo(x)", 1, "unknown function"),
    ("y > 1", 1, "unknown name"),
    ("max(x", 6, "expected ')'"),
    ("1 +", 4, "end of expression"),
    ("x < 1 < 2", 7, "chained"),
    ("mean(x) ; 1", 9, "character ';'"),
    ("abs(x, x)", 1, "takes 1"),
    ("x[]", 3, "expected an index"),
    ("x[0", 4, "expected ']'"),
    ("x[..., ...]", 8, "only one '...'"),
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


def test_indexing_is_numpys_basic_indexing():
    """A watch on one row or one element (v12[0, -1, :8]) as a numpy user writes it."""
    t = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    for text, want in (("x[0, -1, :2]", t[0, -1, :2]), ("x[..., 1]", t[..., 1]), ("x[1][2][3]", t[1, 2, 3]),
                       ("x[:, 1:3, ::2]", t[:, 1:3, ::2]), ("x[0, argmax(x[0, :, 0])]", t[0, 2]),
                       ("-x[1, 0, 0] + 1", -t[1, 0, 0] + 1), ("x[1.0, 0]", t[1, 0]), ("x[:]", t)):
        assert torch.equal(torch.as_tensor(ev(text, t)), want), text
    assert compile_expr("max(abs(x[0, :, 1])) > 8").test(lambda name: t)
    assert compile_expr("t12[0] + x[1, 0, 0]").names == {"t12", "x"}
    for text, words in (("x[0, 3]", "index 3 is out of range for dimension 1 of size 3"),
                        ("x[..., 4]", "index 4 is out of range for dimension 2 of size 4"),
                        ("x[0, 0, 0, 0]", "4 indices for a tensor of 3 dimension(s)"),
                        ("x[0.5]", "must be a whole number"), ("x[x]", "must be a whole number"),
                        ("x[::-1]", "step must be positive"), ("(1 + 2)[0]", "only a tensor with dimensions")):
        with pytest.raises(ExprError, match=words.replace("(", r"\(").replace(")", r"\)")):
            ev(text, t)


def test_reductions_along_a_dimension_and_more_functions():
    t = torch.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    assert torch.allclose(ev("mean(x, -1)", t), t.mean(-1))
    assert torch.allclose(ev("sum(x, 0)", t), t.sum(0))
    assert torch.allclose(ev("std(x, 1)", t), t.std(1, correction=0))
    assert ev("argmax(x)", t).item() == 5 and ev("argmin(x, 1)", t).tolist() == [0, 1]
    assert ev("tanh(0) + sigmoid(0) + cos(0) + sin(0)", t).item() == pytest.approx(1.5)
    with pytest.raises(ExprError, match="a dimension must be a whole number"):
        ev("mean(x, 0.5)", t)


def test_shape_is_a_function_and_attributes_say_so():
    t = torch.zeros(2, 3, 5)
    assert ev("shape(x)[2] * numel(x[0])", t).item() == 75
    for text, words in (("x.T", "values have no attribute 'T'"), ("x.dtype", "values have no attribute 'dtype'"),
                        ("x.mean", "call it: x.f() means f(x)"), ("x.__class__", "no attribute '__class__'"),
                        ("x.flatten()", "no method 'flatten'"), ("x.abs().__dict__", "no attribute '__dict__'"),
                        ("x.mean(0, 1)", "mean() takes 0 or 1 argument(s), got 2"), ("x.", "expected a method"),
                        ("(x).1", "unexpected")):
        with pytest.raises(ExprError, match=words.replace("(", r"\(").replace(")", r"\)")):
            Expr(text, extra_names=["fc1.weight"])


def test_methods_and_shape_read_as_the_functions_a_pytorch_user_means():
    """``x.abs().max()`` is ``max(abs(x))``: the sugar maps to the same whitelisted functions (no
    attribute of any object is looked up), on ticks, parameters and results of calls alike."""
    t = torch.tensor([[1.0, -5.0, 3.0], [4.0, 2.0, -6.0]])
    w = torch.tensor([[0.5, -0.25]])
    lookup = {"x": t, "v3": t * 2, "fc1.weight": w}.__getitem__
    for sugar, plain in (("x.abs().max()", "max(abs(x))"), ("x.mean(-1)", "mean(x, -1)"),
                         ("x.shape", "shape(x)"), ("x.size()[1]", "shape(x)[1]"), ("v3.sum()", "sum(v3)"),
                         ("fc1.weight.abs().sum()", "sum(abs(fc1.weight))"), ("fc1.weight.shape[1]", "shape(fc1.weight)[1]"),
                         ("x[1].argmax()", "argmax(x[1])"), ("(x * 2).min()", "min(x * 2)"),
                         ("x.max(v3).sum() > 0 and x.isnan().any() == false", "sum(max(x, v3)) > 0 and any(isnan(x)) == false"),
                         ("x.numel()", "numel(x)")):
        a = Expr(sugar, extra_names=["fc1.weight"]).evaluate(lookup)
        b = Expr(plain, extra_names=["fc1.weight"]).evaluate(lookup)
        assert torch.equal(torch.as_tensor(a), torch.as_tensor(b)), (sugar, a, b)
    assert Expr("v3.mean() + x.std()").names == {"v3", "x"}


def test_completions_replace_the_name_typed_before_the_cursor():
    from nac_engine.runtime.expr import completions
    assert completions("max(ab", 6) == (4, [("abs(", "function")])
    assert completions("mean(enc) + 1", 8, ["encoder.w", "enc2", "dec"]) == (5, [("enc2", "variable"), ("encoder.w", "variable")])
    assert completions("1e", 2) == (2, []) and completions("x + 2.5e", 8) == (8, [])
    start, found = completions("", 0, ["p"])
    assert start == 0 and ("x", "value") in found and ("p", "variable") in found and ("mean(", "function") in found
    assert completions("abs", 99)[0] == 0                    # a cursor past the end is the end
    # after a value and a dot: the methods (and shape), replacing what follows the dot
    assert completions("x.me", 4) == (2, [("mean(", "function")])
    assert completions("fc1.weight.s", 12, ["fc1.weight"]) == \
        (11, [("sigmoid(", "function"), ("sin(", "function"), ("size(", "function"), ("sqrt(", "function"),
              ("std(", "function"), ("sum(", "function"), ("shape", "value")])
    assert completions("x.abs().ma", 10) == (8, [("max(", "function")])
    assert completions("v12[0].", 7)[1][0] == ("abs(", "function")
    assert completions("fc1.we", 6, ["fc1.weight"]) == (0, [("fc1.weight", "variable")])   # a dotted name still
    # a long line costs a short look back, not a scan of all of it
    import time
    text = "a" * 2_000_000 + "("
    t = time.perf_counter()
    assert completions(text, len(text)) [1][0] == ("abs(", "function")
    assert time.perf_counter() - t < 2.0
