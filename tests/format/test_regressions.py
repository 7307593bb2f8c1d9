"""Minimal reproducers of codec bugs found while writing the format tests.

Each test reproduces a bug found by the suite and fixed since; it guards against its return.
Nothing here needs the corpus: the inputs are built from the model classes.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from nac_engine import NacEncodeError, NacFormatError, read, write
from nac_engine.format.model import (Constant, Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile,
                                     Orch, Parameter, TensorMeta)


def small_file(version: str = "1.8") -> NacFile:
    """x -> linear(x, w) -> relu -> output, one bool and one int constant, an MMAP."""
    w = np.arange(6, dtype="<f4").reshape(2, 3)
    cmap_base = 32 if version == "1.8" else 20
    nac = NacFile(header=Header(version=version, num_inputs=1, num_outputs=1, d_model=3))
    nac.cmap = {cmap_base: "aten.linear.default", cmap_base + 1: "aten.softmax.int"}
    nac.perms = {1: "T", 2: "TT", 3: "Tib"}
    nac.constants = {2: Constant(2, 1, True, 1), 3: Constant(3, 2, -1)}
    nac.params = {1: Parameter(1, "w", meta=TensorMeta(0, (2, 3), 0), _payload=w.tobytes())}
    nac.input_names = [InputName(0, "x")]
    nac.instructions = [
        Instruction(0, 2, 0, None, None),
        Instruction(1, 2, 1, (1, 1), None),
        Instruction(2, cmap_base, 2, None, (-2, -1)),
        Instruction(3, cmap_base + 1, 3, (2, 3, 2), (-1, 0, 0)),
        Instruction(4, 3, 0, (1, 0), (-1,)),
    ]
    nac.mmap = [MmapRecord(0, [MmapCommand(40, 1)]), MmapRecord(2, [MmapCommand(30, 3)]),
                MmapRecord(3, [MmapCommand(10, 3)])]
    nac.orch = Orch()
    return nac


def leaf_gaps(nac, size: int) -> list:
    """(expected offset, leaf) wherever the leaves stop tiling [0, size) in order."""
    bad, pos = [], 0
    for leaf in nac.spans.leaves():
        if leaf.offset != pos:
            bad.append((pos, leaf.path, leaf.offset))
        pos = max(pos, leaf.end)
    if pos != size:
        bad.append((pos, "<end>", size))
    return bad


def test_small_file_is_clean():
    for version in ("1.6", "1.8"):
        data = write(small_file(version))
        nac = read(data)
        assert write(nac) == data
        assert leaf_gaps(nac, len(data)) == []


# --------------------------------------------------------------------------- span tree order
@pytest.mark.parametrize("section", ["OPS", "MMAP"])
def test_bytes_after_a_lazily_built_section_keep_span_order(section):
    nac = small_file()
    nac.trailing[section] = b"\xAA\xBB"          # decodable: strict read keeps them as trailing bytes
    data = write(nac)
    out = read(data)
    assert out.trailing == {section: b"\xAA\xBB"}
    sec = out.spans.find(section)
    junk = sec.end - 2
    assert out.span_at(junk).name == "unparsed"
    assert leaf_gaps(out, len(data)) == []


# --------------------------------------------------------------------------- lenient span gaps
def _lenient_gaps(data: bytes):
    nac = read(data, strict=False)
    assert nac.problems
    return leaf_gaps(nac, len(data))


def test_lenient_spans_cover_a_bad_utf8_name():
    data = bytearray(write(small_file()))
    nac = read(bytes(data))
    name = nac.spans.find("CMAP").children[2].find("name")      # op[0]/name
    data[name.offset] = 0xFF
    assert _lenient_gaps(bytes(data)) == []


def test_lenient_spans_cover_a_wrong_tag():
    data = bytearray(write(small_file()))
    orch = struct.unpack_from("<Q", data, 12 + 8 * 7)[0]
    data[orch] = ord("X")
    with pytest.raises(NacFormatError):
        read(bytes(data))
    assert _lenient_gaps(bytes(data)) == []


def test_lenient_spans_keep_mmap_records_before_a_bad_one():
    data = bytearray(write(small_file()))
    mmap = struct.unpack_from("<Q", data, 12)[0]
    struct.pack_into("<I", data, mmap + 4, 4)            # 3 records written, 4 claimed
    gaps = _lenient_gaps(bytes(data))
    assert gaps == []


# --------------------------------------------------------------------------- non-canonical values
def test_bool_constant_byte_other_than_0_or_1():
    data = bytearray(write(small_file()))
    nac = read(bytes(data))
    rec = next(r for r in nac.spans.find("CNST").children if r.type == "const" and r.find("type").value == 1)
    value = rec.find("value")
    assert data[value.offset] == 1
    data[value.offset] = 2
    try:
        decoded = read(bytes(data))
    except NacFormatError:
        return                                           # rejecting it is a fix too
    assert write(decoded) == bytes(data)


@pytest.mark.parametrize("mutate", ["mmap-not-first", "bytes-after-header"])
def test_v18_writer_never_emits_a_file_its_reader_rejects(mutate):
    nac = small_file("1.8")
    if mutate == "mmap-not-first":
        nac.layout = ["OPS", "MMAP", "CMAP", "CNST", "PERM", "DATA", "ORCH", "ARRS"]
    else:
        nac.trailing["header"] = b"\0\0\0\0"
    try:
        data = write(nac)
    except NacEncodeError:
        return
    read(data)


# --------------------------------------------------------------------------- fixed: keep them fixed
def test_v18_to_v16_and_back_is_exact_with_v18_standard_ops():
    """Was: writer._converted_cmap kept CMAP entries restating the v1.8 standard table, so
    v1.8 → v1.6 → v1.8 gained CMAP entries (bert_tiny). Fixed while these tests were written."""
    nac = small_file("1.8")
    nac.instructions[3] = Instruction(3, 20, 2, None, (-1, -1))     # nac.mul: standard in v1.8 only
    original = write(nac)
    v16 = read(write(read(original), version="1.6"))
    assert v16.cmap[20] == "nac.mul"                                 # v1.6 needs the entry
    assert write(v16, version="1.8") == original


def test_write_without_orch_writes_an_empty_plan():
    """Was: AttributeError from writer._orch when nac.orch is None (fixed in HEAD)."""
    for version in ("1.6", "1.8"):
        nac = small_file(version)
        nac.orch = None
        out = read(write(nac))
        assert out.orch is not None and out.orch.is_empty
        assert write(NacFile(header=Header(version=version)))     # an empty model writes too
