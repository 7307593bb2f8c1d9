"""TVMR text form <-> bytes map (issue 14): ``instruction_at``, ``line_of_offset`` and ``offset_of_line``
agree with the disassembly on every corpus sample and on a program with labels, extension ops and a
raw ``.insn`` line; bytes outside the instructions and lines that are no instruction map to nothing."""
from __future__ import annotations

import pytest

from nac_engine.peers import open_peer, tvmr
from nac_engine.peers.tvmr.asm import assemble
from tests.corpus_paths import CORPUS

SAMPLES = sorted((CORPUS / "peers" / "tvmr" / "synthesized").glob("*.tvmr"))

LABELLED = """
.requires
    neuro 0x0005
.registers
    H0: i32[4]
    H1: i32[1]
.program
    load_input H0
    neuro.chem_read H1, 1
    if_zero H1, skip
    relu H0, H0
skip:
    .insn 0x0000, 0x7777, 0x01, 0x02, 0x03, 0x04
    store_output H0
    halt
"""


def _check(f):
    lines = f.disassemble().splitlines()
    seen = set()
    for i in f.instructions:
        for byte in range(8):
            assert f.instruction_at(i.offset + byte) == i.index
        line = f.line_of_offset(i.offset + 7)
        assert line not in seen
        seen.add(line)
        assert f.offset_of_line(line) == i.offset
        text = lines[line - 1].strip().lower()
        assert text.split()[0].split(".")[-1] == i.mnemonic.lower().split(".")[-1] or text.startswith(".insn")
    assert f.instruction_at(0) is None and f.line_of_offset(0) is None
    assert f.instruction_at(f.instructions[-1].offset + 8) is None
    for n in range(1, len(lines) + 1):
        if n not in seen:
            assert f.offset_of_line(n) is None, lines[n - 1]


@pytest.mark.skipif(not SAMPLES, reason="shared corpus absent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_every_instruction_has_its_line(path):
    _check(open_peer(str(path)))


def test_labels_extensions_and_raw_lines():
    f = tvmr.decode(assemble(LABELLED), strict=False)
    _check(f)
    lines = f.disassemble().splitlines()
    assert lines[f.line_of_offset(f.instructions[4].offset) - 1].strip().startswith(".insn")
    assert any(l.endswith(":") and not l.startswith(" ") for l in lines)      # a label line: no instruction
