"""The CI's hostile-input slice (scripts/fuzz_slice.py) holds on a small run: special files are
refused, files truncated while open give results or the one error, peer mutants decode or are
refused. CI runs it at full size after the test suite."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import CORPUS

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fuzz_slice.py"


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not present at {CORPUS}")
def test_fuzz_slice_small_run_holds(capsys):
    spec = importlib.util.spec_from_file_location("fuzz_slice", SCRIPT)
    slice_ = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(slice_)
    assert slice_.main(["--peer-mutants", "300", "--truncations", "30"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "contract held"
    assert any(line.startswith("fuzz slice: special files: refused ") for line in out)
    assert any("truncated while open" in line and "files 30" in line for line in out)
