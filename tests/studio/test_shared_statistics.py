"""A weight's statistics in the engine host are one pass per file version (host/handlers.py,
SharedStatistics): selecting a weight asks twice at once (Properties and the tensor inspector),
and the second request waits for the first's pass instead of running its own; a waiter whose
pass is cancelled computes it itself; a later request is answered from the finished pass; a
changed file starts afresh."""
from __future__ import annotations

import shutil
import threading
import time

import numpy as np
import pytest

import nac_studio.model.tensor_stats as tensor_stats
from nac_studio.host.handlers import HostState, statistics
from nac_studio.host.server import Cancelled
from tests.resources_path import DEMO


class _Ctx:
    def __init__(self, state):
        self.state = state
        self.cancelled = False
        self.progressed = []

    def check(self):
        if self.cancelled:
            raise Cancelled()

    def progress(self, done, total=1.0, text=None):
        self.progressed.append((done, total))


@pytest.fixture
def passes(monkeypatch):
    """The parameters param_stats ran for; each pass waits on ``gate`` at its first progress, so
    a second request surely arrives while the first pass runs."""
    ran, gate = [], threading.Event()
    real = tensor_stats.param_stats

    def counted(ctx, p, *a, **k):
        ran.append(p.id)
        gate.wait(30)
        return real(ctx, p, *a, **k)
    monkeypatch.setattr(tensor_stats, "param_stats", counted)
    return ran, gate


def _ask(state, args, into, key, ctx=None):
    ctx = ctx or _Ctx(state)
    try:
        into[key] = statistics(ctx, args)
    except Cancelled as exc:
        into[key] = exc
    return ctx


def _started(ran, n):
    deadline = time.monotonic() + 30
    while len(ran) < n:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_two_requests_at_once_share_one_pass_and_a_later_one_is_answered_from_it(tmp_path, passes):
    ran, gate = passes
    path = tmp_path / "m.nac"
    shutil.copy(DEMO, path)
    state, args, got = HostState(), {"path": str(path), "param": 1}, {}
    first = threading.Thread(target=_ask, args=(state, args, got, "first"))
    first.start()
    _started(ran, 1)
    second_ctx = _Ctx(state)
    second = threading.Thread(target=_ask, args=(state, args, got, "second", second_ctx))
    second.start()
    time.sleep(0.2)                          # the second request is waiting, not computing
    assert ran == [1]
    gate.set()
    first.join(30)
    second.join(30)
    assert ran == [1] and got["first"]["count"] > 0
    assert got["first"]["mean"] == got["second"]["mean"]
    np.testing.assert_array_equal(got["first"]["hist"][0], got["second"]["hist"][0])
    _ask(state, args, got, "later")
    assert ran == [1] and got["later"]["std"] == got["first"]["std"]
    # another parameter is its own pass; a changed file (a new version) starts afresh
    _ask(state, {"path": str(path), "param": 2}, got, "other")
    assert ran == [1, 2]
    shutil.copy(DEMO, path)
    path.touch()
    time.sleep(0.01)
    _ask(state, args, got, "changed")
    assert ran == [1, 2, 1]


def test_a_waiter_whose_pass_is_cancelled_computes_it_itself(tmp_path, passes):
    ran, gate = passes
    state, args, got = HostState(), {"path": str(DEMO), "param": 1}, {}
    owner_ctx = _Ctx(state)
    owner = threading.Thread(target=_ask, args=(state, args, got, "owner", owner_ctx))
    owner.start()
    _started(ran, 1)
    waiter = threading.Thread(target=_ask, args=(state, args, got, "waiter"))
    waiter.start()
    time.sleep(0.1)
    owner_ctx.cancelled = True                # its view moved on
    gate.set()
    owner.join(30)
    waiter.join(30)
    assert isinstance(got["owner"], Cancelled)
    assert ran == [1, 1] and got["waiter"]["count"] > 0
    _ask(state, args, got, "later")
    assert ran == [1, 1]                      # the waiter's pass is the one kept


def test_statistics_are_answered_while_a_long_job_holds_the_work_lane(monkeypatch):
    """Clicking a weight must not wait for the file's shape pass, a layout or a 30-second
    simulation on the work lane: statistics have a lane of their own (``inspect``)."""
    from nac_studio.host.connection import HostConnection
    monkeypatch.setenv("NAC_HOST_TEST_HOOKS", "1")
    conn = HostConnection()
    try:
        long_job = conn.request("nac/testHook", {"how": "sleep", "seconds": 120})   # a work-lane job
        time.sleep(0.3)
        assert not long_job.future.done()
        stats = conn.call("nac/statistics", {"path": str(DEMO), "param": 1}, timeout=60)
        assert stats["count"] > 0 and not long_job.future.done()
        long_job.cancel()
    finally:
        conn.shutdown()
