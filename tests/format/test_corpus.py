"""The codec against every real file in the shared corpus (written by the reference compiler).

Per file: strict open, clean ``verify``, byte-exact ``write(read(f))``, a span tree whose
leaves tile the file, ``span_at``, and the facts recorded in the corpus INDEX.md. Then the
decoded facts of research note upstream_format.md (§3.4 byte example, §9.3/§9.4 MMAP
tables, §10 quantisation metadata, §12.4 MEP bytecode, fresh-compile ID numbering),
quantised weights against the fp32 case, external weights, and version conversion.
"""
from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import pytest

import nac_engine
from nac_engine import NacEncodeError, read, verify, write
from nac_engine.format import layout as L
from nac_engine.isa.optable import CONST_CODES, TENSOR_CODES, custom_op_start


def case_of(path: Path) -> str:
    return path.parent.name


def other_version(version: str) -> str:
    return "1.8" if version == "1.6" else "1.6"


# --------------------------------------------------------------------------- every file
def test_opens_strict_and_verifies_clean(corpus_file):
    with read(corpus_file) as nac:          # strict=True is the default
        assert nac.problems == []
        assert nac.header_decoded
        assert len(nac.instructions) > 0
        internal = nac.header.weights_internal
    assert verify(corpus_file) == []
    if internal:   # from bytes, external weights cannot be located (that is reported)
        assert verify(corpus_file.read_bytes()) == []


def test_write_read_is_byte_exact(corpus_file):
    data = corpus_file.read_bytes()
    with read(corpus_file) as nac:
        assert write(nac) == data
    # from bytes as well as from a (memory-mapped) path
    assert write(read(data)) == data


def test_write_to_path_is_byte_exact(corpus_file, tmp_path):
    data = corpus_file.read_bytes()
    out = tmp_path / "copy.nac"
    with read(corpus_file) as nac:
        returned = write(nac, out)
    assert returned == data
    assert out.read_bytes() == data


def _check_tiling(root, size: int) -> None:
    """Leaves cover [0, size) exactly once, in order; zero-length leaves own no byte
    but must sit at the current position. Children stay inside their parent, in order."""
    pos = 0
    for leaf in root.leaves():
        assert leaf.length >= 0, leaf
        assert leaf.offset == pos, f"gap/overlap before {leaf!r}: expected offset {pos}"
        pos = leaf.end
    assert pos == size, f"leaves end at {pos}, file has {size} bytes"
    for node in root.walk():
        prev_end = node.offset
        for kid in node.children:
            assert node.offset <= kid.offset and kid.end <= node.end, (node, kid)
            assert kid.offset >= prev_end, f"{kid!r} overlaps its previous sibling"
            prev_end = kid.end


def test_span_leaves_tile_the_file(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    assert nac.spans.offset == 0 and nac.spans.length == len(data)
    _check_tiling(nac.spans, len(data))
    owned = [leaf for leaf in nac.spans.leaves() if leaf.length]
    assert sum(leaf.length for leaf in owned) == len(data)
    assert not [leaf for leaf in owned if leaf.name == "unparsed"], "the corpus has no unattributed bytes"


def test_span_at_returns_the_leaf_holding_the_offset(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    rnd = random.Random(1234)
    offsets = {0, len(data) - 1}
    for sec in nac.spans.children:
        offsets.update({sec.offset, sec.end - 1})
    for ins in nac.instructions[:50]:
        offsets.update(range(ins.offset, ins.offset + ins.nbytes))
    offsets.update(rnd.randrange(len(data)) for _ in range(300))
    leaves = {(leaf.offset, leaf.end): leaf for leaf in nac.spans.leaves() if leaf.length}
    for off in sorted(offsets):
        sp = nac.span_at(off)
        assert sp is not None, off
        assert sp.offset <= off < sp.end, (off, sp)
        assert sp.is_leaf, f"span_at({off}) = {sp!r} is not a leaf"
        assert leaves.get((sp.offset, sp.end)) is sp
    assert nac.span_at(len(data)) is None
    assert nac.span_at(-1) is None


def test_instruction_spans_match_instruction_bytes(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    ops = nac.spans.find("OPS")
    for ins in nac.instructions:
        sp = ops.find(f"instr[{ins.index}]")
        assert (sp.offset, sp.length) == (ins.offset, ins.nbytes)
        a = sp.find("A")
        assert a.value == ins.a == data[ins.offset]
        for j, dv in enumerate(ins.d or ()):
            d = sp.find(f"D[{j}]")
            assert struct.unpack_from("<h", data, d.offset)[0] == dv == d.value


# --------------------------------------------------------------------------- INDEX.md
_QUANT_COLUMN = {"none": "none", "FP16": "FP16", "INT8_TENSOR": "INT8_TENSOR",
                 "INT8_CHANNEL": "INT8_CHANNEL", "BLOCK_FP8": "BLOCK_FP8"}


def test_matches_corpus_index(corpus_file, corpus_index):
    row = corpus_index.get(case_of(corpus_file))
    assert row is not None, f"{case_of(corpus_file)} is not in INDEX.md"
    vbyte, hsize = (int(x) for x in row["format (version byte / header)"].split("/"))
    quant, weights = (x.strip() for x in row["quantization / weights"].split("/"))
    data = corpus_file.read_bytes()
    with read(corpus_file) as nac:
        assert data[3] == vbyte
        assert L.LAYOUTS[nac.version].version_byte == vbyte
        assert L.LAYOUTS[nac.version].size == hsize
        assert nac.spans.find("header").length == hsize
        assert struct.unpack_from("<Q", data, 12)[0] == hsize, "MMAP always starts right after the header"
        assert len(nac.instructions) == int(row["instructions"])
        assert nac.header.quant_name == _QUANT_COLUMN[quant]
        assert nac.header.weights_internal == weights.startswith("internal")


def test_index_lists_every_corpus_file(corpus_files, corpus_index):
    assert {case_of(p) for p in corpus_files} == set(corpus_index)


# --------------------------------------------------------------------------- layout facts
def test_section_order_and_numbering_of_a_fresh_compile(corpus_file):
    """Research §2.2 (physical order), §4.2 (CMAP), §5 (PERM), §6.3 (CNST), §3.1/§3.2 (C/D)."""
    with read(corpus_file) as nac:
        v = nac.version
        optional = {"PROC": nac.proc is not None, "RSRC": nac.rsrc is not None, "TRNG": nac.trng is not None}
        if v == "1.8":
            expect = ["MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "ORCH", "TRNG", "RSRC", "ARRS"]
        else:
            expect = ["MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "RSRC", "ORCH"]
        assert nac.layout == [t for t in expect if optional.get(t, True)]
        assert nac.orch is not None                          # ORCH always written
        assert (nac.arrs is not None) == (v == "1.8")        # ARRS always written in v1.8
        # CMAP: consecutive IDs from the custom start, alphabetical
        start = custom_op_start(v)
        assert list(nac.cmap) == list(range(start, start + len(nac.cmap)))
        assert list(nac.cmap.values()) == sorted(nac.cmap.values())
        # PERM: ID 0 = "" in v1.8 only; 1, 2, ... in ASCII order
        assert (nac.perms.get(0) == "") if v == "1.8" else (0 not in nac.perms)
        named = [s for sid, s in nac.perms.items() if sid]
        assert [sid for sid in nac.perms if sid] == list(range(1, 1 + len(named)))
        assert named == sorted(named)
        # CNST: 1 = None (reserved), 2, 3, ... sorted by str() of the stored value
        rest = [c for c in nac.constants.values() if c.id != 1]
        assert [c.id for c in rest] == list(range(2, 2 + len(rest)))
        assert [str(c.value) for c in rest] == sorted(str(c.value) for c in rest)
        # Instructions
        n_out = nac.header.num_outputs
        for ins in nac.instructions:
            if ins.a == 2 and ins.b in (1, 2, 3):
                assert ins.c[0] == 1 and ins.d is None      # INPUT C prefix is 1, not 2
            if ins.a == 3 and ins.b == 0:
                assert ins.c == (n_out,) + (0,) * n_out and len(ins.d) == n_out
            if ins.a >= 10:
                sig = nac.perms.get(ins.b, "")
                assert (ins.c is not None) == any(ch in CONST_CODES for ch in sig)
                assert len(ins.d or ()) == len(sig)
                if ins.c is not None:
                    assert ins.c[0] == ins.d.count(0) >= 1
                for ch, dv in zip(sig, ins.d or ()):
                    if ch in TENSOR_CODES:
                        assert dv < 0 and ins.index + dv >= 0
            for dv in ins.d or ():
                assert dv <= 0


def test_d_model_from_the_last_linear(corpus_file):
    """Research §8.4: MLP 8→16→16→4 gives 16, the CNN 256, tiny BERT 64 (its config's hidden size);
    a plain module without a config (the newer cases) the in_features of its last nn.Linear, read
    here from that linear's weight in the file."""
    case = case_of(corpus_file)
    expect = {"mlp": 16, "tok": 16, "cnn": 256, "bert": 64, "hand": 128, "mha": 128}
    with read(corpus_file) as nac:
        want = expect.get(case.split("_")[0])
        if want is None:
            last = [i for i in nac.instructions if nac.instruction_name(i) == "aten.linear.default"][-1]
            weight = nac.param_for(nac.instructions[last.producers()[1]])
            want = weight.shape[1]
        assert nac.header.d_model == want


# --------------------------------------------------------------------------- research examples
def test_mlp_byte_example(corpus_case):
    """Research §3.4: the first and last instructions of mlp.nac (v1.8, OPS at 186)."""
    path = corpus_case("mlp")
    data = path.read_bytes()
    with read(path) as nac:
        assert struct.unpack_from("<Q", data, 20)[0] == 186
        assert data[186:194] == b"OPS " + struct.pack("<I", 13)
        expected = ["0200", "0201" "0100" "0100", "0201" "0100" "0200", "2002" "fdff" "feff" "ffff", "2101" "ffff"]
        pos = 194
        for hexs in expected:
            n = len(hexs) // 2
            assert data[pos:pos + n].hex() == hexs
            pos += n
        ins = nac.instructions
        assert (ins[0].a, ins[0].b, ins[0].c, ins[0].d) == (2, 0, None, None)
        assert nac.input_name_map[0] == "x"
        assert (ins[1].a, ins[1].b, ins[1].c) == (2, 1, (1, 1)) and nac.param_for(ins[1]).name == "fc1.weight"
        assert (ins[2].a, ins[2].b, ins[2].c) == (2, 1, (1, 2)) and nac.param_for(ins[2]).name == "fc1.bias"
        assert (ins[3].a, ins[3].b, ins[3].c, ins[3].d) == (32, 2, None, (-3, -2, -1))
        assert nac.op_name(32) == "aten.linear.default" and nac.signature(ins[3]) == "TTT"
        assert [a.producer for a in nac.arguments(ins[3])] == [0, 1, 2]
        assert (ins[4].a, ins[4].b, ins[4].d) == (33, 1, (-1,))
        assert nac.op_name(33) == "aten.relu.default" and nac.signature(ins[4]) == "T"
        last = ins[-1]
        assert data[last.offset:last.offset + last.nbytes].hex() == "0300" "0100" "0000" "ffff"
        assert (last.a, last.b, last.c, last.d) == (3, 0, (1, 0), (-1,))
        assert nac.output_producers() == [11]


_MMAP_V18 = {0: [(10, 0), (40, 1), (40, 2)],
             3: [(20, 0), (20, 1), (20, 2), (30, 4), (40, 5)],
             4: [(10, 4), (40, 6)],
             7: [(20, 4), (20, 5), (20, 6), (30, 8), (40, 9)],
             8: [(10, 8), (40, 10)],
             11: [(20, 8), (20, 9), (20, 10)]}
_MMAP_V16 = {0: [(40, 1), (40, 2)],
             3: [(30, 4)],
             4: [(30, 7), (20, 1), (20, 2), (40, 9), (40, 10)],
             7: [(30, 8)],
             8: [(30, 11), (20, 5), (20, 6)],
             11: [(10, 11)],
             12: [(20, 9), (20, 10)]}


@pytest.mark.parametrize("case, table", [("mlp__v1.6", _MMAP_V16), ("mlp", _MMAP_V18)],
                         ids=["v1.6-lookback-§9.4", "v1.8-halfsplit-§9.3"])
def test_mlp_mmap_table(corpus_case, case, table):
    path = corpus_case(case)
    with read(path) as nac:
        got = [(r.tick, [(c.action, c.target) for c in r.commands]) for r in nac.mmap]
        assert got == list(table.items()), "records in file order, commands in file order"
        assert nac.mmap[2].commands[0].name == ("FORWARD" if case == "mlp__v1.6" else "SAVE_RESULT")
        sp = nac.span_at(nac.mmap[0].offset)
        assert sp.path == f"MMAP/tick[{nac.mmap[0].tick}]/tick"


def _meta_bytes(nac, data: bytes, name: str) -> bytes:
    p = nac.param_by_name(name)
    for rec in nac.spans.find("DATA/tensors").children:
        if rec.type == "tensor" and rec.find("data").offset == p.data_offset:
            meta = rec.find("meta")
            return data[meta.offset:meta.end]
    raise AssertionError(f"no tensor record for {name}")


def test_quant_metadata_examples(corpus_case):
    """Research §10.2: metadata bytes of the mlp_* cases."""
    path = corpus_case("mlp_fp16")
    data = path.read_bytes()
    nac = read(data)
    assert _meta_bytes(nac, data, "fc1.weight").hex() == "02" "02" "10000000" "08000000" "00"
    assert nac.param_by_name("fc1.weight").meta.quant == 0          # FP16 is dtype 2 with quant code 0

    path = corpus_case("mlp_int8c__v1.6")
    data = path.read_bytes()
    nac = read(data)
    meta = _meta_bytes(nac, data, "fc1.weight")
    assert len(meta) == 80
    assert meta[:12].hex() == "07" "02" "10000000" "08000000" "03" "00" and struct.unpack_from("<I", meta, 12)[0] == 16
    assert nac.param_by_name("fc1.weight").meta.scales.shape == (16,)
    assert nac.param_by_name("fc1.bias").meta.quant == 2            # 1-D under INT8_CHANNEL → INT8_TENSOR

    path = corpus_case("mlp_bfp8__v1.6")
    data = path.read_bytes()
    nac = read(data)
    meta = _meta_bytes(nac, data, "fc1.weight")
    assert meta[:22].hex() == "07" "01" "80000000" "04" "4000" "02" "10000000" "08000000" "02000000"
    assert len(meta) == 22 + 2 * 4
    m = nac.param_by_name("fc1.weight").meta
    assert (m.shape, m.original_shape, m.block_size, m.logical_shape) == ((128,), (16, 8), 64, (16, 8))


def test_mlp_orch_bytecode(corpus_case):
    """Research §12.4: the 29-byte MEP program of mlp_orch and its pool."""
    with read(corpus_case("mlp_orch")) as nac:
        assert nac.orch.bytecode.hex() == ("10000000" "14000100" "800001000101" "62000201" "04030200"
                                           "5f020300" "fe0101")
        assert [(c.id, c.value) for c in nac.orch.pool] == [(0, "mlp_orch.nac"), (1, "sample_input"),
                                                           (2, "argmax:"), (3, "pred")]
        assert [a.name for a in nac.arrs] == ["sample_input"]


# --------------------------------------------------------------------------- weights
def _reference_mlp(corpus_case):
    nac = read(corpus_case("mlp"))
    return {p.name: np.array(p.array()) for p in nac.params.values()}


QUANT_CASES = ["mlp_fp16", "mlp_fp16__v1.6", "mlp_int8t", "mlp_int8t__v1.6", "mlp_int8c__v1.6", "mlp_bfp8__v1.6"]


@pytest.mark.parametrize("case", QUANT_CASES)
def test_quantised_weights_dequantise_close_to_fp32(corpus_case, case):
    """Tolerances (all from how the values were quantised, research §10.2):

    * FP16: |w' - w| <= |w| * 2**-11 + 2**-24 (round to nearest half), hence also <= 1e-3;
    * INT8_TENSOR: the stored scale is max|w|/127 and |w' - w| <= scale/2;
    * INT8_CHANNEL: one scale per row = max|row|/127 and |w' - w| <= that scale/2;
    * BLOCK_FP8: one scale per 64-value block = max|block|/127 and |w' - w| <= scale/2.

    Every one of them is inside the looser max|w|/127.
    """
    ref = _reference_mlp(corpus_case)
    nac = read(corpus_case(case))
    assert {p.name for p in nac.params.values()} == set(ref)
    slack = 1 + 1e-5
    for p in nac.params.values():
        w = ref[p.name].astype(np.float64)
        got = np.array(p.array())
        assert got.dtype == np.float32 and got.shape == w.shape == tuple(p.shape)
        err = np.abs(got.astype(np.float64) - w)
        assert err.max() <= np.abs(w).max() / 127
        q = nac.header.quant_name
        m = p.meta
        if q == "FP16":
            assert m.dtype == 2 and m.quant == 0
            assert np.all(err <= np.abs(w) * 2.0 ** -11 + 2.0 ** -24)
            assert err.max() <= 1e-3
        elif q == "INT8_TENSOR" or (q == "INT8_CHANNEL" and w.ndim == 1):
            assert m.dtype == 7 and m.quant == 2
            assert m.scale == pytest.approx(np.abs(w).max() / 127, rel=1e-6)
            assert err.max() <= m.scale / 2 * slack
        elif q == "INT8_CHANNEL":
            assert m.dtype == 7 and m.quant == 3 and m.axis == 0
            row_max = np.abs(w).reshape(w.shape[0], -1).max(axis=1)
            np.testing.assert_allclose(m.scales, row_max / 127, rtol=1e-6)
            bound = (m.scales.astype(np.float64) / 2 * slack).reshape((-1,) + (1,) * (w.ndim - 1))
            assert np.all(err <= bound)
        elif q == "BLOCK_FP8":
            assert m.dtype == 7 and m.quant == 4 and m.block_size == 64
            flat = np.zeros(m.shape[0])
            flat[:w.size] = w.reshape(-1)
            block_max = np.abs(flat).reshape(-1, 64).max(axis=1)
            np.testing.assert_allclose(m.scales, np.where(block_max == 0, 1.0, block_max / 127), rtol=1e-6)
            bound = np.repeat(m.scales.astype(np.float64) / 2 * slack, 64)[:w.size].reshape(w.shape)
            assert np.all(err <= bound)
        else:
            raise AssertionError(q)


@pytest.mark.parametrize("case", ["mlp_external", "mlp_external__v1.6"])
def test_external_weights_equal_internal(corpus_case, case):
    from safetensors.numpy import load_file
    ref = _reference_mlp(corpus_case)
    path = corpus_case(case)
    st = path.with_suffix(".safetensors")
    assert st.is_file()
    raw = load_file(str(st))
    with read(path) as nac:
        assert not nac.header.weights_internal
        assert nac.weights_path == str(st)
        assert nac.spans.find("DATA/tensors") is None, "no block 3 at all with external weights"
        for p in nac.params.values():
            assert p.meta is None           # nothing is read at open time
            got = np.array(p.array())
            assert got.dtype == np.float32 and np.array_equal(got, ref[p.name])
            assert np.array_equal(got, raw[p.name])
            assert p.meta is not None and p.meta.dtype_name == "float32" and p.shape == ref[p.name].shape
    # from bytes, with the weights location given explicitly
    nac = read(path.read_bytes(), weights=str(st))
    for p in nac.params.values():
        assert np.array_equal(p.array(), ref[p.name])


def test_internal_weights_are_identical_across_mlp_cases(corpus_case):
    ref = _reference_mlp(corpus_case)
    for case in ("mlp__v1.6", "mlp_noopt__v1.6", "mlp_orch"):
        nac = read(corpus_case(case))
        for p in nac.params.values():
            assert np.array_equal(p.array(), ref[p.name]), (case, p.name)


# --------------------------------------------------------------------------- version conversion
def _same_program(a, b) -> None:
    assert len(a.instructions) == len(b.instructions)
    for x, y in zip(a.instructions, b.instructions):
        assert (x.a, x.b, x.c, x.d) == (y.a, y.b, y.c, y.d)
        assert a.instruction_name(x) == b.instruction_name(y)
        assert a.signature(x) == b.signature(y)
    assert a.perms == b.perms
    assert [(c.id, c.type, c.value) for c in a.constants.values()] == \
        [(c.id, c.type, c.value) for c in b.constants.values()]
    assert [(p.id, p.name) for p in a.params.values()] == [(p.id, p.name) for p in b.params.values()]
    for p in a.params.values():
        q = b.params[p.id]
        if p.meta is not None:
            assert np.array_equal(np.asarray(p.raw()).view(np.uint8), np.asarray(q.raw()).view(np.uint8))
            assert p.meta.shape == q.meta.shape and p.meta.quant == q.meta.quant
    assert [(n.index, n.name) for n in a.input_names] == [(n.index, n.name) for n in b.input_names]
    assert [(r.tick, [(c.action, c.target) for c in r.commands]) for r in a.mmap] == \
        [(r.tick, [(c.action, c.target) for c in r.commands]) for r in b.mmap]
    ha, hb = a.header, b.header
    assert (ha.quant_method, ha.weights_internal, ha.num_inputs, ha.num_outputs, ha.d_model) == \
        (hb.quant_method, hb.weights_internal, hb.num_inputs, hb.num_outputs, hb.d_model)


@pytest.mark.parametrize("version", ["1.6", "1.8"])
def test_version_conversion_keeps_the_program(corpus_file, version):
    data = corpus_file.read_bytes()
    nac = read(data)
    if version == "1.6" and nac.arrs:
        with pytest.raises(NacEncodeError, match="ARRS"):
            write(nac, version=version)
        return
    converted = write(nac, version=version)
    out = read(converted)
    assert out.version == version
    assert converted[3] == L.LAYOUTS[version].version_byte
    assert out.spans.find("header").length == L.LAYOUTS[version].size
    _same_program(nac, out)
    # each op keeps its meaning in the target version's table
    for ins in out.instructions:
        if ins.a >= 10:
            assert out.op_name(ins.a) == nac.op_name(ins.a)
    if version == nac.version:
        assert converted == data


def test_version_conversion_converts_back_to_the_original_bytes(corpus_file):
    data = corpus_file.read_bytes()
    nac = read(data)
    target = other_version(nac.version)
    if target == "1.6" and nac.arrs:
        pytest.skip("v1.6 cannot hold ARRS (checked by test_version_conversion_keeps_the_program)")
    there = write(nac, version=target)
    back = write(read(there), version=nac.version)
    assert back == data


def test_conversion_to_v16_refuses_arrs(corpus_case):
    with read(corpus_case("mlp_orch")) as nac:
        assert nac.arrs
        with pytest.raises(NacEncodeError):
            write(nac, version="1.6")


def test_unknown_version_is_an_encode_error(corpus_case):
    with read(corpus_case("mlp")) as nac:
        with pytest.raises(NacEncodeError):
            write(nac, version="2.0")


def test_public_api():
    assert nac_engine.read is read and nac_engine.write is write and nac_engine.verify is verify
    assert issubclass(nac_engine.NacFormatError, ValueError)
    assert issubclass(nac_engine.NacEncodeError, ValueError)
