"""E5 dispatch descriptors (seed 002): no public sample exists, so descriptors are built with
``flatbuffers.Builder`` by the seed's root table (and this project's reading of Section and
BuildInfo) and decoded back; hostile mutants give the one error type."""
from __future__ import annotations

import numpy as np
import pytest
import flatbuffers

from nac_engine.errors import NacFormatError
from nac_engine.peers import detect, e5


def build(symbols=("x", "w", "y", "z"), sections=(("conv0", 1, (0, 1, 2)), ("cast0", 0, (2, 3))),
          build_info=(("compiler", "ane-7.0"), ("source", "model.mil")), version=4) -> bytes:
    b = flatbuffers.Builder(256)
    sym = [b.CreateString(s) for s in symbols]
    b.StartVector(4, len(sym), 4)
    for o in reversed(sym):
        b.PrependUOffsetTRelative(o)
    sym_vec = b.EndVector()

    def strings(items):
        offs = [b.CreateString(s) for s in items]
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    keys, values = strings([k for k, _ in build_info]), strings([v for _, v in build_info])
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, keys, 0)
    b.PrependUOffsetTRelativeSlot(1, values, 0)
    bi = b.EndObject()
    secs = []
    for name, op, operands in sections:
        n = b.CreateString(name)
        frame = b.CreateByteVector(bytes(range(8)))
        attrs = b.CreateByteVector(b"\x01\x02\x03")
        b.StartVector(4, len(operands), 4)
        for k in reversed(operands):
            b.PrependUint32(k)
        ops = b.EndVector()
        b.StartObject(5)
        b.PrependUOffsetTRelativeSlot(0, n, 0)
        b.PrependUint8Slot(1, op, 255)
        b.PrependUOffsetTRelativeSlot(2, frame, 0)
        b.PrependUOffsetTRelativeSlot(3, attrs, 0)
        b.PrependUOffsetTRelativeSlot(4, ops, 0)
        secs.append(b.EndObject())
    b.StartVector(4, len(secs), 4)
    for o in reversed(secs):
        b.PrependUOffsetTRelative(o)
    sec_vec = b.EndVector()
    b.StartObject(4)
    # added last-first so the fields sit at table offsets 4, 8, 12, 16 as in a real descriptor
    b.PrependInt32Slot(3, version, -1)
    b.PrependUOffsetTRelativeSlot(2, sec_vec, 0)
    b.PrependUOffsetTRelativeSlot(1, bi, 0)
    b.PrependUOffsetTRelativeSlot(0, sym_vec, 0)
    root = b.EndObject()
    b.Finish(root)
    return bytes(b.Output())


def test_built_descriptor_decodes_back():
    data = build()
    assert e5.sniff(data) and detect(data[:4096]) == "e5"
    f = e5.decode(data)
    assert f.problems == []
    assert f.format_version == 4 and f.symbol_names == ["x", "w", "y", "z"]
    assert f.build_info == {"compiler": "ane-7.0", "source": "model.mil"}
    assert [(s["name"], s["op_type_name"], s["operands"]) for s in f.sections] == \
        [("conv0", "AneInference", [0, 1, 2]), ("cast0", "Cast", [2, 3])]
    assert f.sections[0]["arg_frame"] == bytes(range(8)) and f.sections[1]["op_attrs"] == b"\x01\x02\x03"
    g = f.graph()
    assert [n.kind for n in g.nodes] == ["matmul", "elementwise"] and [(e.src, e.dst, e.label) for e in g.edges] \
        == [(0, 1, "y")]
    assert f.summary()["format"] == "e5" and "AneInference" in f.format_summary()
    pos = 0
    for leaf in f.root.leaves():        # every byte in exactly one leaf
        assert leaf.offset == pos
        pos = leaf.end
    assert pos == len(data)


def test_every_op_type_and_a_bad_one():
    for k, name in enumerate(e5.OP_TYPES):
        f = e5.decode(build(sections=((f"s{k}", k, (0,)),)))
        assert f.sections[0]["op_type_name"] == name and f.problems == []
    f = e5.decode(build(sections=(("bad", 40, (0,)),)))
    assert "unknown(40)" == f.sections[0]["op_type_name"] and f.problems
    assert e5.decode(build(version=5)).problems


def test_out_of_range_operand_and_truncation():
    f = e5.decode(build(sections=(("s", 1, (0, 99)),)))
    assert any("past the" in p.reason for p in f.problems)
    data = build()
    with pytest.raises(NacFormatError):
        e5.decode(data[:len(data) // 2], strict=True)


def _fuzz(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = build()
    for _ in range(n):
        b = bytearray(base)
        if rng.integers(3) == 0:
            b = b[:rng.integers(len(b))]
        else:
            for _ in range(rng.integers(1, 6)):
                b[rng.integers(len(b))] = rng.integers(256)
        try:
            f = e5.decode(bytes(b))
            f.summary(), f.graph(), f.details()
        except NacFormatError:
            pass


def test_fuzz_slice():
    _fuzz(3000, 1)


@pytest.mark.slow
def test_fuzz_100k():
    _fuzz(100_000, 2)
