"""Hostile inputs derived from the corpus: the reader fails with NacFormatError, never anything else.

Every rejection is checked the same way (``_check_error``): ``section`` is a non-empty
string, ``offset`` an int inside the file, ``reason`` a non-empty string. Every strict
rejection is paired with a lenient read (``strict=False``) that must not raise and must
report problems of the same shape.
"""
from __future__ import annotations

import random
import struct
import tracemalloc
import zlib

import pytest

from nac_engine import NacFormatError, read, verify, write
from nac_engine.format import layout as L
from nac_engine.isa.optable import OP_CONVERGENCE, custom_op_start

MAX_ALLOC = 4 * 1024 * 1024     # "a few MB": what a hostile count may cost a read


def _check_error(err, size: int) -> None:
    assert isinstance(err, NacFormatError)
    assert isinstance(err.section, str) and err.section
    assert isinstance(err.offset, int) and 0 <= err.offset <= size, (err, size)
    assert isinstance(err.reason, str) and err.reason.strip()
    assert err.to_dict() == {"section": err.section, "offset": err.offset, "reason": err.reason}


def reject(data: bytes, section: str | None = None, offset: int | None = None) -> NacFormatError:
    """Strict read raises NacFormatError (any other exception fails the test); the lenient
    read of the same bytes returns problems. Returns the strict error."""
    with pytest.raises(NacFormatError) as info:
        read(data)
    err = info.value
    _check_error(err, len(data))
    if section is not None:
        assert err.section == section, err
    if offset is not None:
        assert err.offset == offset, err
    nac = read(data, strict=False)
    assert nac.problems, "a lenient read of bad bytes reports problems"
    for p in nac.problems:
        _check_error(p, len(data))
    assert any((p.section, p.offset, p.reason) == (err.section, err.offset, err.reason) for p in nac.problems)
    assert nac.spans is not None and nac.spans.offset == 0 and nac.spans.length == len(data)
    return err


def _rnd(path, salt: str = "") -> random.Random:
    return random.Random(zlib.crc32((path.parent.name + salt).encode()))


def _sections(nac):
    return [s for s in nac.spans.children if s.type == "section"]


# --------------------------------------------------------------------------- trivial inputs
@pytest.mark.parametrize("data", [b"", b"N", b"NAC", b"\x00\x01\x02", b"NAC\x01", b"NAC\x02" + b"\0" * 8,
                                  b"NAC\x01" + b"\0" * 80, b"NAC\x02" + b"\0" * 90],
                         ids=["empty", "1-byte", "magic-only", "3-bytes", "v1.6-4-bytes", "v1.8-12-bytes",
                              "v1.6-84-bytes", "v1.8-94-bytes"])
def test_tiny_inputs(data):
    err = reject(data, section="header")
    nac = read(data, strict=False)
    assert not nac.header_decoded


def test_empty_file_on_disk(tmp_path):
    p = tmp_path / "empty.nac"
    p.write_bytes(b"")
    with pytest.raises(NacFormatError) as info:
        read(p)
    _check_error(info.value, 0)
    assert info.value.section == "header"
    with read(p, strict=False) as nac:
        assert nac.problems
    probs = verify(p)
    assert probs and all(isinstance(e, NacFormatError) for e in probs)


def test_wrong_magic(corpus_file):
    data = bytearray(corpus_file.read_bytes())
    for i, b in ((0, ord("X")), (1, 0), (2, ord("c"))):
        bad = bytearray(data)
        bad[i] = b
        reject(bytes(bad), section="header", offset=0)


@pytest.mark.parametrize("vbyte", [0, 3, 0x7F, 0xFF])
def test_unsupported_version_byte(corpus_file, vbyte):
    data = bytearray(corpus_file.read_bytes())
    data[3] = vbyte
    err = reject(bytes(data), section="header", offset=3)
    assert str(vbyte) in err.reason


def test_version_byte_swapped(corpus_file):
    """v1.6 bytes labelled version 2 have MMAP at 88: neither a v1.7 nor a v1.8 header.
    v1.8 bytes labelled version 1 decode as v1.6 with unattributed bytes, which verify flags."""
    data = bytearray(corpus_file.read_bytes())
    v16 = data[3] == 1
    data[3] = 2 if v16 else 1
    if v16:
        reject(bytes(data), section="header", offset=12)
    else:
        probs = verify(bytes(data))
        assert any("belong to no decoded field" in p.reason for p in probs)


def test_pre_v16_90_byte_header_is_refused(corpus_case):
    data = bytearray(corpus_case("mlp__v1.6").read_bytes())
    struct.pack_into("<Q", data, 12, 90)
    reject(bytes(data), section="header", offset=12)


# --------------------------------------------------------------------------- truncation
def test_truncation(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    size = len(data)
    points = {0, 1, 3, 4, 11, 12, nac.spans.find("header").length - 1, nac.spans.find("header").length}
    for sec in _sections(nac):
        for edge in (sec.offset, sec.end):
            points.update({edge - 1, edge, edge + 1})
        for kid in sec.children[:3]:              # tag, first count field...
            points.update({kid.offset, kid.end})
    rnd = _rnd(corpus_file, "truncate")
    points.update(rnd.randrange(size) for _ in range(50))
    points = sorted(p for p in points if 0 <= p < size)
    assert len(points) >= 60
    for p in points:
        reject(data[:p])


def test_truncation_on_disk(corpus_file, tmp_path):
    """The memory-mapped path behaves like bytes."""
    data = corpus_file.read_bytes()
    rnd = _rnd(corpus_file, "disk")
    for i, p in enumerate(sorted({len(data) - 1, len(data) // 2, 88, 13, *(rnd.randrange(len(data)) for _ in range(3))})):
        f = tmp_path / f"t{i}.nac"
        f.write_bytes(data[:p])
        with pytest.raises(NacFormatError) as info:
            read(f)
        _check_error(info.value, p)
        with read(f, strict=False) as nac:
            assert nac.problems


# --------------------------------------------------------------------------- header offsets
def _offset_slots(data: bytes, nac):
    lay = L.LAYOUTS[nac.version]
    offs = struct.unpack_from(f"<{len(lay.slots)}Q", data, 12)
    return lay, [(i, tag, off) for i, (tag, off) in enumerate(zip(lay.slots, offs)) if off]


def test_corrupt_header_offsets(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    lay, slots = _offset_slots(data, nac)
    size = len(data)
    table = range(12, 12 + 8 * len(lay.slots))
    for i, tag, off in slots:
        other = next(o for j, t, o in slots if j != i)
        for value in (2 ** 64 - 1, 2 ** 63, size, size - 3, size + 4096, lay.size - 1, 12, 0x10, other):
            bad = bytearray(data)
            struct.pack_into("<Q", bad, 12 + 8 * i, value)
            err = reject(bytes(bad), section="header")
            assert err.offset in table, err


# --------------------------------------------------------------------------- hostile counts
def _count_fields(nac):
    """(label, offset, tag) of every u32 count/length the reader trusts."""
    wanted = {"count", "const_count", "bytecode_length", "length"}
    out = []
    for sec in _sections(nac):
        for kid in sec.children:
            if kid.type == "u32" and kid.name in wanted:
                out.append((f"{sec.name}/{kid.name}", kid.offset, sec.name))
            if kid.type in ("block1", "block2", "block3"):
                cnt = kid.find("count")
                out.append((f"{sec.name}/{kid.name}/count", cnt.offset, sec.name))
    return out


def test_huge_counts_fail_fast_and_allocate_little(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    fields = _count_fields(nac)
    labels = {f[0] for f in fields}
    for need in ("MMAP/count", "OPS/count", "CMAP/count", "CNST/count", "PERM/count", "DATA/names/count",
                 "DATA/inputs/count", "ORCH/bytecode_length", "ORCH/const_count"):
        assert need in labels, (need, labels)
    if nac.header.weights_internal:
        assert "DATA/tensors/count" in labels
    if nac.rsrc is not None:
        assert "RSRC/count" in labels
    if nac.arrs is not None:
        assert "ARRS/count" in labels
    if nac.proc is not None:
        assert "PROC/length" in labels
    for label, off, tag in fields:
        for value in (2 ** 32 - 1, 2 ** 31, 0x01000000):
            bad = bytearray(data)
            struct.pack_into("<I", bad, off, value)
            bad = bytes(bad)
            tracemalloc.start()
            try:
                with pytest.raises(NacFormatError) as info:
                    read(bad)
                read(bad, strict=False)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            err = info.value
            _check_error(err, len(bad))
            assert err.section.split("/")[0] == tag, (label, err)
            assert peak < MAX_ALLOC, f"{label} = {value}: peak {peak} bytes"


def test_huge_tensor_lengths(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    tensors = nac.spans.find("DATA/tensors")
    if tensors is None:
        pytest.skip("external weights: no tensor records")
    recs = [r for r in tensors.children if r.type == "tensor"]
    for rec in recs[:2] + recs[-1:]:
        for field, fmt, values in (("meta_length", "<I", (2 ** 32 - 1, 2 ** 31)),
                                   ("data_length", "<Q", (2 ** 64 - 1, 2 ** 63, 2 ** 40))):
            for value in values:
                bad = bytearray(data)
                struct.pack_into(fmt, bad, rec.find(field).offset, value)
                tracemalloc.start()
                try:
                    err = reject(bytes(bad))
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                assert err.section.startswith("DATA")
                assert peak < MAX_ALLOC + 2 * len(data)


# --------------------------------------------------------------------------- D offsets
def _d_slots(nac, rnd, limit=8):
    slots = []
    for ins in nac.instructions:
        if ins.d and ins.a != OP_CONVERGENCE:
            base = ins.offset + 2 + 2 * len(ins.c or ())
            for j in range(len(ins.d)):
                slots.append((ins, j, base + 2 * j))
    if len(slots) > limit:
        slots = slots[:2] + slots[-2:] + rnd.sample(slots[2:-2], limit - 4)
    return slots


@pytest.mark.parametrize("kind", ["forward", "self", "before-first"])
def test_d_offset_out_of_range(corpus_file, kind):
    data = corpus_file.read_bytes()
    nac = read(data)
    slots = _d_slots(nac, _rnd(corpus_file, kind))
    assert slots
    for ins, j, at in slots:
        assert struct.unpack_from("<h", data, at)[0] == ins.d[j]
        value = {"forward": 1, "self": None, "before-first": -(ins.index + 1)}[kind]
        if value is None:
            if ins.d[j] == 0:
                continue                      # D = 0 is a constant slot, not a self reference
            value = 0x7FFF
        bad = bytearray(data)
        struct.pack_into("<h", bad, at, value)
        err = reject(bytes(bad), section="OPS", offset=at)
        assert f"instruction {ins.index}" in err.reason


def test_d_offset_far_before_first(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    ins, j, at = _d_slots(nac, _rnd(corpus_file))[-1]
    bad = bytearray(data)
    struct.pack_into("<h", bad, at, -0x8000)
    reject(bytes(bad), section="OPS", offset=at)


# --------------------------------------------------------------------------- signatures
def _used_signatures(nac):
    return sorted({ins.b for ins in nac.instructions if ins.a >= 10 and nac.perms.get(ins.b)})


@pytest.mark.parametrize("change", ["longer-tensor", "longer-const", "shorter"])
def test_signature_length_changed(corpus_file, change):
    """A PERM string of another length than the D fields written for it: D no longer
    matches C (or the instruction stream desynchronises) and the read fails."""
    data = corpus_file.read_bytes()
    used = _used_signatures(read(data))
    assert used
    for sid in used:
        nac = read(data)
        s = nac.perms[sid]
        nac.perms[sid] = {"longer-tensor": s + "T", "longer-const": s + "i", "shorter": s[:-1]}[change]
        reject(write(nac))


# --------------------------------------------------------------------------- op ids
def test_unknown_op_id(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    start = custom_op_start(nac.version)
    unused = max(list(nac.cmap) + [start - 1]) + 1
    assert unused <= 255 and unused not in nac.op_names
    regular = [ins for ins in nac.instructions if ins.a >= 10]
    for ins in regular[:3] + regular[-2:]:
        for a in (unused, 255):
            bad = bytearray(data)
            bad[ins.offset] = a
            err = reject(bytes(bad), section="OPS", offset=ins.offset)
            assert f"A={a}" in err.reason


@pytest.mark.parametrize("a", [1, 4, 5, 8, 9])
def test_unknown_system_op_id(corpus_file, a):
    data = corpus_file.read_bytes()
    nac = read(data)
    ins = next(i for i in nac.instructions if i.a >= 10)
    bad = bytearray(data)
    bad[ins.offset] = a
    reject(bytes(bad), section="OPS", offset=ins.offset)


def test_unknown_signature_id(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    unused = max(nac.perms) + 1
    ins = next(i for i in nac.instructions if i.a >= 10 and i.b)
    bad = bytearray(data)
    bad[ins.offset + 1] = unused
    reject(bytes(bad), section="OPS", offset=ins.offset + 1)


# --------------------------------------------------------------------------- tables
def test_bad_tags(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    for sec in _sections(nac):
        bad = bytearray(data)
        bad[sec.offset] ^= 0x20
        reject(bytes(bad), section=sec.name, offset=sec.offset)


def test_bad_utf8_in_names(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    targets = []
    for path in ("CMAP", "PERM", "DATA/names", "DATA/inputs"):
        sec = nac.spans.find(path)
        names = [rec.find("name") or rec.find("signature") for rec in sec.children
                 if rec.type in ("cmap", "perm", "param", "input")]
        names = [n for n in names if n is not None and n.length]
        if names:
            targets.append((path.split("/")[0], names[0].offset))
    assert targets
    for tag, at in targets:
        bad = bytearray(data)
        bad[at] = 0xFF
        err = reject(bytes(bad), offset=at)
        assert err.section.split("/")[0] == tag


def test_constant_records(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    recs = [r for r in nac.spans.find("CNST").children if r.type == "const"]
    if not recs:
        pytest.skip("no constants")
    for rec in recs[:4]:
        typ = rec.find("type")
        for code in (7, 0x80, 0xFF):            # unknown type codes
            bad = bytearray(data)
            bad[typ.offset] = code
            reject(bytes(bad), section="CNST", offset=typ.offset)
        if typ.value in (0, 1):
            # None and bool carry no length-sized payload: their length field is kept as stored
            # (for byte-exact re-encoding), so a bad one is not a decode error
            continue
        length = rec.find("length")
        bad = bytearray(data)
        struct.pack_into("<H", bad, length.offset, 0xFFFF)
        reject(bytes(bad), section="CNST")


def test_duplicate_table_ids(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    for path, kind in (("CMAP", "cmap"), ("PERM", "perm"), ("DATA/names", "param")):
        recs = [r for r in nac.spans.find(path).children if r.type == kind]
        if len(recs) < 2:
            continue
        bad = bytearray(data)
        first = struct.unpack_from("<H", data, recs[0].offset)[0]
        struct.pack_into("<H", bad, recs[1].offset, first)
        reject(bytes(bad))


def test_mmap_tick_beyond_last_instruction(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    if not nac.mmap:
        pytest.skip("no MMAP records")
    rec = nac.mmap[-1]
    bad = bytearray(data)
    struct.pack_into("<H", bad, rec.offset, len(nac.instructions))
    reject(bytes(bad), section="MMAP", offset=rec.offset)


def test_negative_constant_count_in_c(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    ins = next((i for i in nac.instructions if i.a >= 10 and i.c), None)
    if ins is None:
        pytest.skip("no regular instruction with constants")
    bad = bytearray(data)
    struct.pack_into("<h", bad, ins.offset + 2, -1)
    reject(bytes(bad), section="OPS", offset=ins.offset + 2)
    bad = bytearray(data)
    struct.pack_into("<h", bad, ins.offset + 2, 0x7FFF)
    reject(bytes(bad), section="OPS")


def test_block_fp8_original_shape_larger_than_the_stored_values_is_refused(tmp_path):
    # a 64-value tensor claiming 2**48 values: every consumer would size buffers from it
    import math
    import numpy as np
    from nac_engine import read, write
    from nac_engine.errors import NacEncodeError, NacFormatError
    from nac_engine.format import layout as L
    from nac_engine.format.model import Header, Instruction, NacFile, Parameter, TensorMeta
    from nac_engine.format.writer import encode_tensor_meta

    def file_with(oshape):
        nac = NacFile(Header(version="1.8", num_outputs=1, quant_method=L.QUANT_BLOCK_FP8))
        meta = TensorMeta(7, (64,), L.QUANT_BLOCK_FP8, block_size=64, original_shape=oshape,
                          scales=np.ones(1, "<f4"))
        nac.params[1] = Parameter(1, "w", meta, _payload=np.zeros(64, np.int8), data_length=64, _file=nac)
        nac.tensor_order.append(1)
        nac.perms = {0: ""}
        nac.instructions = [Instruction(0, 2, 1, (1, 1), None), Instruction(1, 3, 0, (1, 0), (-1,))]
        return nac

    good = write(file_with((8, 8)))
    path = tmp_path / "good.nac"
    path.write_bytes(good)
    assert read(path).params[1].array().shape == (8, 8)
    with pytest.raises(NacEncodeError, match="original shape"):
        write(file_with((65536, 65536, 65536)))
    # the same bytes patched by hand: the reader names the field
    bad = bytearray(good)
    meta = encode_tensor_meta(file_with((8, 8)).params[1].meta)
    at = bytes(bad).index(meta)
    patched = bytearray(meta)
    o = 1 + 1 + 4 + 1 + 2 + 1              # dtype, rank, shape[0], quant, block, original rank
    patched[o:o + 4] = (65536).to_bytes(4, "little")
    bad[at:at + len(meta)] = patched
    (tmp_path / "bad.nac").write_bytes(bytes(bad))
    with pytest.raises(NacFormatError, match="original shape .* only 64 are stored") as e:
        read(tmp_path / "bad.nac")
    assert e.value.section.startswith("DATA") and math.isfinite(e.value.offset)


@pytest.mark.parametrize("entry, match", [
    ({"quant_type": "BLOCK_FP8", "block_size": 64, "original_shape": [99999, 99999], "scales": [1.0]},
     "does not fit the 64 stored values"),
    ({"quant_type": "INT8_CHANNEL", "axis": "zero", "scales": [1.0]}, "malformed quantisation metadata"),
    ({"quant_type": "BLOCK_FP8", "original_shape": 7, "scales": [1.0]}, "malformed quantisation metadata"),
])
def test_hostile_external_quantisation_metadata_is_a_format_error(tmp_path, entry, match):
    import json
    import numpy as np
    from safetensors.numpy import save_file
    from nac_engine import read, write
    from nac_engine.errors import NacFormatError
    from nac_engine.format.model import Header, Instruction, NacFile, Parameter

    nac = NacFile(Header(version="1.8", num_outputs=1, weights_internal=False))
    nac.params[1] = Parameter(1, "w")
    nac.perms = {0: ""}
    nac.instructions = [Instruction(0, 2, 1, (1, 1), None), Instruction(1, 3, 0, (1, 0), (-1,))]
    (tmp_path / "m.nac").write_bytes(write(nac))
    save_file({"w": np.zeros(64, np.int8)}, str(tmp_path / "m.safetensors"),
              metadata={"metadata": json.dumps({"w": entry})})
    f = read(tmp_path / "m.nac")
    with pytest.raises(NacFormatError, match=match) as e:
        f.params[1].array()
    assert e.value.section == "weights/w"


@pytest.mark.parametrize("shape,dtype,why", [
    ((1 << 32) - 1, 0, "needs"),            # product overflows int64 in numpy: exact here
    ((3,), 0, "needs 12 bytes"),            # too few bytes for the shape
    ((2,), 42, "not an array dtype"),
])
def test_an_arrs_entry_that_does_not_describe_its_bytes_is_flagged_and_refused(shape, dtype, why):
    from nac_engine.format.model import Header, Instruction, NacFile, NamedArray
    if isinstance(shape, int):
        shape = (shape,) * 3
    nac = NacFile(Header(version="1.8", num_outputs=1))
    nac.perms = {0: ""}
    nac.instructions = [Instruction(0, 2, 0, None, None), Instruction(1, 3, 0, (1, 0), (-1,))]
    nac.arrs = [NamedArray("a", dtype, shape, _payload=bytes(8))]
    data = write(nac)
    problems = [p for p in verify(data) if p.section == "ARRS"]
    assert problems and why in problems[0].reason
    arr = read(data).arrs[0]
    with pytest.raises(NacFormatError) as e:
        arr.array()
    assert e.value.section == "ARRS" and why in e.value.reason and e.value.offset > 0
