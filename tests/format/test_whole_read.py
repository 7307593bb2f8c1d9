"""How ``read()`` holds a file's bytes: a small file read whole into a private, 64-byte aligned
buffer (safe from other programs, weights usable in place by a run), a big one memory-mapped."""
from __future__ import annotations

import numpy as np
import pytest

import nac_engine
from nac_engine import NacFormatError, read, write
from nac_engine.format import reader as reader_module
from nac_engine.format.model import Instruction, Resource, TensorMeta
from nac_engine.runtime import Session
from tests.conftest import corpus_params
from tests.format.test_regressions import small_file

X = np.ones((1, 3), np.float32)


def runnable_file():
    """small_file() ending at its linear (x @ w.T): an MMAP, a resource, runnable."""
    nac = small_file()
    nac.instructions = nac.instructions[:3] + [Instruction(3, 3, 0, (1, 0), (-1,))]
    nac.rsrc = [Resource("notes.txt", _payload=b"hello")]
    return nac


def test_a_small_file_is_a_private_copy_that_truncation_on_disk_cannot_reach(tmp_path):
    path = tmp_path / "m.nac"
    data = write(runnable_file())
    path.write_bytes(data)
    with read(path) as nac:
        assert nac.private_buffer and nac._closer is None
        assert np.frombuffer(nac.buffer, np.uint8).ctypes.data % 64 == 0
        path.write_bytes(b"")                   # another program empties the file
        assert bytes(nac.buffer) == data
        assert write(nac) == data
        np.testing.assert_array_equal(nac.params[1].array(), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_bytes_given_by_the_caller_are_not_called_private():
    assert not read(write(runnable_file())).private_buffer


def rank_200_weight_file(path):
    """A runnable file whose weight 1 claims rank 200 (numpy allows 64): ``path``, written."""
    nac = runnable_file()
    p = nac.params[1]
    p.meta, p._payload = TensorMeta(0, (1,) * 200, 0), np.ones(1, np.float32).tobytes()
    path.write_bytes(write(nac))
    return path


def test_hostile_tensor_metadata_is_a_format_error_on_the_run_path(tmp_path):
    path = rank_200_weight_file(tmp_path / "rank.nac")
    with pytest.raises(NacFormatError) as e:
        nac_engine.run(path, inputs={"x": X})
    assert e.value.section == "DATA/tensors" and "rank 200" in e.value.reason


def test_weights_lie_in_the_sessions_own_buffer_when_aligned(tmp_path):
    """An unquantised weight is a view of the private buffer when its record is 64-byte aligned,
    else a copy; either way in-place changes never reach the file on disk."""
    files = {}
    for n in range(1, 80):                     # the name's length moves the record
        nac = runnable_file()
        nac.params[1].name = "w" * n
        data = write(nac)
        files.setdefault(read(data).params[1].data_offset % 64 == 0, data)
        if len(files) == 2:
            break
    assert len(files) == 2
    for aligned, data in files.items():
        path = tmp_path / f"w{aligned}.nac"
        path.write_bytes(data)
        with Session(path, inputs={"x": X}) as s:
            s.run()
            (w,) = s._params.values()
            base = np.frombuffer(s.nac.buffer, np.uint8).ctypes.data
            assert (base <= w.data_ptr() < base + len(s.nac.buffer)) == aligned
            assert w.data_ptr() % 64 == 0 or not aligned
            np.testing.assert_array_equal(w.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
            w.add_(1)
        assert path.read_bytes() == data


@pytest.mark.parametrize("path", corpus_params())
def test_mapped_and_private_reads_decode_and_run_the_same(path, monkeypatch):
    """Past WHOLE_READ_MAX a file is mapped (tensor headers by pread, weights copied out through
    the size-checked path) instead of read whole: same tables, same spans, same outputs."""
    feeds = [np.load(f) for f in sorted(path.parent.glob("feed_*.npy"))]
    private = read(path)
    try:
        want = nac_engine.run(path, feeds=feeds)
    except Exception as e:        # files the interpreter refuses are another test's business
        want = e
    monkeypatch.setattr(reader_module, "WHOLE_READ_MAX", 0)
    with read(path) as mapped:
        assert private.private_buffer and not mapped.private_buffer and mapped._closer is not None
        assert write(mapped) == write(private) == path.read_bytes()
        assert mapped.params.keys() == private.params.keys()
        mid = path.stat().st_size // 2
        assert mapped.span_at(mid).path == private.span_at(mid).path
    if isinstance(want, Exception):
        pytest.skip(f"does not run: {type(want).__name__}")
    got = nac_engine.run(path, feeds=feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
