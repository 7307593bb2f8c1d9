"""Session.run's direct loop and its per-instruction closures (runtime/fastcall.py): the same
values, the same errors and the same general path for what the closures do not handle, as the
instruction-by-instruction path (run_instruction / call_op, which keep_results and the debugger use)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nac_engine import read
from nac_engine.format.model import Constant
from nac_engine.isa.coerce import InexactCoercion
from nac_engine.runtime import KernelError, Session
from nac_engine.runtime.errors import CoercionError
from nac_engine.runtime.fastcall import SLOW, plain_call
from nac_engine.runtime.kernels import nac_add, nac_clone, nac_div, nac_transpose, nac_view

from .test_corpus_run import CASES, corpus, load_case
from .test_session import program

INT, LIST_I32, BOOL, FLOAT = 2, 5, 1, 3


@corpus
@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_direct_loop_is_bit_identical_to_stepping(case):
    """A plain run (direct loop, twice: first with binding, then through the closures) against
    run_instruction for every tick (keep_results): equal bit for bit."""
    path, _, feeds, _ = load_case(case)
    with read(path) as nac:
        try:
            stepped = Session(nac, feeds=feeds, keep_results=True).run()
        except Exception as e:     # files the interpreter refuses are another test's business
            pytest.skip(f"does not run: {type(e).__name__}")
        s = Session(nac, feeds=feeds)
        for _ in range(2):
            out = s.run()
            assert len(out) == len(stepped)
            for a, b in zip(out, stepped):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
        assert s.finished


def _mm_program(tmp_path):
    # v0 = x; v1 = y; v2 = aten.mm(x, y); v3 = nac.neg(v2); out(v3)
    return program(tmp_path, [(2, 0, None, None), (2, 0, None, None), (32, 2, None, (-2, -1)),
                              (14, 1, None, (-1,)), (3, 0, (1, 0), (-1,))],
                   cmap={32: "aten.mm.default"}, perms={1: "T", 2: "TT"}, names={0: "x", 1: "y"})


def test_kernel_failure_in_the_direct_loop_names_the_tick_and_op(tmp_path):
    nac = _mm_program(tmp_path)
    x, y = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    s = Session(nac, inputs={"x": x, "y": y})
    np.testing.assert_array_equal(s.run()[0], -(x @ y))
    np.testing.assert_array_equal(s.run()[0], -(x @ y))        # through the recipe's closure
    assert s._prepared[2].fast is not None
    bad = Session(nac, inputs={"x": x, "y": np.ones((4, 4), np.float32)})
    bad._prepared = s._prepared            # the closure made for good shapes meets bad ones
    with pytest.raises(KernelError, match=r"instruction 2: aten\.mm\.default\(Tensor\(2, 3\)") as e:
        bad.run()
    assert e.value.tick == 2 and bad.tick == 2
    nac.close()


def test_a_multi_output_value_takes_the_general_path(tmp_path):
    """aten.max.dim returns (values, indices); its reader gets the first element (first_of_multi),
    as in stepping, while getitem keeps the tuple."""
    # v0 = x; v1 = max(x, 1); v2 = neg(v1) (values); v3 = getitem(v1, 1) (indices); out(v2, v3)
    nac = program(tmp_path, [(2, 0, None, None), (40, 2, (1, 1), (-1, 0)), (14, 1, None, (-1,)),
                             (41, 3, (1, 2), (-2, 0)), (3, 0, (2, 0, 0), (-2, -1))],
                  cmap={40: "aten.max.dim", 41: "getitem"}, perms={1: "T", 2: "Ti", 3: "Ti"},
                  constants=[Constant(1, INT, 1), Constant(2, INT, 1)], names={0: "x"}, outputs=2)
    x = np.array([[1.0, 5.0, 2.0], [7.0, -1.0, 3.0]], np.float32)
    s = Session(nac, inputs={"x": x})
    for _ in range(2):
        values, indices = s.run()
        np.testing.assert_array_equal(values, -x.max(axis=1))
        np.testing.assert_array_equal(indices, x.argmax(axis=1))
    nac.close()


def test_standard_op_closures_equal_their_kernels():
    x = torch.arange(24.0).reshape(2, 3, 4)
    results = {0: x, 1: torch.full((2, 3, 4), 2.0)}
    cases = [(nac_view, (0,), (0,), [None, (4, 6)]), (nac_transpose, (0,), (0,), [None, 1, False]),
             (nac_transpose, (0,), (0,), [None, 1.0, 2]), (nac_clone, (0,), (0,), None),
             (nac_add, (0, 1), (0, 1), None), (nac_div, (0, 1), (0, 1), None),
             (nac_add, (0,), (0,), [None, 1.5])]
    for fn, producers, refs, base in cases:
        fast = plain_call(fn, producers, refs, base, False)
        args = list(base) if base is not None else [None] * len(refs)
        for k, p in zip(refs, producers):
            args[k] = results[p]
        got, want = fast(results), fn(*args)
        assert torch.equal(got, want), fn.__name__
        assert got.shape == want.shape and got.dtype == want.dtype


def test_standard_op_closures_leave_tuples_and_inexact_constants_to_the_kernel():
    t = torch.ones(2, 3)
    assert plain_call(nac_clone, (0,), (0,), None, False)({0: (t, t)}) is SLOW
    assert plain_call(nac_add, (0, 1), (0, 1), None, False)({0: (t, t), 1: t}) is SLOW
    # 1.5 as a dim is not specialised: the kernel raises the coercion error, naming the argument
    fast = plain_call(nac_transpose, (0,), (0,), [None, 1.5, 0], False)
    with pytest.raises(InexactCoercion, match="1 \\(dim: int\\)"):
        fast({0: t})
    with pytest.raises(KeyError):                      # a missing value: before any kernel runs
        plain_call(nac_view, (3,), (0,), [None, (6,)], False)({0: t})


def test_inexact_constant_in_the_direct_loop_is_a_coercion_error(tmp_path):
    # v0 = x; v1 = nac.transpose(x, 1.5, 0); out(v1)
    nac = program(tmp_path, [(2, 0, None, None), (23, 2, (2, 1, 2), (-1, 0, 0)), (3, 0, (1, 0), (-1,))],
                  perms={1: "T", 2: "TSS"}, constants=[Constant(1, FLOAT, 1.5), Constant(2, INT, 0)],
                  names={0: "x"})
    with pytest.raises(CoercionError, match="instruction 1"):
        Session(nac, inputs={"x": np.ones((2, 3), np.float32)}).run()
    nac.close()
