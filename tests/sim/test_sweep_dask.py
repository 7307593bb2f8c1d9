"""Design-space sweeps on Dask distributed give the process pool's table, point for point."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nac_engine.sim import sweep as S
from nac_engine.sim.config import HardwareConfigError
from tests.corpus_paths import NAC_FILES

import distributed  # a declared test dependency: failing to import is a failure, not a skip
from tests.cli_fork import run_cli

AXES = {"array.rows": [8, 16, 32], "dram.bytes_per_cycle": [4, 8, 16, 32]}     # 12 points


@pytest.fixture(scope="module")
def model():
    found = [p for p in NAC_FILES if p.parent.name == "mlp"]
    if not found:
        pytest.skip("corpus absent")
    return found[0]


@pytest.fixture(scope="module")
def feed(model):
    return str(model.parent / "feed_0.npy")


@pytest.fixture(scope="module")
def program(model, feed):
    import numpy as np
    from nac_engine.sim.api import prepare
    return prepare(str(model), feeds=[np.load(feed)])


@pytest.fixture(scope="module")
def client():
    # Two in-process workers: the scheduler, serialisation and scatter paths are Dask's own,
    # without spawning processes on a 2-core machine.
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_twelve_points_same_table_through_process_pool_and_local_cluster(model, feed, client):
    import numpy as np
    feeds = [np.load(feed)]
    pool = S.sweep(str(model), "edge-32x32", AXES, feeds=feeds, workers=2)
    dask = S.sweep(str(model), "edge-32x32", AXES, feeds=feeds, scheduler=client)
    assert len(pool) == len(dask) == 12
    assert [r.as_dict() for r in pool] == [r.as_dict() for r in dask]
    assert all(r.ok for r in dask)
    assert S.format_table(pool) == S.format_table(dask)
    # grid order, both keys varied
    assert [tuple(r.values.values()) for r in dask] == [(a, b) for a in AXES["array.rows"]
                                                         for b in AXES["dram.bytes_per_cycle"]]
    assert len({r.total_cycles for r in dask}) > 1


def test_program_is_scattered_once_not_sent_per_point(program, client, monkeypatch):
    scattered, submitted = [], []
    real_scatter, real_submit = client.scatter, client.submit

    def scatter(data, **kw):
        scattered.append((data, kw))
        return real_scatter(data, **kw)

    def submit(fn, *args, **kw):
        submitted.append(args)
        return real_submit(fn, *args, **kw)
    monkeypatch.setattr(client, "scatter", scatter)
    monkeypatch.setattr(client, "submit", submit)
    rows = S.sweep(program, "edge-32x32", {"array.rows": [8, 16, 32]}, scheduler=client)
    assert len(rows) == 3 and all(r.ok for r in rows)
    assert len(scattered) == 1 and scattered[0][1].get("broadcast") is True
    assert scattered[0][0] == [program]
    assert len(submitted) == 3
    assert all(not isinstance(a, S.Program) for args in submitted for a in args)   # a future, not the data


def test_a_failed_point_is_reported_with_its_configuration_and_the_rest_complete(program, client, monkeypatch):
    from nac_engine.sim import engine
    real = engine.run_event

    def flaky(prog, hw):
        if hw.array.rows == 16:
            raise RuntimeError("simulated worker fault")
        return real(prog, hw)
    monkeypatch.setattr(engine, "run_event", flaky)     # in-process workers see the patch
    for rows in (S.sweep(program, "edge-32x32", {"array.rows": [8, 16, 32]}, scheduler=client),
                 S.sweep(program, "edge-32x32", {"array.rows": [8, 16, 32]}, workers=1)):
        assert [r.ok for r in rows] == [True, False, True]
        bad = rows[1]
        assert bad.values == {"array.rows": 16} and "simulated worker fault" in bad.error
        assert bad.total_cycles is None
        table = S.format_table(rows)
        assert "failed: array.rows=16: RuntimeError: simulated worker fault" in table


def test_scheduler_addresses():
    assert S.parse_scheduler("local:3") == ("local", 3)
    assert S.parse_scheduler("tcp://10.0.0.5:8786") == ("address", "tcp://10.0.0.5:8786")
    for bad in ("local:0", "local:x", "localhost:8786", "tcp://", ""):
        with pytest.raises(HardwareConfigError):
            S.parse_scheduler(bad)


def test_cli_scheduler_errors_are_one_line(model):
    r = run_cli(["sim", model, "--sweep", "array.rows=8,16", "--scheduler", "nowhere"])
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "--scheduler 'nowhere'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli(["sim", model, "--scheduler", "local:1"])
    assert r.returncode != 0 and "--sweep" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.heavy       # a real LocalCluster and two CLI processes: ~15 s on one worker
def test_cli_local_cluster_matches_the_process_pool(model, feed):
    """``--scheduler local:1`` starts a real LocalCluster (one worker process)."""
    base = [sys.executable, "-m", "nac_engine.cli", "sim", str(model), "--sweep", "array.rows=8,32",
            "--sweep", "dram.bytes_per_cycle=4,16", "--feed", feed, "--json"]
    pool = subprocess.run(base + ["--workers", "1"], capture_output=True, text=True, timeout=300)
    dask = subprocess.run(base + ["--scheduler", "local:1"], capture_output=True, text=True, timeout=300)
    assert pool.returncode == 0 and dask.returncode == 0, pool.stderr + dask.stderr
    assert json.loads(pool.stdout) == json.loads(dask.stdout)
