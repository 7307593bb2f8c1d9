"""DiffResult.values_of: the two values of the first divergence are kept (what the Studio shows side
by side), equal to each run's value at the matched ticks; no other pair keeps its values."""
from __future__ import annotations

import numpy as np
import pytest

from nac_engine.format import read
from nac_engine.diff import diff_files, run_values
from tests.corpus_paths import CORPUS

MLP = CORPUS / "nac" / "mlp" / "mlp.nac"
MLP_FEED = CORPUS / "nac" / "mlp" / "feed_0.npy"
MLP_INT8 = CORPUS / "nac" / "mlp_int8t" / "mlp_int8t.nac"


def test_first_divergence_keeps_both_values():
    if not (MLP.is_file() and MLP_INT8.is_file()):
        pytest.skip("corpus MLP files missing")
    feeds = [np.load(MLP_FEED)]
    result = diff_files(MLP, MLP_INT8, None, feeds, tolerance=1e-3)
    first = result.first_divergence
    assert first is not None and first in result.pairs
    a, b = result.values_of(first)
    va, _ = run_values(read(str(MLP)), None, feeds, {first.tick_a})
    vb, _ = run_values(read(str(MLP_INT8)), None, feeds, {first.tick_b})
    np.testing.assert_array_equal(a.numpy(), va[first.tick_a].numpy())
    np.testing.assert_array_equal(b.numpy(), vb[first.tick_b].numpy())
    assert a.dtype == va[first.tick_a].dtype                  # as the run produced it, not widened
    assert float(np.abs(a.numpy() - b.numpy()).max()) == pytest.approx(first.max_abs)
    assert all(result.values_of(p) is None for p in result.pairs + result.outputs if p is not first)


def test_no_divergence_keeps_nothing():
    if not MLP.is_file():
        pytest.skip("corpus MLP missing")
    result = diff_files(MLP, MLP, None, [np.load(MLP_FEED)], tolerance=1e-3)
    assert not result.diverged and result.kept_values == {}
