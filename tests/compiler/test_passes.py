"""Each optimiser pass on its own: instruction counts before/after and unchanged numerics.

Graphs come from real exports of tiny modules (the patterns torch actually produces) or are built
by hand where export would not produce the pattern. ``Graph.evaluate`` is the reference: the
graph after a pass must compute exactly what it computed before.
"""
from __future__ import annotations

import operator

import torch
from torch import nn

from nac_engine.compiler.export import export_program, to_graph
from nac_engine.compiler.graph import Graph, TensorSpec
from nac_engine.compiler.passes import (eliminate_common_subexpressions, eliminate_dead_code, fold_constants,
                                        optimize, remove_identities, remove_inverse_pairs, simplify_algebra,
                                        simplify_constant_index)

aten = torch.ops.aten


def exported(fn_or_module, *inputs) -> Graph:
    module = fn_or_module if isinstance(fn_or_module, nn.Module) else _Wrap(fn_or_module)
    return to_graph(export_program(module, inputs))


class _Wrap(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def run_pass(pass_fn, graph: Graph, *inputs):
    """Apply ``pass_fn`` (+ the dead code it leaves); return (rewrites, before, after) and check numerics."""
    before_graph = graph.copy()
    expected = before_graph.evaluate(*inputs)
    before = graph.instruction_count()
    rewrites = pass_fn(graph)
    eliminate_dead_code(graph)
    graph.check()
    got = graph.evaluate(*inputs)
    for e, g in zip(expected, got):
        assert e.dtype == g.dtype and e.shape == g.shape
        torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)
    return rewrites, before, graph.instruction_count()


def ops_of(graph: Graph) -> list[str]:
    return [n.op_name for n in graph.ops]


# --------------------------------------------------------------------------- hand-built graphs
def hand_graph():
    g = Graph()
    x = g.append(g.new_node("input", "x", spec=TensorSpec((4, 4), torch.float32)))
    return g, x


def op(g, name, target, *args, spec=None, **kwargs):
    return g.append(g.new_node("op", name, target=target, args=args, kwargs=kwargs, spec=spec))


def param(g, name, tensor):
    from nac_engine.compiler.graph import spec_of_value
    return g.append(g.new_node("param", name, spec=spec_of_value(tensor), tensor=tensor, origin="parameter"))


F44 = TensorSpec((4, 4), torch.float32)


# --------------------------------------------------------------------------- dead code
def test_dead_code_removes_unread_ops_and_params_keeps_inputs():
    g, x = hand_graph()
    y = g.append(g.new_node("input", "unused_input", spec=F44))
    w = param(g, "w", torch.ones(4, 4))
    dead = op(g, "dead", aten.mul.Tensor, x, w, spec=F44)
    op(g, "dead2", aten.relu.default, dead, spec=F44)
    live = op(g, "live", aten.add.Tensor, x, 1.0, spec=F44)
    g.outputs = [live]
    x_val, y_val = torch.randn(4, 4), torch.randn(4, 4)
    rewrites, before, after = run_pass(eliminate_dead_code, g, x_val, y_val)
    assert (rewrites, before, after) == (3, 7, 4)
    assert [n.name for n in g.nodes] == ["x", "unused_input", "live"]
    assert y in g.nodes


def test_dead_code_keeps_side_effects():
    g, x = hand_graph()
    op(g, "check", aten._assert_tensor_metadata.default, x, None, None, torch.float32)
    g.outputs = [op(g, "r", aten.relu.default, x, spec=F44)]
    assert eliminate_dead_code(g) == 0


# --------------------------------------------------------------------------- identities
def test_identities_from_export_dropout_contiguous_clone_to_same_dtype_asserts():
    drop = nn.Dropout(0.5).eval()

    def f(x):
        y = drop(x).contiguous().clone().to(torch.float32)
        return y.reshape(2, 3).view(2, 3).transpose(1, 1) + 1
    g = exported(f, torch.randn(2, 3))
    assert any("clone" in o for o in ops_of(g))
    rewrites, before, after = run_pass(remove_identities, g, torch.randn(2, 3))
    assert rewrites >= 3 and after == 3, g.dump()    # input, add, output
    assert ops_of(g) == ["aten.add.Tensor"]


def test_identities_keep_real_changes():
    g, x = hand_graph()
    t = op(g, "t", aten.transpose.int, x, 0, 1, spec=F44)                 # square: same shape, other values
    c = op(g, "c", aten._to_copy.default, t, dtype=torch.float64, spec=TensorSpec((4, 4), torch.float64))
    v = op(g, "v", aten.reshape.default, c, [16], spec=TensorSpec((16,), torch.float64))
    g.outputs = [v]
    assert run_pass(remove_identities, g, torch.randn(4, 4)) == (0, 5, 5)


def test_identities_drop_same_shape_views_and_identity_permute():
    g, x = hand_graph()
    a = op(g, "a", aten.permute.default, x, [0, 1], spec=F44)
    b = op(g, "b", aten.view.default, a, [4, 4], spec=F44)
    c = op(g, "c", aten.slice.Tensor, b, 0, 0, 9223372036854775807, spec=F44)
    d = op(g, "d", aten.expand.default, c, [4, -1], spec=F44)
    g.outputs = [op(g, "e", aten.relu.default, d, spec=F44)]
    assert run_pass(remove_identities, g, torch.randn(4, 4)) == (4, 7, 3)


# --------------------------------------------------------------------------- inverse pairs
def test_inverse_pairs_transpose_permute_view_neg():
    def f(x):
        a = x.transpose(0, 2).transpose(2, 0)
        b = a.permute(2, 0, 1).permute(1, 2, 0)
        c = b.view(6, 4).view(2, 3, 4)
        return -(-c)
    g = exported(f, torch.randn(2, 3, 4))
    before_ops = len(g.ops)
    rewrites, before, after = run_pass(remove_inverse_pairs, g, torch.randn(2, 3, 4))
    assert before_ops == 8 and rewrites >= 4
    assert after == 2 and ops_of(g) == [], g.dump()    # the output is the input itself


def test_inverse_pairs_collapse_reshape_chains_and_keep_non_inverses():
    def f(x):
        a = x.transpose(0, 1).transpose(1, 2)        # not an inverse pair
        return a, x.view(6, 4).unsqueeze(0).view(4, 6)
    g = exported(f, torch.randn(2, 3, 4))
    rewrites, before, after = run_pass(remove_inverse_pairs, g, torch.randn(2, 3, 4))
    assert rewrites == 1 and before - after == 1     # view(unsqueeze(view(x))) -> view(x): two reshapes die
    assert ops_of(g).count("aten.transpose.int") == 2


# --------------------------------------------------------------------------- algebra
def test_algebraic_neutral_elements():
    def f(x):
        return ((x * 1) + 0 - 0) / 1, 1 * x + torch.zeros(3), x ** 1
    g = exported(f, torch.randn(2, 3))
    assert len(g.ops) >= 7
    rewrites, before, after = run_pass(simplify_algebra, g, torch.randn(2, 3))
    assert rewrites >= 6, g.dump()
    # zeros(3) is an op, not a known value, until constant folding turns it into a parameter
    assert ops_of(g) == ["aten.zeros.default", "aten.add.Tensor"], g.dump()
    g2 = exported(f, torch.randn(2, 3))
    optimize(g2)
    assert ops_of(g2) == [], g2.dump()


def test_algebraic_keeps_promotion_broadcast_and_times_zero():
    g = Graph()
    i = g.append(g.new_node("input", "i", spec=TensorSpec((3,), torch.int64)))
    x = g.append(g.new_node("input", "x", spec=TensorSpec((3,), torch.float32)))
    a = op(g, "a", aten.mul.Tensor, i, 1.0, spec=TensorSpec((3,), torch.float32))        # int -> float
    z = param(g, "z", torch.zeros(2, 3))
    b = op(g, "b", aten.add.Tensor, x, z, spec=TensorSpec((2, 3), torch.float32))       # broadcasts
    c = op(g, "c", aten.mul.Tensor, x, 0, spec=TensorSpec((3,), torch.float32))         # inf * 0 is nan
    g.outputs = [a, b, c]
    xs = (torch.tensor([1, 2, 3]), torch.tensor([1.0, float("inf"), 2.0]))
    assert run_pass(simplify_algebra, g, *xs)[0] == 0


# --------------------------------------------------------------------------- constant folding
class _Folding(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.register_buffer("big", torch.randn(8))

    def forward(self, x):
        mask = torch.arange(4).unsqueeze(0) <= torch.arange(4).unsqueeze(1)    # causal mask from nothing
        w2 = self.w * 2.0 + 1.0
        huge = self.big.expand(64, 64, 8)                                      # would bloat the file
        return torch.where(mask, x @ w2, 0.0), (huge * x.sum()).sum()


def test_fold_constants_folds_weights_and_masks_not_expansions():
    g = exported(_Folding(), torch.randn(4, 4))
    rewrites, before, after = run_pass(fold_constants, g, torch.randn(4, 4))
    assert rewrites == 2, g.dump()             # w2 and the mask
    folded = [n for n in g.params if n.origin == "folded"]
    assert sorted(str(n.spec.dtype) for n in folded) == ["torch.bool", "torch.float32"]
    assert "aten.expand.default" in ops_of(g)  # 64*64*8 floats stay computed
    assert not any(o.startswith("aten.arange") for o in ops_of(g))
    assert after < before


def test_fold_constants_never_folds_random_ops():
    g, x = hand_graph()
    r = op(g, "r", aten.rand.default, [4, 4], spec=F44)
    g.outputs = [op(g, "s", aten.add.Tensor, x, r, spec=F44)]
    assert fold_constants(g) == 0


# --------------------------------------------------------------------------- CSE
def test_cse_merges_identical_ops_only():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) + self.lin(x), (x + 1) * (x + 1.0), torch.softmax(x, -1) - torch.softmax(x, 0)
    g = exported(M(), torch.randn(3, 4))
    rewrites, before, after = run_pass(eliminate_common_subexpressions, g, torch.randn(3, 4))
    assert rewrites == 1 and before - after == 1, g.dump()   # the two linears; 1 vs 1.0 and dims differ
    assert ops_of(g).count("aten.linear.default") == 1


def test_cse_leaves_random_ops():
    g, x = hand_graph()
    a = op(g, "a", aten.rand_like.default, x, spec=F44)
    b = op(g, "b", aten.rand_like.default, x, spec=F44)
    g.outputs = [op(g, "c", aten.sub.Tensor, a, b, spec=F44)]
    assert eliminate_common_subexpressions(g) == 0


# --------------------------------------------------------------------------- constant indexing
def test_constant_index_all_dims_becomes_take():
    g = Graph()
    m = g.append(g.new_node("input", "m", spec=TensorSpec((2, 5), torch.float32)))
    i0 = param(g, "i0", torch.tensor([[0], [1]]))
    i1 = param(g, "i1", torch.tensor([[4, -1, 0]]))
    out = op(g, "idx", aten.index.Tensor, m, [i0, i1], spec=TensorSpec((2, 3), torch.float32))
    g.outputs = [out]
    assert run_pass(simplify_constant_index, g, torch.randn(2, 5))[:1] == (1,)
    assert ops_of(g) == ["aten.take.default"]


def test_constant_index_one_dim_becomes_index_select():
    g = Graph()
    m = g.append(g.new_node("input", "m", spec=TensorSpec((2, 5, 3), torch.float32)))
    i1 = param(g, "i1", torch.tensor([[4, -1], [0, 2]]))
    g.outputs = [op(g, "idx", aten.index.Tensor, m, [None, i1], spec=TensorSpec((2, 2, 2, 3), torch.float32))]
    assert run_pass(simplify_constant_index, g, torch.randn(2, 5, 3))[0] == 1
    assert ops_of(g) == ["aten.index_select.default", "aten.view.default"]


def test_constant_index_leaves_dynamic_and_bool_indices():
    g = Graph()
    m = g.append(g.new_node("input", "m", spec=TensorSpec((4,), torch.float32)))
    i = g.append(g.new_node("input", "i", spec=TensorSpec((2,), torch.int64)))
    b = param(g, "b", torch.tensor([True, False, True, False]))
    g.outputs = [op(g, "a", aten.index.Tensor, m, [i], spec=TensorSpec((2,), torch.float32)),
                 op(g, "c", aten.index.Tensor, m, [b], spec=TensorSpec((2,), torch.float32))]
    assert simplify_constant_index(g) == 0


# --------------------------------------------------------------------------- the driver
def test_optimize_reports_every_pass_and_reaches_a_fixpoint():
    def f(x):
        y = x.transpose(0, 1).transpose(0, 1).contiguous() * 1
        return y + torch.arange(3.0)
    g = exported(f, torch.randn(2, 3))
    ref = g.copy().evaluate(torch.ones(2, 3))
    stats = optimize(g)
    assert [s.name for s in stats[:7]] == ["dead_code", "identities", "inverse_pairs", "algebraic",
                                           "fold_constants", "constant_index", "cse"]
    assert all(s.before >= s.after for s in stats)
    assert stats[-1].rewrites == 0 and all(s.rewrites == 0 for s in stats if s.round == stats[-1].round)
    assert ops_of(g) == ["aten.add.Tensor"]
    assert torch.equal(g.evaluate(torch.ones(2, 3))[0], ref[0])


def test_getitem_targets_are_kept_pure():
    assert operator.getitem in {n.target for n in exported(lambda x: torch.split(x, 2)[1] * 2, torch.randn(4)).ops}


def test_a_tensor_lifted_twice_is_one_parameter():
    lin = nn.Linear(4, 4)          # captured by a closure: export lifts its tensors once per use

    def f(x):
        return lin(x) + lin(x)
    g = exported(f, torch.randn(3, 4))
    assert len(g.params) == 2
    assert eliminate_common_subexpressions(g) == 1


def test_contiguous_before_view_goes_and_the_view_still_evaluates():
    def f(x):
        return x.transpose(0, 1).contiguous().view(12)
    g = exported(f, torch.randn(3, 4))
    rewrites, before, after = run_pass(remove_identities, g, torch.randn(3, 4))
    assert rewrites == 1 and ops_of(g) == ["aten.transpose.int", "aten.view.default"]
