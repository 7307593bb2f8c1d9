"""TVMR (seed 004) decoder: the synthesized corpus binaries decode with spans over every byte, the
writer's checksum is recognised (and xxhash64 as the seed states it), legacy TERN is reported, and
hostile headers give the one error type."""
from __future__ import annotations

import json
import struct

import pytest

from nac_engine.errors import NacFormatError
from nac_engine.peers import detect, open_peer, tvmr
from nac_engine.peers.tvmr.format import tvmr_hash, xxh64
from tests.corpus_paths import CORPUS
from tests.cli_fork import run_cli

TVMR_DIR = CORPUS / "peers" / "tvmr"
SAMPLES = sorted((TVMR_DIR / "synthesized").glob("*.tvmr")) if TVMR_DIR.is_dir() else []
needs_corpus = pytest.mark.skipif(not SAMPLES, reason="shared corpus absent")


def leaves(span):
    kids = span.children
    if not kids:
        yield span
    for k in kids:
        yield from leaves(k)


def covers_exactly_once(f) -> bool:
    pos = 0
    for s in sorted(leaves(f.root), key=lambda s: s.offset):
        if s is f.root:
            continue
        if s.offset != pos:
            return False
        pos = s.end
    return pos == f.size


@needs_corpus
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_decodes_clean_with_full_spans(path):
    assert detect(path.read_bytes()[:4096], str(path)) == "tvmr"
    f = open_peer(str(path))
    assert f.format == "tvmr" and not f.problems and not f.verify()
    assert covers_exactly_once(f)
    assert f.checksum_kind == "tvmr-binary.rs"
    assert f.header.ext_offset == 48 and f.instructions[-1].mnemonic == "HALT"
    assert f.instructions[0].mnemonic == "LOAD_INPUT"
    cold = [r for r in f.registers if r.reg >> 6 == 1]
    assert cold and all(r.type_id == 0x100 and len(r.dims) == 2 and r.key for r in cold)


@needs_corpus
def test_classifier_fields():
    f = tvmr.decode((TVMR_DIR / "synthesized" / "ant_classifier.tvmr").read_bytes(), strict=True)
    assert len(f.registers) == 9 and len(f.instructions) == 27
    c0 = f.register(0x40)
    assert c0.dims == [24, 32] and c0.key_text == "ant.classifier.w_in" and c0.flags == 1
    sig = [i for i in f.instructions if i.mnemonic == "SIGMOID"][0]
    assert sig.operands == bytes([3, 3, 0, 64])                     # D = gain 64
    assert f.summary()["ops"]["TERNARY_MATMUL"] == 8


@needs_corpus
def test_cli_info_json_and_span():
    path = SAMPLES[0]
    r = run_cli(["info", "--json", path])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    js = json.loads(out)
    assert js["format"] == "tvmr" and js["checksum_matched"] == "tvmr-binary.rs"
    r = run_cli(["span", path, "32"])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "checksum" in out


def _program(ext=(), regs=(), instrs=(), checksum="tvmr-binary.rs") -> bytes:
    et = b"".join(struct.pack("<4H", e, 1, 0, 0) for e in ext)
    rd = b"".join(regs)
    it = b"".join(instrs)
    ro = 48 + len(et)
    io = ro + len(rd)
    ck = {"tvmr-binary.rs": tvmr_hash, "xxh64": xxh64}[checksum](et + rd + it)
    hdr = struct.pack("<4sHHIIIIIIQ8s", b"TVMR", 1, 0, 48, len(ext), ro, len(regs), io, len(it) // 8, ck, b"\0" * 8)
    return hdr + et + rd + it


def test_xxhash_variant_recognised_and_wrong_checksum_is_a_problem():
    halt = bytes.fromhex("00000001ffff0000")
    f = tvmr.decode(_program(instrs=[halt], checksum="xxh64"))
    assert f.checksum_kind == "xxh64"
    assert all(getattr(p, "severity", "") == "warning" for p in f.problems)
    bad = bytearray(_program(instrs=[halt]))
    bad[33] ^= 0xFF
    f = tvmr.decode(bytes(bad))
    assert f.checksum_kind is None
    assert any(p.section == "header/checksum" for p in f.problems)
    with pytest.raises(NacFormatError):
        tvmr.decode(bytes(bad), strict=True)


def test_extension_instructions_decode_with_names():
    instrs = [bytes.fromhex("0005000003020000"),   # neuro.CHEM_READ H3, 2
              bytes.fromhex("0008000707000000"),   # lifecycle.HALT_REGION 7
              bytes.fromhex("0006000440000509"),   # arch.GROW_NEURON C0, _, 5, 9
              bytes.fromhex("00000001ffff0000")]
    f = tvmr.decode(_program(ext=(5, 8, 6), instrs=instrs), strict=True)
    assert [i.mnemonic for i in f.instructions] == ["neuro.CHEM_READ", "lifecycle.HALT_REGION",
                                                    "arch.GROW_NEURON", "HALT"]
    assert [e.name for e in f.extensions] == ["neuro", "lifecycle", "arch"]
    assert covers_exactly_once(f)
    # an extension used but not declared is reported by verify
    g = tvmr.decode(_program(ext=(5,), instrs=instrs))
    assert any("not declared" in p.reason for p in g.verify())


def legacy_writer_file() -> bytes:
    """The legacy writer's layout (to_binary): three bank counts, instr_count at 11, no checksum."""
    regs = bytes([0x00, 1, 1]) + struct.pack("<H", 4) + b"\0" + bytes([0x40, 2, 2]) + struct.pack("<HH", 2, 4) + b"\x03abc"
    hdr = b"TERN" + struct.pack("<HH", 1, 0) + bytes([1, 1, 0]) + struct.pack("<II", 2, 0)
    return hdr + b"\0" * (32 - len(hdr)) + regs + bytes.fromhex("0000100700ff000000000001ffff0000")


def test_legacy_tern_is_detected_and_reported():
    hdr = b"TERN" + struct.pack("<HHBBBBIIQ", 1, 0, 1, 0, 0, 0, 1, 0, 0) + b"\0" * 4
    data = hdr + bytes.fromhex("00000001ffff0000")
    assert detect(data[:4]) == "tvmr"
    f = tvmr.decode(data)
    assert f.legacy and any("legacy reader" in p.reason for p in f.problems)
    assert f.summary()["legacy_tern"] is True and covers_exactly_once(f)
    # the legacy writer's layout, which the real reader cannot load, is tried too
    f = tvmr.decode(legacy_writer_file())
    assert any("legacy writer" in p.reason for p in f.problems) and covers_exactly_once(f)
    assert [(r.name, r.dims, r.key_text, r.type_id) for r in f.registers] == [("H0", [4], "", 7),
                                                                               ("C0", [2, 4], "abc", 0x100)]
    assert [i.mnemonic for i in f.instructions] == ["LOAD_INPUT", "HALT"]
    from nac_engine.peers.tvmr.asm import assemble
    g = tvmr.decode(assemble(f.disassemble()), strict=True)        # its text assembles to TVMR v1
    assert [r.name for r in g.registers] == ["H0", "C0"] and g.instructions[-1].mnemonic == "HALT"


@pytest.mark.parametrize("patch", [
    (12, struct.pack("<I", 0xFFFFFFFF)),        # ext_count
    (28, struct.pack("<I", 0x7FFFFFFF)),        # instr_count
    (16, struct.pack("<I", 0xFFFFFFF0)),        # reg_defs_offset
    (20, struct.pack("<I", 1 << 30)),           # reg_count
    (24, struct.pack("<I", 3)),                 # instr_offset before the header end
])
def test_hostile_header_fields_are_format_errors(patch):
    data = bytearray(_program(regs=[bytes([0, 7, 0, 1, 1, 4, 0, 0])], instrs=[bytes.fromhex("00000001ffff0000")]))
    off, b = patch
    data[off:off + len(b)] = b
    with pytest.raises(NacFormatError):
        tvmr.decode(bytes(data), strict=True)
    f = tvmr.decode(bytes(data))
    assert f.problems and covers_exactly_once(f)


def test_truncated_and_tiny_inputs():
    for data in (b"", b"TVMR", b"TVMR" + b"\0" * 40, b"TERN\0\0"):
        f = tvmr.decode(data)
        assert f.problems
        assert covers_exactly_once(f) or f.size == 0


@needs_corpus
def test_details_and_machine_accessor():
    f = tvmr.decode(SAMPLES[0].read_bytes())
    ck, blocks = f.details()
    assert any("(matches)" in c.value for c in ck.children) and blocks.value == 1
    m = f.machine(seed=2)
    assert m.step().mnemonic == "LOAD_INPUT"
