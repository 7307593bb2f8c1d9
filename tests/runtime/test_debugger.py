"""Debugger: stepping, going back, breakpoints, watches, bounded history, threads."""
import threading

import numpy as np
import pytest

from nac_engine.format.model import Constant
from nac_engine.runtime import KernelError, run
from nac_engine.runtime.debugger import Debugger
from nac_engine.runtime.expr import ExprError

from .test_corpus_run import _case, corpus, load_case
from .test_session import program


@pytest.fixture
def chain(tmp_path):
    """x → log → mul(log, x) → add(·, x) → hardtanh(·, -0.5, 0.5) → output (ticks 0..5)."""
    nac = program(tmp_path, [
        (2, 0, None, None),                 # 0 x
        (40, 1, None, (-1,)),               # 1 aten.log.default(x)
        (20, 2, None, (-1, -2)),            # 2 nac.mul(log, x)
        (11, 2, None, (-1, -3)),            # 3 nac.add(·, x)
        (32, 3, (2, 1, 2), (-1, 0, 0)),     # 4 aten.hardtanh.default(·, -0.5, 0.5)
        (3, 0, (1, 0), (-1,)),              # 5 output
    ], cmap={32: "aten.hardtanh.default", 40: "aten.log.default"}, perms={1: "T", 2: "TT", 3: "Tff"},
        constants=[Constant(1, 3, -0.5), Constant(2, 3, 0.5)], names={0: "x"})
    yield nac
    nac.close()


X = np.array([0.5, 2.0, 3.0], np.float32)


def test_step_step_back_and_outputs(chain):
    d = Debugger(chain, inputs={"x": X})
    assert d.tick == -1 and d.next_tick == 0
    assert d.step().kind == "step" and d.tick == 0
    np.testing.assert_array_equal(d.result().tensor, X)
    d.step()
    r = d.result(1)
    np.testing.assert_allclose(r.tensor, np.log(X), rtol=1e-6)
    assert (r.shape, r.dtype, r.name) == ((3,), "float32", "aten.log.default")
    assert r.min == pytest.approx(np.log(0.5)) and r.nan_count == 0
    assert d.step_back().kind == "step_back" and d.tick == 0
    assert 1 not in d.session.results
    while not d.finished:
        d.step()
    assert d.step().kind == "end" and d.tick == 5
    np.testing.assert_array_equal(d.outputs[0], run(chain, inputs={"x": X})[0])
    d.step_back()
    assert not d.finished and d.outputs is None and d.tick == 4
    d.step()
    np.testing.assert_array_equal(d.outputs[0], run(chain, inputs={"x": X})[0])


def test_run_to_forward_backward_and_restart(chain):
    d = Debugger(chain, inputs={"x": X})
    assert d.run_to(3).kind == "run_to" and d.tick == 3
    assert d.run_to(1).tick == 1 and set(d.session.results) == {0, 1}   # the live set before 2
    assert d.run_to(-1).tick == -1
    d.run_to(4)
    assert d.restart().kind == "restart" and d.tick == -1 and not d.history
    with pytest.raises(IndexError):
        d.result(0)
    with pytest.raises(IndexError):
        d.run_to(6)


def test_dead_values_are_freed_from_the_live_set(chain):
    d = Debugger(chain, inputs={"x": X})
    d.run_to(3)
    assert set(d.session.results) == {3}         # x's last reader was tick 3
    np.testing.assert_array_equal(d.result(0).tensor, X)   # still inspectable from history


def test_nan_breakpoint_and_condition_expression(chain):
    d = Debugger(chain, inputs={"x": np.array([1.0, -1.0, 2.0], np.float32)})
    bp = d.break_on_nan()
    stop = d.continue_()
    assert (stop.kind, stop.tick, stop.breakpoints) == ("breakpoint", 1, (bp.id,))
    assert d.result().nan_count == 1
    assert d.continue_().tick == 2 and bp.hits == 2         # NaN propagates through mul
    d.enable(bp, False)
    assert d.continue_().kind == "end" and bp.hits == 2
    d.remove_breakpoint(bp)
    d.add_breakpoint(condition="max(abs(x)) > 1.5")
    d.restart()
    assert d.continue_().tick == 0                           # x itself has |2| > 1.5


def test_breakpoint_on_tick_op_glob_and_param_and_hit_counts(chain):
    d = Debugger(chain, inputs={"x": X})
    on_tick = d.add_breakpoint(tick=3)
    on_op = d.add_breakpoint(op="aten.*")
    stops = []
    while True:
        s = d.continue_()
        stops.append((s.kind, s.tick))
        if s.kind == "end":
            break
    assert stops == [("breakpoint", 1), ("breakpoint", 3), ("breakpoint", 4), ("end", 5)]
    assert on_tick.hits == 1 and on_op.hits == 2
    with pytest.raises(ValueError):
        d.add_breakpoint(op="aten.softmax*")
    with pytest.raises(ValueError):
        d.add_breakpoint(param="nope")
    cond = d.add_breakpoint(op="aten.hardtanh*", condition="all(x <= 0.5)")
    d.restart()
    d.enable(on_tick, False), d.enable(on_op, False)
    assert d.continue_().breakpoints == (cond.id,)


def test_watches_update_at_every_stop(chain):
    d = Debugger(chain, inputs={"x": X})
    d.add_watch("mean(x)")
    d.add_watch("max(t0)")
    d.add_watch("nope(x)")
    assert isinstance(d.watches["mean(x)"], ExprError)     # no current tick yet
    d.step()
    assert d.watches["mean(x)"] == pytest.approx(X.mean()) and d.watches["max(t0)"] == 3.0
    d.step()
    assert d.watches["mean(x)"] == pytest.approx(np.log(X).mean(), rel=1e-6)
    assert isinstance(d.watches["nope(x)"], ExprError)


def test_observers(chain):
    d = Debugger(chain, inputs={"x": X})
    seen = {"tick": [], "stopped": [], "output": []}
    d.on_tick.append(seen["tick"].append)
    d.on_stopped.append(lambda reason, tick: seen["stopped"].append((reason.kind, tick)))
    d.on_output.append(seen["output"].append)
    d.add_breakpoint(tick=2)
    d.continue_()
    d.continue_()
    assert seen["tick"] == [0, 1, 2, 3, 4, 5]
    assert seen["stopped"] == [("breakpoint", 2), ("end", 5)]
    assert len(seen["output"]) == 1 and seen["output"][0][0].shape == (3,)


def test_kernel_error_stops_with_reason_error(tmp_path):
    nac = program(tmp_path, [(2, 0, None, None), (2, 0, None, None), (20, 2, None, (-2, -1)),
                             (3, 0, (1, 0), (-1,))], perms={2: "TT"}, names={0: "x", 1: "y"})
    with nac:
        d = Debugger(nac, inputs={"x": np.zeros((2, 3), np.float32), "y": np.zeros(4, np.float32)})
        with pytest.raises(KernelError):
            d.continue_()
        assert d.stop_reason.kind == "error" and d.tick == 1 and "nac.mul" in d.stop_reason.message


def _bert():
    path, _, feeds, expected = load_case(_case("bert_tiny"))
    return path, feeds, expected


@corpus
def test_bert_tiny_bounded_history_recomputes_exactly():
    path, feeds, expected = _bert()
    full = Debugger(path, feeds=feeds)
    full.continue_()
    n = full.tick + 1
    want = [full.result(t).tensor for t in range(n)]
    tiny = Debugger(path, feeds=feeds, history_bytes=8 << 10, checkpoint_every=8,
                    checkpoint_bytes=1 << 20)
    tiny.continue_()
    assert tiny.history.total <= 8 << 10 and tiny.history.evicted > 0
    assert len(tiny.checkpoints.ticks) > 1
    np.testing.assert_array_equal(tiny.outputs[0], full.outputs[0])
    for t in reversed(range(n)):                      # step back all the way, comparing
        got = tiny.result(t).tensor
        assert (got is None and want[t] is None) or np.array_equal(got, want[t]), t
        tiny.step_back()
    assert tiny.tick == -1
    for t in [50, 10, 90, 30]:                        # random access back and forth
        tiny.run_to(t)
        assert np.array_equal(tiny.result().tensor, want[t]), t
    tiny.continue_()
    np.testing.assert_array_equal(tiny.outputs[0], full.outputs[0])
    rel = np.abs(full.outputs[0] - expected[0]).max() / np.abs(expected[0]).max()
    assert rel <= 1e-4


@corpus
def test_bert_tiny_breakpoints_are_deterministic_and_param_breakpoints_cover_consumers():
    path, feeds, _ = _bert()
    d = Debugger(path, feeds=feeds, history_bytes=64 << 10)
    name = next(p.name for p in d.nac.params.values())
    bp_param = d.add_breakpoint(param=name)
    d.add_breakpoint(op="aten.softmax*")
    d.add_breakpoint(condition="mean(x) < -0.5")

    def stops():
        d.restart()
        out = []
        while (s := d.continue_()).kind != "end":
            out.append((s.tick, s.breakpoints))
        return out

    first = stops()
    assert first == stops() and first
    loads = [t for t in bp_param.ticks if d.nac.param_for(d.session.instructions[t]) is not None]
    assert loads and all(c in bp_param.ticks for t in loads for c in d.nac.users(t))
    assert {t for t, hits in first if bp_param.id in hits} == set(bp_param.ticks)


@corpus
def test_cancel_from_another_thread():
    path, feeds, _ = _bert()
    d = Debugger(path, feeds=feeds)
    gate, release = threading.Event(), threading.Event()

    def slow(tick):
        if tick == 20:
            gate.set()
            release.wait(5)
    d.on_tick.append(slow)
    future = d.run_in_thread("continue_")
    assert gate.wait(5)
    d.cancel()
    release.set()
    stop = future.result(10)
    assert stop.kind == "cancelled" and stop.tick == 20
    d.on_tick.remove(slow)
    assert d.run_in_thread("continue_").result(30).kind == "end"


def test_watches_and_conditions_can_name_parameters():
    from tests.resources_path import DEMO
    import nac_engine
    nac = nac_engine.read(DEMO)
    x = np.linspace(-1, 1, 8, dtype=np.float32)[None]
    dbg = Debugger(nac, inputs={"x": x})
    w = nac.param_by_name("fc2.weight").array()
    dbg.add_watch("max(abs(fc2.weight))")
    dbg.add_watch("mean(fc1.bias) + t0")
    dbg.add_watch("fc9.weight")
    assert isinstance(dbg.watches["fc9.weight"], ExprError)
    assert "unknown name" in str(dbg.watches["fc9.weight"])
    dbg.step()
    assert dbg.watches["max(abs(fc2.weight))"] == pytest.approx(float(np.abs(w).max()))
    b = nac.param_by_name("fc1.bias").array()
    np.testing.assert_allclose(dbg.watches["mean(fc1.bias) + t0"], float(b.mean()) + x, rtol=1e-6)
    # a condition over a parameter: true at the first tick
    dbg.restart()
    dbg.add_breakpoint(condition="max(abs(x)) > max(abs(fc3.bias)) * 0")
    assert dbg.continue_().kind == "breakpoint" and dbg.tick == 0
    nac.close()


def test_a_condition_at_every_tick_skips_uninitialised_memory(tmp_path):
    """`torch.empty` hands out whatever memory it finds, NaN bit patterns included, until an op
    fills it: a NaN (or any condition) breakpoint placed everywhere does not stop there; one placed
    on that very tick still does."""
    import torch

    import nac_engine
    from nac_engine.compiler.external import write_compiled
    from nac_engine.runtime.kernels import Kernels
    from nac_engine.runtime.prepared import forget_plans
    from nac_engine.runtime.session import Session

    class Fill(torch.nn.Module):
        def forward(self, x):
            perm = torch.argsort(x[:, 0])                  # rows in an order known at run time
            out = torch.empty_like(x)
            out[perm] = 2 * x                              # every row written
            return out + 1
    path = tmp_path / "fill.nac"
    write_compiled(nac_engine.compile(Fill(), (torch.randn(4, 3),)), str(path))
    class Garbage(Kernels):
        """What a reused allocation may hold: NaN patterns (this session's kernels only)."""
        def _resolve(self, name):
            fn = super()._resolve(name)
            return (lambda *a, **k: fn(*a, **k).fill_(float("nan"))) if name.startswith("aten.empty") else fn
    forget_plans()                  # call plans are shared by op across sessions: none from before...
    try:
        session = Session(str(path), feeds=[np.ones((4, 3), np.float32)], kernels=Garbage())
        dbg = Debugger(session)
        empty = next(i.index for i in dbg.session.instructions if dbg.nac.instruction_name(i).startswith("aten.empty"))
        dbg.break_on_nan()
        assert dbg.continue_().kind == "end"              # stopped at the empty buffer before
        assert np.isnan(dbg.value(empty).numpy()).all()   # (its garbage is there to see)
        dbg.restart()
        dbg.add_breakpoint(tick=empty, condition="nan")
        assert (dbg.continue_().kind, dbg.tick) == ("breakpoint", empty)
    finally:
        forget_plans()              # ... and none of this one's after
