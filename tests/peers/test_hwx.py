"""Apple ANE hwx (seed 002, research note §4.3): the four H13 samples decode completely — every
register-write packet, every register listed (named or not), spans over every byte — and hostile
mutants give the one error type."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from nac_engine.errors import NacFormatError
from nac_engine.peers import hwx, is_warning, open_peer
from tests.corpus_paths import CORPUS

ANE = CORPUS / "peers" / "ane"
SAMPLES = sorted(ANE.glob("*.hwx")) if ANE.is_dir() else []
needs_corpus = pytest.mark.skipif(not SAMPLES, reason="shared corpus absent")
#: research note §4.3, relu.hwx: (block base, words) of its 7 packets in order
RELU_PACKETS = [(0x1F800, 62), (0x0, 16), (0x13800, 28), (0x4800, 18), (0x8800, 4), (0xC800, 5), (0x17800, 7)]


@needs_corpus
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_decodes_fully(path):
    f = open_peer(str(path))
    assert f.format == "hwx" and f.generation == "H13" and f.compiler == "zin_ane_compiler v4.2.1"
    assert "-t h13" in f.compile_flags
    assert [p for p in f.problems if not is_warning(p)] == []
    assert f.tds and all(t.packets for t in f.tds)
    for t in f.tds:      # every packet's values fill the TD exactly and every register is listed
        assert sum(c for _, _, c in t.packets) == len(t.registers)
        assert 4 * (len(t.packets) + len(t.registers)) == hwx.TD_SIZE_H13 - hwx.TD_HEADER
    pos = 0
    for leaf in f.root.leaves():
        assert leaf.offset == pos, leaf
        pos = leaf.end
    assert pos == f.size
    g = f.graph()
    assert g.nodes[0].kind == "input" and g.nodes[-1].kind == "output"
    assert all(n.inferred for n in g.nodes if n.label.startswith("TD"))
    assert "TD" in f.format_summary() and f.disassemble().count("=") >= 140


@needs_corpus
def test_info_and_dis_read_as_text_not_python_dicts(capsys):
    """`nac info` / `nac dis` of an hwx name shapes, formats and strides in words (they printed the
    decoder's dicts: ``{'Win': 77, ...}``, ``{'name': 'image', 'element_type': ...}``)."""
    from nac_engine.cli import main
    assert main(["info", str(ANE / "relu.hwx")]) == 0
    info = capsys.readouterr().out
    assert "activation (inferred): fp16[C1 H1 W77] → fp16[C1 H1 W77], kernel 1×1; 7 packets" in info
    assert "tensor      image: float16[1, 1, 1, 77], strides n 192 c 192 h 192 w 2" in info
    assert main(["dis", str(ANE / "relu.hwx")]) == 0
    dis = capsys.readouterr().out
    assert "; activation (inferred): fp16[C1 H1 W77] → fp16[C1 H1 W77], kernel 1×1" in dis
    assert "{'" not in info + dis
    symbols = open_peer(str(ANE / "relu.hwx")).details()[-1]
    assert [(c.name, c.value) for c in symbols.children[0].children] == [("type", "0xf"), ("sect", 3),
                                                                        ("value", "0x30008000")]


@needs_corpus
def test_relu_packets_match_the_research_note():
    f = open_peer(str(ANE / "relu.hwx"))
    assert [(a, c) for _, a, c in f.tds[0].packets] == RELU_PACKETS
    t = f.tds[0]
    assert (t.shape["Win"], t.shape["Wout"], t.shape["in_fmt"]) == (77, 77, "fp16") and t.kind == "activation"
    lay = next(s["layout"] for s in f.symbols if s.get("layout") and s["layout"]["name"] == "image")
    assert lay["shape"] == [1, 1, 1, 77] and lay["element_type"] == "float16"
    unnamed = [r for r in t.registers if not r.fields]
    assert unnamed and all(r.name.split("+")[0] in dict(hwx.H13_BLOCKS) for r in unnamed)


@needs_corpus
def test_shapes_agree_with_the_symbol_table():
    for name, kind in (("gemm.hwx", "conv"), ("sum.hwx", "elementwise"), ("conv.hwx", "conv")):
        f = open_peer(str(ANE / name))
        t = f.tds[0]
        lay = next(s["layout"] for s in f.symbols if s.get("layout") and "output" in s["layout"]["name"])
        assert t.kind == kind
        assert lay["shape"][1] == t.shape["Cout"]


def test_not_hwx_and_truncated():
    with pytest.raises(NacFormatError):
        hwx.decode(b"\xce\xfa\xed\xfe" + bytes(40), strict=True)
    f = hwx.decode(struct.pack("<8I", hwx.MAGIC, 0x80, 4, 2, 3, 10_000, 0, 0))
    assert f.problems and "sizeofcmds" in f.problems[0].reason


def _fuzz(n: int, seed: int) -> None:
    if not SAMPLES:
        pytest.skip("shared corpus absent")
    rng = np.random.default_rng(seed)
    bases = [p.read_bytes()[:0x4400] for p in SAMPLES[:2]]     # header, commands and the TD stream
    for k in range(n):
        b = bytearray(bases[k % len(bases)])
        if rng.integers(4) == 0:
            b = b[:rng.integers(len(b))]
        else:
            for _ in range(rng.integers(1, 8)):
                pos = rng.integers(0x1000) if rng.integers(2) else 0x4000 + rng.integers(0x274)
                b[pos % len(b)] = rng.integers(256)
        try:
            f = hwx.decode(bytes(b))
            f.summary(), f.graph(), f.details(), f.disassemble()
        except NacFormatError:
            pass


def test_fuzz_slice():
    _fuzz(1500, 1)


@pytest.mark.slow
def test_fuzz_100k():
    _fuzz(100_000, 2)


@needs_corpus
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_corrupt_first_packet_is_a_problem(path):
    """A damaged first register-write header made the rest of the TD read as other packets, and the
    file verified "ok": an unaligned address, one outside every block, a run leaving its block or
    a register written twice in one TD is a problem naming the packet."""
    data = path.read_bytes()
    first = open_peer(str(path)).tds[0].packets[0][0]
    word = struct.unpack_from("<I", data, first)[0]
    for bad in (0, 0xFFFFFFFF, word | (0x3F << 26), (word & ~0x3FFFFFF) | 0x3FFFFFF):
        mutant = bytearray(data)
        struct.pack_into("<I", mutant, first, bad)
        f = hwx.decode(bytes(mutant))
        errors = [p for p in f.problems if not is_warning(p)]
        assert errors and all(p.section.startswith("td[0]/packet[") for p in errors), (hex(bad), f.problems)


@needs_corpus
def test_an_output_marked_only_on_its_symbol_is_drawn_as_an_output():
    """Issue 22 §3.3: later compilers write the bare port name in the load command and keep the
    ``@output`` marker on the buffer's symbol. Reproduced from relu.hwx: its port name loses the
    marker (the bytes become NULs, sizes unchanged), its symbol keeps it — the port is still the
    graph's output, not a second input."""
    data = bytearray((ANE / "relu.hwx").read_bytes())
    first = data.find(b"probs@output\0")          # the load command's name comes before the string table
    assert first > 0 and data.find(b"probs@output\0", first + 1) > first
    data[first + 5:first + 12] = bytes(7)
    f = hwx.decode(bytes(data))
    assert "probs" in f.ports and "probs@output" not in f.ports
    assert any(s.get("name") == "probs@output" for s in f.symbols)
    g = f.graph()
    assert [n.label for n in g.nodes if n.kind == "output"] == ["probs"]
    assert [n.label for n in g.nodes if n.kind == "input"] == ["image"]
