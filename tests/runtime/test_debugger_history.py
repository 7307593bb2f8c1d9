"""The debugger's step-back history holds activations only: a parameter tick's value is the
session's loaded weight (at hand, never evicted, never counted against the budget), so a budget
that fits the activations steps back over a whole run without recomputing anything, and every
value seen on the way back equals a stepping session's."""
from __future__ import annotations

import numpy as np
import torch

import nac_engine
from nac_engine.isa.optable import OP_INPUT
from nac_engine.runtime.debugger import Debugger
from nac_engine.runtime.history import nbytes
from nac_engine.runtime.session import Session, to_numpy


class Stack(torch.nn.Module):
    def __init__(self, width: int = 64, depth: int = 4):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def _model():
    torch.manual_seed(0)
    x = torch.randn(4, 64)
    return nac_engine.compile(Stack().eval(), (x,)), [x.numpy()]


def test_parameters_stay_out_of_the_history_and_step_back_never_recomputes():
    nac, feeds = _model()
    stepped = Session(nac, feeds=feeds)
    while not stepped.finished:
        stepped.run_instruction(stepped.tick)
    params = {i.index for i in nac.instructions if i.a == OP_INPUT and i.b == 1}
    weights = sum(nbytes(stepped.results[t]) for t in params)
    activations = sum(nbytes(v) for t, v in stepped.results.items() if t not in params)
    assert weights > 2 * activations            # the budget below holds the activations, not the weights
    d = Debugger(nac, feeds=feeds, history_bytes=activations + 1024)
    d.continue_()
    assert not params & {t for t in range(len(nac.instructions)) if t in d.history}
    assert d.history.evicted == 0 and d.history.total <= activations
    executed = []
    original = d.session.execute
    d.session.execute = lambda i: executed.append(i) or original(i)
    while d.tick >= 0:                          # back over the whole run: values equal, nothing recomputed
        t = d.tick
        want = stepped.results[t]
        got = d.peek(t, "not at hand")
        assert not isinstance(got, str) and (want is not None or got is None)
        if isinstance(want, torch.Tensor):
            np.testing.assert_array_equal(to_numpy(got), to_numpy(want))
        if t in params:
            assert got is d.session.load_param(nac.instructions[t]), "a parameter tick is the loaded weight"
        d.step_back()
    assert executed == [], f"step back recomputed ticks {executed[:10]}"
    d.continue_()                               # and forward again to the same outputs
    np.testing.assert_array_equal(d.outputs[0], stepped.outputs[0])


def test_peek_never_recomputes_an_evicted_value():
    nac, feeds = _model()
    d = Debugger(nac, feeds=feeds, history_bytes=1)       # keeps nothing
    d.continue_()
    first_op = next(i.index for i in nac.instructions if i.a >= 10)
    assert d.peek(first_op, "evicted") == "evicted"       # the view's question: not at hand
    assert d.peek(10_000, "x") == "x" and d.peek(-1, "x") == "x"
    assert d.value(first_op) is not None                   # value() recomputes it from a checkpoint
