"""Flattened Tensor[] arguments: ops whose lists the interpreter cannot regroup are decomposed, the rest
read back as written (checked at compile time), and what can be neither is refused with the user's line."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from nac_engine.compiler import CompileError, compile_model
from nac_engine.compiler import export as export_mod
from nac_engine.compiler import pipeline
from nac_engine.compiler.export import to_graph, trace_program
from nac_engine.compiler.tensor_lists import regroup_problems
from tests.compiler.helpers import compile_and_check


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


class LSTMNoState(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True, bidirectional=True)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return y, h, c


class LSTMGivenState(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 5)

    def forward(self, x, h, c):
        y, (hn, cn) = self.lstm(x, (h, c))      # the line a refusal must point at
        return y, hn, cn


class Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(6, 5)
        self.gru = nn.GRUCell(6, 5)

    def forward(self, x, h, c):
        h1, c1 = self.lstm(x, (h, c))
        return h1, c1, self.gru(x, h1)


class IndexPutAccumulate(nn.Module):
    def forward(self, x, i, v):
        return x.index_put((i,), v, accumulate=True)


class Lists(nn.Module):
    def forward(self, x, i):
        y = torch.cat([x, x * 2], 1)
        z = torch.stack([x, y[:, :4]], 0)
        return z[:, i], y.index_put((i,), torch.ones(8), accumulate=True), x[None, i]


def _lstm_given_state_args():
    return torch.randn(4, 3, 6), torch.randn(1, 3, 5), torch.randn(1, 3, 5)


def test_lstm_without_state_matches_eager():
    c = compile_and_check(LSTMNoState(), (torch.randn(3, 4, 8),))
    names = {c.nac.instruction_name(i) for i in c.nac.instructions}
    assert not any("lstm" in n for n in names), names


def test_lstm_with_given_state_matches_eager():
    c = compile_and_check(LSTMGivenState(), _lstm_given_state_args())
    assert not any("lstm" in c.nac.instruction_name(i) for i in c.nac.instructions)


def test_lstm_cell_matches_eager_and_gru_cell_stays_one_op():
    c = compile_and_check(Cells(), (torch.randn(3, 6), torch.randn(3, 5), torch.randn(3, 5)))
    names = [c.nac.instruction_name(i) for i in c.nac.instructions]
    assert "aten.gru_cell.default" in names           # one tensor hx, no list: regroups uniquely
    assert not any("lstm" in n for n in names)


def test_index_put_accumulate_matches_eager():
    args = (torch.randn(4, 4), torch.tensor([0, 2, 0]), torch.randn(3, 4))
    c = compile_and_check(IndexPutAccumulate(), args)
    assert any(c.nac.instruction_name(i) == "aten.index_put.default" for i in c.nac.instructions)


def test_check_flags_lstm_and_accepts_unambiguous_lists():
    raw = trace_program(LSTMGivenState(), _lstm_given_state_args()).run_decompositions({})
    problems = regroup_problems(to_graph(raw))
    assert [str(p.op) for p in problems] == ["aten.lstm.input"]
    assert "hx" in problems[0].reason or "params" in problems[0].reason, problems[0].reason

    model, args = Lists(), (torch.randn(4, 4), torch.tensor([3, 0]))
    graph = to_graph(trace_program(model, args).run_decompositions({}))
    listed = {n.op_name for n in graph.ops if any(isinstance(a, (list, tuple)) for a in n.args)}
    assert {"aten.cat.default", "aten.stack.default", "aten.index.Tensor", "aten.index_put.default"} <= listed
    assert regroup_problems(graph) == []
    compile_and_check(model, args)


def test_safety_net_decomposes_an_ambiguous_op_missing_from_the_table(monkeypatch):
    monkeypatch.setattr(export_mod, "LIST_AMBIGUOUS_OPS", {})
    c = compile_and_check(LSTMGivenState(), _lstm_given_state_args())
    assert any("aten.lstm.input decomposed" in w for w in c.result.report.warnings), c.result.report.warnings
    assert not any("lstm" in c.nac.instruction_name(i) for i in c.nac.instructions)


def test_ambiguous_op_without_decomposition_is_refused_with_the_users_line(monkeypatch):
    monkeypatch.setattr(export_mod, "LIST_AMBIGUOUS_OPS", {})
    monkeypatch.setattr(pipeline, "decomposition_for", lambda op: None)
    with pytest.raises(CompileError) as info:
        compile_model(LSTMGivenState(), _lstm_given_state_args())
    e = info.value
    assert "aten.lstm.input" in str(e) and "no decomposition" in str(e)
    assert e.source is not None and "test_tensor_lists.py" in e.source
    assert e.source.endswith("# the line a refusal must point at")
