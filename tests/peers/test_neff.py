"""AWS NEFF (seed 003): header, in-memory tar, manifests, coarse graph — and hostile archives that
are refused or contained without touching the disk or memory beyond the limits."""
from __future__ import annotations

import gzip
import json
import os
import tarfile
import tracemalloc

import numpy as np
import pytest

from nac_engine.errors import NacFormatError
from nac_engine.peers import detect, is_warning, neff, open_peer
from tests.corpus_paths import CORPUS
from tests.peers.neff_builder import header, neff as build, small_model, tar_of

SAMPLE = CORPUS / "peers" / "neff" / "matmul_small.neff"


def leaves_cover(f) -> None:
    """Every byte in exactly one leaf span."""
    pos = 0
    for leaf in f.root.leaves():
        assert leaf.offset == pos, (leaf, pos)
        pos = leaf.end
    assert pos == f.size


@pytest.mark.skipif(not SAMPLE.exists(), reason="shared corpus absent")
def test_real_sample_decodes():
    f = open_peer(str(SAMPLE))
    assert f.format == "neff" and f.header["pkg_version"] == 2 and f.header["lnc_size"] == 2
    assert len(f.members) == 72 and f.compressed and f.target == "cayman"
    assert [s.name for s in f.subgraphs] == ["sg00", "sg01"]
    sg = f.subgraphs[0]
    assert sg.variables["x"]["size"] == 65536 and sg.variables["x"]["type"] == "input"
    assert sg.queues["qPoolDynamic"]["type"] == "dynamic" and sg.engines["PE"]["slots"] == 768 // 64
    assert f.constant("sg00/value_sg0000_identity_82_CRSM.npy").dtype == np.float16
    # its hash is neither digest (research note): "not checked", no problem at all
    assert f.problems == [] and f.hash_ok is None
    g = f.graph()
    inputs = {n.label: n.attrs for n in g.nodes if n.kind == "input"}
    assert inputs["x"]["shape"] == [128, 256] and inputs["y"]["dtype"] == "float16"
    assert sum(n.kind == "output" for n in g.nodes) == 2 and sum(n.kind == "matmul" for n in g.nodes) == 2
    leaves_cover(f)


def test_crafted_model_decodes_graph_vars_dma_constants(tmp_path):
    data = build(small_model())
    assert neff.sniff(data[:4096]) and detect(data[:4096]) == "neff"
    f = neff.decode(data)
    assert [p for p in f.problems if not is_warning(p)] == [] and f.hash_ok is True
    sg = f.subgraphs[0]
    assert sg.engines["PE"]["slots"] == 4 and sg.engines["PE"]["opcodes"] == {0x01: 3, 0xA0: 1}
    assert sg.engines["PE"]["dma"][0]["from_sizes"] == [128]
    np.testing.assert_array_equal(f.constant("sg00/c.npy"), np.arange(6, dtype=np.float32).reshape(2, 3))
    g = f.graph()
    assert [n.kind for n in g.nodes] == ["input", "matmul", "output"] and len(g.edges) == 2
    assert g.edges[0].label == "float32[4, 8]"
    text = f.disassemble()
    assert "PE[    0]  op=0x01" in text and text.count("\n") == 5
    leaves_cover(f)


def test_raw_tar_pkg1_has_member_spans():
    data = build(small_model(), pkg=1)
    f = neff.decode(data)
    assert not f.compressed and f.hash_ok is True
    names = [s.value for s in f.root.find("payload").children if s.name.startswith("member")]
    assert "neff.json" in names
    leaves_cover(f)


def test_an_unknown_hash_is_not_checked_and_truncation_a_problem():
    """Real compilers' hashes match neither digest (what they cover is not public): a hash that is
    not the payload's md5 is "not checked", with no warning that could be neither right nor wrong."""
    f = neff.decode(build(small_model(), good_hash=False))
    assert f.hash_ok is None and f.problems == [] and f.subgraphs
    assert f.summary()["hash_check"].startswith("not checked")
    data = build(small_model())
    cut = neff.decode(data[:len(data) - 40])
    assert any("past the end" in p.reason or "truncated" in p.reason for p in cut.problems)
    with pytest.raises(NacFormatError):
        neff.decode(data[:500], strict=True)


def _hostile_members():
    sym = tarfile.TarInfo("sg00/link")
    sym.type, sym.linkname = tarfile.SYMTYPE, "/etc/passwd"
    hard = tarfile.TarInfo("sg00/hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, "neff.json"
    dev = tarfile.TarInfo("dev")
    dev.type = tarfile.CHRTYPE
    return [("../escape.json", b"{}"), ("/abs/path.json", b"{}"), ("sg00/../../up", b"x"),
            (sym, None), (hard, None), (dev, None), ("neff.json", b"{}")]


def test_hostile_members_are_refused_without_touching_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = neff.decode(build(_hostile_members()))
    refused = {m.name: m.refused for m in f.members.values() if m.refused}
    assert set(refused) == {"../escape.json", "/abs/path.json", "sg00/../../up", "sg00/link", "sg00/hard", "dev"}
    assert all(m.data is None for m in f.members.values() if m.refused)
    assert "neff.json" in f.members and f.members["neff.json"].data == b"{}"
    assert os.listdir(tmp_path) == []


def test_ten_gigabyte_member_header_is_contained():
    big = tarfile.TarInfo("huge.bin")
    big.size = 10 << 30
    tar = tar_of([("neff.json", b"{}")])[:1024]            # its header + data block, no end-of-archive
    tar += big.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 1024   # header only: no data follows
    payload = gzip.compress(tar, mtime=0)
    tracemalloc.start()
    f = neff.decode(header(payload) + payload)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 << 20
    m = f.members.get("huge.bin")
    assert m is None or (m.data is None and m.refused)
    assert any("huge.bin" in p.section or "damaged" in p.reason for p in f.problems)


def test_sparse_member_is_refused():
    sparse = tarfile.TarInfo("sparse.bin")
    sparse.type = tarfile.GNUTYPE_SPARSE
    f = neff.decode(build([(sparse, None), ("neff.json", b"{}")]))
    assert any(m.refused == "sparse member" for m in f.members.values())


def test_three_times_the_member_limit_stops_at_the_limit():
    tar = tar_of([(f"m{i}", b"") for i in range(3 * neff.MAX_MEMBERS)])
    payload = gzip.compress(tar, mtime=0)
    tracemalloc.start()
    f = neff.decode(header(payload) + payload)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(f.members) == neff.MAX_MEMBERS
    assert any("more than" in p.reason for p in f.problems)
    assert peak < 200 << 20


def test_gzip_bomb_is_refused_at_the_inflate_limit(monkeypatch):
    monkeypatch.setattr(neff, "INFLATE_FLOOR", 8 << 20)
    payload = gzip.compress(b"\0" * (64 << 20), mtime=0)
    f = neff.decode(header(payload) + payload)
    assert any("inflates past" in p.reason for p in f.problems)


def test_deep_json_and_bad_npy_are_problems():
    deep = b"[" * 100_000 + b"]" * 100_000
    f = neff.decode(build([("neff.json", deep), ("kelf-0.json", b'{"graphs": 3}')]))
    assert any("nests" in p.reason for p in f.problems)
    bad = b"\x93NUMPY\x01\x00" + b"v\x00" + b"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }".ljust(118) + b"\n"
    with pytest.raises(NacFormatError):
        neff.load_npy(bad, "x.npy")
    short = json.dumps({"descr": "<f4", "fortran_order": False, "shape": (1000,)})
    with pytest.raises(NacFormatError):
        neff.load_npy(b"\x93NUMPY\x01\x00" + len(short).to_bytes(2, "little") + short.encode(), "y.npy")


def _mutants(data: bytes, n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        b = bytearray(data)
        kind = rng.integers(4)
        if kind == 0:
            for _ in range(rng.integers(1, 8)):
                b[rng.integers(len(b))] = rng.integers(256)
        elif kind == 1:
            b = b[:rng.integers(len(b))]
        elif kind == 2:
            pos = rng.integers(1024)      # header fields
            b[pos:pos + 8] = rng.integers(0, 256, 8, dtype=np.uint8).tobytes()
        else:
            pos = rng.integers(len(b))
            b[pos:pos] = rng.integers(0, 256, rng.integers(1, 64), dtype=np.uint8).tobytes()
        yield bytes(b)


def _fuzz(n: int, seed: int) -> None:
    bases = [build(small_model()), build(small_model(), pkg=1)]
    for base in bases:
        for m in _mutants(base, n // len(bases), seed):
            try:
                f = neff.decode(m)
                f.summary(), f.graph(), f.details()
            except NacFormatError:
                pass


def test_fuzz_slice():
    _fuzz(600, 1)


@pytest.mark.slow
def test_fuzz_100k():
    _fuzz(100_000, 2)


def test_outputs_keep_the_files_names_and_a_shared_name_says_which_subgraph(capsys):
    """The real sample names both outputs `output0` (one per subgraph, LNC=2): shown as the file
    names them, told apart by their subgraph, never renamed `output1`."""
    from nac_engine.cli import main
    from tests.corpus_paths import CORPUS
    path = CORPUS / "peers" / "neff" / "matmul_small.neff"
    if not CORPUS.is_dir():
        pytest.skip("the shared corpus is absent")
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    outputs = [ln.split(None, 1)[1] for ln in out.splitlines() if ln.strip().startswith("output ")]
    assert outputs == ["output0 (sg00): float16[128, 128]", "output0 (sg01): float16[128, 128]"]
    assert "output1" not in out and "not checked" in out and "warning" not in out
    g = neff.decode(path.read_bytes()).graph()
    assert [n.attrs["file_name"] for n in g.nodes if n.kind == "output"] == ["output0", "output0"]


# -- read from disk as a stream (issue 22 §4.3) -------------------------------------------------
def _with_big_members(weights: bytes, slots: bytes) -> list:
    """small_model() plus a large weights member and an engine stream larger than KEEP_MEMBER."""
    members = small_model()
    definition = json.loads(members[2][1])
    definition["act"], definition["act_instr"] = "Act.json", "Act.bin"
    definition["var"]["w"] = {"type": "file", "var_id": 3, "size": len(weights) - 128, "file_name": "w.npy"}
    members[2] = ("sg00/def.json", json.dumps(definition).encode())
    return members + [("sg00/Act.json", b'{"dma": []}'), ("sg00/Act.bin", slots), ("sg00/w.npy", weights)]


def _npy(arr) -> bytes:
    import io
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def test_a_gzip_neff_is_walked_in_bounded_memory_and_large_members_are_read_again(tmp_path, monkeypatch):
    """At the allowed inflate ratio a small file holds a large tar: it is walked a chunk at a
    time (the old reader held the whole tar and every member: 572 MB for a 4 MB file); members
    larger than KEEP_MEMBER keep only their head and slot-opcode counts, and are read again,
    byte for byte, when asked for."""
    monkeypatch.setattr(neff, "KEEP_MEMBER", 1 << 20)
    weights = _npy(np.zeros((48 << 20) // 4, dtype=np.float32))             # 48 MB, compresses ~1000x
    rng = np.random.default_rng(3)
    ops = rng.choice(np.array([0x01, 0x02, 0xA0], dtype=np.uint8), size=(3 << 20) // 64)
    slots = np.zeros(((3 << 20) // 64, 64), dtype=np.uint8)
    slots[:, 0] = ops
    path = tmp_path / "big.neff"
    path.write_bytes(build(_with_big_members(weights, slots.tobytes())))
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    f = open_peer(str(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [p for p in f.problems if not is_warning(p)] == []
    assert peak < 24 << 20, f"{peak:,} bytes traced while walking a {len(weights) + len(slots):,}-byte archive"
    w, act = f.members["sg00/w.npy"], f.members["sg00/Act.bin"]
    assert w.data is None and act.data is None and len(w.head) == neff.HEAD_BYTES
    eng = f.subgraphs[0].engines["Activation"]
    assert eng["slots"] == len(ops) and eng["opcodes"] == {int(k): int(v) for k, v in
                                                            zip(*np.unique(ops, return_counts=True))}
    assert f.subgraphs[0].variables["w"]["_constant"] == f"float32[{(48 << 20) // 4}]"
    assert f.member_bytes("sg00/Act.bin") == slots.tobytes()
    assert f.member_bytes("sg00/w.npy") == weights
    assert f.constant("sg00/c.npy").shape == (2, 3)           # a kept member as before


def test_a_raw_tar_neff_reads_large_members_from_the_mapping(tmp_path, monkeypatch):
    monkeypatch.setattr(neff, "KEEP_MEMBER", 1 << 16)
    weights = _npy(np.arange(1 << 18, dtype=np.float32))
    slots = bytes([0x01] + [0] * 63) * 2048
    path = tmp_path / "raw.neff"
    path.write_bytes(build(_with_big_members(weights, slots), pkg=1))
    f = open_peer(str(path))
    assert [p for p in f.problems if not is_warning(p)] == [] and not f.compressed
    assert f.members["sg00/w.npy"].data is None
    np.testing.assert_array_equal(f.constant("sg00/w.npy"), np.arange(1 << 18, dtype=np.float32))
    assert f.subgraphs[0].engines["Activation"]["opcodes"] == {0x01: 2048}
    leaves_cover(f)


def test_a_neff_larger_than_the_whole_read_limit_is_mapped_not_refused(tmp_path, monkeypatch):
    """open_peer maps a NEFF instead of reading it whole: the whole-file limit of the text formats
    (MAX_PEER_BYTES; a real model's NEFF is gigabytes) does not apply."""
    import nac_engine.peers as peers

    def refuse(*_a, **_k):
        raise AssertionError("a NEFF was read whole")
    monkeypatch.setattr(peers, "read_bounded", refuse)
    path = tmp_path / "m.neff"
    path.write_bytes(build(small_model()))
    f = open_peer(str(path))
    assert f.subgraphs and not [p for p in f.problems if not is_warning(p)]


def test_a_member_past_the_end_of_a_truncated_stream_is_refused_not_crashed(tmp_path):
    data = build(_with_big_members(_npy(np.ones(1 << 16, np.float32)), bytes(64) * 4))
    f = neff.decode(data[:len(data) * 2 // 3])
    assert f.problems and all(isinstance(p, NacFormatError) for p in f.problems)


@pytest.mark.parametrize("pkg", [1, 2])
def test_a_neff_cut_on_disk_after_opening_is_a_refusal_not_a_crash(tmp_path, monkeypatch, pkg):
    """The file is read with pread as needed, never through a mapping: cut by another program
    after it was opened, a large member read again is refused (KeyError), and the process lives."""
    monkeypatch.setattr(neff, "KEEP_MEMBER", 1 << 12)
    path = tmp_path / "cut.neff"
    path.write_bytes(build(_with_big_members(_npy(np.arange(1 << 16, dtype=np.float32)), bytes(64) * 256), pkg=pkg))
    f = open_peer(str(path))
    assert f.members["sg00/w.npy"].data is None
    with open(path, "r+b") as fh:
        fh.truncate(2048)
    with pytest.raises(KeyError):
        f.member_bytes("sg00/w.npy")
    assert len(f.data[1000:4000]) == 1048          # what the hex view reads: shorter, not a crash
