"""Cheap sessions: calls prepared once (template + schema binding), values dropped after their
last reader in Session.run, weights read on first use, and a thread count for a shared machine."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nac_engine import read, threads
from nac_engine.runtime import Session
from nac_engine.runtime.prepared import PreparedCall

from .test_corpus_run import CASES, corpus, load_case


class _LiveCounter(Session):
    """Records how many values ``results`` holds after each instruction."""

    def run_instruction(self, i):
        value = super().run_instruction(i)
        self.sizes.append(len(self.results))
        return value


@corpus
@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_second_run_with_prepared_calls_is_bit_identical(case):
    """The second run goes through the prepared templates and binding recipes; it must give
    exactly what a fresh session's first (fully bound) run gives."""
    path, _, feeds, _ = load_case(case)
    with read(path) as nac:
        try:
            first = Session(nac, feeds=feeds).run()
        except Exception as e:     # files the interpreter refuses are another test's business
            pytest.skip(f"does not run: {type(e).__name__}")
        s = Session(nac, feeds=feeds)
        s.run()
        again = s.run()
        assert len(again) == len(first)
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a, b)
        recipes = sum(1 for c in s._prepared.values() if c.recipe is not None)
        assert all(isinstance(c, PreparedCall) for c in s._prepared.values())
        if any(getattr(c.fn, "op", None) is not None for c in s._prepared.values()):
            assert recipes > 0     # schema-bound ops got a binding recipe


@corpus
def test_run_drops_values_after_their_last_reader():
    path, _, feeds, expected = load_case(next(c for c in CASES if c.name == "bert_tiny"))
    with read(path) as nac:
        kept = _LiveCounter(nac, feeds=feeds, keep_results=True)
        kept.sizes = []
        kept.run()
        freeing = _LiveCounter(nac, feeds=feeds)
        freeing.sizes = []
        out = freeing.run()
        np.testing.assert_allclose(out[0], expected[0], rtol=0, atol=1e-4)
        n = len(nac.instructions)
        assert max(kept.sizes) == n
        # the live set of a 2-layer BERT is a handful of values, not every instruction's
        assert max(freeing.sizes) < n // 3, max(freeing.sizes)
        du = nac.def_use()
        left = set(freeing.results)
        assert all(du.users(v) == () or du.last_use(v) >= n - 1 or v in du.outputs for v in left), left


def test_dead_values_follow_the_def_use_index(tmp_path):
    from .test_session import program
    # v0 = x; v1 = neg(v0); v2 = neg(v0) (unread); v3 = neg(v1); out(v3)
    nac = program(tmp_path, [(2, 0, None, None), (14, 1, None, (-1,)), (14, 1, None, (-2,)),
                             (14, 1, None, (-2,)), (3, 0, (1, 0), (-1,))],
                  perms={1: "T"}, names={0: "x"}, outputs=1)
    s = Session(nac, inputs={"x": np.ones(2, np.float32)})
    assert {t: sorted(vs) for t, vs in s.dead_values().items()} == {2: [0, 2], 3: [1], 4: [3, 4]}
    (out,) = s.run()
    np.testing.assert_array_equal(out, np.ones(2, np.float32))
    assert s.results == {}
    nac.close()


def test_recipe_rebinds_when_a_reference_changes_kind():
    """A binding recipe is used only while the referenced values look as they did when it was
    made (tensors, same 0-d-ness); otherwise the call is bound afresh."""
    from nac_engine.runtime.kernels import Kernels
    k = Kernels()
    call = PreparedCall("aten.add.Tensor", k("aten.add.Tensor"), [(True, 0), (True, 1)], False)
    a, b = torch.ones(3), torch.full((3,), 2.0)
    assert torch.equal(call([a, b]), a + b) and call.recipe is not None
    assert torch.equal(call([b, b]), b + b)                        # same object twice: still right
    s = torch.tensor(5.0)
    assert torch.equal(call([a, s]), a + 5) and call.recipe.fits([a, b]) and not call.recipe.fits([a, s])
    assert torch.equal(call([a, 3]), a + 3)                        # a Python number: bound afresh


def test_no_recipe_for_ops_that_write_an_argument():
    from nac_engine.runtime.kernels import Kernels
    k = Kernels()
    call = PreparedCall("aten.add_.Tensor", k("aten.add_.Tensor"), [(True, 0), (False, 1.0)], False)
    x = torch.zeros(2)
    call([x, 1.0])
    assert call.recipe is None and torch.equal(x, torch.ones(2))


@corpus
def test_quantised_weights_are_dequantised_once_and_not_copied_again():
    path, _, feeds, expected = load_case(next(c for c in CASES if c.name == "mlp_int8t"))
    with Session(path, feeds=feeds) as s:
        out = s.run()
        np.testing.assert_allclose(out[0], expected[0], rtol=0, atol=1e-5)
        cached = dict(s._params)
        assert cached and all(t.dtype == torch.float32 for t in cached.values())
        s.run()
        assert all(s._params[k] is t for k, t in cached.items())
        # each tensor owns its memory: the dequantised array was handed over, not copied again,
        # and no tensor is a view of the read-only mapping
        for pid, t in cached.items():
            p = s.nac.params[pid]
            assert p.raw().ctypes.data != t.data_ptr()


# --------------------------------------------------------------------------- threads
def test_thread_choice_for_a_shared_machine():
    assert threads.choose(cpus=2, busy=0.0, reserved=0) == 1        # 2 cores: one thread, always
    assert threads.choose(cpus=1, busy=5.0, reserved=1) == 1
    assert threads.choose(cpus=16, busy=0.0, reserved=0) == 16
    assert threads.choose(cpus=16, busy=0.0, reserved=1) == 15      # the Studio's UI thread
    assert threads.choose(cpus=16, busy=6.4, reserved=1) == 9       # other work holds 6 cores
    assert threads.choose(cpus=8, busy=30.0, reserved=0) == 1


def test_apply_respects_the_environment_and_the_user(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setattr(threads, "_pinned", None)
        monkeypatch.setattr(threads, "_applied", None)
        monkeypatch.setenv("NAC_NUM_THREADS", "2")
        assert threads.apply() == 2 and torch.get_num_threads() == 2
        monkeypatch.delenv("NAC_NUM_THREADS")
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.setattr(threads, "choose", lambda: 1)
        assert threads.apply() == 1
        torch.set_num_threads(3)                  # the program set its own count: it wins from now on
        assert threads.apply() == 3 and threads.apply() == 3
        threads.pin(None)
        threads.pin(2)
        assert torch.get_num_threads() == 2
    finally:
        threads.pin(None)
        monkeypatch.setattr(threads, "_applied", None)
        torch.set_num_threads(before)


def test_session_run_applies_the_choice_unless_told_not_to(monkeypatch, tmp_path):
    from .test_session import program
    nac = program(tmp_path, [(2, 0, None, None), (14, 1, None, (-1,)), (3, 0, (1, 0), (-1,))],
                  perms={1: "T"}, names={0: "x"}, outputs=1)
    calls = []
    monkeypatch.setattr(threads, "apply", lambda n=None: calls.append(n) or 1)
    s = Session(nac, inputs={"x": np.ones(2, np.float32)})
    assert calls == []                    # nothing at set-up: a run chooses when it starts
    s.run()
    assert calls == [None]
    stepped = Session(nac, inputs={"x": np.ones(2, np.float32)})
    stepped.run_instruction(0)            # stepping (the debugger): before its first instruction
    stepped.run_instruction(1)
    assert calls == [None, None]
    Session(nac, inputs={"x": np.ones(2, np.float32)}, manage_threads=False).run()
    quiet = Session(nac, inputs={"x": np.ones(2, np.float32)}, manage_threads=False)
    quiet.run_instruction(0)
    assert calls == [None, None]
    nac.close()


def test_a_count_the_program_set_before_the_first_run_is_kept(tmp_path):
    """`torch.set_num_threads(n)` before the first `nac_engine.run` is the host program's choice:
    the run keeps it (it was reset to the automatic count). n is one more than the machine's CPUs,
    so it cannot be mistaken for torch's default (a program that chose nothing)."""
    import os
    import subprocess
    import sys
    import nac_engine
    from nac_engine.compiler.external import write_compiled
    path = tmp_path / "lin.nac"
    write_compiled(nac_engine.compile(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),)), str(path))
    code = ("import torch, numpy as np\n"
            "import os\n"
            "n = (os.cpu_count() or 1) + 1\n"
            "torch.set_num_threads(n)\n"
            "import nac_engine\n"
            f"nac_engine.run({str(path)!r}, feeds=[np.ones((2, 3), np.float32)])\n"
            "print(n, torch.get_num_threads())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NAC_NUM_THREADS", "OMP_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    want, got = r.stdout.split()
    assert want == got
