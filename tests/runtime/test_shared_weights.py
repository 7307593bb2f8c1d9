"""Weights used where they lie (issue 25 §2b): over a mapped file's pages, over the caller's
decoded file, never copied on the way to a kernel — unless an op of the file writes into an
argument, which then gets the session's own copy so nothing reaches the caller's bytes or a
read-only mapping."""
from __future__ import annotations

import numpy as np
import pytest

import nac_engine
from nac_engine import read, write
from nac_engine.format import reader as reader_module
from nac_engine.format.model import Instruction
from nac_engine.runtime import Session
from tests.format.test_regressions import small_file

X = np.ones((1, 3), np.float32)
W = np.arange(6, dtype=np.float32).reshape(2, 3)


def linear_file(*, in_place: bool = False, return_weight: bool = False):
    """x -> linear(x, w) -> output, its weight record 64-byte aligned. ``in_place``: the program
    first does ``w.add_(1)``; ``return_weight``: w itself is a second output."""
    nac = small_file()
    nac.align_tensors = True
    ops = [Instruction(0, 2, 0, None, None), Instruction(1, 2, 1, (1, 1), None)]
    if in_place:
        nac.cmap[40] = "aten.add_.Scalar"
        nac.perms[4] = "Tf"
        from nac_engine.format.model import Constant
        nac.constants[5] = Constant(5, 3, 1.0)
        ops.append(Instruction(2, 40, 4, (1, 5), (-1, 0)))
    n = len(ops)
    ops.append(Instruction(n, 32, 2, None, (-n, -(n - 1) if not in_place else -1)))
    if return_weight:
        nac.header.num_outputs = 2
        ops.append(Instruction(n + 1, 3, 0, (2, 0, 0), (-1, -(n + 1) + 1)))
    else:
        ops.append(Instruction(n + 1, 3, 0, (1, 0), (-1,)))
    nac.instructions = ops
    nac.mmap = []
    return nac


def mapped(monkeypatch, path):
    monkeypatch.setattr(reader_module, "WHOLE_READ_MAX", 0)
    nac = read(path)
    assert not nac.private_buffer
    return nac


def inside(t, nac) -> bool:
    base = np.frombuffer(nac._buf, np.uint8).ctypes.data
    return base <= t.data_ptr() < base + nac.size


def test_a_mapped_files_aligned_weight_is_used_over_the_mapping(tmp_path, monkeypatch):
    path = tmp_path / "m.nac"
    path.write_bytes(write(linear_file()))
    nac = mapped(monkeypatch, path)
    assert nac.params[1].data_offset % 64 == 0
    with Session(nac, inputs={"x": X}) as s:
        (y,) = s.run()
        w = s.weight(nac.params[1])
        assert inside(w, nac)
    np.testing.assert_allclose(y, X @ W.T, rtol=1e-6)
    nac.close()


def test_a_weight_returned_as_an_output_is_the_callers_own_copy(tmp_path, monkeypatch):
    path = tmp_path / "m.nac"
    data = write(linear_file(return_weight=True))
    path.write_bytes(data)
    nac = mapped(monkeypatch, path)
    y, w_out = nac_engine.run(nac, inputs={"x": X})
    np.testing.assert_array_equal(w_out, W)
    w_out += 1                       # a read-only mapping would crash here; the copy takes it
    assert path.read_bytes() == data
    nac.close()


def test_a_decoded_file_given_to_run_is_not_copied(tmp_path):
    path = tmp_path / "m.nac"
    path.write_bytes(write(linear_file()))
    nac = read(path)
    assert nac.private_buffer
    with Session(nac, inputs={"x": X}) as s:
        s.run()
        assert inside(s.weight(nac.params[1]), nac)


@pytest.mark.parametrize("how", ["mapped", "decoded", "path"])
def test_a_file_whose_op_writes_into_its_weight_gets_copies(tmp_path, monkeypatch, how):
    """``w.add_(1)`` before the linear: each run sees the stored weight plus one (the session's own
    copy, made once), and the file, its mapping and the caller's decoded bytes stay as stored."""
    path = tmp_path / "m.nac"
    data = write(linear_file(in_place=True))
    path.write_bytes(data)
    src = {"mapped": lambda: mapped(monkeypatch, path), "decoded": lambda: read(path), "path": lambda: path}[how]()
    with Session(src, inputs={"x": X}) as s:
        assert not s.weights_shared()
        (y,) = s.run()
        np.testing.assert_allclose(y, X @ (W + 1).T, rtol=1e-6)
    if how != "path":
        assert bytes(src.buffer) == data
        np.testing.assert_array_equal(src.params[1].array(), W)
        src.close()
    assert path.read_bytes() == data


def test_files_of_functional_ops_share_and_in_place_ones_do_not():
    from nac_engine.runtime.kernels import Kernels
    k = Kernels()
    assert not k.writes_an_argument("aten.linear.default")
    assert not k.writes_an_argument("nac.add")
    assert k.writes_an_argument("aten.add_.Tensor")
    assert k.writes_an_argument("aten.relu_.default")
    assert k.writes_an_argument("aten.add.out")


def test_closing_the_file_never_unmaps_weights_a_session_still_holds(tmp_path, monkeypatch):
    """The mapping outlives NacFile.close() while a tensor over it lives (an export is held):
    a session run again after its file was closed reads its weights, no SIGSEGV."""
    path = tmp_path / "m.nac"
    path.write_bytes(write(linear_file()))
    nac = mapped(monkeypatch, path)
    s = Session(nac, inputs={"x": X})
    (first,) = s.run()
    nac.close()
    s.reset()
    (again,) = s.run()
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(s.weight(nac.params[1]).numpy(), W)
