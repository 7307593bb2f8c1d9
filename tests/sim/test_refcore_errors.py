"""Reference-core mode reports what the RTL reports as errors (issue 15 §4): the progress
watchdog (RTL C7) and an op id ORCH cannot execute (RTL C12), at the RTL's cycles, with the
probe harness's parameters (upstream_hardware.md §7.1, §7.3)."""
import pytest

from nac_engine.sim import load_hardware, simulate
from nac_engine.sim.refcore import HARDWIRED_OPS, RefcoreOrchError, RefcoreWatchdog
from tests.sim.refcore_programs import _file, p1
from tests.sim.test_refcore import hw


def test_preset_has_the_tiny_profiles_watchdog_and_op_table():
    rc = load_hardware("nac-core-ref").refcore
    assert (rc.watchdog_cycles, rc.op_table) == (1000, "cmap")
    assert load_hardware("edge-32x32").refcore.watchdog_cycles == 0     # other presets: off


def test_c7_watchdog_timeout_at_1045():
    # P1, S = 256, KLAT 10, no MMAP: ORCH is done at 45, then the engine scans empty slots
    # (ticks start 8, 264, 520, 776, 1032) with no handshake: timeout at 45 + 1000
    with pytest.raises(RefcoreWatchdog) as err:
        simulate(p1(), hw(256, 10))
    assert err.value.cycle == 1045
    msg = str(err.value)
    assert "watchdog timeout at cycle 1045" in msg and "since cycle 45" in msg and "C7" in msg


def test_c7_without_the_watchdog_runs_to_the_end_of_the_scan():
    h = load_hardware("nac-core-ref", {**_overrides(256, 10), "refcore.watchdog_cycles": 0})
    r = simulate(p1(), h)
    assert (r.refcore["orch_done"], r.refcore["done"]) == (45, 1032 + 256)


def test_a_kernel_of_exactly_the_limit_is_no_timeout():
    # C9: KLAT 1000, kernel_start → kernel_done is 1000 cycles, not longer: done 2534
    assert simulate(p1(), hw(256, 1000)).refcore["done"] == 2534
    with pytest.raises(RefcoreWatchdog) as err:      # one cycle longer is
        simulate(p1(), hw(256, 1001))
    assert err.value.cycle == 15 + 1000              # kernel_start seen at fetch 14 + 1


def _overrides(S, klat):
    o = {"refcore.slots_per_tick": S, "refcore.klat": klat, "refcore.ilat": 1}
    for a in ("preload", "save_result", "forward", "free"):
        o[f"refcore.latency.{a}"] = 0
    return o


def c12(cmap_div: bool = False):
    """INPUT; A=21 (nac.div) B=1; OUTPUT — no op-table entry for 21 unless ``cmap_div``."""
    nac = _file([(2, 0, None, None), (21, 1, None, (-1, -1)), (3, 0, (2, 0), (-1,))])
    if cmap_div:
        nac.cmap[21] = "nac.div"
    return nac


def test_c12_unknown_op_id_is_an_orch_error_at_10():
    assert 21 not in HARDWIRED_OPS
    with pytest.raises(RefcoreOrchError) as err:
        simulate(c12(), hw(4, 1))
    assert (err.value.cycle, err.value.tick) == (10, 1)
    msg = str(err.value)
    assert "op id 21" in msg and "ORCH error at cycle 10" in msg and "fetched at 8" in msg and "C12" in msg


def test_an_op_table_entry_or_op_table_any_runs_it():
    assert simulate(c12(cmap_div=True), hw(4, 1)).refcore["orch_done"] > 10
    h = load_hardware("nac-core-ref", {**_overrides(4, 1), "refcore.op_table": "any"})
    assert simulate(c12(), h).refcore["orch_done"] > 10
