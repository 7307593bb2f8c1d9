"""DebugSession without Qt: breakpoint specs before and during a run, JSON round trip, inputs from
the file's signature (the same values ``make_inputs`` gives ``nac run``), variables at the
execution point, MMAP residency, watches added while an action runs."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import nac_engine
from nac_engine.format.input_signature import make_inputs, read_input_signature
from nac_engine.format.reader import read
from nac_engine.runtime.debugger import Debugger
from nac_studio.debug_session import DebugSession, InputChoice
from tests.corpus_paths import CORPUS

MLP = CORPUS / "nac" / "mlp" / "mlp.nac"
FEED = CORPUS / "nac" / "mlp" / "feed_0.npy"


@pytest.fixture
def mlp_session():
    if not MLP.is_file():
        pytest.skip("corpus absent")
    nac = read(str(MLP), strict=False)
    s = DebugSession(nac)
    s.set_choices({0: InputChoice(mode="npy", path=str(FEED))})
    yield s
    s.close()          # and its engine host
    nac.close()


def test_breakpoints_before_a_run_json_round_trip_and_hits(mlp_session):
    s = mlp_session
    a = s.add_breakpoint("op", "aten.relu*")
    bad = s.add_breakpoint("op", "no.such.op*")
    expr = s.add_breakpoint("expr", "max(x) >")         # a syntax error, reported before any run
    assert a.error == "" and "no instruction matches" in bad.error and expr.error
    relu = [i.index for i in s.nac.instructions if "relu" in s.nac.instruction_name(i)]
    assert sorted(s.breakpoint_ticks()) == relu
    data = json.loads(json.dumps(s.to_json()))
    other = DebugSession(s.nac)
    other.load_json(data)
    assert [(b.kind, b.value, b.enabled) for b in other.breakpoints] == \
        [(b.kind, b.value, b.enabled) for b in s.breakpoints]
    assert other.choices[0].path == str(FEED) and not other.needs_inputs()
    s.remove_breakpoint(bad.id)
    s.remove_breakpoint(expr.id)
    assert s.run_now("continue_").kind == "breakpoint" and s.tick == relu[0]
    s.edit_breakpoint(a.id, enabled=False)
    assert s.run_now("continue_").kind == "end" and s.state == "finished"
    assert a.hits == 1
    np.testing.assert_allclose(s.debugger.outputs[0], np.load(CORPUS / "nac" / "mlp" / "expected_output_0.npy"),
                               atol=1e-5)


def test_variables_are_the_current_result_and_the_live_set(mlp_session):
    s = mlp_session
    s.run_now("run_to", 6)
    rows = s.variables()
    assert rows[0].tick == 6 and rows[0].where == "current result"
    ref = Debugger(str(MLP), feeds=[np.load(FEED)])       # the engine's debugger, in this process
    ref.run_to(6)
    live = {t for t in ref.session.results if t < 6}
    assert live == {v.tick for v in rows if "live" in v.where}
    for v in rows:
        r = s.result(v.tick)
        assert v.shape == r.shape and v.dtype == r.dtype
        np.testing.assert_array_equal(r.tensor, ref.result(v.tick).tensor)


def test_mmap_residency_follows_the_schedule(mlp_session):
    """The variables at a stop list what the MMAP schedule holds then, as the host answers it."""
    s = mlp_session
    cmds = sorted((rec.tick, c.name, c.target) for rec in s.nac.mmap for c in rec.commands)
    saved = [(t, v) for t, name, v in cmds if name == "SAVE_RESULT"]
    if not saved:
        pytest.skip("no SAVE_RESULT in this schedule")
    t, v = saved[0]

    def where(tick: int) -> str:
        s.run_now("run_to", tick)
        return next((r.where for r in s.variables() if r.tick == v), "")
    freed = [ft for ft, name, fv in cmds if name == "FREE" and fv == v and ft > t]
    if freed and freed[0] == t + 1:
        pytest.skip("the first saved value is freed at the next tick")
    assert "MMAP SAVE_RESULT" in where(t + 1)         # held after its own tick (there: the current result)
    if freed:
        assert "MMAP" not in where(freed[0])


def test_signature_inputs_equal_make_inputs(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    nac_engine.write(nac_engine.compile(model, (torch.randn(2, 4),)), str(tmp_path / "m.nac"))
    nac = read(str(tmp_path / "m.nac"))       # the Studio debugs files: the engine host opens it too
    specs = read_input_signature(nac)
    s = DebugSession(nac)
    assert not s.needs_inputs() and s.slots[0].shape == (2, 4)
    feeds = s.feeds()
    np.testing.assert_array_equal(feeds[0], make_inputs(specs, seed=0)[specs[0].name])
    s.run_now("continue_")
    with torch.no_grad():
        want = model(torch.from_numpy(feeds[0])).numpy()
    np.testing.assert_allclose(s.debugger.outputs[0], want, rtol=1e-6, atol=1e-6)
    s.close()


def test_watch_added_while_an_action_runs_is_evaluated_at_the_next_stop(mlp_session):
    s = mlp_session
    future = s.begin("step")
    s.add_watch("max(x)")
    s.complete(future)
    s.run_now("step")
    (text, value, error), = s.watch_values()
    assert error == "" and value == pytest.approx(float(s.result().tensor.max()))
