"""Reference-core mode reproduces the RTL scenario table of research note upstream_hardware.md
§7 (programs and parameters from §7.1), in both memory semantics."""
import pytest

from nac_engine.format import read
from nac_engine.format.model import MmapCommand, MmapRecord
from nac_engine.sim import load_hardware, simulate
from nac_engine.sim.refcore import load_cycles, mmap_drain
from tests.resources_path import DEMO
from tests.sim.refcore_programs import P0_HEX, P1_HEX, m1, ops_bytes, p0, p1, p_ops


def test_programs_are_the_probe_bytes():
    assert ops_bytes(p0()).hex() == P0_HEX
    assert ops_bytes(p1(m1())).hex() == P1_HEX
    assert len(ops_bytes(p_ops())) == 80 and len(p_ops().instructions) == 16


def hw(S, klat, semantics="accept", mode="cached", **lat):
    o = {"refcore.slots_per_tick": S, "refcore.klat": klat, "refcore.ilat": 1, "refcore.run_mode": mode,
         "refcore.memory_semantics": semantics}
    for a in ("preload", "save_result", "forward", "free"):
        o[f"refcore.latency.{a}"] = lat.get(a, 0)
    return load_hardware("nac-core-ref", o)


C10 = [MmapRecord(0, [MmapCommand(20, 0)])]
# id: (program, S, KLAT, mode, latencies, done, ORCH done, load, fetches, commits, accepts)
SCENARIOS = {
    "C1": (lambda: p0(), 2, 1, "cached", {}, 13, 11, 19, [2, 8], [7, 10], []),
    "C2": (lambda: p0(), 4, 1, "legacy", {}, 25, 21, 19, [8, 18], [13, 20], []),
    "C3a": (lambda: p1(), 4, 1, "cached", {}, 32, 27, 41, [2, 8, 14, 19, 24], [7, 13, 18, 23, 26], []),
    "C3b": (lambda: p1(), 4, 10, "cached", {}, 50, 45, 41, [2, 8, 14, 28, 42], None, []),
    "C3c": (lambda: p1(), 4, 100, "cached", {}, 230, 225, 41, None, None, []),
    "C4a": (lambda: p1(m1()), 4, 10, "cached", {}, 52, 45, 41, None, None, [9, 29, 43, 45]),
    "C4b": (lambda: p1(m1()), 4, 10, "cached", {"preload": 50}, 82, 45, 41, None, None, [59, 68, 73, 75]),
    "C4c": (lambda: p1(m1()), 4, 10, "cached", {"preload": 500}, 532, 45, 41, None, None, [509, 518, 523, 525]),
    "C5": (lambda: p1(), 4, 10, "legacy", {}, 57, 52, 41, [4, 12, 21, 35, 49], None, []),
    "C6": (lambda: p0(), 256, 1, "cached", {}, 520, 11, 19, None, None, []),
    "C8": (lambda: p1(m1()), 256, 10, "cached", {}, 1292, 45, 41, None, None, [9, 522, 779, 781]),
    "C9": (lambda: p1(), 256, 1000, "cached", {}, 2534, 2025, 41, None, None, []),
    "C10/0": (lambda: p0(C10), 2, 1, "legacy", {"free": 0}, 23, 21, 19, None, None, [15]),
    "C10/3": (lambda: p0(C10), 2, 1, "legacy", {"free": 3}, 23, 21, 19, None, [13, 20], [18]),
    "C10/10": (lambda: p0(C10), 2, 1, "legacy", {"free": 10}, 29, 21, 19, None, None, [25]),
    "C10/100": (lambda: p0(C10), 2, 1, "legacy", {"free": 100}, 119, 21, 19, None, None, [115]),
    "C11": (lambda: p_ops(), 4, 1, "cached", {}, 86, 81, 127, [2] + [8 + 5 * k for k in range(14)] + [78],
            None, []),
}


@pytest.mark.parametrize("semantics", ["accept", "tick"])
@pytest.mark.parametrize("sid", list(SCENARIOS))
def test_scenario_cycles(sid, semantics):
    build, S, klat, mode, lat, done, orch, load, fetch, commit, accepts = SCENARIOS[sid]
    r = simulate(build(), hw(S, klat, semantics, mode, **lat))
    rc = r.refcore
    assert (rc["done"], rc["orch_done"], rc["load_cycles"]) == (done, orch, load)
    assert r.total_cycles == done and r.mode == "refcore"
    if fetch is not None:
        assert rc["fetch"] == fetch
    if commit is not None:
        assert rc["commit"] == commit
    assert [a["accept_cycle"] for a in rc["accepts"]] == accepts
    for rec, f, c in zip(r.instructions, rc["fetch"], rc["commit"]):
        assert (rec.issue_cycle, rec.start_cycle, rec.end_cycle, rec.stall_cycles) == (f, f, c, 0)
        assert rec.dispatch_cycles == {"op": 3, "output": 2}.get(rec.kind, 4)   # ORCH overhead (§3.3)
        assert rec.compute_cycles == {"op": klat, "output": 0}.get(rec.kind, 1)


def test_c11_kernel_starts_every_five_cycles():
    r = simulate(p_ops(), hw(4, 1))
    starts = [rec.detail["kernel_start"] for rec in r.instructions if rec.kind == "op"]
    assert starts == list(range(9, 75, 5))


def test_late_forward_overwrites_the_consumer_only_at_accept_time():
    late = simulate(p1(m1()), hw(4, 10, "accept", preload=50)).refcore["hazards"]
    assert {(h["kind"], h["target"]) for h in late} >= {("forward_overwrite", 3)}
    on_time = simulate(p1(m1()), hw(4, 10, "accept")).refcore["hazards"]
    assert not [h for h in on_time if h["kind"] == "forward_overwrite"]
    assert simulate(p1(m1()), hw(4, 10, "tick", preload=50)).refcore["hazards"] == []


def test_mmap_engine_drains_unseen_ticks_from_zero():
    """U3: ticks 0–4 never arrive, tick 5 at cycle 0 and 6 at 1; tick 5 holds PRELOAD, FREE,
    FORWARD, SAVE (PRELOAD ready withheld 3 cycles), tick 6 a FREE; S = 4."""
    slots = {5: [(40, 9), (20, 2), (30, 6), (10, 12)], 6: [(20, 7)]}
    idle, acc = mmap_drain([0] * 6 + [1], slots, 4, lambda t, k, a, x, valid: valid + (3 if a == 40 else 0))
    assert [(a.valid_cycle, a.accept_cycle) for a in acc] == [(22, 25), (27, 27), (29, 29), (31, 31), (33, 33)]
    assert idle == 37


def test_load_cycles_formula():
    assert load_cycles(p0().instructions) == 19 and load_cycles(p1().instructions) == 41


def test_too_many_commands_for_the_slots():
    from nac_engine.sim.refcore import RefcoreError
    with pytest.raises(RefcoreError, match="tick 3 has 2 MMAP commands"):
        simulate(p1(m1()), hw(1, 10))


def test_derived_costs_on_a_real_program():
    """The preset: derived kernel latencies from shapes, PRELOADs through the DMA manager model."""
    with read(str(DEMO)) as nac:
        r = simulate(nac, "nac-core-ref", inputs={"x": "2x8"})
        n = len(nac.instructions)
        ref = load_hardware("nac-core-ref")
        rc = r.refcore
        assert "kernel latencies" in rc["derived"] and "preload ready latency" in rc["derived"]
        # 256 slots scanned per tick: the MMAP engine, not compute, sets the pace
        assert r.total_cycles >= 256 * n
        lin = next(rec for rec in r.instructions if rec.op == "aten.linear.default")
        assert lin.compute_cycles == 2 * 16 * -(-8 // ref.refcore.lanes) + 3      # M·N·⌈K/L⌉ + 3
        relu = next(rec for rec in r.instructions if rec.op == "aten.relu.default")
        assert relu.compute_cycles == max(ref.refcore.klat_min, -(-32 // ref.refcore.lanes) + 3)
        # a PRELOAD miss holds the manager: request 3, DRAM 10 + bytes/8 + 1, ready 2
        for t in r.transfers:
            acc = next(a for a in rc["accepts"] if a["action"] == "preload" and a["target"] == t.value)
            assert t.start_cycle == acc["accept_cycle"] + 3
            assert t.end_cycle == t.start_cycle + 10 + -(-t.bytes // 8) + 1
        params = {x.tick: x.out_bytes for x in r.instructions if x.kind == "param"}
        assert r.dram_read_bytes == sum(params[t.value] for t in r.transfers)
        # the next command is accepted no earlier than the manager is ready again
        accepts = rc["accepts"]
        for a, b in zip(accepts, accepts[1:]):
            if a["action"] == "preload":
                t = next(t for t in r.transfers if t.value == a["target"])
                assert b["accept_cycle"] >= t.end_cycle + 2
