"""The models the DAP tests debug, compiled once per test session (the Python client's tests and
the DebugClient suite share them)."""
from __future__ import annotations

from pathlib import Path

import pytest

from nac_engine.cli import main
from tests.dap.fixture_models import NESTED, SLOW


@pytest.fixture(scope="session")
def dap_models(tmp_path_factory) -> Path:
    """A directory with model.py/model.nac (nested modules, a NaN at its log), model_q8.nac
    (int8 per channel) and slow.py/slow.nac (~400 matrix products: long enough to pause)."""
    d = tmp_path_factory.mktemp("dap_models")
    (d / "model.py").write_text(NESTED)
    (d / "slow.py").write_text(SLOW)
    assert main(["compile", str(d / "model.py"), "-o", str(d / "model.nac")]) == 0
    assert main(["compile", str(d / "model.py"), "-o", str(d / "model_q8.nac"), "--quant", "int8_channel"]) == 0
    assert main(["compile", str(d / "slow.py"), "-o", str(d / "slow.nac")]) == 0
    return d


@pytest.fixture(autouse=True)
def own_cache_folder(tmp_path, monkeypatch):
    """`nac dap` remembers the model programs it compiled in the user's cache folder: a test's
    adapters (and the ones it starts) remember them in a folder of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
