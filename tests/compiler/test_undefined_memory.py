"""Uninitialised memory (``torch.empty`` and its family) is never evaluated at compile time: its
contents would be baked into the file and every compile would write different bytes. Overwriting
all of it (``fill_``, ``copy_``, ``zero_``) makes a constant again."""
from __future__ import annotations

import torch
from torch import nn

import nac_engine
from nac_engine.compiler import compile_model
from nac_engine.compiler.export import export_program, to_graph
from nac_engine.compiler.graph import Graph, TensorSpec
from nac_engine.compiler.passes import eliminate_dead_code, fold_constants
from nac_engine.compiler.passes.common import has_side_effect, is_pure, undefined_result
from tests.compiler.helpers import compile_and_check

aten = torch.ops.aten
EMPTY_FAMILY = (aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default,
                aten.empty_strided.default, aten.new_empty_strided.default, aten.empty_permuted.default)


class PiecewiseFill(nn.Module):
    """/tmp/review/empty_fold.py: an empty buffer written in two halves from the input."""

    def forward(self, x):
        out = torch.empty(64, 8)
        out[:, :4] = x
        out[:, 4:] = 2 * x
        return out


class FullOverwrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.randn(4, 3))

    def forward(self, x):
        a = torch.empty(4, 3).fill_(2.0)
        b = torch.empty_like(x).copy_(self.b)
        c = torch.empty(4, 3).zero_()
        d = x.new_empty(4, 3)
        d.fill_(torch.tensor(1.5))
        return x + a + b + c + d, torch.empty(2, 4, 3).copy_(self.b)


def _dirty_allocator():
    # Freed blocks full of large values: what a fresh torch.empty is likely to hand out next.
    junk = [torch.full((64, 8), 1e6 + k) for k in range(50)]
    del junk


def _op_names(nac) -> list[str]:
    return [nac.instruction_name(i) for i in nac.instructions]


def test_empty_family_is_not_pure_but_not_a_side_effect_either():
    for op in EMPTY_FAMILY:
        assert undefined_result(op) and not is_pure(op), op
    for op in (aten.zeros.default, aten.full.default, aten.fill.Scalar, aten.new_zeros.default):
        assert not undefined_result(op) and is_pure(op), op
    assert not is_pure(aten.rand.default) and not is_pure(aten.bernoulli.p)    # nondeterministic_seeded

    g = Graph()
    x = g.append(g.new_node("input", "x", spec=TensorSpec((4,), torch.float32)))
    e = g.append(g.new_node("op", "e", target=aten.empty.memory_format, args=([4],),
                            spec=TensorSpec((4,), torch.float32)))
    g.outputs = [x]
    assert not has_side_effect(e)
    assert eliminate_dead_code(g) == 1 and [n.name for n in g.nodes] == ["x"]


def test_fold_constants_leaves_empty_alone():
    g = to_graph(export_program(PiecewiseFill(), (torch.randn(64, 4),)))
    fold_constants(g)
    eliminate_dead_code(g)
    assert not [n for n in g.params if n.origin == "folded"], g.dump()
    assert "aten.empty.memory_format" in [n.op_name for n in g.ops]


def test_empty_written_piecewise_compiles_to_the_same_bytes_every_time_and_runs():
    x = torch.randn(64, 4)
    blobs = []
    for _ in range(3):
        _dirty_allocator()
        res = compile_model(PiecewiseFill(), (x,))
        assert not any("empty" in p.name for p in res.nac.params.values())
        blobs.append(nac_engine.write(res.nac))
    assert blobs[0] == blobs[1] == blobs[2]
    c = compile_and_check(PiecewiseFill(), (x,))
    assert "aten.empty.memory_format" in _op_names(c.nac)


def test_empty_then_full_overwrite_still_folds_and_runs():
    torch.manual_seed(0)
    model, x = FullOverwrite(), torch.randn(4, 3)
    g = to_graph(export_program(model, (x,)))
    fold_constants(g)
    eliminate_dead_code(g)
    assert not any(undefined_result(n.target) for n in g.ops), g.dump()

    blobs = []
    for _ in range(3):
        _dirty_allocator()
        blobs.append(nac_engine.write(compile_model(model, (x,)).nac))
    assert blobs[0] == blobs[1] == blobs[2]
    c = compile_and_check(model, (x,))
    assert not any("empty" in n for n in _op_names(c.nac))
