"""The reader's bulk decoders (format/bulk_records.py) and the listing's block formatters
(isa/table_lines.py) against the field-by-field and line-by-line paths they stand in for:
same model, problems, errors, spans, verify list and text, on crafted tables, targeted
defects, seeded random corruptions and the corpus; and cheaper than the paths they replace."""
from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nac_engine import read, verify, write
from nac_engine.format import reader as reader_module
from nac_engine.format.model import Constant, Parameter, TensorMeta
from nac_engine.text import disasm
from nac_engine.text.literals import format_name
from nac_engine.text.table_lines import const_lines, format_names, param_lines, tensor_lines
from nac_engine.text.textops import Tables
from tests.corpus_paths import NAC_FILES
from tests.decoder_cost import best_cpu
from tests.format.test_regressions import small_file

_DTYPES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 200)        # 200: a code no dtype has


def tables_file() -> bytes:
    """Runs of plain tensors (ranks 0-4, every dtype, an unknown one) around quantised ones, names
    that need quoting or are not ASCII, and int/float constant runs broken by every other type."""
    nac = small_file()
    for pid in range(2, 700):
        rank = pid % 5
        shape = tuple((pid + j) % 4 + 1 for j in range(rank))
        dt = _DTYPES[pid % len(_DTYPES)]
        size = int(np.prod(shape)) * (np.dtype(reader_module.L.NUMPY_STORAGE[dt]).itemsize if dt != 200 else 1)
        name = ["w%d" % pid, "é%d" % pid, "x y %d" % pid, "layer.%d.bias" % pid][pid % 4] if pid != 5 else "None"
        if pid in (300, 301):
            meta = TensorMeta(7, (2, 2), 2, scale=0.5, scale_bits=bytes.fromhex("0000003f"))
            size = 4
        else:
            meta = TensorMeta(dt, shape, 0)
        nac.params[pid] = Parameter(pid, name, meta=meta, _payload=bytes(size))
    for cid in range(10, 1_500):
        typ = 2 if cid % 211 else (0, 1, 4, 5, 6)[cid // 211 % 5]
        if 900 <= cid < 1_000:
            typ = 3
        value = {0: None, 1: True, 2: cid * 7919 - 10**12, 3: cid / 3.0, 4: "s%d" % cid, 5: (1, 2, cid),
                 6: (0.5, 1.5)}[typ]
        nac.constants[cid] = Constant(cid, typ, value, 1 if typ in (0, 1) else None)
    return write(nac)


def _records(data: bytes, block: str) -> dict:
    return {r.name: r for r in read(data).spans.find(block).children}


def defects(data: bytes) -> dict:
    """One defect each, at records the bulk paths read."""
    out = {}
    tensors, names, consts = _records(data, "DATA/tensors"), _records(data, "DATA/names"), _records(data, "CNST")

    def edit(name, fmt, offset, value):
        b = bytearray(data)
        struct.pack_into(fmt, b, offset, value)
        out[name] = bytes(b)

    edit("shape_vs_payload", "<I", tensors["tensor[40]"].offset + 16, 9)
    edit("huge_shape", "<Q", tensors["tensor[48]"].offset + 16, 2**64 - 1)     # rank 4: 2 dims of 2**32-1
    edit("unnamed_id", "<H", tensors["tensor[50]"].offset, 9_999)
    edit("second_record", "<H", tensors["tensor[60]"].offset, tensors_pid(data, 3))
    edit("param_named_twice", "<H", names["param[70]"].offset, 3)
    edit("name_not_utf8", "B", names["param[80]"].offset + 4, 0xFF)
    edit("const_defined_twice", "<H", consts["const[100]"].offset, 11)
    edit("const_bad_length", "<H", consts["const[120]"].offset + 3, 7)
    edit("const_unknown_type", "B", consts["const[130]"].offset + 2, 9)
    cut = tensors["tensor[500]"].offset + 5
    out["truncated"] = data[:cut]
    return out


def tensors_pid(data: bytes, index: int) -> int:
    return read(data).tensor_order[index]


def random_corruptions(data: bytes, count: int, seed: int) -> list:
    rnd = random.Random(seed)
    spans = read(data).spans
    regions = [(s.offset, s.length) for s in (spans.find("CNST"), spans.find("DATA"))]
    out = []
    for _ in range(count):
        off, length = regions[rnd.randrange(2)]
        b = bytearray(data)
        for _ in range(rnd.randrange(1, 4)):
            b[off + rnd.randrange(length)] = rnd.choice((0, 1, 2, 3, 5, 7, 8, 0x80, 0xFF, rnd.randrange(256)))
        out.append(bytes(b))
    return out


def _walk(span, out: list, depth: int = 0) -> list:
    out.append((depth, span.offset, span.length, span.name, span.type, repr(span.value)))
    for child in span.children:
        _walk(child, out, depth + 1)
    return out


def observe(source) -> dict:
    """Everything a reader of the file can see."""
    seen = {}
    try:
        nac = read(source, strict=False)
    except Exception as e:        # noqa: BLE001 - compared, not handled
        return {"error": repr(e)}
    seen["problems"] = [(p.section, p.offset, p.reason) for p in nac.problems]
    seen["params"] = [(k, p.id, p.name, repr(p.meta), p.data_offset, p.data_length) for k, p in nac.params.items()]
    seen["order"] = list(nac.tensor_order)
    seen["inputs"] = [(i.index, i.name) for i in nac.input_names]
    seen["constants"] = [(k, repr(c)) for k, c in nac.constants.items()]
    seen["trailing"] = dict(nac.trailing)
    seen["text"] = disasm.disassemble(nac)
    seen["spans"] = _walk(nac.spans, [])
    try:
        read(source)
        seen["strict"] = None
    except Exception as e:        # noqa: BLE001
        seen["strict"] = repr(e)
    seen["verify"] = [(p.section, p.offset, p.reason) for p in verify(source)]
    return seen


@pytest.fixture
def field_by_field(monkeypatch):
    """Switches the bulk decoders off: the reader's own loops read every record."""
    def off():
        monkeypatch.setattr(reader_module, "name_records", lambda *a: None)
        monkeypatch.setattr(reader_module, "plain_tensor_walk", lambda buf, fd, pos, *a: ([], [], pos))
        monkeypatch.setattr(reader_module, "scalar_constant_run", lambda *a: 0)
    return off


def _both_ways(datas, tmp_path, field_by_field, monkeypatch):
    sources = []
    for i, data in enumerate(datas):
        path = tmp_path / f"f{i}.nac"
        path.write_bytes(data)
        sources += [data, path]
    bulk = [observe(s) for s in sources]
    field_by_field()
    general = [observe(s) for s in sources]
    monkeypatch.undo()
    for i, (a, b) in enumerate(zip(bulk, general)):
        assert a == b, f"source {i} ({'bytes' if i % 2 == 0 else 'path'})"
    return bulk


def test_bulk_reads_the_crafted_tables_like_field_by_field(tmp_path, field_by_field, monkeypatch):
    seen = _both_ways([tables_file()], tmp_path, field_by_field, monkeypatch)
    assert len(seen[0]["params"]) == 699 and len(seen[0]["constants"]) == 1_492 and seen[0]["strict"] is None


def test_bulk_reports_each_defect_like_field_by_field(tmp_path, field_by_field, monkeypatch):
    cases = defects(tables_file())
    seen = _both_ways(list(cases.values()), tmp_path, field_by_field, monkeypatch)
    by_name = dict(zip(cases, seen[::2]))
    assert [r for _, _, r in by_name["shape_vs_payload"]["problems"]] == [
        "tensor é41: shape [9] of uint8 needs 9 bytes, record holds 2"]
    huge = [r for _, _, r in by_name["huge_shape"]["problems"]]     # a count past int64: exact all the same
    assert len(huge) == 1 and f"needs {(2**32 - 1) ** 2 * 4 * 1 * 8}" in huge[0], huge
    assert any("which block 1 does not name" in r for _, _, r in by_name["unnamed_id"]["problems"])
    assert any("has two tensor records" in r for _, _, r in by_name["second_record"]["problems"])
    assert any("is named twice" in r for _, _, r in by_name["param_named_twice"]["problems"])
    assert "UTF-8" in by_name["name_not_utf8"]["strict"]
    assert any("defined twice" in r for _, _, r in by_name["const_defined_twice"]["problems"])
    assert by_name["const_bad_length"]["strict"] and by_name["const_unknown_type"]["strict"]
    assert any(r.startswith("truncated: tensor 500") for _, _, r in by_name["truncated"]["problems"])


def test_bulk_reads_random_corruptions_like_field_by_field(tmp_path, field_by_field, monkeypatch):
    _both_ways(random_corruptions(tables_file(), 40, seed=15), tmp_path, field_by_field, monkeypatch)


@pytest.mark.skipif(not NAC_FILES, reason="shared corpus not present")
def test_bulk_reads_the_corpus_like_field_by_field(tmp_path, field_by_field, monkeypatch):
    _both_ways([p.read_bytes() for p in NAC_FILES], tmp_path, field_by_field, monkeypatch)


# -- listing blocks against the line-by-line forms ---------------------------------------------------
_names = st.lists(st.one_of(st.sampled_from(["None", "True", "False", "", "a\n", "a\x00b", "_x", "9a", "a.b:c/d[0]-e"]),
                            st.text(max_size=6)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_names)
def test_format_names_equals_format_name_of_each(names):
    assert format_names(names) == [format_name(n) for n in names]


def test_table_blocks_equal_the_line_by_line_text():
    nac = read(tables_file())
    t = Tables(nac)
    names = reader_module.L.CONST_TYPE_NAMES
    consts = [f".const {c.id} {names[c.type]} {lit}" if c.type not in (0, 1) else ".const " + disasm._const_directive(c, lit)
              for c, lit in zip(nac.constants.values(), t.const_literals)]
    assert "\n".join(const_lines(nac.constants.values(), t.const_literals, disasm._const_directive)) == "\n".join(consts)
    params = [f".param {pid} {format_name(p.name)}" for pid, p in nac.params.items()]
    assert "\n".join(param_lines(nac.params)) == "\n".join(params)
    assert '.param 5 "None"' in params and '.param 2 "x y 2"' in params
    tensors = [f".tensor {pid} {disasm.format_meta(nac.params[pid].meta)}    ; {nac.params[pid].data_length} bytes"
               for pid in nac.tensor_order]
    assert "\n".join(tensor_lines(nac, disasm.format_meta)) == "\n".join(tensors)


# -- cost ------------------------------------------------------------------------------------------
def _table(kind: str) -> bytes:
    nac = small_file()
    if kind == "tensors":
        for pid in range(2, 12_000):
            nac.params[pid] = Parameter(pid, f"p{pid}", meta=TensorMeta(0, (2,), 0), _payload=bytes(8))
    else:
        for cid in range(10, 30_000):
            nac.constants[cid] = Constant(cid, 2, cid % 7)
    return write(nac)


@pytest.mark.parametrize("kind", ["tensors", "constants"])
def test_bulk_read_costs_less_than_field_by_field(tmp_path, kind, field_by_field, monkeypatch):
    """Generous: measured about 0.4-0.6 (tensors) and 0.45 (constants) of the field-by-field read."""
    path = tmp_path / "t.nac"
    path.write_bytes(_table(kind))

    def step(p):
        read(p, strict=False).close()
    step(path)
    bulk = best_cpu(step, path, repeat=7)
    field_by_field()
    step(path)
    general = best_cpu(step, path, repeat=7)
    monkeypatch.undo()
    assert bulk <= 0.9 * general, f"{kind}: bulk {bulk:.4f} s, field by field {general:.4f} s"
