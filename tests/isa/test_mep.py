"""MEP bytecode (ORCH): decode/encode/text round trips, the real mlp_orch plan, hostile bytes."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from nac_engine.errors import NacFormatError
from nac_engine.spans import Span
from nac_engine.isa.mep import (MEP_OPCODES, MepInstruction, OpTail, decode_mep, encode_mep, format_mep,
                                parse_mep, parse_mep_listing)

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "nac"
ORCH_SLOT = 7          # ORCH's offset-table slot in every header generation
OFFSET_TABLE = 12      # the u64 offset table starts at byte 12 in every generation


def _corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*/*.nac")) if CORPUS.is_dir() else []


def _orch(path: Path) -> tuple[bytes, int, dict]:
    """(bytecode, its absolute offset, pool) of a file's ORCH section; pool records use the
    CNST layout (u16 id, u8 type, u16 len, value); only the types the plans use are read."""
    data = path.read_bytes()
    (orch,) = struct.unpack_from("<Q", data, OFFSET_TABLE + 8 * ORCH_SLOT)
    assert data[orch:orch + 4] == b"ORCH"
    code_len, const_count = struct.unpack_from("<II", data, orch + 4)
    start = orch + 12
    pool, pos = {}, start + code_len
    for _ in range(const_count):
        cid, ctype, clen = struct.unpack_from("<HBH", data, pos)
        pos += 5
        if ctype == 4:
            pool[cid] = data[pos:pos + clen].decode()
            pos += clen
        elif ctype in (2, 3):
            pool[cid] = struct.unpack_from("<q" if ctype == 2 else "<d", data, pos)[0]
            pos += 8
        else:
            raise AssertionError(f"pool type {ctype} not expected in the corpus")
    return data[start:start + code_len], start, pool


def _assert_leaves_tile(root: Span, start: int, length: int) -> None:
    pos = start
    for leaf in root.leaves():
        assert leaf.offset == pos, f"gap or overlap at {leaf!r} (expected offset {pos})"
        assert leaf.length > 0
        pos = leaf.end
    assert pos == start + length


# -- the real plan --------------------------------------------------------------------------
MLP_ORCH_LISTING = [
    '0: RES_LOAD_MODEL model=0 path=#0 ; "mlp_orch.nac"',
    '4: RES_LOAD_ARRAY out=k0 name=#1 ; "sample_input"',
    '8: MODEL_RUN_STATIC model=0 in=[k0] out=[k1]',
    '14: MATH_AGGREGATE op=argmax out=k2 in=k1',
    '18: SRC_CONSTANT out=k3 const=#2 ; "argmax:"',
    '22: SYS_DEBUG_PRINT var=k2 msg=#3 ; "pred"',
    '26: EXEC_RETURN values=[k1]',
]


@pytest.fixture
def mlp_orch():
    path = CORPUS / "mlp_orch" / "mlp_orch.nac"
    if not path.is_file():
        pytest.skip("shared corpus not present")
    return _orch(path)


def test_mlp_orch_matches_research_note(mlp_orch):
    bytecode, base, pool = mlp_orch
    # research note §12.4: the 29 bytes, split at instruction boundaries
    note = "10 00 0000 | 14 00 0100 | 80 00 01 00 01 01 | 62 00 02 01 | 04 03 0200 | 5f 02 0300 | fe 01 01"
    chunks = [bytes.fromhex(c) for c in note.split("|")]
    assert bytecode == b"".join(chunks)
    assert pool == {0: "mlp_orch.nac", 1: "sample_input", 2: "argmax:", 3: "pred"}

    instrs, problems = decode_mep(bytecode, base)
    assert problems == []
    assert [i.length for i in instrs] == [len(c) for c in chunks]
    assert [format_mep(i, pool) for i in instrs] == MLP_ORCH_LISTING
    run = instrs[2]
    assert (run.opcode, run.operands) == (0x80, [("model", 0), ("in", [0]), ("out", [1])])
    assert format_mep(run, address=False) == "MODEL_RUN_STATIC model=0 in=[k0] out=[k1]"


def test_mlp_orch_round_trips_and_spans(mlp_orch):
    bytecode, base, pool = mlp_orch
    root = Span(base, len(bytecode), "bytecode")
    instrs, _ = decode_mep(bytecode, base, root)
    assert encode_mep(instrs) == bytecode
    assert encode_mep(parse_mep_listing(MLP_ORCH_LISTING)) == bytecode
    assert [c.name for c in root.children] == [f"insn[{i}]" for i in range(len(instrs))]
    assert root.children[2].value == "MODEL_RUN_STATIC model=0 in=[k0] out=[k1]"
    assert [c.name for c in root.children[2].children] == ["opcode", "model", "n_in", "in[0]", "n_out", "out[0]"]
    assert root.span_at(base + 3).name == "path" and root.span_at(base + 3).length == 2
    _assert_leaves_tile(root, base, len(bytecode))


@pytest.mark.parametrize("path", _corpus_files() or [None], ids=lambda p: p.parent.name if p else "none")
def test_every_corpus_orch_decodes_cleanly(path):
    if path is None:
        pytest.skip("shared corpus not present")
    bytecode, base, _ = _orch(path)
    instrs, problems = decode_mep(bytecode, base)
    assert problems == []
    assert encode_mep(instrs) == bytecode


# -- generated streams ------------------------------------------------------------------------
_VALUE = {"k": st.integers(0, 255), "u8": st.integers(0, 255), "c16": st.integers(0, 0xFFFF),
          "i16": st.integers(-0x8000, 0x7FFF)}


@st.composite
def instruction(draw, opcode=None) -> MepInstruction:
    if opcode is None:
        opcode = draw(st.sampled_from(sorted(MEP_OPCODES)))
    mnemonic, layout = MEP_OPCODES[opcode]
    tail = next((f for f in layout if isinstance(f, OpTail)), None)
    operands: list = []
    pending = list(layout)
    while pending:
        f = pending.pop(0)
        if isinstance(f, OpTail):
            pending = list(f.by_op.get(dict(operands)["op"], f.default)) + pending
            continue
        if f.name == "op" and tail is not None and tail.default is None:
            value = draw(st.sampled_from(sorted(tail.by_op)))   # ops with a known tail only
        elif f.kind == "keys":
            value = draw(st.lists(st.integers(0, 255), max_size=6))
        elif f.kind == "raw":
            value = draw(st.binary(min_size=f.size, max_size=f.size))
        else:
            value = draw(_VALUE[f.kind])
        operands.append((f.name, value))
    return MepInstruction(0, opcode, mnemonic, operands, 0)


def _placed(instrs: list[MepInstruction]) -> list[MepInstruction]:
    """Give generated instructions their real ip and length."""
    ip = 0
    for instr in instrs:
        instr.ip, instr.length = ip, len(encode_mep([instr]))
        ip += instr.length
    return instrs


streams = st.lists(instruction(), max_size=12).map(_placed)


@given(streams)
@settings(max_examples=300)
def test_decode_inverts_encode(instrs):
    bytecode = encode_mep(instrs)
    decoded, problems = decode_mep(bytecode)
    assert problems == []
    assert decoded == instrs
    assert encode_mep(decoded) == bytecode


@given(streams, st.integers(0, 1 << 20))
@settings(max_examples=200)
def test_text_round_trip(instrs, base):
    pool = {i: f"value {i}" for i in range(0, 0x10000, 7)}
    lines = [format_mep(i, pool) for i in instrs]
    assert [parse_mep(line) for line in lines] == instrs
    assert [parse_mep(format_mep(i, address=False), ip=i.ip) for i in instrs] == instrs
    assert encode_mep(parse_mep_listing("\n".join(lines))) == encode_mep(instrs)


@given(st.binary(max_size=64), st.integers(0, 1 << 20))
@settings(max_examples=500)
def test_any_bytes_decode_without_raising(data, base):
    root = Span(base, len(data), "bytecode")
    instrs, problems = decode_mep(data, base, root)
    assert encode_mep(instrs) == data
    assert len(problems) <= 1
    assert all(isinstance(p, NacFormatError) and p.section == "ORCH/bytecode" for p in problems)
    raws = [i for i in instrs if i.mnemonic == ".bytes"]
    assert len(raws) == len(problems)
    if raws:
        assert raws[0] is instrs[-1] and problems[0].offset == base + raws[0].ip
    # every instruction's text form parses back to it, .bytes included
    assert [parse_mep(format_mep(i)) for i in instrs] == instrs
    if data:
        _assert_leaves_tile(root, base, len(data))


@given(streams, st.integers(0, 1 << 20))
@settings(max_examples=100)
def test_span_leaves_cover_every_byte_once(instrs, base):
    bytecode = encode_mep(instrs)
    root = Span(base, len(bytecode), "bytecode")
    decode_mep(bytecode, base, root)
    assert len(root.children) == len(instrs)
    if bytecode:
        _assert_leaves_tile(root, base, len(bytecode))


def _every_opcode_stream() -> bytes:
    """One instruction of every opcode (each op variant of the op-dependent tails)."""
    instrs = []
    for opcode, (_, layout) in sorted(MEP_OPCODES.items()):
        tail = next((f for f in layout if isinstance(f, OpTail)), None)
        for op in (sorted(tail.by_op) if tail else [None]):
            operands, pending = [], list(layout)
            while pending:
                f = pending.pop(0)
                if isinstance(f, OpTail):
                    pending = list(f.by_op.get(op, f.default)) + pending
                    continue
                value = {"keys": [1, 2, 3], "raw": bytes(range(f.size)), "i16": -3}.get(f.kind, 7)
                operands.append((f.name, op if f.name == "op" and tail else value))
            instrs.append(MepInstruction(0, opcode, MEP_OPCODES[opcode][0], operands, 0))
    return encode_mep(_placed(instrs))


def test_truncation_at_every_offset_reports_and_keeps_bytes():
    full = _every_opcode_stream()
    instrs, problems = decode_mep(full)
    assert problems == []
    starts = {i.ip for i in instrs}
    for cut in range(len(full) + 1):
        prefix = full[:cut]
        got, problems = decode_mep(prefix, 1000, Span(1000, cut, "bytecode"))
        assert encode_mep(got) == prefix
        if cut in starts or cut == len(full):
            assert problems == [] and all(i.mnemonic != ".bytes" for i in got)
        else:
            assert len(problems) == 1 and got[-1].mnemonic == ".bytes"
            assert problems[0].offset == 1000 + got[-1].ip
            assert "truncated" in problems[0].reason


# -- specific cases -------------------------------------------------------------------------
def test_jumps_are_relative_to_instruction_end_and_shown_absolute():
    # 0: LOOP_START k3 | 2: BRANCH_IF k1 -> 9 | 6: LOOP_END -> 2 | 9: HALT
    bytecode = bytes.fromhex("a003" "a8010300" "a1f9ff" "ff")
    instrs, problems = decode_mep(bytecode)
    assert problems == []
    assert [format_mep(i) for i in instrs] == [
        "0: FLOW_LOOP_START counter=k3", "2: FLOW_BRANCH_IF cond=k1 jump=@9",
        "6: FLOW_LOOP_END jump=@2", "9: EXEC_HALT"]
    assert [i.jump_target for i in instrs] == [None, 9, 2, None]
    assert instrs[2].operand("jump") == -7


def test_interpreter_only_opcodes_decode_raw_and_variable_ones_stop():
    instrs, problems = decode_mep(bytes.fromhex("03aabbcc" "31" "0102030405" "e1000000" "18ffffff"))
    assert problems == []
    assert [i.mnemonic for i in instrs] == ["OP_0x03", "OP_0x31", "OP_0xE1", "OP_0x18"]
    assert format_mep(instrs[0]) == '0: OP_0x03 raw=x"aabbcc"'
    for opcode in (0x50, 0x51, 0x81, 0x00, 0x99):
        instrs, problems = decode_mep(bytes([0xFF, opcode, 1, 2]), 40)
        assert [i.mnemonic for i in instrs] == ["EXEC_HALT", ".bytes"]
        assert instrs[1].operands == [("data", bytes([opcode, 1, 2]))]
        assert problems[0].offset == 41 and f"0x{opcode:02X}" in problems[0].reason


def test_op_dependent_tails():
    pad, unsqueeze, info_dim, info_shape = decode_mep(bytes.fromhex("3801020304 05" "38020102 03"
                                                                    "3a01010203" "3a000102"))[0]
    assert pad.operands == [("op", 1), ("out", 2), ("in", 3), ("pad_width", 4), ("value", 5)]
    assert format_mep(unsqueeze, address=False) == "TENSOR_MANIPULATE op=unsqueeze out=k1 in=k2 dim=k3"
    assert info_dim.operands[-1] == ("dim", 3) and info_dim.length == 5
    assert info_shape.length == 4
    # a TENSOR_MANIPULATE op with no known layout cannot be sized: decoding stops there
    instrs, problems = decode_mep(bytes.fromhex("ff" "3809010203"))
    assert instrs[-1].mnemonic == ".bytes" and "op 9" in problems[0].reason


def test_variable_length_layouts():
    train = bytes.fromhex("82" "00" "01" "02" "0506" "01" "07" "08" "09" "0a" "0b00" "0c00")
    (instr,), problems = decode_mep(train)
    assert problems == [] and instr.length == 12 + 2 + 1
    assert format_mep(instr, address=False) == ("MODEL_TRAIN_STEP model=0 loss=mse in=[k5, k6] targets=[k7] "
                                                "loss_out=k8 lr=k9 logits=k10 head_weight=#11 head_bias=#12")
    combine = bytes.fromhex("39" "00" "04" "03" "010203" "05")
    (instr,), _ = decode_mep(combine)
    assert instr.operands == [("op", 0), ("out", 4), ("in", [1, 2, 3]), ("axis", 5)]
    fmt = bytes.fromhex("2a" "01" "0700" "00")
    (instr,), _ = decode_mep(fmt)
    assert format_mep(instr, {7: "{} items"}) == '0: STRING_FORMAT out=k1 fmt=#7 args=[] ; "{} items"'


def test_parse_accepts_names_or_numbers_any_order_and_ignores_comments():
    a = parse_mep("MATH_BINARY b=k3 a=k2 out=k1 op=mul   ; anything ; here")
    b = parse_mep("MATH_BINARY op=2 out=k1 a=k2 b=k3")
    assert a == b and encode_mep([a]) == bytes.fromhex("6102010203")
    assert parse_mep("  12 :  EXEC_RETURN values=[ k1 ,k2 ]").ip == 12
    assert parse_mep("FLOW_LOOP_END jump=@0", ip=10).operands == [("jump", -13)]
    assert format_mep(parse_mep("RES_LOAD_MODEL model=0 path=#9"), {}) == "0: RES_LOAD_MODEL model=0 path=#9 ; #9=?"


@pytest.mark.parametrize("line", [
    "", "; only a comment", "NOPE", "EXEC_RETURN", "EXEC_RETURN values=[k1] extra=1",
    "EXEC_RETURN values=[k1] values=[k2]", "EXEC_RETURN values=k1", "SYS_COPY out=3 in=k1",
    "RES_LOAD_MODEL model=256 path=#0", "RES_LOAD_MODEL model=0 path=0", "MATH_BINARY op=modulo out=k1 a=k2 b=k3",
    "FLOW_LOOP_END jump=5", "FLOW_LOOP_END jump=@40000", 'OP_0x03 raw=x"01"', 'OP_0x03 raw=x"0g0000"',
    "TENSOR_MANIPULATE op=9 out=k1 in=k2", "EXEC_RETURN values=[" + ", ".join(["k1"] * 256) + "]",
    '.bytes data=x"abc"', "SYS_COPY out=k1 in=k2 garbage",
])
def test_bad_text_raises_value_error(line):
    with pytest.raises(ValueError):
        parse_mep(line)


def test_encode_rejects_bad_operands():
    with pytest.raises(ValueError):
        encode_mep([MepInstruction(0, 0x59, "SYS_COPY", [("in", 1), ("out", 2)], 3)])
    with pytest.raises(ValueError):
        encode_mep([MepInstruction(0, 0x59, "SYS_COPY", [("out", 1), ("in", 300)], 3)])
    with pytest.raises(ValueError):
        encode_mep([MepInstruction(0, 0x50, "?", [], 1)])
