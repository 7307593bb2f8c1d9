"""TVMR assembly: every corpus binary disassembles and reassembles byte-identically, the upstream
.ternsig sources assemble to the synthesized binaries (also through `nac asm`), and random programs
(all extension tables, branches, odd keys and flags, unknown opcodes) survive dis -> asm unchanged."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from nac_engine.peers import tvmr
from nac_engine.peers.tvmr import isa
from nac_engine.peers.tvmr.asm import TvmrAsmError, assemble
from nac_engine.peers.tvmr.format import tvmr_hash, xxh64
from tests.peers.test_tvmr import SAMPLES, TVMR_DIR, needs_corpus
from tests.cli_fork import run_cli


@needs_corpus
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_round_trips_and_source_assembles_to_it(path):
    data = path.read_bytes()
    text = tvmr.decode(data).disassemble()
    assert ".insn" not in text                      # every sample instruction has its mnemonic form
    assert assemble(text) == data
    src = TVMR_DIR / "ternsig_src" / (path.stem + ".ternsig")
    assert assemble(src.read_text(encoding="utf-8")) == data


@needs_corpus
def test_nac_asm_cli_writes_the_synthesized_binary(tmp_path):
    for path in SAMPLES[:2]:     # the CLI path; every sample goes through assemble() above
        out = tmp_path / (path.stem + ".tvmr")
        src = TVMR_DIR / "ternsig_src" / (path.stem + ".ternsig")
        assert run_cli(["asm", src, "-o", out]).returncode == 0
        assert out.read_bytes() == path.read_bytes()
        dis = tmp_path / (path.stem + ".ternsig")
        assert run_cli(["dis", out, "-o", dis]).returncode == 0
        again = tmp_path / (path.stem + "2.tvmr")
        assert run_cli(["asm", dis, "-o", again]).returncode == 0
        assert again.read_bytes() == path.read_bytes()


SOURCE = """
; exercise of the source form
.meta
    name "demo"
.requires
    neuro 0x0005
    lifecycle
    activation 0x0003
    tensor
.registers
    H0: i32[8]
    H1: i32[8]
    H2: i32
    C0: ternary[8, 8]  key="demo.w"  frozen=true
    P0: i32[1]
.program
    load_input H0
    loop 3
top:
    ternary_matmul H1, C0, H0
    activation.relu H1, H1
    tensor.scale H1, H1, 1, 0
    sigmoid H1, H1, gain=2.0
    clamp H1, H1, 100, 200
    neuro.chem_read H2, 2
    if_zero H2, done
    jump top
    end_loop
done:
    lifecycle.halt_region 7
    store_output H1
    halt
"""


def test_source_form_encodes_as_the_real_assembler_does():
    f = tvmr.decode(assemble(SOURCE), strict=True)
    assert f.checksum_kind == "tvmr-binary.rs" and not f.verify()
    raw = [i.raw.hex() for i in f.instructions]
    assert raw[0] == "00001007" + "00ff0000"                 # load_input: [r, FF, 0, 0]
    assert raw[1] == "00006000" + "ffff0003"                 # loop count u16 BE in C:D
    assert raw[4] == "00010004" + "01010100"                 # extension ops: operands in order
    assert raw[5] == "00003004" + "01010020"                 # gain 2.0 x 16
    assert raw[7] == "00050000" + "02020000"
    assert raw[8] == "00006009" + "02ff000b"                 # if_zero target: instruction 11, u16 BE
    assert raw[9] == "00006008" + "ffff0002"
    assert f.register(0x40).frozen and f.register(0x02).dims == [1]
    assert [e.ext_id for e in f.extensions] == [5, 8, 3, 1]
    text = f.disassemble()
    assert "L2:" in text and "jump L2" in text and "neuro.chem_read H2, 2" in text
    assert assemble(text) == f.data


def _random_program(rng) -> bytes:
    exts = sorted(rng.choice([e for e in isa.EXTENSIONS if e], size=int(rng.integers(0, 5)), replace=False))
    et = b"".join(struct.pack("<4H", int(e), 1, int(rng.integers(0, 3)), 0) for e in exts)
    regs = []
    for _ in range(int(rng.integers(0, 6))):
        nd = int(rng.integers(0, 4))
        key = bytes(rng.integers(0, 256, int(rng.integers(0, 12)), dtype=np.uint8)) if rng.random() < .5 \
            else b"k.ey;\"x" * int(rng.integers(0, 2))
        regs.append(struct.pack("<BHBB", int(rng.integers(0, 256)), int(rng.choice([7, 0x100, 0x101, 0xB, 0x333])),
                                int(rng.choice([1, 3, 0, 0x81])), nd)
                    + struct.pack(f"<{nd}H", *rng.integers(0, 65536, nd).tolist()) + bytes([len(key)]) + key)
    n = int(rng.integers(1, 30))
    instrs = []
    all_ops = [(e, o) for e, (_, t) in isa.EXTENSIONS.items() for o in t]
    for _ in range(n):
        if rng.random() < 0.1:
            ext, opc = int(rng.integers(0, 0x200)), int(rng.integers(0, 0x8000))
        else:
            ext, opc = all_ops[int(rng.integers(len(all_ops)))]
        ops = bytes(rng.integers(0, 256, 4, dtype=np.uint8)) if rng.random() < .3 else \
            bytes([int(rng.integers(0, 256)), 0xFF, 0, int(rng.integers(0, n))])
        instrs.append(struct.pack(">HH", ext, opc) + ops)
    rd, it = b"".join(regs), b"".join(instrs)
    ro = 48 + len(et)
    ck = (xxh64 if rng.random() < .3 else tvmr_hash)(et + rd + it)
    if rng.random() < 0.1:
        ck ^= 1
    hdr = struct.pack("<4sHHIIIIIIQ8s", b"TVMR", 1, int(rng.choice([0, 0, 4])), 48, len(exts), ro, len(regs),
                      ro + len(rd), n, ck, b"\0" * 8)
    return hdr + et + rd + it


def test_random_programs_round_trip_byte_identically():
    rng = np.random.default_rng(14)
    for _ in range(400):
        data = _random_program(rng)
        f = tvmr.decode(data)
        assert assemble(f.disassemble()) == data


@pytest.mark.parametrize("src, msg", [
    (".program\n  frob H0\n", "unknown mnemonic"),
    (".program\n  relu H0, H99\n", "invalid register"),
    (".program\n  jump nowhere\n", "undefined label"),
    (".registers\n  H0: wat[3]\n", "unknown dtype"),
    (".registers\n  H0: i32[70000]\n", "outside"),
    (".requires\n  nosuch\n", "unknown extension"),
    ("  halt\n", "outside of a section"),
    (".bogus\n", "unknown directive"),
    (".program\n  shift H0, H0, 9" + "9" * 5000 + "\n", "too long"),
    (".program\n  neuro.frob H0\n", "unknown extension mnemonic"),
])
def test_bad_source_is_one_error_naming_the_line(src, msg):
    with pytest.raises(TvmrAsmError) as e:
        assemble(src)
    assert msg in str(e.value) and str(e.value).startswith("line ")
