"""Disassembly ↔ assembly: exact round trips, readable lines, hand edits, clear errors."""
import numpy as np
import pytest

from nac_engine import read, write
from nac_engine.format.model import Instruction
from nac_engine.text.asm import assemble
from nac_engine.text.disasm import disassemble
from nac_engine.text.textops import Tables, TextError, format_instruction, parse_instruction
from tests.corpus_paths import NAC_FILES

corpus = pytest.mark.skipif(not NAC_FILES, reason="../shared/corpus is absent")


@corpus
@pytest.mark.parametrize("path", NAC_FILES, ids=lambda p: p.parent.name)
def test_corpus_disassembles_and_reassembles_byte_identical(path):
    original = path.read_bytes()
    with read(path) as nac:
        text = disassemble(nac, mmap_comments=True)
    assert " = raw " not in text, "every corpus instruction has a readable form"
    rebuilt = write(assemble(text, weights=str(path)))
    assert rebuilt == original


@corpus
def test_weights_from_safetensors(tmp_path):
    from safetensors.numpy import save_file
    path = next(p for p in NAC_FILES if p.parent.name == "mlp")
    with read(path) as nac:
        save_file({p.name: np.array(p.raw()) for p in nac.params.values()}, str(tmp_path / "w.safetensors"))
        text = disassemble(nac)
    assert write(assemble(text, weights=str(tmp_path / "w.safetensors"))) == path.read_bytes()


@corpus
def test_readable_lines_for_mlp():
    path = next(p for p in NAC_FILES if p.parent.name == "mlp__v1.6")
    with read(path) as nac:
        lines = disassemble(nac, mmap_comments=True).splitlines()
    ops = lines[lines.index(".ops") + 1:lines.index(".mmap")]
    assert ops[0].startswith("v0 = input x")
    assert ops[1].startswith("v1 = param fc1.weight")
    assert ops[3].startswith("v3 = aten.linear.default(v0, v1, v2)")
    assert "FORWARD v4" in ops[3]
    assert ops[12].startswith("v12 = return v11")


@corpus
def test_constants_shown_by_value_and_signature_only_when_needed():
    path = next(p for p in NAC_FILES if p.parent.name == "bert_tiny__v1.6")
    with read(path) as nac:
        text = disassemble(nac)
    assert "aten.slice.Tensor(v2, 0, 0, 9223372036854775807)" in text
    assert 'aten._to_copy.default(' in text and '"float32")<Tc>' in text   # dtype string is 'c', not 's'
    assert "nac.view(" in text


def test_hand_written_program_assembles_and_verifies(tmp_path):
    text = """
.version 1.6
.ops
v0 = input x
v1 = aten.leaky_relu.default(v0, 0.2)
v2 = nac.add(v1, v0)
v3 = return v2
"""
    nac = assemble(text)
    data = write(nac)
    back = read(data)
    assert back.header.num_inputs == 1 and back.header.num_outputs == 1
    assert back.instruction_name(back.instructions[1]) == "aten.leaky_relu.default"
    args = back.arguments(back.instructions[1])
    assert args[0].producer == 0 and args[1].kind == "const" and args[1].value == 0.2
    assert back.signature(back.instructions[1]) == "Tf"
    assert back.instruction_name(back.instructions[2]) == "nac.add"   # standard op: no CMAP entry
    assert 11 not in back.cmap
    from nac_engine import verify
    assert verify(data) == []


def test_raw_form_keeps_unusual_encodings():
    nac = assemble(".version 1.6\n.ops\nv0 = input x\nv1 = raw A=2 B=1 C=[2,7]\nv2 = raw A=6 B=0 C=[3,1,2] D=[-1]\n")
    t = Tables(nac)
    # a <INPUT B=1> with the spec's prefix 2 (the reference writes 1) cannot use the `param` form
    assert format_instruction(nac.instructions[1], t) == "v1 = raw A=2 B=1 C=[2,7]"
    assert format_instruction(nac.instructions[2], t) == "v2 = raw A=6 B=0 C=[3,1,2] D=[-1]"


def test_mismatched_c_count_falls_back_to_raw():
    nac = assemble(".version 1.6\n.perm 1 \"Ti\"\n.cmap 20 aten.softmax.int\n.const 2 int64 1\n.ops\nv0 = input x\n")
    bad = Instruction(1, 20, 1, (2, 2, 2), (-1, 0))   # C says 2 constants, D has one slot
    assert format_instruction(bad, Tables(nac)).startswith("v1 = raw ")


@pytest.mark.parametrize("text, message", [
    (".version 1.6\n.ops\nv1 = input x\n", "out of sequence"),
    (".version 1.6\n.ops\nv0 = param missing\n", "unknown parameter"),
    (".version 1.6\n.ops\nv0 = input x\nv1 = aten.relu.default(v0)<TT>\n", "signature"),
    (".version 9.9\n", "unknown version"),
    (".version 1.6\n.bogus 1\n", "unknown directive"),
    (".version 1.6\n.ops\nv0 = ???\n", "cannot parse"),
    (".version 1.6\n.mmap\n@1: JUMP v0\n", "unknown MMAP action"),
])
def test_errors_name_the_line(text, message):
    with pytest.raises(TextError) as e:
        assemble(text)
    assert message in str(e.value)
    assert e.value.line >= 1


def test_missing_weights_are_reported():
    text = ".version 1.6\n.param 1 w\n.tensor 1 float32 [2]\n.ops\nv0 = param w\n"
    with pytest.raises(TextError, match="tensor data for parameter 'w'"):
        assemble(text)


def test_literal_collisions_use_explicit_ids():
    # two CNST records with the same value: the text must name which one
    text = ".version 1.6\n.perm 1 \"Ti\"\n.cmap 20 aten.softmax.int\n.const 2 int64 1\n.const 3 int64 1\n.ops\nv0 = input x\nv1 = aten.softmax.int(v0, c3)\n"
    nac = assemble(text)
    assert nac.instructions[1].c == (1, 3)
    line = format_instruction(nac.instructions[1], Tables(nac))
    assert "c3" in line
    assert parse_instruction(line, 1, Tables(nac)).same_encoding(nac.instructions[1])
