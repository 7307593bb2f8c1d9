"""Re-planning a file's MMAP in memory, and saving a copy whose only change is its schedule."""
from __future__ import annotations


import numpy as np
import pytest
import torch
from torch import nn

import nac_engine
from nac_engine.compiler import replan as R
from nac_engine.compiler.pipeline import compile_model
from nac_engine.compiler.schedule import resident_bytes
from nac_engine.runtime.mmap_check import check_schedule, trace_memory
from tests.corpus_paths import NAC_FILES
from tests.cli_fork import run_cli


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.ln = nn.Linear(16, 48), nn.Linear(48, 16), nn.LayerNorm(16)

    def forward(self, x):
        h = torch.relu(self.a(x))
        y = self.ln(self.b(h) + x)
        return torch.softmax(y @ y.transpose(-1, -2), -1) @ y


@pytest.fixture(scope="module")
def compiled():
    torch.manual_seed(0)
    return compile_model(_Block(), (torch.randn(6, 16),))


def test_planner_peaks_equal_the_compiler_report(compiled):
    nac, report = compiled.nac, compiled.report
    sizes = R.value_nbytes(nac, {"x": "6x16"})
    curves = {c.label: c for c in R.compare(nac, sizes, [R.Planner("min-peak"), R.Planner("reference")])}
    for mode in ("min-peak", "reference"):
        assert curves[mode].peak == report.mmap[mode]["peak"], mode
        assert curves[mode].peak_tick == report.mmap[mode]["tick"], mode
        assert sum(curves[mode].commands.values()) == report.mmap[mode]["commands"], mode
    # the file was compiled with min-peak: its own schedule measures the same
    assert curves["file"].peak == report.mmap["min-peak"]["peak"]
    assert list(curves["file"].live_bytes) == list(curves["min-peak"].live_bytes)


def test_parse_planner():
    assert R.parse_planner("reference") == R.Planner("reference")
    assert R.parse_planner(" Lookahead 5 ") == R.Planner("min-peak", 5)
    assert R.parse_planner("lookahead 2").label == "min-peak"
    assert R.Planner("min-peak", 7).label == "lookahead 7"
    for bad in ("fastest", "lookahead", "lookahead -1", "lookahead x"):
        with pytest.raises(ValueError):
            R.parse_planner(bad)


def _section_bytes(path) -> dict[str, bytes]:
    """Each section's bytes (header excluded: its offsets move when MMAP changes size)."""
    raw = open(path, "rb").read()
    nac = nac_engine.read(str(path))
    out = {}
    for child in nac.spans.children:
        if child.name != "header":
            out[child.name] = raw[child.offset:child.offset + child.length]
    nac.close()
    return out


@pytest.mark.parametrize("mode", ["min-peak", "reference", "reference-lookback"])
def test_save_with_schedule_changes_only_mmap_and_lints(tmp_path, compiled, mode):
    src = tmp_path / "src.nac"
    nac_engine.write(compiled.nac, str(src))
    nac = nac_engine.read(str(src))
    sizes = R.value_nbytes(nac, {"x": "6x16"})
    plan = R.replan(nac, sizes, R.Planner(mode))
    out = tmp_path / f"{mode}.nac"
    R.save_with_schedule(nac, plan.records, out)
    before, after = _section_bytes(src), _section_bytes(out)
    assert set(before) == set(after)
    assert [k for k in before if before[k] != after[k]] in ([], ["MMAP"])
    again = nac_engine.read(str(out))
    assert [(r.tick, [(c.action, c.target) for c in r.commands]) for r in again.mmap] == \
        [(r.tick, [(c.action, c.target) for c in r.commands]) for r in plan.records]
    assert nac_engine.verify(str(out)) == []
    lint = run_cli(["lint", out])
    if mode == "min-peak":
        assert lint.returncode == 0, lint.stdout + lint.stderr
        assert check_schedule(again).violations == [] and check_schedule(again).hazards == []
    x = np.random.default_rng(0).standard_normal((6, 16)).astype(np.float32)
    np.testing.assert_array_equal(nac_engine.run(again, inputs={"x": x})[0], nac_engine.run(nac, inputs={"x": x})[0])
    again.close()
    nac.close()


def test_save_is_atomic_when_encoding_fails(tmp_path, compiled):
    from nac_engine.errors import NacEncodeError
    from nac_engine.format.model import MmapCommand, MmapRecord
    dst = tmp_path / "keep.nac"
    dst.write_bytes(b"old")
    bad = [MmapRecord(0, [MmapCommand(1, 70000)])]      # target does not fit the field
    with pytest.raises((NacEncodeError, ValueError, OverflowError)):
        R.save_with_schedule(compiled.nac, bad, dst)
    assert dst.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["keep.nac"]


@pytest.mark.skipif(not NAC_FILES, reason="corpus absent")
@pytest.mark.parametrize("path", [p for p in NAC_FILES if p.parent.name in ("mlp", "cnn__v1.6", "bert_tiny")],
                         ids=lambda p: p.parent.name)
def test_meta_sizes_reproduce_the_dynamic_trace(path):
    """Sizes from shape propagation (no real run) give mmap_check's live bytes exactly."""
    nac = nac_engine.read(str(path))
    feeds = [np.load(f) for f in sorted(path.parent.glob("feed_*.npy"))]
    sizes = R.value_nbytes(nac, feeds=feeds)
    trace = trace_memory(nac, feeds=feeds)
    assert list(trace.live_bytes) == resident_bytes(nac, nac.mmap, sizes, during_tick=False)
    nac.close()
