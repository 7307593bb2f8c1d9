"""The run read (format/run_read.py): what ``nac_engine.run(path)`` and ``Session(path)`` decode.

It must decode exactly what ``read()`` decodes for the sections a run needs, leave the others
until they are touched (then decode them with read()'s own decoders), refuse what read() refuses
with the same error, and give the same outputs as a run on read()'s file."""
from __future__ import annotations

import dataclasses
import random
import struct

import numpy as np
import pytest

import nac_engine
from nac_engine import NacFormatError, read, write
from nac_engine.format import reader as reader_module
from nac_engine.format.model import Instruction, MmapCommand, MmapRecord, Orch, Resource, TensorMeta
from nac_engine.format.run_read import RunFile, read_for_run
from nac_engine.runtime import Session
from tests.conftest import corpus_params, nac_corpus_files
from tests.format.test_regressions import small_file

LAZY_FIELDS = ("mmap", "proc", "orch", "rsrc", "trng", "arrs")
X = np.ones((1, 3), np.float32)


def runnable_file():
    """small_file() ending at its linear (x @ w.T): an MMAP, a resource, runnable."""
    nac = small_file()
    nac.instructions = nac.instructions[:3] + [Instruction(3, 3, 0, (1, 0), (-1,))]
    nac.rsrc = [Resource("notes.txt", _payload=b"hello")]
    return nac


def _same_tables(full, run) -> None:
    assert run.header == full.header and run.layout == full.layout
    assert run.cmap == full.cmap and run.perms == full.perms
    assert run.constants == full.constants
    assert [(i.index, i.a, i.b, i.c, i.d, i.offset) for i in run.instructions] == \
        [(i.index, i.a, i.b, i.c, i.d, i.offset) for i in full.instructions]
    assert run.input_names == full.input_names and run.tensor_order == full.tensor_order
    assert run.params.keys() == full.params.keys()
    for pid, p in full.params.items():
        q = run.params[pid]
        assert (q.name, q.data_offset, q.data_length) == (p.name, p.data_offset, p.data_length)
        assert (q.meta is None) == (p.meta is None)
        if p.meta is not None:
            for field in (f.name for f in dataclasses.fields(p.meta)):
                a, b = getattr(p.meta, field), getattr(q.meta, field)
                assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, (pid, field)


@pytest.mark.parametrize("path", corpus_params())
def test_run_read_equals_read_on_every_corpus_file(path):
    full = read(path)
    run = read_for_run(path)
    assert isinstance(run, RunFile) and run.private_buffer
    _same_tables(full, run)
    assert run.weights_path == full.weights_path
    for pid, p in full.params.items():
        if p.meta is not None:
            np.testing.assert_array_equal(run.params[pid].array(), p.array())
    # the parts decoded on first access are read()'s
    assert run.mmap == full.mmap
    assert (run.orch is None) == (full.orch is None)
    if full.orch is not None:
        assert (run.orch.bytecode, run.orch.pool) == (full.orch.bytecode, full.orch.pool)
    assert (run.proc is None) == (full.proc is None) and (not full.proc or run.proc.manifest == full.proc.manifest)
    for field in ("rsrc", "arrs"):
        a, b = getattr(full, field), getattr(run, field)
        assert (a is None) == (b is None)
        assert [(x.name, x.data) for x in a or ()] == [(x.name, x.data) for x in b or ()]
        assert all(x._file is run for x in b or ())
    assert run.trng == full.trng and run.trailing == full.trailing
    assert write(run) == path.read_bytes()          # everything exact re-encoding needs
    mid = path.stat().st_size // 2
    assert run.span_at(mid).path == full.span_at(mid).path
    full.close()


@pytest.mark.parametrize("path", corpus_params())
def test_run_from_path_equals_run_on_reads_file(path):
    """nac_engine.run(path) (the run read, weights over its own buffer) against a Session on
    read()'s memory-mapped file: the same outputs, bit for bit."""
    case = path.parent
    feeds = [np.load(f) for f in sorted(case.glob("feed_*.npy"))]
    with read(path) as nac:
        try:
            want = Session(nac, feeds=feeds).run()
        except Exception as e:        # files the interpreter refuses are another test's business
            pytest.skip(f"does not run: {type(e).__name__}")
    got = nac_engine.run(path, feeds=feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_sections_are_decoded_on_first_access_only(tmp_path, monkeypatch):
    nac = runnable_file()
    path = tmp_path / "m.nac"
    path.write_bytes(write(nac))
    calls = []
    for tag in ("MMAP", "ORCH", "RSRC", "PROC", "TRNG", "ARRS", "CMAP", "CNST", "PERM", "OPS", "DATA"):
        original = getattr(reader_module._Reader, "_sec_" + tag)

        def counting(self, cur, sp, _tag=tag, _original=original):
            calls.append(_tag)
            return _original(self, cur, sp)
        monkeypatch.setattr(reader_module._Reader, "_sec_" + tag, counting)
    run = read_for_run(path)
    assert calls == []                      # the run sections took the fast decoders, no spans
    assert not any("_v_" + f in run.__dict__ for f in LAZY_FIELDS + ("spans", "trailing"))
    out = Session(run, inputs={"x": X}).run()
    np.testing.assert_array_equal(out[0], X @ np.arange(6, dtype=np.float32).reshape(2, 3).T)
    assert calls == []                      # running touched none of them
    assert run.mmap == [MmapRecord(0, [MmapCommand(40, 1)], run.mmap[0].offset),
                        MmapRecord(2, [MmapCommand(30, 3)], run.mmap[1].offset),
                        MmapRecord(3, [MmapCommand(10, 3)], run.mmap[2].offset)]
    assert calls == ["MMAP"]
    run.mmap
    assert calls == ["MMAP"]                # decoded once, kept
    assert run.rsrc[0].data == b"hello" and calls == ["MMAP", "RSRC"]
    run.orch = Orch(b"")                    # assigning replaces, as on any NacFile
    assert run.orch.bytecode == b"" and calls == ["MMAP", "RSRC"]


def _section_offset(data: bytes, tag: str) -> int:
    full = read(data)
    return full.spans.find(tag).offset


@pytest.mark.parametrize("tag,field", [("MMAP", "mmap"), ("ORCH", "orch"), ("RSRC", "rsrc")])
def test_broken_lazy_section_raises_when_touched_and_every_time(tmp_path, tag, field):
    data = bytearray(write(runnable_file()))
    at = _section_offset(bytes(data), tag)
    struct.pack_into("<I", data, at + 4, 0xFFFFFFF0)       # a count no section can hold
    with pytest.raises(NacFormatError) as full_error:
        read(bytes(data))
    assert full_error.value.section == tag
    path = tmp_path / "broken.nac"
    path.write_bytes(bytes(data))
    run = read_for_run(path)                 # a run does not need the section
    assert Session(run, inputs={"x": X}).run()[0].shape == (1, 2)
    for _ in range(2):
        with pytest.raises(NacFormatError) as e:
            getattr(run, field)
        assert (e.value.section, e.value.offset, e.value.reason) == \
            (full_error.value.section, full_error.value.offset, full_error.value.reason)
    with pytest.raises(NacFormatError):
        run.trailing                          # needs every section
    with pytest.raises(NacFormatError):
        run.spans


def test_truncated_file_is_refused_like_read(tmp_path):
    data = write(runnable_file())
    for cut in range(0, len(data), 7):
        try:
            read(data[:cut])
            want = None
        except NacFormatError as e:
            want = e
        try:
            read_for_run(data[:cut])
            got = None
        except NacFormatError as e:
            got = e
        if want is None:
            assert got is None, cut
        elif got is not None:
            assert (got.section, got.offset, got.reason) == (want.section, want.offset, want.reason), cut
        else:       # only a part the run does not read is cut off: touching it raises read()'s error
            with pytest.raises(NacFormatError):
                run = read_for_run(data[:cut])
                for field in LAZY_FIELDS:
                    getattr(run, field)


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
    """An unquantised weight is a view of the run read's private buffer when its record is 64-byte
    aligned, else a copy; either way in-place changes never reach the file on disk."""
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
            base = np.frombuffer(s.nac._buf, np.uint8).ctypes.data
            assert (base <= w.data_ptr() < base + len(s.nac._buf)) == aligned
            assert w.data_ptr() % 64 == 0 or not aligned
            np.testing.assert_array_equal(w.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
            w.add_(1)
        assert path.read_bytes() == data


# --------------------------------------------------------------------------- differential fuzz
MUTANTS_PER_FILE = 150


@pytest.mark.skipif(not nac_corpus_files(), reason="corpus not present")
def test_mutants_run_read_agrees_with_read():
    """Corpus mutants (test_fuzz's mutations): when read() decodes a mutant, the run read decodes
    the same tables; when the run read refuses one, read() refuses it too, with the same error
    when the run read's section is the first broken one; when only read() refuses it, the broken
    part is one the run does not read, and touching it on the run file raises read()'s error."""
    from tests.format.test_fuzz import Seed, mutate
    rnd = random.Random(0x5EED)
    outcomes = {"both": 0, "refused": 0, "lazy_only": 0}
    for path in nac_corpus_files()[::3]:
        seed = Seed(path.name, path.read_bytes())
        for _ in range(MUTANTS_PER_FILE):
            mutant, _kinds = mutate(rnd, seed)
            try:
                full = read(mutant)
                full_error = None
            except NacFormatError as e:
                full, full_error = None, e
            try:
                run = read_for_run(mutant)
                run_error = None
            except NacFormatError as e:
                run, run_error = None, e
            if full is not None:
                assert run is not None, (path.name, run_error)
                _same_tables(full, run)
                assert run.mmap == full.mmap and run.trailing == full.trailing
                outcomes["both"] += 1
            elif run_error is not None:
                assert 0 <= run_error.offset <= len(mutant) and run_error.reason
                if run_error.section.split("/")[0] == full_error.section.split("/")[0]:
                    assert (run_error.offset, run_error.reason) == (full_error.offset, full_error.reason)
                outcomes["refused"] += 1
            else:
                lazy_error = None
                for field in LAZY_FIELDS:
                    try:
                        getattr(run, field)
                    except NacFormatError as e:
                        lazy_error = e
                        break
                assert lazy_error is not None, (path.name, full_error)
                assert full_error.section.split("/")[0] in ("MMAP", "PROC", "ORCH", "RSRC", "TRNG", "ARRS")
                outcomes["lazy_only"] += 1
    assert all(outcomes.values()), outcomes


@pytest.mark.parametrize("path", corpus_params())
def test_a_file_above_the_whole_read_limit_is_mapped_and_runs_the_same(path, monkeypatch):
    """Past WHOLE_READ_MAX the run read maps the file (tensor headers by pread, weights copied
    out through the size-checked path) instead of reading it whole: same tables, same outputs."""
    from nac_engine.format import run_read
    monkeypatch.setattr(run_read, "WHOLE_READ_MAX", 0)
    feeds = [np.load(f) for f in sorted(path.parent.glob("feed_*.npy"))]
    with read(path) as full, read_for_run(path) as run:
        assert not run.private_buffer and run._closer is not None
        _same_tables(full, run)
        assert run.mmap == full.mmap
        try:
            want = Session(full, feeds=feeds).run()
        except Exception as e:        # files the interpreter refuses are another test's business
            pytest.skip(f"does not run: {type(e).__name__}")
    got = nac_engine.run(path, feeds=feeds)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
