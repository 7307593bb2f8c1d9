"""The DAP acceptance suite: mocha drives `nac dap` through @vscode/debugadapter-testsupport's
DebugClient (the client VS Code's adapter authors test with). This test compiles the fixtures,
then runs it; `node` and the suite's npm packages are installed by scripts/install.sh, and a
missing one is a failure here, not a skip."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus_paths import CORPUS
from tests.dap.fixture_models import NESTED, marker_line


# scripts/install.sh may rebuild tests/dap/node_modules, which the DAP suites run from: one worker.
# Heavy: 24 sessions of `nac dap` (each imports torch), ~35 s on one worker; the default tier's
# tests/dap/test_adapter.py drives the same adapter over the same requests from Python.
pytestmark = [pytest.mark.xdist_group("node_modules"), pytest.mark.heavy]

HERE = Path(__file__).resolve().parent


@pytest.fixture
def fixtures(dap_models, tmp_path) -> Path:
    d = tmp_path
    model, quant, slow = dap_models / "model.nac", dap_models / "model_q8.nac", dap_models / "slow.nac"
    data = model.read_bytes()
    (d / "truncated.nac").write_bytes(data[:len(data) // 3])
    (d / "noise.nac").write_bytes(b"NAC\x01" + bytes(range(256)) * 4)
    corpus = CORPUS / "nac" / "cnn"
    info = {"model": str(model), "source": str(dap_models / "model.py"), "quant": str(quant), "slow": str(slow),
            "truncated": str(d / "truncated.nac"), "noise": str(d / "noise.nac"),
            "lines": {m: marker_line(NESTED, m) for m in ("softmax", "body", "head-call", "log")},
            "corpus": str(corpus / "cnn.nac"), "corpusFeed": str(corpus / "feed_0.npy"),
            "corpusExpected": str(corpus / "expected_output_0.npy")}
    path = d / "fixtures.json"
    path.write_text(json.dumps(info))
    return path


def test_debug_client_suite(fixtures):
    if not CORPUS.is_dir():
        pytest.skip("the shared corpus is absent")
    node = shutil.which("node")
    assert node is not None, "node is not installed: run scripts/install.sh (it installs Node.js)"
    mocha = HERE / "node_modules" / "mocha" / "bin" / "mocha.js"
    assert mocha.is_file(), "the DAP suite's npm packages are missing: run scripts/install.sh (npm ci in tests/dap)"
    nac = Path(sys.executable).parent / "nac"
    env = dict(os.environ, NAC_BIN=str(nac if nac.exists() else shutil.which("nac")),
               NAC_DAP_FIXTURES=str(fixtures))
    r = subprocess.run([node, str(mocha), "--timeout", "180000", "--reporter", "spec", "extension.test.js", "dap.test.js"],
                       cwd=HERE, env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-4000:]
    assert " passing" in r.stdout and " failing" not in r.stdout
