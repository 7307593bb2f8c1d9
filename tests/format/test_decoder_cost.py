"""Decoding cost stays linear in the file (issue 15 §5): bytes of RAM per file byte measured with
tracemalloc (machine-independent), CPU time of 4x the input against 1x (a quadratic step makes
that 16x; the bound leaves room for a shared machine), and the compact ORCH stream checked
against the one-instruction-at-a-time decoder it replaced."""
from __future__ import annotations

import gc
import random
import tracemalloc

import pytest
from hypothesis import given, settings, strategies as st

from benchmarks.bench_hostile_cost import cmap_file, distinct_ops, id_text_file
from nac_engine import read, verify, write
from nac_engine.format.gc_pause import collector_paused
from nac_engine.format.model import (Constant, InputName, Instruction, MmapCommand, MmapRecord, NamedArray, Orch,
                                     Parameter, Proc, Resource, TensorMeta)
from nac_engine.text.asm import assemble
from nac_engine.text.disasm import disassemble, iter_disassembly
from nac_engine.text.textops import TextError
from nac_engine.isa.mep import (MEP_OPCODES, MepStream, _decode_one, _Undecodable, decode_mep, format_mep,
                                format_mep_blocks)
from tests.format.test_regressions import small_file
from tests.decoder_cost import growth, ram_per_file_byte

# minutes of CPU: the default tier skips them, .ci/run runs them (pytest -m heavy)
pytestmark = pytest.mark.heavy

# A real MEP program (load model, load array, run, argmax, print, return): 29 bytes.
MEP_PROGRAM = bytes.fromhex("100000001400010080000100010162000201040302005f020300fe0101")


def crafted(kind: str, scale: int) -> bytes:
    """A valid file whose ``kind`` section grows with ``scale`` (1 ~ 100-250 KB)."""
    nac = small_file()
    if kind == "orch":
        nac.orch = Orch(MEP_PROGRAM * (8_600 * scale), [Constant(i, 4, f"s{i}") for i in range(4)])
    elif kind == "orch_distinct":
        nac.orch = Orch(_distinct_orch(100_000 * scale), [Constant(i, 4, f"s{i}") for i in range(4)])
    elif kind == "orch_shortest":    # EXEC_RETURN with no keys: 2 bytes, a listing line each
        nac.orch = Orch(b"\xfe\x00" * (50_000 * scale), [Constant(i, 4, f"s{i}") for i in range(4)])
    elif kind == "mmap":
        rnd = random.Random(1)
        nac.mmap = [MmapRecord(t, [MmapCommand(10, rnd.randrange(5)) for _ in range(255)])
                    for t in range(130 * scale)]
    elif kind == "mmap_shortest":    # empty records: 3 bytes each
        nac.mmap = [MmapRecord(t % 3, []) for t in range(40_000 * scale)]
    elif kind == "cnst":
        for cid in range(10, 10 + 12_000 * scale):
            nac.constants[cid] = Constant(cid, 2, cid % 7)
    elif kind == "cnst_shortest":    # null constants: 5 bytes each
        for cid in range(10, 10 + 16_000 * scale):
            nac.constants[cid] = Constant(cid, 0, None)
    elif kind in ("proc_shortest", "proc_unknown"):    # empty TISA records: 5 bytes each
        op = 0x01 if kind == "proc_shortest" else 0x7F     # (an unknown opcode: a problem each)
        nac.proc = Proc(b"TISA\x01" + (bytes([op]) + bytes(4)) * (50_000 * scale))
    elif kind == "pool_shortest":    # ORCH pool null constants: 5 bytes each
        nac.orch = Orch(b"", [Constant(i % 65_536, 0, None) for i in range(50_000 * scale)])
    elif kind == "arrs_shortest":    # empty ARRS entries: 12 bytes each (v1.8)
        nac.header.version = "1.8"
        nac.arrs = [NamedArray("", 9, (), _payload=b"") for _ in range(20_000 * scale)]
    elif kind == "tensors":
        for pid in range(2, 2 + 3_000 * scale):
            nac.params[pid] = Parameter(pid, f"p{pid}", meta=TensorMeta(0, (2,), 0), _payload=bytes(8))
    elif kind == "ops":
        base = nac.instructions[2].a
        body = [Instruction(i, base, 2, None, (-1, -1)) if i % 2 else Instruction(i, base + 1, 3, (2, 3, 2), (-1, 0, 0))
                for i in range(2, 2 + 2_000 * scale)]
        nac.instructions = nac.instructions[:2] + body + [Instruction(len(body) + 2, 3, 0, (1, 0), (-1,))]
    elif kind == "ops_shortest":     # an op without arguments: 2 bytes, the most instructions per byte
        base = nac.instructions[2].a
        body = [Instruction(i, base, 0, None, None) for i in range(2, 2 + 62_500 * scale)]
        nac.instructions = nac.instructions[:2] + body + [Instruction(len(body) + 2, 3, 0, (1, 0), (-1,))]
    elif kind == "ops_problems":     # each reads two later values: decoded field by field, two problems
        base = nac.instructions[2].a
        body = [Instruction(i, base, 2, None, (1, 2)) for i in range(2, 2 + 25_000 * scale)]
        nac.instructions = nac.instructions[:2] + body + [Instruction(len(body) + 2, 3, 0, (1, 0), (-1,))]
    elif kind == "ops_distinct":
        nac.constants.update(_int_constants(400 * scale))
        nac.instructions = distinct_ops(nac, 2_000 * scale, 400 * scale)
    elif kind == "names_shortest":   # empty parameter names: 4 bytes each (ids are u16: 64k at most)
        nac.header.weights_internal = False
        nac.params = {pid: Parameter(pid, "") for pid in range(2, 2 + 16_000 * scale)}
    elif kind == "names_internal":   # the same with internal weights and one tensor
        nac.params = {pid: Parameter(pid, "") for pid in range(2, 2 + 16_000 * scale)}
        nac.params[1] = small_file().params[1]
    elif kind == "inputs_shortest":  # empty input names: 4 bytes each
        nac.input_names = [InputName(i % 65536, "") for i in range(60_000 * scale)]
    elif kind == "rsrc":
        nac.rsrc = [Resource(f"res/{i}.json", _payload=b'{"k": %d}' % i) for i in range(4_000 * scale)]
    elif kind == "rsrc_shortest":    # an empty name and payload: 6 bytes each
        nac.rsrc = [Resource("", _payload=b"") for _ in range(40_000 * scale)]
    elif kind == "cmap":     # 4-byte records whose ids repeat: a duplicate-id warning each
        return cmap_file(200_000 * scale)
    elif kind in ("cmap_shortest", "perm_shortest"):    # distinct ids, empty texts: 3 bytes each
        return id_text_file(kind[:4].upper(), 16_384 * scale)
    return write(nac)


def _int_constants(count: int) -> dict:
    return {cid: Constant(cid, 2, cid * 7919 - 10_000_000) for cid in range(10, 10 + count)}


def _distinct_orch(size: int) -> bytes:
    """About ``size`` bytes of MEP whose instructions all differ (random operands, a jump in
    five, as benchmarks/bench_hostile_cost.py's orch_distinct): no text can be reused."""
    rnd = random.Random(2)
    kinds = [(0x04, 3), (0x14, 3), (0x61, 4), (0x5F, 3), (0xA8, 3), (0x59, 2)]
    parts, n = [], 0
    while n < size:
        op, length = kinds[rnd.randrange(len(kinds))]
        body = rnd.randbytes(length)
        if op == 0x61:
            body = bytes([body[0] % 7]) + body[1:]
        parts.append(bytes([op]) + body)
        n += 1 + length
    return b"".join(parts)


KINDS = ("orch", "orch_distinct", "orch_shortest", "mmap", "mmap_shortest", "cmap", "cmap_shortest", "perm_shortest", "cnst", "cnst_shortest", "pool_shortest", "arrs_shortest", "proc_shortest", "proc_unknown", "tensors", "rsrc", "rsrc_shortest", "ops",
         "ops_shortest", "ops_distinct", "ops_problems", "names_shortest", "names_internal", "inputs_shortest")
STEPS = {
    "read": lambda p: read(p, strict=False).close(),
    "verify": verify,
    "dis": lambda p: sum(map(len, iter_disassembly(read(p, strict=False)))),
    # `nac span FILE OFFSET`: one offset's spans (it built every record's: 7 s for 1 MB ORCH)
    "span": lambda p: read(p, strict=False).span_at(p.stat().st_size // 2),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cost")
    out = {}
    for kind in KINDS:
        for scale in (1, 4):
            path = d / f"{kind}{scale}.nac"
            path.write_bytes(crafted(kind, scale))
            out[kind, scale] = path
    return out


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("kind", KINDS)
def test_ram_per_file_byte_is_bounded(files, kind, step):
    per_byte = ram_per_file_byte(STEPS[step], files[kind, 4])
    assert per_byte <= 20, f"{kind} {step}: {per_byte:.1f} B per file byte"


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("kind", KINDS)
def test_four_times_the_input_costs_about_four_times(files, kind, step):
    fn = STEPS[step]
    fn(files[kind, 1])
    small, big = growth(fn, files[kind, 1], fn, files[kind, 4], lambda s, b: b <= 6 * s + 0.02)
    assert big <= 6 * small + 0.02, f"{kind} {step}: 1x {small:.3f} s, 4x {big:.3f} s"


# -- the compact ORCH stream against the instruction-at-a-time walk --------------------------------
def _reference_walk(buf: bytes):
    """The decoder before MepStream: decode each instruction in turn, stop at the first bad one."""
    out, ip = [], 0
    while ip < len(buf):
        try:
            ins = _decode_one(buf, ip, want_leaves=False)[0]
        except _Undecodable as e:
            return out, ip, e.args[0]
        out.append(ins)
        ip += ins.length
    return out, None, None


_OPCODES = sorted(MEP_OPCODES)
# mostly opcodes followed by small operand bytes, sometimes anything: exercises keys, tails, cuts
_streams = st.lists(st.one_of(st.sampled_from(_OPCODES), st.integers(0, 5), st.integers(0, 255)),
                    max_size=300).map(bytes)


@given(_streams, st.integers(0, 1 << 20))
@settings(max_examples=400, deadline=None)
def test_stream_decodes_like_the_reference_walk(data, base):
    stream, problems = decode_mep(data, base)
    ref, bad_ip, reason = _reference_walk(data)
    assert isinstance(stream, MepStream)
    assert list(stream.starts) == [i.ip for i in ref]
    assert [stream[i] for i in range(len(ref))] == ref
    if bad_ip is None:
        assert problems == [] and stream.tail is None
    else:
        assert [(p.offset, p.reason) for p in problems] == [(base + bad_ip, reason)]
        assert stream.tail.ip == bad_ip and stream[-1] is stream.tail
    assert "\n".join(format_mep_blocks(stream, {0: "zero"}, ".mep ")).split("\n") == \
        [".mep " + format_mep(i, {0: "zero"}) for i in stream] if len(stream) else True


def test_blocks_cache_and_jumps_across_block_boundaries():
    """> 4096 instructions (several blocks), jumps (text depends on the ip) and more distinct
    encodings than the text cache keeps: the text is still each instruction's own."""
    rnd = random.Random(3)
    parts = []
    for _ in range(30_000):
        op = rnd.choice([0x04, 0xA8, 0x61, 0xFE, 0x80])
        if op == 0x04:
            parts.append(bytes([op, rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)]))
        elif op == 0xA8:
            parts.append(bytes([op, rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)]))
        elif op == 0x61:
            parts.append(bytes([op, rnd.randrange(7), 1, 2, 3]))
        elif op == 0xFE:
            parts.append(bytes([op, 2, 5, 6]))
        else:
            parts.append(bytes([op, 0, 1, 7, 2, 8, 9]))
    data = b"".join(parts) + b"\x04\x01"         # cut short: a .bytes tail
    stream, problems = decode_mep(data, 100)
    assert len(problems) == 1 and stream.tail is not None
    pool = {i: f"p{i}" for i in range(0, 65536, 3)}
    expect = [".mep " + format_mep(i, pool) for i in _reference_walk(data)[0]] + [".mep " + format_mep(stream.tail, pool)]
    assert "\n".join(format_mep_blocks(stream, pool, ".mep ")).split("\n") == expect


def test_dis_of_a_big_orch_reads_back_byte_exact(tmp_path):
    from nac_engine.text.asm import assemble
    data = crafted("orch", 1)
    path = tmp_path / "orch.nac"
    path.write_bytes(data)
    nac = read(path)
    text = disassemble(nac)
    assert text.count("\n.mep ") == len(nac.orch.instructions)
    assert write(assemble(text, weights=str(path))) == data


def test_collector_comes_back_after_reads_good_and_bad():
    was = gc.isenabled()     # a Studio test earlier in the process leaves it off (nac_studio/ui_gc.py)
    gc.enable()
    try:
        read(write(small_file()))
        assert gc.isenabled()
        with pytest.raises(Exception):
            read(b"NAC\x09" + bytes(100))
        assert gc.isenabled()
        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        read(write(small_file()))
        assert not gc.isenabled()      # a caller's own choice is kept
    finally:
        (gc.enable if was else gc.disable)()


def test_peer_files_are_read_without_reserving_the_limit(tmp_path):
    """read_bounded once asked read() for limit + 1 bytes: 1 GB allocated for any peer file."""
    from nac_engine.errors import NacFormatError
    from nac_engine.peers import read_bounded
    path = tmp_path / "f.bin"
    data = bytes(range(256)) * 40
    path.write_bytes(data)
    tracemalloc.start()
    try:
        got = read_bounded(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == data and peak < 4 * len(data) + 65536
    assert read_bounded(str(path), limit=len(data)) == data
    with pytest.raises(NacFormatError):
        read_bounded(str(path), limit=len(data) - 1)


# -- OPS: the walk's per-encoding verdicts and per-encoding text against the one-at-a-time paths ----------
def _plain(nac):
    """The same file with its instructions as a plain list (the object-at-a-time paths)."""
    import copy
    other = copy.copy(nac)
    other.instructions = list(nac.instructions)
    other._def_use = None
    return other


def _ops_variety() -> bytes:
    """Coerced constants (1.0 used as a dim), a '%' in a string constant, inputs whose names are
    not derivable, a reference before tick 0, an unknown op, a long C (> 16 bytes) and more than
    one 4096-line block."""
    nac = small_file()
    base = nac.instructions[2].a
    nac.constants.update({4: Constant(4, 3, 1.0), 5: Constant(5, 4, "50% off"),
                          6: Constant(6, 2, 7)})
    nac.perms.update({4: "Tfs", 5: "T" + "i" * 12, 6: "Ti"})
    body = []
    for i in range(2, 9_000):
        r = i % 6
        if r == 0:
            body.append(Instruction(i, base + 1, 4, (2, 4, 5), (-1, 0, 0)))
        elif r == 1:
            body.append(Instruction(i, base + 1, 5, (12,) + (6,) * 12, (-1,) + (0,) * 12))
        elif r == 2:
            body.append(Instruction(i, base + 1, 6, (1, 4), (-1, 0)))     # 1.0 where an int is meant
        elif r == 3:
            body.append(Instruction(i, 2, 0, None, None))
        else:
            body.append(Instruction(i, base, 2, None, (-2, -1)))
    body[5] = Instruction(7, 250, 0, None, None)                         # unknown op id
    body[7] = Instruction(9, base, 2, None, (-20, -1))                   # before tick 0
    n = len(body) + 2
    nac.instructions = nac.instructions[:2] + body + [Instruction(n, 3, 0, (1, 0), (-1,))]
    nac.input_names = [InputName(0, "x"), InputName(9, "late")]
    return write(nac)


def _ops_cases():
    from tests.corpus_paths import NAC_FILES
    cases = [("variety", _ops_variety()), ("ops", crafted("ops", 1)), ("small", write(small_file("1.6")))]
    return cases + [(p.parent.name, p.read_bytes()) for p in NAC_FILES]


@pytest.mark.parametrize("mmap_comments", [False, True])
def test_ops_text_from_the_bytes_equals_the_line_by_line_text(mmap_comments):
    for name, data in _ops_cases():
        nac = read(data, strict=False)
        assert nac.instructions.encoded() is not None
        fast = "\n".join(iter_disassembly(nac, mmap_comments=mmap_comments)).split("\n")
        slow = "\n".join(iter_disassembly(_plain(nac), mmap_comments=mmap_comments)).split("\n")
        assert fast == slow, name


def test_ops_verify_from_the_bytes_equals_the_object_walk():
    from nac_engine.format.verify import _semantic
    for name, data in _ops_cases():
        nac = read(data, strict=False)
        fast = [(p.section, p.offset, p.reason) for p in _semantic(nac)]
        slow = [(p.section, p.offset, p.reason) for p in _semantic(_plain(nac))]
        assert fast == slow, name
    assert any("instruction 7: unknown op id A=250" in p.reason for p in verify(_ops_variety()))


def _reference_ops(data: bytes):
    """OPS decoded one instruction at a time by the field-by-field decoder (the reader before
    the bulk walk): instructions, problems and where it stopped."""
    from nac_engine.errors import NacFormatError
    from nac_engine.format import reader as R
    nac = read(data, strict=False)
    ops = nac.spans.find("OPS")
    problems = R.ProblemList(False)
    r = R._Reader.__new__(R._Reader)
    r.nac, r.buf, r.p = nac, nac._buf, problems
    start = ops.offset + 8
    n = int.from_bytes(nac._buf[ops.offset + 4:start], "little")
    lay = R._OpsLayout(nac, n, False)
    out, pos = [], start
    try:
        for i in range(n):
            ins, pos = r._decode_instruction(i, pos, ops.end, lay)
            out.append((ins.a, ins.b, ins.c, ins.d, ins.offset))
    except NacFormatError as e:
        problems.items.append(e)
    problems.finish()       # past PROBLEMS_PER_KIND of a kind, the count line the reader closes with
    return nac, out, [(p.section, p.offset, p.reason) for p in problems.items]


@given(st.sampled_from(["ops", "ops_distinct"]),
       st.lists(st.tuples(st.integers(0, 30_000), st.integers(0, 255)), min_size=1, max_size=6),
       st.integers(0, 60))
@settings(max_examples=150, deadline=None)
def test_ops_walk_decodes_like_the_field_by_field_decoder(name, edits, cut):
    """Mutated OPS bytes (unknown ops and signatures, out-of-range D, negative C counts, cut
    short): the walk with its per-encoding verdicts keeps the same instructions and names the
    same problems, in order, as decoding one instruction at a time."""
    data = bytearray(crafted(name, 1))
    nac = read(bytes(data))
    ops = nac.spans.find("OPS")
    for at, value in edits:
        data[ops.offset + 8 + at % (ops.length - 8)] = value
    if cut:
        data[ops.end - cut:ops.end] = bytes(cut)     # zeroed tail: a cut-short count or field
    mutated, want, want_problems = _reference_ops(bytes(data))
    got = [(i.a, i.b, i.c, i.d, i.offset) for i in mutated.instructions]
    assert got == want
    assert [(p.section, p.offset, p.reason) for p in mutated.problems if p.section == "OPS"] == want_problems
    strict = None
    try:
        read(bytes(data))
    except Exception as e:    # a strict read raises the first problem of the file
        strict = (e.section, e.offset, e.reason)
    first = [(p.section, p.offset, p.reason) for p in mutated.problems]
    assert strict == (first[0] if first else None)


def test_instruction_table_is_a_list_until_edited():
    from nac_engine.format.instruction_table import InstructionTable
    nac = read(crafted("ops", 1))
    table = nac.instructions
    assert isinstance(table, InstructionTable) and table.encoded() is not None
    assert table[5] is table[5] and table[-1] is list(table)[-1]
    assert table == list(table) and list(table) == table
    assert table.decode(7).same_encoding(table[7]) and table.decode(7).offset == table[7].offset
    assert table[:2] + [table[2]] == list(table)[:3]
    data = write(nac)
    table.append(table[-1])
    assert table.encoded() is None and len(table) == len(list(table))
    table.pop()
    assert write(nac) == data


def test_tensor_records_inline_and_field_by_field_agree(tmp_path):
    """Plain records decoded inline (bytes source and pread read-ahead alike) and the others
    (quantised, a record whose id block 1 does not name, a second record for one id) field by
    field: same metadata, same problems, named where they are."""
    import struct
    nac = small_file()
    nac.params[2] = Parameter(2, "q", meta=TensorMeta(7, (2, 2), 2, scale=0.5, scale_bits=bytes.fromhex("0000003f")),
                              _payload=bytes(4))
    for pid in range(3, 3_000):
        nac.params[pid] = Parameter(pid, f"p{pid}", meta=TensorMeta(0, (pid % 5 + 1,), 0),
                                    _payload=bytes(4 * (pid % 5 + 1)))
    data = bytearray(write(nac))
    clean = read(bytes(data))
    tensors = clean.spans.find("DATA/tensors")
    rec = {r.name: r for r in tensors.children}
    shape_at = rec["tensor[10]"].offset + 14 + 2            # its shape[0] (u32)
    struct.pack_into("<I", data, shape_at, 7)                # 7 floats claimed, fewer held
    struct.pack_into("<H", data, rec["tensor[20]"].offset, 9_999)    # an id block 1 does not name
    struct.pack_into("<H", data, rec["tensor[30]"].offset, 5)        # a second record for id 5
    path = tmp_path / "t.nac"
    path.write_bytes(bytes(data))
    from_bytes, from_path = read(bytes(data), strict=False), read(path, strict=False)
    reasons = [(p.offset, p.reason) for p in from_bytes.problems]
    assert reasons == [(p.offset, p.reason) for p in from_path.problems]
    p10 = clean.params[clean.tensor_order[10]]
    assert (rec["tensor[10]"].offset, f"tensor {p10.name}: shape [7] of float32 needs 28 bytes, "
            f"record holds {p10.data_length}") in reasons
    assert any("parameter id 9999, which block 1 does not name" in r for _, r in reasons)
    assert any("parameter id 5 has two tensor records" in r for _, r in reasons)
    for got in (from_bytes, from_path):
        assert got.params[2].meta.scale == 0.5 and got.params[2].meta.quant == 2
        assert [(p.meta.shape, p.data_offset, p.data_length) for p in got.params.values() if p.meta] == \
            [(p.meta.shape, p.data_offset, p.data_length) for p in from_bytes.params.values() if p.meta]
    clean_path = tmp_path / "clean.nac"
    clean_path.write_bytes(write(clean))
    assert write(read(clean_path)) == write(clean)


def _asm_of_dis(path):
    text = disassemble(read(path, strict=False))
    return lambda p: _assembled(text, p)


def _assembled(text, path):
    try:
        return assemble(text, weights=str(path))
    except (TextError, ValueError):       # a refusal is a result (MMAP ticks past the program)
        return None


@pytest.mark.parametrize("kind", KINDS)
def test_asm_of_the_dis_text_is_linear_and_bounded(files, kind):
    """``nac asm`` of a file's own listing: 4x the input costs about 4x (a scan per .rsrc line
    made 20k resources cost 7 s), and its memory is bounded by what it reads (text + file)."""
    small_fn, big_fn = _asm_of_dis(files[kind, 1]), _asm_of_dis(files[kind, 4])
    small_fn(files[kind, 1])
    small, big = growth(small_fn, files[kind, 1], big_fn, files[kind, 4], lambda s, b: b <= 6 * s + 0.1)
    # 0.1 s of slack: asm builds Python objects for every record, and on a busy machine a 0.3 s
    # run varies by that much; a scan per record (what this guards against) costs seconds
    assert big <= 6 * small + 0.1, f"{kind} asm: 1x {small:.3f} s, 4x {big:.3f} s"
    path = files[kind, 4]
    text_bytes = len(disassemble(read(path, strict=False)).encode())
    per_byte = ram_per_file_byte(big_fn, path) * path.stat().st_size / (text_bytes + path.stat().st_size)
    assert per_byte <= 20, f"{kind} asm: {per_byte:.1f} B per input byte"


def test_a_repeated_defect_is_counted_not_listed(files):
    """A CMAP of 50k duplicate ids: the lenient read keeps 1000 of them and one problem that
    counts the rest; the CLI shows five and the count."""
    import subprocess
    import sys
    from nac_engine.format.reader import PROBLEMS_PER_KIND
    path = files["cmap", 1]
    nac = read(path, strict=False)
    twice = [p for p in nac.problems if "defined twice" in p.reason and "more like this" not in p.reason]
    assert len(twice) == PROBLEMS_PER_KIND
    (rest,) = [p for p in nac.problems if "more like this" in p.reason]
    assert rest.section == "CMAP" and rest.offset > twice[-1].offset
    n = int(rest.reason.split()[2].replace(",", ""))
    assert n > 10_000
    out = subprocess.run([sys.executable, "-m", "nac_engine.cli", "verify", str(path)], capture_output=True,
                         text=True, timeout=120).stdout.splitlines()
    assert len(out) < 20 and any("more like this" in line for line in out)
