"""A new session's first run (issue 15 §2, cold run incl. load): call plans shared across sessions,
every shared-plan instruction prepared and every weight loaded in one pass before the run, external
weights read from one open of the .safetensors. Each must give what instruction-by-instruction
stepping gives, and a weight that fails to load must still fail at its own tick."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nac_engine
from nac_engine import NacFormatError, read
from nac_engine.runtime import Session
from nac_engine.runtime.prepared import forget_plans

from .test_corpus_run import CASES, corpus, load_case


def _model_file(tmp_path, **compile_kw):
    from nac_engine.compiler.external import write_compiled
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x = torch.randn(2, 8)
    path = tmp_path / "m.nac"
    write_compiled(nac_engine.compile(model, (x,), **compile_kw), str(path))
    return path, x.numpy(), model(x).detach().numpy()


@pytest.mark.parametrize("quantization", [None, "int8_channel", "block_fp8"])
def test_external_weights_read_once_equal_stepping(tmp_path, quantization):
    kw = {"quantization": quantization} if quantization else {}
    path, x, eager = _model_file(tmp_path, weights="external", **kw)
    assert path.with_suffix(".safetensors").exists()
    got = nac_engine.run(path, feeds=[x])                    # run read, weights in one pass
    with read(path) as nac:
        stepped = Session(nac, feeds=[x], keep_results=True).run()   # one load_param per tick
    np.testing.assert_array_equal(got[0], stepped[0])
    np.testing.assert_allclose(got[0], eager, atol=5e-3 if quantization else 1e-6)


def test_a_weight_that_fails_to_load_fails_at_its_tick(tmp_path):
    from tests.format.test_whole_read import rank_200_weight_file
    path = rank_200_weight_file(tmp_path / "bad.nac")
    with Session(path, inputs={"x": np.ones((1, 3), np.float32)}) as s:
        with pytest.raises(NacFormatError, match="rank 200"):
            s.run()
        assert s.tick == 1                   # <INPUT B=1> of the weight, not before the run began
        assert s.results.keys() == {0}


@corpus
def test_a_new_session_finds_its_calls_prepared_from_shared_plans():
    path, _, feeds, expected = load_case(next(c for c in CASES if c.name == "bert_tiny"))
    forget_plans()
    first = nac_engine.run(path, feeds=feeds)                 # binds, and leaves its plans shared
    with Session(path, feeds=feeds) as s:
        s._prepare_shared()
        regular = [i.index for i in s.instructions if i.a >= 10]
        assert set(s._prepared) == set(regular)
        assert all(c.fast is not None for c in s._prepared.values())   # bound before its first call
        again = s.run()
    for a, b, e in zip(first, again, expected):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, e, atol=1e-4)
    forget_plans()
    np.testing.assert_array_equal(nac_engine.run(path, feeds=feeds)[0], first[0])


def test_constants_differing_only_in_sign_of_zero_get_their_own_plans(tmp_path):
    """0.0 == -0.0 in Python, but mul(x, -0.0) is not mul(x, 0.0): the plan key keeps the sign."""
    from nac_engine.format.model import Constant
    from .test_session import program
    FLOAT = 3
    outs = []
    for zero in (0.0, -0.0):
        # v0 = x; v1 = aten.mul.Tensor(x, zero); out(v1)
        nac = program(tmp_path, [(2, 0, None, None), (32, 1, (1, 1), (-1, 0)), (3, 0, (1, 0), (-1,))],
                      cmap={32: "aten.mul.Tensor"}, perms={1: "Tf"}, constants=[Constant(1, FLOAT, zero)],
                      names={0: "x"})
        outs.append(Session(nac, inputs={"x": np.ones(2, np.float32)}).run()[0])
        nac.close()
    assert not np.signbit(outs[0]).any() and np.signbit(outs[1]).all()


def test_a_constants_only_call_keeps_its_binding_and_returns_fresh_tensors():
    """nac.ones((2, 3), 'float32') binds once (a recipe), and every call still makes a new tensor;
    a constants-only op that could return an alias of an argument is bound every time."""
    from nac_engine.runtime.kernels import Kernels
    from nac_engine.runtime.prepared import PreparedCall
    k = Kernels()
    call = PreparedCall("nac.ones", k("nac.ones"), [(False, (2, 3)), (False, "float32")], False)
    a = call([(2, 3), "float32"])
    assert call.recipe is not None and call.fast is not None
    b = call.fast({})
    a.add_(1)
    assert torch.equal(b, torch.ones(2, 3)) and a.data_ptr() != b.data_ptr()
    alias = PreparedCall("aten.alias.default", k("aten.alias.default"), [(False, 1.0)], False)
    alias([1.0])
    assert alias.recipe is None


@pytest.mark.parametrize("base", [[8, "int64", "cpu", False], [2, 10, "int64", "cpu", False],
                                  [0, 10, 2, "int64", "cpu", False], [0.5, 3.0]])
def test_constant_arange_is_bound_once_and_equals_the_kernel(base):
    from nac_engine.runtime.fastcall import plain_call
    from nac_engine.runtime.kernels import Kernels
    fn = Kernels()("nac.arange")
    fast = plain_call(fn, (), (), base, False)
    got, want = fast({}), fn(*base)
    assert torch.equal(got, want) and got.dtype == want.dtype
    assert fast({}) is not got                      # a new tensor every call
