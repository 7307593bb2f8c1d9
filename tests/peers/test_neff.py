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


def test_hundred_thousand_members_stop_at_the_limit():
    tar = tar_of([(f"m{i}", b"") for i in range(100_000)])
    payload = gzip.compress(tar, mtime=0)
    tracemalloc.start()
    f = neff.decode(header(payload) + payload)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(f.members) == neff.MAX_MEMBERS
    assert any("more than" in p.reason for p in f.problems)
    assert peak < 200 << 20


def test_gzip_bomb_is_refused_at_the_inflate_limit(monkeypatch):
    monkeypatch.setattr(neff, "MAX_INFLATED", 8 << 20)
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
