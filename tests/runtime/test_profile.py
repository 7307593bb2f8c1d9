"""The Profile run (nac_engine.runtime.profile, `nac profile`): every instruction timed on this
CPU, median of the timed runs; the slowest instructions and ops; with --hw the simulated cycles
of the same instructions beside them."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nac_engine import read
from nac_engine.cli import main
from nac_engine.format.input_signature import signature_inputs
from nac_engine.runtime.profile import Profile, profile
from nac_engine.sim.api import simulate
from tests.resources_path import DEMO

CNN = DEMO.with_name("demo_cnn.nac")


def test_every_instruction_is_timed_and_the_lists_are_consistent():
    prof = profile(str(CNN), repeat=3)
    assert prof.repeat == 3 and len(prof.runs) == 3 and prof.total_seconds == float(np.median(prof.runs))
    assert prof.seconds.shape == (len(prof.ops),) and np.all(prof.seconds > 0)
    slowest = prof.slowest(5)
    assert [t for t, _ in slowest] == sorted(range(len(prof.ops)), key=lambda t: (-prof.seconds[t], t))[:5]
    by_op = prof.by_op()
    assert sum(n for _op, _s, n in by_op) == len(prof.ops)
    assert sum(s for _op, s, _n in by_op) == pytest.approx(float(prof.seconds.sum()))
    assert [s for _op, s, _n in by_op] == sorted((s for _op, s, _n in by_op), reverse=True)
    back = Profile.from_data(json.loads(json.dumps(prof.to_data())))
    np.testing.assert_array_equal(back.seconds, prof.seconds)
    assert back.ops == prof.ops and back.runs == prof.runs


def test_profile_refuses_nothing_to_time():
    with pytest.raises(ValueError):
        profile(str(CNN), repeat=0)


def test_cli_lists_measured_time_beside_simulated_cycles(capsys):
    assert main(["profile", str(CNN), "--top", "4", "--hw", "edge-32x32"]) == 0
    out = capsys.readouterr().out
    assert "simulated on edge-32x32" in out and "slowest instructions" in out and "slowest ops" in out
    rows = out.split("slowest instructions")[1].split("slowest ops")[0].strip().splitlines()[1:]
    assert len(rows) == 4
    sim = simulate(str(CNN), "edge-32x32", inputs=signature_inputs(read(str(CNN))))
    cycles = {r.tick: r.end_cycle - r.issue_cycle for r in sim.instructions if r.kind != "skipped"}
    for row in rows:
        tick, _us, _share, cyc, _sim_us, op = row.split(None, 5)
        assert int(cyc.replace(",", "")) == cycles[int(tick)]
    assert main(["profile", str(CNN), "--json", "--repeat", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["instructions"]) == len(sim.instructions) and data["repeat"] == 1
    assert all(r["measured_s"] > 0 for r in data["instructions"])


def test_cli_refusals_are_one_line(capsys):
    assert main(["profile", str(CNN), "--hw", "no-such-preset"]) == 2
    assert "no-such-preset" in capsys.readouterr().err
    assert main(["profile", str(CNN), "--repeat", "0"]) == 2


def test_a_mind_program_is_profiled_after_converting_it_in_memory(tmp_path, capsys):
    ir = tmp_path / "m.ir"
    ir.write_bytes(b'%0 = Input() {name: "x"} : Tensor<f32, [2, 3]>\n%1 = Relu(%0) : Tensor<f32, [2, 3]>\n'
                   b'%2 = BinOp(Mul, %1, %1) : Tensor<f32, [2, 3]>\noutputs: %2\n')
    assert main(["profile", str(ir), "--input", "x=2x3", "--top", "2"]) == 0
    out, err = capsys.readouterr()
    assert "converted from mind to NAC in memory" in err and "slowest instructions" in out
    tvmr = tmp_path / "p.tvmr"
    tvmr.write_bytes(b"TVMR" + bytes(60))
    assert main(["profile", str(tvmr)]) == 2
    assert "nac profile" in capsys.readouterr().err


def test_the_slowest_instructions_name_the_module_that_ran_them(capsys):
    """A 12-layer model's 12 matrix products look alike: the source map says whose each is."""
    from nac_engine.format.source_map import read_source_map
    bert = DEMO.with_name("demo_bert_tiny.nac")   # compiled with a source map
    modules = {e.tick: e.module_path for e in read_source_map(read(str(bert))).entries}
    assert main(["profile", str(bert), "--top", "6", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    rows = out.split("slowest instructions")[1].split("slowest ops")[0].strip().splitlines()[1:]
    named = [r for r in rows if r.endswith(")")]
    assert named, rows
    for row in named:
        tick = int(row.split()[0])
        assert row.endswith(f"  ({modules[tick]})")
    assert main(["profile", str(bert), "--json", "--repeat", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert all(r["module"] == modules.get(r["tick"], "") for r in data["instructions"])
