"""MMAP linter: corpus findings derived from research §9, crafted violations, and the live-bytes trace."""
import copy

import numpy as np
import pytest

from nac_engine import read
from nac_engine.format import layout as L
from nac_engine.format.model import MmapCommand, MmapRecord
from nac_engine.text.asm import assemble
from nac_engine.runtime import Session
from nac_engine.runtime.mmap_check import check_schedule, trace_memory

from .test_corpus_run import CASES, corpus, load_case

A = {"SAVE": L.MMAP_SAVE_RESULT, "FREE": L.MMAP_FREE, "FWD": L.MMAP_FORWARD, "PRE": L.MMAP_PRELOAD}


def with_mmap(nac, schedule):
    """A copy of ``nac`` whose MMAP is ``{tick: [(action, target), ...]}``."""
    out = copy.copy(nac)
    out.mmap = [MmapRecord(t, [MmapCommand(A[a], v) for a, v in cmds]) for t, cmds in sorted(schedule.items())]
    return out


def kinds(findings):
    return sorted((f.kind, f.tick, f.target) for f in findings)


# --------------------------------------------------------------------------- corpus (static)
def expected_findings(nac):
    """Predict the linter's output from the planner rules of research §9 (not from the linter)."""
    ins = nac.instructions
    mm = [(t, c.action, c.target) for r in nac.mmap for c in r.commands for t in [r.tick]]
    users = {}
    for i in ins:
        for p in set(i.producers()):
            users.setdefault(p, []).append(i.index)
    outputs = set(nac.output_producers())
    buffers = {v for _, a, v in mm if a == L.MMAP_PRELOAD and ins[v].b != 1}
    hazards = [("preload_buffer", t, v) for t, a, v in mm if a == L.MMAP_PRELOAD and v in buffers]
    violations = []
    if nac.version == "1.6":
        # look-back: FREE at last_use + 1, but records on weight ticks are dropped -> never freed.
        weights = {i.index for i in ins if i.a == 2 and i.b == 1} | buffers
        saved = {v for _, a, v in mm if a == L.MMAP_SAVE_RESULT}
        for v in sorted((weights | saved) - outputs):
            if v in users and max(users[v]) + 1 in weights:
                violations.append(("never_freed", max(users[v]), v))
    else:
        # HEAD: every FREE lands on the tick of the last use -> one same-tick hazard each.
        hazards += [("same_tick_free", t, v) for t, a, v in mm if a == L.MMAP_FREE]
    return sorted(violations), sorted(hazards)


@corpus
@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_corpus_static_findings(case):
    path, *_ = load_case(case)
    with read(path) as nac:
        report = check_schedule(nac)
        want_v, want_h = expected_findings(nac)
    # no MMAP records: optimize=False, and arange_positions__v1.6 whose optimiser raised
    # during the reference compile (its compile_log.txt)
    assert report.has_schedule == (case.name not in ("mlp_noopt__v1.6", "arange_positions__v1.6"))
    assert kinds(report.violations) == want_v
    assert kinds(report.hazards) == want_h


@corpus
def test_corpus_spot_checks():
    """Hand-read from the dumps: cnn__v1.6 loses FREE 1,2 (tick 4 is a weight) and 11,12 (tick 14)."""
    by = {c.name: c for c in CASES}
    with read(load_case(by["cnn__v1.6"])[0]) as nac:
        assert kinds(check_schedule(nac).violations) == [("never_freed", 3, 1), ("never_freed", 3, 2),
                                                         ("never_freed", 13, 11), ("never_freed", 13, 12)]
    with read(load_case(by["mlp__v1.6"])[0]) as nac:
        r = check_schedule(nac)
        assert r.violations == [] and r.hazards == []      # FORWARD 4->7 over weights is fine
    with read(load_case(by["mlp"])[0]) as nac:
        r = check_schedule(nac)
        assert r.violations == []
        assert kinds(r.hazards) == sorted(("same_tick_free", t, v) for t, vs in
                                          {3: (0, 1, 2), 7: (4, 5, 6), 11: (8, 9, 10)}.items() for v in vs)


# --------------------------------------------------------------------------- crafted (static)
@pytest.fixture(scope="module")
def mlp():
    by = {c.name: c for c in CASES}
    if "mlp" not in by:
        pytest.skip("corpus absent")
    path, status, feeds, expected = load_case(by["mlp"])
    nac = read(path)
    yield nac, feeds, expected
    nac.close()


GOOD = {0: [("SAVE", 0), ("PRE", 1), ("PRE", 2)], 3: [("FWD", 4), ("PRE", 5)], 4: [("FREE", 0), ("FREE", 1),
        ("FREE", 2), ("SAVE", 4), ("PRE", 6)], 7: [("FWD", 8), ("PRE", 9)], 8: [("FREE", 4), ("FREE", 5),
        ("FREE", 6), ("SAVE", 8), ("PRE", 10)], 12: [("FREE", 8), ("FREE", 9), ("FREE", 10)]}


def edit(base, tick, drop=(), add=()):
    s = {t: list(c) for t, c in base.items()}
    s[tick] = [c for c in s.get(tick, []) if c not in drop] + list(add)
    return s


def test_clean_crafted_schedule(mlp):
    r = check_schedule(with_mmap(mlp[0], GOOD))
    assert r.violations == [] and r.hazards == []


@pytest.mark.parametrize("schedule, violations, hazards", [
    # FREE v4 at 7 while 7 reads it: a race, not a violation
    (edit(edit(GOOD, 8, drop=[("FREE", 4)]), 7, add=[("FREE", 4)]), [], [("same_tick_free", 7, 4)]),
    # FREE v0 at 3 (its reader) is a hazard; FREE v4 at 5 is before its read at 7
    (edit(edit(GOOD, 8, drop=[("FREE", 4)]), 5, add=[("FREE", 4)]), [("use_after_free", 7, 4)], []),
    # v4 has one consumer but neither SAVE_RESULT nor FORWARD
    (edit(GOOD, 4, drop=[("SAVE", 4)]), [("unrouted", 4, 4)], []),
    (edit(GOOD, 3, drop=[("FWD", 4)], add=[("FWD", 7)]), [("forward_not_consumer", 3, 7), ("never_freed", 4, 3), ("unrouted", 3, 3)], []),
    (edit(GOOD, 0, add=[("PRE", 3)]), [("preload_not_param", 0, 3)], []),
    (edit(edit(GOOD, 7, drop=[("PRE", 9)]), 12, add=[("PRE", 9)]), [("preload_after_use", 12, 9)], []),
    (edit(edit(GOOD, 7, drop=[("PRE", 9)]), 11, add=[("PRE", 9)]), [], [("preload_same_tick", 11, 9)]),
    (edit(edit(GOOD, 7, drop=[("PRE", 9)]), 9, add=[("PRE", 9)]), [], [("preload_after_load", 9, 9)]),
    (edit(GOOD, 12, drop=[("FREE", 9)]), [("never_freed", 11, 9)], []),
    (edit(GOOD, 8, drop=[("FREE", 4)]), [("never_freed", 7, 4)], []),
    (edit(GOOD, 3, add=[("SAVE", 2)]), [("save_not_current", 3, 2)], []),
    (edit(GOOD, 3, add=[("FREE", 40)]), [("target_out_of_range", 3, 40)], []),
    (edit(GOOD, 13, add=[("FREE", 1)]), [("tick_out_of_range", 13, 1)], []),
    (edit(GOOD, 12, add=[("FREE", 8)]), [("double_free", 12, 8)], []),
    (edit(GOOD, 3, add=[("FREE", 5)]), [("free_before_execute", 3, 5)], []),
])
def test_crafted_violation_kinds(mlp, schedule, violations, hazards):
    r = check_schedule(with_mmap(mlp[0], schedule))
    assert kinds(r.violations) == sorted(violations)
    assert kinds(r.hazards) == sorted(hazards)


def test_multi_consumer_without_save_and_forward_not_next():
    text = """
.version 1.6
.ops
v0 = input x
v1 = aten.relu.default(v0)
v2 = aten.relu.default(v1)
v3 = nac.add(v1, v2)
v4 = return v3
.mmap
@1: FORWARD v3
@2: FORWARD v3
"""
    r = check_schedule(assemble(text))
    assert kinds(r.violations) == [("forward_not_next", 1, 3), ("multi_consumer_no_save", 1, 1),
                                   ("never_freed", 3, 1)]   # no route, so no FREE either


# --------------------------------------------------------------------------- dynamic
def _sizes(nac, feeds):
    s = Session(nac, feeds=feeds, keep_results=True)
    s.run()
    return {i: (v.numel() * v.element_size() if hasattr(v, "numel") else 0) for i, v in s.results.items()}


def test_trace_mlp_matches_hand_computation(mlp):
    nac, feeds, expected = mlp
    b = _sizes(nac, feeds)
    # research §9.3 schedule, bytes alive after each tick, written out by hand
    alive = {0: [0, 1, 2], 1: [0, 1, 2], 2: [0, 1, 2], 3: [3, 5], 4: [4, 5, 6], 5: [4, 5, 6], 6: [4, 5, 6],
             7: [7, 9], 8: [8, 9, 10], 9: [8, 9, 10], 10: [8, 9, 10], 11: [11], 12: [11]}
    want = [sum(b[v] for v in alive[t]) for t in range(13)]
    tr = trace_memory(nac, feeds=feeds)
    assert list(tr.ticks) == list(range(13)) and list(tr.live_bytes) == want
    assert tr.peak == max(want) and tr.peak_tick == want.index(max(want))
    assert tr.violations == [] and len(tr.hazards) == 9
    np.testing.assert_allclose(tr.outputs[0], expected[0], rtol=1e-5, atol=1e-6)


@corpus
def test_trace_bert_tiny_peak_matches_event_simulation():
    by = {c.name: c for c in CASES}
    path, status, feeds, _ = load_case(by["bert_tiny"])
    with read(path) as nac:
        b = _sizes(nac, feeds)
        n = len(nac.instructions)
        # Independent walk: a set of live values updated tick by tick from the commands.
        cmds = nac.mmap_by_tick()
        users = {}
        for i in nac.instructions:
            for p in set(i.producers()):
                users.setdefault(p, []).append(i.index)
        live, forwarded_to, series = set(), {}, []
        for t in range(n):
            live.add(t)
            for c in cmds.get(t, []):
                if c.name == "PRELOAD":
                    live.add(c.target)
                elif c.name == "FREE":
                    live.discard(c.target)
                elif c.name == "FORWARD":
                    forwarded_to[t] = c.target
            live -= {v for v, u in forwarded_to.items() if u == t}
            if t not in users and t not in nac.output_producers():
                series.append(sum(b.get(v, 0) for v in live))
                live.discard(t)
                continue
            series.append(sum(b.get(v, 0) for v in live))
        tr = trace_memory(nac, feeds=feeds)
    assert list(tr.live_bytes) == series
    assert tr.peak == max(series) and tr.violations == []


def test_early_free_is_reported_not_raised():
    text = """
.version 1.6
.ops
v0 = input x
v1 = aten.relu.default(v0)
v2 = aten.relu.default(v1)
v3 = nac.add(v1, v2)
v4 = return v3
.mmap
@1: SAVE_RESULT v1
@2: FREE v1, FORWARD v3
"""
    nac = assemble(text)
    assert kinds(check_schedule(nac).violations) == [("use_after_free", 3, 1)]
    x = np.array([-1.0, 2.0], dtype=np.float32)
    tr = trace_memory(nac, feeds=[x])
    assert kinds(tr.violations) == [("use_after_free", 3, 1)]
    np.testing.assert_allclose(tr.outputs[0], [0.0, 4.0])      # the run still finished
    # x (8 bytes) is never freed (caller-owned); v1 dies at 2, v2 is forwarded to 3, v3 is the output
    assert list(tr.live_bytes) == [8, 16, 16, 16, 16]


@pytest.mark.parametrize("schedule, hazards", [
    # the reference HEAD planner's pattern: the output v1 is read by v2 but has no route
    ("@2: FREE v0", [("output_read_unsaved", 1, 1)]),
    ("@1: SAVE_RESULT v1\n@2: FREE v0", []),
])
def test_output_that_a_later_instruction_reads_needs_a_route(schedule, hazards):
    text = f"""
.version 1.6
.ops
v0 = input x
v1 = aten.relu.default(v0)
v2 = aten.neg.default(v1)
v3 = return v1, v2
.mmap
{schedule}
"""
    r = check_schedule(assemble(text))
    assert kinds(r.hazards) == hazards and r.violations == []
