"""TVMR interpreter: the straight-line samples run to HALT and match an independent PyTorch int64
evaluation of the same network (exact, integer semantics of the research note); stepping, history by
tick, loops/calls, host-only ops reported, runtime errors named."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nac_engine.peers import tvmr
from nac_engine.peers.tvmr.asm import assemble
from nac_engine.peers.tvmr.interp import TvmrMachine, TvmrRuntimeError, run
from tests.peers.test_tvmr import SAMPLES, TVMR_DIR, needs_corpus

I32 = (-(1 << 31), (1 << 31) - 1)


def small_weights(f, seed):
    """Magnitudes small enough that nothing saturates, so the reference needs no clamping tricks."""
    rng = np.random.default_rng(seed)
    out = {}
    for r in f.registers:
        if r.reg >> 6 == 1:
            n = int(np.prod(r.dims))
            out[r.key_text] = (rng.integers(-1, 2, n), rng.integers(0, 8, n))
    return out


def W(weights, f, name):
    r = [x for x in f.registers if x.name == name][0]
    pol, mag = weights[r.key_text]
    return torch.tensor(np.asarray(pol, np.int64) * np.asarray(mag, np.int64)).reshape(r.dims)


def clamp32(t):
    return t.clamp(*I32)


def reference(name, f, w, x):
    x = torch.tensor(x, dtype=torch.int64)
    relu = torch.relu
    if name in ("ant_diff", "ant_merge"):
        h = relu(clamp32(W(w, f, "C0") @ x))
        return clamp32(W(w, f, "C1") @ h)
    if name == "ant_compare":
        h = relu(clamp32(W(w, f, "C0") @ x))
        h = relu(clamp32(W(w, f, "C1") @ h))
        return clamp32(W(w, f, "C2") @ h)
    if name == "ant_gate":
        h = relu(clamp32(W(w, f, "C0") @ x))
        g = ((clamp32(W(w, f, "C1") @ h) * 64) >> 10).add(128).clamp(0, 255)
        m = (x[:g.numel()] * g) >> 8        # copy_reg H4, H0 (64 values); mul: min length, (a*b) >> 8
        return m >> 8
    if name == "ant_classifier":
        h1 = relu(clamp32(W(w, f, "C0") @ x))
        for _ in range(3):
            h2 = relu(clamp32(W(w, f, "C1") @ h1))
            h3 = ((clamp32(W(w, f, "C2") @ h1) * 64) >> 10).add(128).clamp(0, 255)
            h2 = (h2 * h3) >> 8
            h1 = clamp32(h1 + h2) >> 1
        return clamp32(W(w, f, "C3") @ h1)
    raise KeyError(name)


@needs_corpus
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_runs_and_matches_pytorch(path):
    f = tvmr.decode(path.read_bytes())
    for seed in range(3):
        w = small_weights(f, seed)
        n = int(np.prod(f.register(f.instructions[0].operands[0]).dims))
        x = np.random.default_rng(100 + seed).integers(-60, 61, n)
        m = run(f, inputs=x, weights=w)
        assert m.error is None and m.halted and m.tick == len(f.instructions)
        ref = reference(path.stem, f, w, x).numpy()
        np.testing.assert_array_equal(m.output, ref)
        assert np.any(ref != 0)


@needs_corpus
def test_stepping_and_history_by_tick():
    f = tvmr.decode((TVMR_DIR / "synthesized" / "ant_compare.tvmr").read_bytes())
    m = TvmrMachine(f, seed=3)
    first = m.step()
    assert first.mnemonic == "LOAD_INPUT" and first.writes == ["H0"] and m.pc == 1
    m.step()
    m.step()
    after_relu = m.registers()["H1"].copy()
    assert (after_relu >= 0).all()
    m.run()
    assert m.done and m.halted and m.steps[-1].status == "halt"
    assert np.array_equal(m.registers_at(3)["H1"], after_relu)      # after three ticks
    assert not np.any(m.registers_at(0)["H1"])                       # before any: zeros
    assert m.step() is None


LOOPED = """
.requires
    neuro 0x0005
.registers
    H0: i32[4]
    H1: i32[4]
    H2: i32[1]
.program
    load_input H0
    copy_reg H1, H0
    loop 3
    add H1, H1, H0
    end_loop
    neuro.chem_read H2, 1
    if_zero H2, skip
    call sub
skip:
    store_output H1
    halt
sub:
    relu H1, H1
    return
"""


def test_loop_call_and_host_ops():
    f = tvmr.decode(assemble(LOOPED), strict=True)
    m = run(f, inputs=[1, -2, 3, -4])
    assert m.error is None
    np.testing.assert_array_equal(m.output, [4, -8, 12, -16])          # 1 + 3 adds; H2 zero -> skip the call
    assert [s.mnemonic for s in m.host_ops] == ["neuro.CHEM_READ"] and m.host_ops[0].status == "host"
    src = LOOPED.replace("if_zero H2, skip", "if_nonzero H2, skip")
    m = run(tvmr.decode(assemble(src)), inputs=[1, -2, 3, -4])
    np.testing.assert_array_equal(m.output, [4, 0, 12, 0])              # the call's relu ran


def test_runtime_errors_are_named_and_runaway_loops_stop():
    f = tvmr.decode(assemble(".registers\n H0: i32[2]\n.program\n relu H0, H5\n halt\n"))
    m = run(f)
    assert m.error and "H5 not allocated" in m.error and m.steps[-1].status == "error"
    f = tvmr.decode(assemble(".registers\n H0: i32[2]\n.program\ntop:\n jump top\n"))
    m = run(f, max_steps=1000)
    assert "1,000 steps" in m.error
    big = tvmr.decode(assemble(".registers\n H0: i32[65535, 65535]\n.program\n halt\n"))
    with pytest.raises(TvmrRuntimeError):
        TvmrMachine(big)


def test_integer_semantics_of_the_core_ops():
    src = """
.registers
    H0: i32[4]
    H1: i32[4]
    C0: ternary[4]
.program
    load_input H0
    mul H1, H0, H0
    sigmoid H1, H0, gain=8
    add H1, H0, C0
    shift H1, H1, 2
    store_output H1
    halt
"""
    f = tvmr.decode(assemble(src))
    x = np.array([2_000_000_000, -300, 5, 1024])
    pol, mag = np.array([1, -1, 0, 1]), np.array([255, 2, 9, 1])
    m = TvmrMachine(f, inputs=x, weights={"C0": (pol, mag)})
    m.step()
    m.step()
    np.testing.assert_array_equal(m.registers()["H1"], ((x.astype(np.int64) ** 2) >> 8).astype(np.int32))  # wraps
    m.step()
    np.testing.assert_array_equal(m.registers()["H1"], np.clip(((x * 128) >> 10) + 128, 0, 255))
    m.run()
    expect = np.clip(x + pol * mag * 255, *I32) >> 2                   # cold bias x 255, saturating
    np.testing.assert_array_equal(m.output, expect)
