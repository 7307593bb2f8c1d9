"""Engine hosts forked from a warm zygote (nac_studio/host/zygote.py): after the first host of a
Studio process has answered, later hosts are forks of a process that already imported torch.
They answer requests like a child would, see the environment of the moment they were asked for
(not the zygote's), and their end is reported with its signal; without a warm zygote the Studio
starts a plain child, as before."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nac_studio.host.connection import HostConnection
from nac_studio.host.zygote import ZYGOTE, ForkedProcess
from tests.resources_path import DEMO

ROOT = Path(__file__).resolve().parents[2]


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _statistics(conn: HostConnection) -> dict:
    """A weight's statistics; its histogram (a list of arrays) as lists, so two answers compare whole."""
    body = conn.call("nac/statistics", {"path": str(DEMO), "param": 1}, timeout=60)
    return {k: [a.tolist() for a in v] if k == "hist" else v for k, v in body.items()}


_PLAIN_CHILD: dict = {}     # what the last plain child host answered


@pytest.fixture
def warm_zygote():
    """A zygote that has finished its imports, started the way the Studio starts one: after a
    second host (both plain children here) answered a request. Once this module has started one,
    later tests reuse it while it lives (each start costs a few seconds of imports)."""
    if _PLAIN_CHILD and ZYGOTE._proc is not None and ZYGOTE._proc.poll() is None and ZYGOTE._is_ready():
        return ZYGOTE
    ZYGOTE.stop()              # an earlier test's zygote: the hosts here must be plain children
    for _ in range(2):
        plain = HostConnection()
        try:
            _PLAIN_CHILD.update(_statistics(plain))
            assert _PLAIN_CHILD["count"] > 0 and not isinstance(plain.proc, ForkedProcess)
        finally:
            plain.shutdown()
    deadline = time.monotonic() + 120
    while ZYGOTE._proc is None or not ZYGOTE._is_ready():
        assert ZYGOTE._proc is not None and ZYGOTE._proc.poll() is None, "no zygote, or it ended during its imports"
        assert time.monotonic() < deadline, "the zygote did not finish its imports"
        time.sleep(0.05)
    return ZYGOTE


def test_a_one_window_session_never_starts_a_zygote():
    code = textwrap.dedent(f"""
        import time
        from nac_studio.host.connection import HostConnection
        from nac_studio.host.zygote import ZYGOTE
        conn = HostConnection()
        assert conn.call("nac/statistics", {{"path": {str(DEMO)!r}, "param": 1}}, timeout=60)["count"] > 0
        time.sleep(0.5)
        conn.shutdown()
        print("zygote" if ZYGOTE._proc is not None else "none")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["none"]


def test_a_later_host_is_a_fork_of_the_zygote_and_answers_like_a_child(warm_zygote):
    conn = HostConnection()
    try:
        stats = _statistics(conn)
        assert isinstance(conn.proc, ForkedProcess)
        assert _parent_of(conn.pid) == warm_zygote._proc.pid
        assert stats == _PLAIN_CHILD
        pid = conn.pid
    finally:
        conn.shutdown()
    assert not os.path.exists(f"/proc/{pid}")        # disconnect ended it, and the zygote reaped it


@pytest.mark.parametrize("how,name", [(signal.SIGKILL, "SIGKILL"), (signal.SIGSEGV, "SIGSEGV")])
def test_a_forked_host_killed_by_a_signal_is_reported_with_it(warm_zygote, how, name):
    conn = HostConnection()
    stopped = []
    conn.on_stopped = stopped.append
    _statistics(conn)
    assert isinstance(conn.proc, ForkedProcess)
    proc = conn.proc
    os.kill(conn.pid, how)
    assert proc.wait(30) == -how
    deadline = time.monotonic() + 30
    while not stopped and time.monotonic() < deadline:
        time.sleep(0.02)
    assert stopped and f"killed by signal {int(how)} ({name})" in stopped[0]
    conn.shutdown()


def test_a_forked_host_sees_the_environment_of_its_start_not_the_zygotes(warm_zygote, monkeypatch):
    """The test hooks exist only with NAC_HOST_TEST_HOOKS=1 in the host's environment: set after
    the zygote started, a forked host must still have them (and one started without, not)."""
    monkeypatch.setenv("NAC_HOST_TEST_HOOKS", "1")
    with_hooks = HostConnection()
    monkeypatch.delenv("NAC_HOST_TEST_HOOKS")
    without = HostConnection()
    try:
        monkeypatch.setenv("NAC_HOST_TEST_HOOKS", "1")
        with_hooks.start()
        monkeypatch.delenv("NAC_HOST_TEST_HOOKS")
        without.start()
        assert isinstance(with_hooks.proc, ForkedProcess) and isinstance(without.proc, ForkedProcess)
        assert with_hooks.call("nac/testHook", {"how": "sleep", "seconds": 0.01}, timeout=30) == {"slept": True}
        refused = without.request("nac/testHook", {"how": "sleep", "seconds": 0.01}).future.exception(30)
        assert refused is not None and "nac/testHook" in str(refused)
    finally:
        with_hooks.shutdown()
        without.shutdown()



def test_a_forked_host_finds_torchs_meta_kernels_loaded(warm_zygote, monkeypatch):
    """The first meta-device op loads ~800 modules (sympy, the meta kernels): 1.2 s that each
    forked host's first shape pass (the graph edges of every compiled file) used to spend."""
    monkeypatch.setenv("NAC_HOST_TEST_HOOKS", "1")
    conn = HostConnection()
    try:
        conn.start()
        assert isinstance(conn.proc, ForkedProcess)
        for module in ("torch._meta_registrations", "sympy"):
            assert conn.call("nac/testHook", {"how": "loaded", "module": module}, timeout=30) == {"loaded": True}
        assert conn.call("nac/testHook", {"how": "loaded", "module": "no_such.module"}, timeout=30) == {"loaded": False}
    finally:
        conn.shutdown()

def test_without_a_live_zygote_the_host_is_a_plain_child(warm_zygote):
    warm_zygote.stop()
    conn = HostConnection()
    try:
        assert _statistics(conn)["count"] > 0
        assert not isinstance(conn.proc, ForkedProcess)
        assert _parent_of(conn.pid) == os.getpid()
    finally:
        conn.shutdown()


def test_the_zygote_outlives_a_host_whose_end_nobody_waits_for(warm_zygote):
    """A host's exit status goes to a pipe the Studio holds; when the Studio has let go of it (a
    window closing while its host still ends), the zygote's report finds no reader. That must
    not end the zygote: the next host is still its fork."""
    conn = HostConnection()
    _statistics(conn)
    proc = conn.proc
    assert isinstance(proc, ForkedProcess)
    r, w = os.pipe()
    os.dup2(r, proc._status)        # the status pipe's read end closed; its fd number stays valid
    os.close(r)
    os.close(w)
    os.kill(conn.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{conn.pid}") and time.monotonic() < deadline:
        time.sleep(0.02)            # reaped by the zygote, whose report then finds no reader
    time.sleep(0.2)
    conn.shutdown()
    assert warm_zygote._proc.poll() is None, "the zygote ended"
    again = HostConnection()
    try:
        assert _statistics(again) == _PLAIN_CHILD and isinstance(again.proc, ForkedProcess)
    finally:
        again.shutdown()
