"""The debug service both front ends drive (nac_engine.dap.service), in this process: a run after
the first starts warm (terminate keeps the interpreter session: weights loaded, calls prepared),
new inputs share those weights, close frees them; breakpoints replaced as a whole keep the front
end's ids; a kernel's failure is the run's state, not the service's exception."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
import torch

import nac_engine
from nac_engine.compiler.external import write_compiled
from nac_engine.dap.service import DebugService, check_breakpoint
from nac_engine.format.input_signature import make_inputs, read_input_signature
from nac_engine.format.reader import read
from nac_engine.isa.optable import OP_INPUT
from nac_engine.runtime.session import Session


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture
def nac(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "two_layers.nac"
    write_compiled(nac_engine.compile(TwoLayers().eval(), (torch.randn(2, 8),)), str(path))
    f = read(str(path), strict=False)
    yield f
    f.close()


@pytest.fixture
def weight_reads(monkeypatch):
    """How many parameters the interpreter reads out of the file (Session._param_tensor)."""
    count = {"n": 0}
    original = Session._param_tensor

    def counted(self, p):
        count["n"] += 1
        return original(self, p)
    monkeypatch.setattr(Session, "_param_tensor", counted)
    return count


def feeds_of(nac, seed: int = 0) -> list:
    specs = read_input_signature(nac)
    made = make_inputs(specs, seed=seed)
    return [made[s.name] for s in specs]


def n_params(nac) -> int:
    return len({ins.c[1] for ins in nac.instructions if ins.a == OP_INPUT and ins.b == 1})


def test_terminate_then_launch_reuses_the_loaded_weights(nac, weight_reads):
    svc = DebugService(nac)
    svc.launch(feeds_of(nac))
    state = svc.act("continue")
    assert state["finished"] and state["weightsRead"] == weight_reads["n"] == n_params(nac) > 0
    first = svc.outputs()
    old = svc.debugger
    svc.terminate()
    assert len(old.history) == 0 and old.session.results == {}, "the ended run's values go at once"
    weight_reads["n"] = 0
    svc.launch(feeds_of(nac))
    state = svc.act("continue")
    assert weight_reads["n"] == 0 and state["weightsRead"] == 0, "the second run read the weights again"
    assert svc.debugger.session is old.session
    expected = Session(nac, feeds=feeds_of(nac)).run()
    for a, b, c in zip(first, svc.outputs(), expected):
        assert np.array_equal(a, b) and np.array_equal(b, c)


def test_new_inputs_share_the_loaded_weights_and_compute_with_the_new_ones(nac, weight_reads):
    svc = DebugService(nac)
    svc.launch(feeds_of(nac))
    svc.act("continue")
    before, kept = svc.outputs(), svc.debugger.session
    weight_reads["n"] = 0
    svc.launch(feeds_of(nac, seed=7))
    svc.act("continue")
    assert weight_reads["n"] == 0 and svc.debugger.session is not kept
    expected = Session(nac, feeds=feeds_of(nac, seed=7)).run()
    assert not np.array_equal(before[0], expected[0]), "the new seed changes the inputs"
    assert all(np.array_equal(a, b) for a, b in zip(svc.outputs(), expected))


def test_close_frees_the_kept_weights(nac, weight_reads):
    svc = DebugService(nac)
    svc.launch(feeds_of(nac))
    svc.act("continue")
    kept = weakref.ref(svc.debugger.session)
    svc.close()
    gc.collect()
    assert kept() is None, "the closed file's session (and its weights) is still referenced"
    weight_reads["n"] = 0
    svc.launch(feeds_of(nac))
    svc.act("continue")
    assert weight_reads["n"] == n_params(nac)


def test_breakpoints_keep_the_front_ends_ids_and_hits(nac):
    svc = DebugService(nac)
    relu = [i.index for i in nac.instructions if "relu" in nac.instruction_name(i)]
    verdicts = svc.set_breakpoints([{"id": 7, "kind": "op", "value": "aten.relu*"},
                                    {"id": 9, "kind": "op", "value": "no.such*"},
                                    {"id": 11, "kind": "expr", "value": "max(x) >"}])
    assert [v["verified"] for v in verdicts] == [True, False, False]
    assert "no instruction matches" in verdicts[1]["message"] and verdicts[2]["message"]
    svc.launch(feeds_of(nac))
    state = svc.act("continue")
    assert state["reason"]["kind"] == "breakpoint" and state["reason"]["breakpoints"] == [7]
    assert state["tick"] == relu[0]
    hits = {b["id"]: b["hits"] for b in state["breakpoints"]}
    assert hits[7] == 1
    # replaced as a whole: the hit count the front end sends back is kept
    svc.set_breakpoints([{"id": 7, "kind": "op", "value": "aten.relu*", "enabled": False, "hits": 1}])
    state = svc.act("continue")
    assert state["finished"] and state["breakpoints"] == [{"id": 7, "hits": 1, "error": ""}]


def test_watches_take_vn_and_tn_names_and_report_errors(nac):
    svc = DebugService(nac)
    svc.set_watches(["max(abs(v1))", "max(abs(t1))", "max(abs(v99999))", "max(x) >"])
    svc.launch(feeds_of(nac))
    svc.act("runTo", 3)
    w = {x["expression"]: x for x in svc.state()["watches"]}
    assert w["max(abs(v1))"]["error"] == "" and w["max(abs(v1))"]["value"] == w["max(abs(t1))"]["value"]
    assert w["max(abs(v99999))"]["error"] and w["max(x) >"]["error"]


def test_a_kernels_failure_is_the_runs_state(nac):
    svc = DebugService(nac)
    svc.launch([np.zeros((2, 8), np.int64)])            # the right shape, a dtype linear refuses
    state = svc.act("continue")
    assert state["error"] and state["error"]["tick"] is not None and not state["finished"]
    assert "linear" in state["error"]["message"]


def test_a_wrongly_shaped_input_is_refused_at_launch(nac):
    from nac_engine.runtime.errors import InputShapeError
    with pytest.raises(InputShapeError, match="expects 2x8 float32, got 3x5 float32"):
        DebugService(nac).launch([np.zeros((3, 5), np.float32)])


def test_check_breakpoint_needs_no_run_and_no_torch(nac):
    assert check_breakpoint(nac, {"kind": "tick", "value": "999"}).startswith("tick 999 is outside")
    assert check_breakpoint(nac, {"kind": "tick", "value": "x"}) == "'x' is not a tick number"
    assert check_breakpoint(nac, {"kind": "expr", "value": "max(abs(v3)) > 1"}) == ""
    assert "unknown name" in check_breakpoint(nac, {"kind": "expr", "value": "max(abs(w3)) > 1"})


def test_the_state_says_when_the_step_back_history_dropped_results(nac):
    """Issue 25 §2: the history keeps activations within its budget and says when older ticks
    were dropped; the Studio's status line says it too."""
    roomy = DebugService(nac)
    roomy.launch(feeds_of(nac))
    roomy.act("continue")
    h = roomy.state()["history"]
    assert h["dropped"] == 0 and h["budget"] == roomy.history_bytes and h["held"] > 0
    tight = DebugService(nac, history_bytes=100)       # fits one 2×4 float32 result at a time
    tight.launch(feeds_of(nac))
    tight.act("continue")
    h = tight.state()["history"]
    assert h["dropped"] > 0 and h["held"] <= 100

    from nac_studio.debug_session import DebugSession

    class Stub:
        history = h
    note = DebugSession.history_note(type("S", (), {"debugger": Stub()})())
    assert note.startswith(" · step-back history full") and f"{h['dropped']:,} older results dropped" in note
    Stub.history = {"budget": 100, "held": 10, "dropped": 0}
    assert DebugSession.history_note(type("S", (), {"debugger": Stub()})()) == ""


def test_logpoints_and_hit_conditions_serve_both_front_ends(nac):
    """In the service, so the Studio and `nac dap` behave alike: a logpoint's line per pass in the
    state's log and no stop; a hit condition skips the hits it rejects; both checked up front."""
    linears = [i.index for i in nac.instructions if nac.instruction_name(i) == "aten.linear.default"]
    relu = next(i.index for i in nac.instructions if "relu" in nac.instruction_name(i))
    svc = DebugService(nac)
    verdicts = svc.set_breakpoints([
        {"id": 1, "kind": "op", "value": "aten.linear*", "log": "lin {shape(x)[1]} {{x}}"},
        {"id": 2, "kind": "op", "value": "aten.linear*", "hitCondition": "2"},
        {"id": 3, "kind": "op", "value": "aten.relu*", "log": "bad {"},
        {"id": 4, "kind": "op", "value": "aten.relu*", "hitCondition": "often"}])
    assert [v["verified"] for v in verdicts] == [True, True, False, False]
    assert verdicts[2]["message"].startswith("log message: ") and "hit condition 'often'" in verdicts[3]["message"]
    svc.launch(feeds_of(nac))
    state = svc.act("continue")
    # the first linear: logged, the hit condition ">= 2" not met yet: no stop; the second: both
    assert [(e["id"], e["tick"], e["text"]) for e in state["log"]] == \
        [(1, linears[0], "lin 16 {x}"), (1, linears[1], "lin 4 {x}")]
    assert state["reason"]["kind"] == "breakpoint" and state["tick"] == linears[1] > relu
    state = svc.act("continue")
    assert state["finished"] and state["log"] == []
    # a plain step onto a logpoint prints it too
    svc.launch(feeds_of(nac))
    svc.set_breakpoints([{"id": 1, "kind": "op", "value": "aten.linear*", "log": "at {x[0, 0]}"}])
    svc.act("runTo", linears[0] - 1)
    state = svc.act("next")
    assert state["tick"] == linears[0] and [e["id"] for e in state["log"]] == [1]
    assert svc.evaluate(f"v{linears[0]}[0, 0]")["value"] == pytest.approx(float(state["log"][0]["text"][3:]), rel=1e-5)
    assert svc.evaluate("v99999")["error"]


def test_rerun_goes_from_the_start_to_the_first_breakpoint_that_stops(nac):
    """The Studio's Restart (``rerun``): back to the start, then on to the first stop, hits
    counted afresh; a hit its condition rejects is passed, not re-run from the start for ever."""
    linears = [i.index for i in nac.instructions if nac.instruction_name(i) == "aten.linear.default"]
    svc = DebugService(nac)
    svc.set_breakpoints([{"id": 7, "kind": "op", "value": "aten.linear*", "hitCondition": "2"}])
    svc.launch(feeds_of(nac))
    assert svc.act("continue")["tick"] == linears[1]
    state = svc.act("continue")
    assert state["finished"]
    state = svc.act("rerun")
    assert state["reason"]["kind"] == "breakpoint" and state["tick"] == linears[1]
    assert svc.act("restart")["tick"] == -1


def test_a_short_vector_is_summarised_by_its_values():
    """What an editor's Variables view, hover and logpoints show for a tensor: its statistics, but
    a vector of up to eight values (a shape, two softmax scores) by the values themselves."""
    from nac_engine.dap.values import summary
    assert summary(np.array([1, 12, 16, 64])) == "i64[4] [1, 12, 16, 64]"
    assert summary(np.array([0.25, 0.75], np.float32)) == "f32[2] [0.25, 0.75]"
    assert summary(np.arange(9.0)).startswith("f64[9] min 0 max 8 mean 4 NaN 0")
    assert summary(np.zeros((2, 2), np.float32)).startswith("f32[2,2] min 0 max 0")
