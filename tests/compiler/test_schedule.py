"""MMAP planner: the reference algorithms against the worked examples and the corpus bytes,
our min-peak mode against hand-computed answers, and every mode against the checker."""
from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from nac_engine.compiler.schedule import (MAX_COMMANDS_PER_TICK, MODES, _Program, _reference_head,
                                          _reference_lookback, plan_mmap, resident_bytes)
from nac_engine.format import layout as L
from nac_engine.format.model import Instruction, NacFile
from nac_engine.runtime.mmap_check import check_schedule
from tests.conftest import nac_corpus_files

SAVE, FREE, FWD, PRE = L.MMAP_SAVE_RESULT, L.MMAP_FREE, L.MMAP_FORWARD, L.MMAP_PRELOAD


# --------------------------------------------------------------------------- helpers
def program(spec) -> NacFile:
    """``[("in",), ("w",), ("op", 0, 1), ..., ("out", k)]`` → a NacFile with that OPS stream
    (only the fields the planner and the checker read: A, B, C and D)."""
    ins, pid = [], 0
    for i, (kind, *srcs) in enumerate(spec):
        if kind == "in":
            ins.append(Instruction(i, 2, 0, None, None))
        elif kind == "w":
            pid += 1
            ins.append(Instruction(i, 2, 1, (1, pid), None))
        elif kind == "op":
            ins.append(Instruction(i, 40, 1, None, tuple(s - i for s in srcs)))
        elif kind == "out":
            ins.append(Instruction(i, 3, 0, (len(srcs),) + (0,) * len(srcs), tuple(s - i for s in srcs)))
    return NacFile(instructions=ins, perms={1: "T" * 8})


def as_pairs(records) -> list:
    return [(r.tick, [(c.action, c.target) for c in r.commands]) for r in records]


def with_plan(nac: NacFile, records) -> NacFile:
    out = copy.copy(nac)
    out.mmap = list(records)
    return out


# The §9.3 MLP: 0 input, 1-2 fc1, 3 linear, 4 relu, 5-6 fc2, 7 linear, 8 relu, 9-10 fc3, 11 linear, 12 out.
MLP = [("in",), ("w",), ("w",), ("op", 0, 1, 2), ("op", 3), ("w",), ("w",), ("op", 4, 5, 6), ("op", 7),
       ("w",), ("w",), ("op", 8, 9, 10), ("out", 11)]

# 0 x, 1 w1, 2 op(x, w1), 3 w2, 4 op(2, w2), 5 out(4)
SMALL = [("in",), ("w",), ("op", 0, 1), ("w",), ("op", 2, 3), ("out", 4)]
SMALL_SIZES = {0: 10, 1: 100, 2: 20, 3: 200, 4: 30}


# --------------------------------------------------------------------------- reference algorithms
def test_head_reproduces_the_worked_example():
    """Research §9.3's table, byte for byte."""
    got = as_pairs(_reference_head(_Program(program(MLP), None)))
    assert got == [(0, [(10, 0), (40, 1), (40, 2)]),
                   (3, [(20, 0), (20, 1), (20, 2), (30, 4), (40, 5)]),
                   (4, [(10, 4), (40, 6)]),
                   (7, [(20, 4), (20, 5), (20, 6), (30, 8), (40, 9)]),
                   (8, [(10, 8), (40, 10)]),
                   (11, [(20, 8), (20, 9), (20, 10)])]


def test_lookback_reproduces_the_worked_example():
    """Research §9.4's table; nothing is freed on a weight tick here, so the fix changes nothing."""
    want = [(0, [(40, 1), (40, 2)]), (3, [(30, 4)]), (4, [(30, 7), (20, 1), (20, 2), (40, 9), (40, 10)]),
            (7, [(30, 8)]), (8, [(30, 11), (20, 5), (20, 6)]), (11, [(10, 11)]), (12, [(20, 9), (20, 10)])]
    prog = _Program(program(MLP), None)
    assert as_pairs(_reference_lookback(prog, keep_frees=False)) == want
    assert as_pairs(plan_mmap(program(MLP), {}, mode="reference-lookback").records) == want


def test_lookback_fix_keeps_frees_the_original_drops():
    nac = program(SMALL)
    raw = _reference_lookback(_Program(nac, None), keep_frees=False)
    # PRELOAD w2 lands on weight tick 1 and FREE w1 on weight tick 3: the original drops both.
    assert as_pairs(raw) == [(0, [(PRE, 1)]), (2, [(FWD, 4)]), (4, [(SAVE, 4)]), (5, [(FREE, 3)])]
    assert [f.kind for f in check_schedule(with_plan(nac, raw)).violations] == ["never_freed"]
    fixed = plan_mmap(nac, SMALL_SIZES, mode="reference-lookback")
    assert as_pairs(fixed.records) == [(0, [(PRE, 1)]), (2, [(FWD, 4)]), (3, [(FREE, 1)]), (4, [(SAVE, 4)]),
                                       (5, [(FREE, 3)])]
    assert check_schedule(with_plan(nac, fixed.records)).violations == []


def _buffer_weights(nac: NacFile) -> list[int]:
    """What the reference planned as weights: B=1 params plus its non-persistent buffers, which it
    wrote as unnamed B=0 (v1.8) or as B=3 (v1.6) placeholders (research §9.5)."""
    named = {n.index for n in nac.input_names}
    if nac.version == "1.6":
        return [i.index for i in nac.instructions if i.a == 2 and i.b in (1, 3)]
    return [i.index for i in nac.instructions if i.a == 2 and (i.b == 1 or (i.b == 0 and i.index not in named))]


def _corpus_params():
    files = nac_corpus_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="corpus not present"))]
    return [pytest.param(p, id=p.parent.name) for p in files]


@pytest.mark.parametrize("path", _corpus_params())
def test_reference_planners_reproduce_corpus_mmap(path: Path):
    """The same instruction stream gives the reference compiler's MMAP bytes: HEAD for v1.8
    files, the look-back planner (without our fix) for v1.6 files."""
    from nac_engine.format import read
    nac = read(str(path))
    if not nac.mmap:
        pytest.skip("compiled without the optimiser: no MMAP to compare")
    prog = _Program(nac, _buffer_weights(nac))
    got = _reference_lookback(prog, keep_frees=False) if nac.version == "1.6" else _reference_head(prog)
    assert as_pairs(got) == as_pairs(nac.mmap)


# --------------------------------------------------------------------------- min-peak, known answers
def test_min_peak_known_answer_lookahead_1():
    plan = plan_mmap(program(SMALL), SMALL_SIZES, preload_lookahead=1)
    assert as_pairs(plan.records) == [(0, [(PRE, 1)]), (2, [(FWD, 4), (PRE, 3)]), (3, [(FREE, 0), (FREE, 1)]),
                                      (5, [(FREE, 3)])]
    # x and w1 until their reader (tick 2) ends; v2 is forwarded to tick 4 and read there; w2
    # preloaded on tick 2; the output v4 stays.
    assert plan.live_bytes == [110, 110, 330, 220, 250, 30]
    assert (plan.peak_live_bytes, plan.peak_tick) == (330, 2)


def test_min_peak_known_answer_lookahead_2():
    plan = plan_mmap(program(SMALL), SMALL_SIZES, preload_lookahead=2)
    # w1 cannot go two ticks back (clamped to tick 0); w2 is preloaded on weight tick 1
    assert as_pairs(plan.records) == [(0, [(PRE, 1)]), (1, [(PRE, 3)]), (2, [(FWD, 4)]),
                                      (3, [(FREE, 0), (FREE, 1)]), (5, [(FREE, 3)])]
    assert plan.live_bytes == [110, 310, 330, 220, 250, 30]


def test_head_same_tick_free_costs_the_same_while_the_tick_runs():
    """HEAD frees on the reading tick: cheaper only "after the tick", equal while it runs."""
    nac = program(SMALL)
    head = plan_mmap(nac, SMALL_SIZES, mode="reference")
    assert head.live_bytes == [110, 110, 330, 220, 250, 30]
    assert resident_bytes(nac, head.records, SMALL_SIZES, during_tick=False) == [110, 110, 220, 220, 30, 30]
    assert {f.kind for f in check_schedule(with_plan(nac, head.records)).hazards} == {"same_tick_free"}


def test_lookahead_zero_emits_no_preload_and_tick_zero_cannot_be_preloaded():
    nac = program([("w",), ("w",), ("in",), ("op", 0, 1, 2), ("out", 3)])
    assert all(c.action != PRE for r in plan_mmap(nac, {}, preload_lookahead=0).records for c in r.commands)
    preloads = [(r.tick, c.target) for r in plan_mmap(nac, {}, preload_lookahead=3).records
                for c in r.commands if c.action == PRE]
    assert preloads == [(0, 1)]


def test_forward_jumps_weight_ticks_only():
    nac = program([("in",), ("op", 0), ("w",), ("w",), ("op", 1, 2, 3), ("op", 4), ("op", 4, 5), ("out", 6)])
    cmds = plan_mmap(nac, {}).by_tick
    assert (FWD, 4) in [(c.action, c.target) for c in cmds[1]]           # 1 → 4 across weights 2, 3
    assert (SAVE, 4) in [(c.action, c.target) for c in cmds[4]]          # two readers
    assert (FREE, 4) in [(c.action, c.target) for c in cmds[7]]          # the tick after its last read
    assert (FWD, 6) in [(c.action, c.target) for c in cmds[5]]


def test_an_output_that_later_instructions_read_is_saved_never_freed():
    # 0 x, 1 w, 2 h = op(x, w) [an output, also read by 3], 3 y = op(h) [an output], 4 out(h, y)
    nac = program([("in",), ("w",), ("op", 0, 1), ("op", 2), ("out", 2, 3)])
    plan = plan_mmap(nac, {})
    cmds = [(r.tick, c.action, c.target) for r in plan.records for c in r.commands]
    assert (2, SAVE, 2) in cmds
    assert not [c for c in cmds if c[2] in (2, 3) and c[1] in (FREE, FWD)]     # outputs live to the end
    assert not [c for c in cmds if c[2] == 3]                                # read by <OUTPUT> only
    assert check_schedule(with_plan(nac, plan.records)).violations == []
    # The reference planners as the originals wrote them: HEAD gives outputs no command (§9.2 step 5),
    # the v1.6 planner saves every output that is read (§9.4).
    head = [(r.tick, c.action, c.target) for r in plan_mmap(nac, {}, mode="reference").records for c in r.commands]
    assert not [c for c in head if c[2] in (2, 3)]
    lookback = plan_mmap(nac, {}, mode="reference-lookback").by_tick
    assert (SAVE, 2) in [(c.action, c.target) for c in lookback[2]]


def test_an_input_or_weight_returned_and_read_gets_no_save():
    nac = program([("in",), ("w",), ("op", 0, 1), ("out", 0, 1, 2)])
    saves = [c.target for r in plan_mmap(nac, {}).records for c in r.commands if c.action == SAVE]
    assert saves == []


def test_states_are_never_freed_but_inputs_are():
    nac = program([("in",), ("in",), ("op", 0, 1), ("out", 2)])
    nac.instructions[1].b = 2     # <INPUT B=2> state: persists across runs
    frees = [c.target for r in plan_mmap(nac, {}).records for c in r.commands if c.action == FREE]
    assert frees == [0]


# --------------------------------------------------------------------------- properties
def _lookahead_ok(nac: NacFile, plan, lookahead: int) -> None:
    """Every weight but one at tick 0 is preloaded exactly ``lookahead`` ticks before its load
    (or on tick 0), once."""
    prog = _Program(nac, None)
    preloads = [(c.target, r.tick) for r in plan.records for c in r.commands if c.action == PRE]
    want = sorted((p, max(0, p - lookahead)) for p in prog.weights if p > 0) if lookahead else []
    assert sorted(preloads) == want


@pytest.mark.parametrize("lookahead", [1, 2, 3, 5])
def test_lookahead_is_honoured_exactly(lookahead):
    nac = program(MLP)
    _lookahead_ok(nac, plan_mmap(nac, {}, preload_lookahead=lookahead), lookahead)


def test_plan_is_deterministic_and_leaves_the_file_alone():
    nac = program(MLP)
    before = list(nac.mmap)
    sizes = {i: 8 * (i + 1) for i in range(13)}
    shuffled = dict(reversed(list(sizes.items())))
    for mode in MODES:
        a, b = plan_mmap(nac, sizes, mode=mode), plan_mmap(nac, shuffled, mode=mode)
        assert as_pairs(a.records) == as_pairs(b.records) and a.live_bytes == b.live_bytes
    assert nac.mmap == before


def test_a_tick_never_holds_more_than_255_commands():
    n = 300
    spec = [("w",)] * n + [("op", *range(n)), ("op", n), ("out", n + 1)]
    nac = program(spec)
    plan = plan_mmap(nac, {})
    assert max(len(r.commands) for r in plan.records) <= MAX_COMMANDS_PER_TICK
    assert sum(c.action == FREE for r in plan.records for c in r.commands) == n
    assert check_schedule(with_plan(nac, plan.records)).violations == []


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown MMAP mode"):
        plan_mmap(program(MLP), {}, mode="fastest")
    with pytest.raises(ValueError, match="preload_lookahead"):
        plan_mmap(program(MLP), {}, preload_lookahead=-1)
    with pytest.raises(ValueError, match="weights must be"):
        plan_mmap(program(MLP), {}, weights=[3])


# --------------------------------------------------------------------------- corpus streams
def _value_sizes(nac: NacFile, path: Path) -> dict[int, int]:
    """Byte size of every instruction's result, measured by running the file on its feeds."""
    from nac_engine.runtime import Session
    from nac_engine.runtime.mmap_check import _nbytes
    feeds = [np.load(f) for f in sorted(path.parent.glob("feed_*.npy"))]
    s = Session(nac, feeds=feeds)
    sizes = {}
    while not s.finished:
        i = s.tick
        sizes[i] = _nbytes(s.run_instruction(i))
    return sizes


@pytest.mark.parametrize("path", _corpus_params())
def test_replanned_corpus_streams(path: Path):
    """Drop the file's MMAP, re-plan in every mode: zero violations, min-peak race-free, live bytes
    consistent with the dynamic trace, min-peak at lookahead 1 never above HEAD at any tick."""
    from nac_engine.format import read
    from nac_engine.runtime.mmap_check import trace_memory
    nac = read(str(path))
    sizes = _value_sizes(nac, path)
    nac.mmap = []
    total = sum(v for i, v in sizes.items() if nac.instructions[i].a != 3)
    plans = {}
    for mode, la in [("reference", 2), ("reference-lookback", 2), ("min-peak", 1), ("min-peak", 2)]:
        plan = plans[mode, la] = plan_mmap(nac, sizes, mode=mode, preload_lookahead=la)
        report = check_schedule(with_plan(nac, plan.records))
        assert report.violations == [], (mode, report.violations[:3])
        if mode == "min-peak":
            assert report.hazards == []
            _lookahead_ok(nac, plan, la)
        assert len(plan.live_bytes) == len(nac.instructions)
        assert plan.peak_live_bytes == max(plan.live_bytes) == plan.live_bytes[plan.peak_tick]
        biggest = max(v for i, v in sizes.items() if nac.instructions[i].a != 3)
        assert biggest <= plan.peak_live_bytes <= total
    head, mp1, mp2 = plans["reference", 2], plans["min-peak", 1], plans["min-peak", 2]
    assert all(a <= b for a, b in zip(mp1.live_bytes, mp2.live_bytes))      # a longer lookahead costs
    assert mp2.peak_live_bytes <= head.peak_live_bytes                     # measured, see the docstring
    prog = _Program(nac, None)
    first_work = min(i for i in range(len(nac.instructions)) if i not in prog.weights)
    if all(w > first_work for w in prog.weights):    # no weight ahead of all work: HEAD's PRELOADs are real
        assert all(a <= b for a, b in zip(mp1.live_bytes, head.live_bytes))
    else:
        assert mp1.peak_live_bytes <= head.peak_live_bytes
    # "After the tick" numbers are what the dynamic trace measures, on the real run.
    if path.parent.name in ("mlp", "cnn__v1.6"):
        feeds = [np.load(f) for f in sorted(path.parent.glob("feed_*.npy"))]
        for plan in (head, mp2):
            trace = trace_memory(with_plan(nac, plan.records), feeds=feeds)
            assert list(trace.live_bytes) == resident_bytes(nac, plan.records, sizes, during_tick=False)


def test_param_sizes_come_from_tensor_meta(corpus_case):
    from nac_engine.format import read
    nac = read(str(corpus_case("mlp_int8t")))
    plan = plan_mmap(nac, {}, preload_lookahead=1)
    first_weight = next(i for i in nac.instructions if i.a == 2 and i.b == 1)
    p = nac.param_for(first_weight)
    # int8 storage, but the runtime holds it dequantised: float32 bytes
    assert plan.live_bytes[first_weight.index] >= 4 * int(np.prod(p.shape))


def test_compiled_model_saves_an_output_its_next_layer_reads():
    """/tmp/review/out_read.py: ``h`` is returned and read by the next linear. The simulator
    reads the schedule as the hardware would and must find every read value routed."""
    import torch
    from torch import nn

    from nac_engine.sim import simulate
    from tests.compiler.helpers import compile_and_check

    class OutputRead(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

        def forward(self, x):
            h = torch.relu(self.a(x))
            return h, self.b(h) + h

    torch.manual_seed(0)
    c = compile_and_check(OutputRead(), (torch.randn(4, 16),))
    h = c.nac.output_producers()[0]
    assert (SAVE, h) in [(cm.action, cm.target) for cm in c.nac.mmap_by_tick()[h]]
    res = simulate(c.nac, "edge-32x32", inputs={"x": "4x16"})
    assert not [w for w in res.warnings if "neither SAVE_RESULT nor FORWARD" in w], res.warnings
