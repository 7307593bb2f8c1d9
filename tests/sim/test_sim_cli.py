"""``nac sim``: JSON keys, trace (Perfetto), CSV, inputs, errors, sweeps."""
import json

import numpy as np
import pytest

from nac_engine.cli import main
from nac_engine.format import write
from nac_engine.sim import load_hardware, simulate
from nac_engine.sim.sweep import format_table, parse_axis, sweep
from nac_engine.sim.trace import trace_events
from nac_engine.sim.topology import transformer_program
from tests.resources_path import DEMO

ISSUE_KEYS = {"total_cycles", "instructions", "dram_read_bytes", "dram_write_bytes", "peak_sram_bytes",
              "utilization"}
RECORD_KEYS = {"tick", "op", "start_cycle", "end_cycle", "compute_cycles", "stall_cycles", "stall_cause"}


@pytest.fixture(scope="module")
def gpt_file(tmp_path_factory):
    nac, _ = transformer_program(2, 32, 2, 8, vocab=50, with_data=True)
    path = tmp_path_factory.mktemp("sim") / "gpt.nac"
    write(nac, str(path))
    return str(path)


GPT_INPUTS = ["--input", "input_ids=1x8:int64", "--input", "position_ids=1x8:int64",
              "--input", "causal_mask=1x1x8x8"]


def test_json_output(capsys, gpt_file):
    assert main(["sim", gpt_file, "--hw", "edge-32x32", "--json"] + GPT_INPUTS) == 0
    d = json.loads(capsys.readouterr().out)
    assert ISSUE_KEYS <= set(d)
    assert d["instructions"] and all(RECORD_KEYS <= set(r) for r in d["instructions"])
    assert d["total_cycles"] >= d["instructions"][-1]["end_cycle"]
    assert 0 < d["utilization"]["systolic"] <= 1


def test_text_trace_and_csv(tmp_path, capsys, gpt_file):
    trace, table = tmp_path / "t.json", tmp_path / "per_instr.csv"
    assert main(["sim", gpt_file, "--trace", str(trace), "--csv", str(table)] + GPT_INPUTS) == 0
    out = capsys.readouterr().out
    assert "cycles" in out and "DRAM read" in out and str(trace) in out
    rows = table.read_text().splitlines()
    assert rows[0].startswith("tick,op,kind,unit")
    doc = json.loads(trace.read_text())
    assert doc["traceEvents"] and doc["otherData"]["total_cycles"] > 0


def test_trace_events_are_valid_and_per_track(gpt_file):
    r = simulate(gpt_file, "edge-32x32", inputs={"input_ids": "1x8:int64", "position_ids": "1x8:int64",
                                                  "causal_mask": "1x1x8x8"})
    doc = trace_events(r)
    ev = doc["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"core", "stalls", "systolic", "vector", "sfu", "mover", "dma0", "dma1"} <= names
    counters = [e for e in ev if e["ph"] == "C"]
    assert counters and all(e["name"] == "SRAM bytes" for e in counters)
    us = 1e6 / r.clock_hz
    assert max(e["args"]["bytes"] for e in counters) == r.peak_sram_bytes
    slices = [e for e in ev if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in slices)
    by_tid = {}
    for e in slices:
        by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_tid.values():      # complete events on one track must not overlap
        spans.sort()
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(spans, spans[1:]))
    assert max(e["ts"] + e["dur"] for e in slices) <= r.total_cycles * us + 1e-6
    assert sum(1 for e in slices if e["cat"] == "dma") == len(r.transfers)


def test_named_npy_and_feed_inputs(tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((2, 8), dtype=np.float32))
    assert main(["sim", str(DEMO), "--input", f"x={x}", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)["total_cycles"]
    assert main(["sim", str(DEMO), "--feed", "2x8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total_cycles"] == a


@pytest.mark.parametrize("argv,needle", [
    (["--hw", "nope"], "unknown hardware preset"),
    (["--set", "array.rows=-1"], "array.rows"),
    (["--set", "rows"], "expected KEY=VALUE"),
    (["--input", "x=1xq"], "input spec"),
    (["--input", "y=2x8"], "unknown input name"),
    ([], "input value(s) missing"),
    (["--input", "x=2x8", "--sweep", "array.rows"], "expected KEY=V1,V2"),
])
def test_errors_are_one_line(capsys, argv, needle):
    assert main(["sim", str(DEMO)] + argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err



def test_a_bad_override_is_named_as_the_override_not_as_the_presets_line(capsys):
    """``--set array.rows=abc``: the error names the override (it said "edge-32x32.toml: array.rows",
    sending the user to a file they never wrote)."""
    assert main(["sim", str(DEMO), "--input", "x=2x8", "--set", "array.rows=abc"]) == 2
    err = capsys.readouterr().err
    assert "array.rows=abc (set over edge-32x32.toml): expected an integer in [1, 65536], got 'abc'" in err


def test_a_byte_count_override_takes_binary_suffixes(capsys):
    """sram.bytes=512K is 524,288 bytes, as the Studio's "SRAM KiB" field and --cpu-budget count; a
    clock in Hz takes no suffix (M would not mean 2**20 there)."""
    totals = {}
    for value in ("512K", "524288", "0.5MiB"):
        code = main(["sim", str(DEMO), "--input", "x=2x8", "--set", f"sram.bytes={value}", "--json"])
        out = capsys.readouterr()
        if value == "0.5MiB":
            assert code == 2 and "sram.bytes=0.5MiB (set over edge-32x32.toml)" in out.err
            continue
        assert code == 0, out.err
        totals[value] = json.loads(out.out)["sram_capacity"]
    assert totals == {"512K": 524288, "524288": 524288}
    assert main(["sim", str(DEMO), "--input", "x=2x8", "--set", "clock_hz=800M"]) == 2
    assert "clock_hz=800M (set over edge-32x32.toml): expected a number" in capsys.readouterr().err

def test_missing_file(capsys, tmp_path):
    assert main(["sim", str(tmp_path / "nope.nac")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_refcore_preset_from_the_cli(capsys):
    assert main(["sim", str(DEMO), "--hw", "nac-core-ref", "--input", "x=2x8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mode"] == "refcore" and d["refcore"]["done"] == d["total_cycles"]


def test_sweep_table_in_parallel(capsys):
    assert main(["sim", str(DEMO), "--input", "x=2x8", "--sweep", "dram.bytes_per_cycle=1,4,64",
                 "--sweep", "array.rows=8,32", "--workers", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "6 point(s)" in out[0]
    header = out[1].split()
    assert header[:3] == ["dram.bytes_per_cycle", "array.rows", "cycles"]
    assert len(out) == 3 + 6


def test_an_invalid_point_is_a_failed_row_not_a_failed_sweep(capsys):
    """``array.rows=0,16``: the 0 row fails naming why, the 16 row runs; exit 1 (a sweep with a
    failed row), not 2 (a refused command)."""
    assert main(["sim", str(DEMO), "--input", "x=2x8", "--sweep", "array.rows=0,16", "--workers", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln.split()[1] for ln in out[3:5]}
    assert rows["0"] == "failed" and rows["16"].replace(",", "").isdigit()
    assert any("array.rows=0" in ln and "expected an integer" in ln for ln in out)


def test_sweep_matches_single_runs():
    rows = sweep(str(DEMO), "edge-32x32", {"sram.bytes": [512, 1 << 20]}, inputs={"x": "2x8"}, workers=1)
    for row in rows:
        single = simulate(str(DEMO), load_hardware("edge-32x32", row.values), inputs={"x": "2x8"})
        assert (row.total_cycles, row.dram_read_bytes, row.spills) == \
            (single.total_cycles, single.dram_read_bytes, len(single.spills))
    assert rows[0].spills > 0 == rows[1].spills
    assert "sram.bytes" in format_table(rows)
    assert parse_axis("array.dataflow=os,ws") == ("array.dataflow", ["os", "ws"])
