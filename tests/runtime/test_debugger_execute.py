"""The debugger steps through Session.execute (run()'s prepared fast call per instruction):
every tick's value bit-identical to run_instruction stepping on every corpus file, the same
errors at the same tick, and a subclass that overrides an instruction kind still sees every
instruction through run_instruction."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nac_engine import read
from nac_engine.runtime import KernelError, Session
from nac_engine.runtime.debugger import Debugger
from nac_engine.runtime.session import to_numpy

from .test_corpus_run import CASES, corpus, load_case
from .test_fastcall import _mm_program


def _same(a, b) -> None:
    a, b = to_numpy(a), to_numpy(b)
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


@corpus
@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_continue_values_equal_run_instruction_stepping(case):
    """A Debugger's Continue (twice: the second through the prepared calls) against a session
    stepped with run_instruction: every tick's value and the outputs equal bit for bit."""
    path, _, feeds, _ = load_case(case)
    with read(path) as nac:
        stepped = Session(nac, feeds=feeds)
        try:
            while not stepped.finished:
                stepped.run_instruction(stepped.tick)
        except Exception as e:     # files the interpreter refuses are another test's business
            pytest.skip(f"does not run: {type(e).__name__}")
        d = Debugger(nac, feeds=feeds)        # unbounded history: every tick's value kept
        for _ in range(2):
            d.restart()
            assert d.continue_().kind == "end"
            for t, v in stepped.results.items():
                if isinstance(v, torch.Tensor):
                    _same(d.value(t), v)
            for a, b in zip(d.outputs, stepped.outputs):
                _same(a, b)


def test_a_kernel_failure_stops_the_debugger_at_its_tick_with_the_steppers_error(tmp_path):
    nac = _mm_program(tmp_path)
    x = np.ones((2, 3), np.float32)
    good = Debugger(nac, inputs={"x": x, "y": np.ones((3, 4), np.float32)})
    good.continue_()
    good.restart()
    good.continue_()                                      # the calls are prepared now
    bad = Debugger(Session(nac, inputs={"x": x, "y": np.ones((4, 4), np.float32)}))
    bad.session._prepared = good.session._prepared        # a closure made for good shapes meets bad ones
    with pytest.raises(KernelError, match=r"instruction 2: aten\.mm\.default\(Tensor\(2, 3\)") as e:
        bad.continue_()
    assert e.value.tick == 2 and bad.next_tick == 2 and bad.stop_reason.kind == "error"
    nac.close()


def test_a_subclass_overriding_an_instruction_kind_sees_every_call(tmp_path):
    seen = []

    class Tracing(Session):
        def call_op(self, ins):
            seen.append(ins.index)
            return super().call_op(ins)

    nac = _mm_program(tmp_path)
    x, y = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    d = Debugger(Tracing(nac, inputs={"x": x, "y": y}))
    d.continue_()
    assert seen == [2, 3]
    np.testing.assert_array_equal(d.outputs[0], -(x @ y))
    nac.close()


def test_a_continue_loads_the_weights_in_one_pass_unless_a_breakpoint_may_stop_it(monkeypatch):
    """Without a breakpoint a Continue runs to the end: it loads every weight before the first
    instruction, as run() does (one pass costs less than the same loads between the kernels). With
    one it loads them as it reaches them: a stop early in a large (quantised) model does not wait
    for the whole model's weights. Both give run()'s outputs."""
    import nac_engine
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(6)]).eval()
    nac = nac_engine.compile(model, (torch.randn(2, 8),))
    feeds = [np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)]
    loads = []
    original = Session._load_params

    def counted(self):
        loads.append(self)
        original(self)
    monkeypatch.setattr(Session, "_load_params", counted)
    expected = Session(nac, feeds=feeds).run()
    loads.clear()
    free = Debugger(nac, feeds=feeds)
    free.continue_()
    assert loads == [free.session]
    stopped = Debugger(nac, feeds=feeds)
    first_op = next(ins.index for ins in nac.instructions if ins.a >= 10)
    stopped.add_breakpoint(tick=first_op)
    stopped.continue_()
    assert stopped.tick == first_op and loads == [free.session]
    assert len(stopped.session._params) < len(nac.params)       # only what the first op read
    stopped.remove_breakpoint(stopped.breakpoints[0])
    stopped.continue_()
    for got in (free.outputs, stopped.outputs):
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
