"""DATA's name blocks and RSRC as read: made when used, walked without being made, and the same
file either way (what dis, verify, the writer and the spans see)."""
from __future__ import annotations

import struct

import pytest

from nac_engine import read, verify, write
from nac_engine.format.const_table import constant_values
from nac_engine.format.model import Constant, InputName, Parameter
from nac_engine.format.lazy_records import walk_records
from nac_engine.format.name_tables import (made_parameters, parameter_items, parameter_name,
                                           parameter_names)
from nac_engine.text.disasm import disassemble

from .test_regressions import small_file


def _external(names: dict) -> bytes:
    """A small file with external weights whose DATA names ``names`` ({id: name})."""
    nac = small_file()
    nac.header.weights_internal = False
    nac.params = {pid: Parameter(pid, name) for pid, name in names.items()}
    nac.instructions[1].c = (1, next(iter(names)))
    return write(nac)


def _record_at(data: bytes, ident: int, name: str) -> int:
    return data.index(struct.pack("<HH", ident, len(name.encode())) + name.encode())


def test_a_read_files_names_are_walked_not_made():
    nac = read(_external({5: "a", 7: "b", 9: "c"}), strict=False)
    assert list(parameter_names(nac.params)) == [(5, "a"), (7, "b"), (9, "c")]
    assert len(nac.params) == 3 and 7 in nac.params and 8 not in nac.params
    assert parameter_name(nac.params, 9) == "c" and parameter_name(nac.params, 8) is None
    assert [(pid, p.name) for pid, p in parameter_items(nac.params)] == [(5, "a"), (7, "b"), (9, "c")]
    assert list(made_parameters(nac.params)) == []       # none of that made them
    disassemble(nac)
    verify(nac)
    assert list(made_parameters(nac.params)) == []
    p = nac.params[7]                                    # a lookup makes that one, once
    assert p is nac.params[7] and p.name == "b" and p.id == 7 and p._file is nac
    assert [q.name for q in made_parameters(nac.params)] == ["b"]
    assert [q.name for q in nac.params.values()] == ["a", "b", "c"]     # iterating makes them all
    assert nac.params[7] is p and [q.name for q in made_parameters(nac.params)] == ["a", "b", "c"]


def test_an_id_named_twice_keeps_the_later_name_at_the_first_place():
    data = bytearray(_external({5: "a", 7: "b", 9: "c"}))
    at = _record_at(bytes(data), 9, "c")
    data[at:at + 2] = struct.pack("<H", 5)
    nac = read(bytes(data), strict=False)
    assert any("parameter id 5 is named twice" in p.reason for p in nac.problems)
    with pytest.raises(Exception, match="named twice"):
        read(bytes(data))
    want = [(5, "c"), (7, "b")]                           # as a dict filled record by record
    assert list(parameter_names(nac.params)) == want and len(nac.params) == 2
    assert parameter_name(nac.params, 5) == "c"
    assert [(pid, p.name) for pid, p in parameter_items(nac.params)] == want
    assert [(pid, p.name) for pid, p in nac.params.items()] == want


def test_unmade_and_made_tables_give_the_same_listing_problems_and_bytes():
    data = bytearray(_external({5: "a", 7: "b", 9: ""}))
    at = _record_at(bytes(data), 9, "")
    data[at:at + 2] = struct.pack("<H", 5)              # a defect too: id 5 named twice
    lazy, made = read(bytes(data), strict=False), read(bytes(data), strict=False)
    made.params.get(5)
    made.input_names[0]
    assert list(made_parameters(made.params)) and not list(made_parameters(lazy.params))
    assert disassemble(lazy) == disassemble(made)
    assert [(p.section, p.offset, p.reason) for p in verify(lazy)] == \
           [(p.section, p.offset, p.reason) for p in verify(made)]
    assert write(lazy) == write(made)
    assert list(parameter_names(read(write(lazy)).params)) == [(5, ""), (7, "b")]


def test_input_names_are_a_list_when_used_and_walked_otherwise():
    nac = small_file()
    nac.input_names = [InputName(0, "x"), InputName(0, "again"), InputName(40_000, "past the program")]
    back = read(write(nac), strict=False)
    assert len(back.input_names) == 3
    assert [(n.index, n.name) for n in walk_records(back.input_names)] == \
           [(0, "x"), (0, "again"), (40_000, "past the program")]
    assert back.input_names == nac.input_names and back.input_names[2].name == "past the program"
    problems = [p.reason for p in verify(back)]
    assert any("'past the program' points to instruction 40000" in r for r in problems)


def test_name_record_spans_come_from_the_kept_records():
    data = _external({5: "a", 7: "bé"})
    nac = read(data)
    leaf = nac.span_at(_record_at(data, 7, "bé") + 5)
    assert (leaf.name, leaf.value, leaf.parent.value) == ("name", "bé", "7 = bé")


def test_resources_are_walked_found_and_made_alike():
    from nac_engine.format.model import Resource
    from nac_engine.format.resource_table import find_resource
    nac = small_file()
    # the second name holds the bytes of the third's head: a search must not stop inside it
    nac.rsrc = [Resource("a", _payload=b"1"), Resource("q\x02\x00ab", _payload=b"22"), Resource("ab", _payload=b"333"),
                Resource("", _payload=b"")]
    data = write(nac)
    back = read(data)
    assert [(r.name, r.data) for r in walk_records(back.rsrc)] == [(r.name, r._payload) for r in nac.rsrc]
    assert find_resource(back.rsrc, "ab").data == b"333" and find_resource(back.rsrc, "b") is None
    assert find_resource(back.rsrc, "").data_length == 0
    assert write(back) == data                     # written from the walk, unmade
    made = read(data)
    assert [r.name for r in made.rsrc] == ["a", "q\x02\x00ab", "ab", ""]     # the list protocol makes them
    assert find_resource(made.rsrc, "ab").data == b"333" and write(made) == data
    leaf = back.span_at(back.rsrc.start_of(2) + 8)       # 2 + 2 + 4 bytes of head, then its data
    assert (leaf.name, leaf.parent.value) == ("data", "ab")


def test_verify_lists_a_thousand_of_a_repeated_defect_and_counts_the_rest():
    nac = small_file()
    nac.input_names = [InputName(0, "x")] + [InputName(3, f"n{i}") for i in range(1500)]
    problems = [p.reason for p in verify(write(nac)) if p.section == "DATA/inputs"]
    assert len(problems) == 1001
    assert sum("points to instruction 3" in r for r in problems) == 1000
    assert problems[-1].startswith("… and 500 more like this (input name 'n#' points to instruction #")


def test_internal_weights_make_only_the_parameters_with_tensors():
    nac = small_file()                                     # parameter 1 has the tensor
    nac.params.update({pid: Parameter(pid, f"n{pid}") for pid in (5, 7)})
    back = read(write(nac), strict=False)
    alone = list(made_parameters(back.params))
    assert [(p.id, p.name, p.shape) for p in alone] == [(1, "w", (2, 3))]
    assert [(pid, name) for pid, name in parameter_names(back.params)] == [(1, "w"), (5, "n5"), (7, "n7")]
    assert back.params[1] is alone[0] and back.params[1].array().shape == (2, 3)   # made alone: the mapping's
    assert [(p.id, p.meta is None) for p in back.params.values()] == [(1, False), (5, True), (7, True)]
    nac.instructions[1].c = (1, 5)                      # a load of a parameter without a tensor
    loads_n5 = read(write(nac), strict=False)
    assert [p.reason for p in verify(loads_n5) if "no tensor" in p.reason] == \
           ["instruction 1: parameter 'n5' has no tensor in DATA block 3"]
    assert [p.id for p in made_parameters(loads_n5.params)] == [1]       # verify made no other


# -- CMAP and PERM ids past 255 (no instruction can name them: A and B are bytes) -----------------
def _with_high_ids(tag: str, extra: dict) -> bytes:
    """small_file() with ``extra`` ({id: text}) appended to its ``tag`` section (CMAP or PERM)."""
    nac = small_file()
    table = nac.cmap if tag == "CMAP" else nac.perms
    table.update(extra)
    return write(nac)


@pytest.mark.parametrize("tag", ["CMAP", "PERM"])
def test_an_id_table_with_high_ids_reads_writes_and_lists_as_the_dict(tag):
    extra = {300: "QK", 7000: "", 65_535: "Q"}
    data = _with_high_ids(tag, extra)
    nac = read(data)
    table = nac.cmap if tag == "CMAP" else nac.perms
    want = {**(small_file().cmap if tag == "CMAP" else small_file().perms), **extra}
    assert type(table).__name__ == "IdTextTable"
    low = {k: v for k, v in want.items() if k < 256}
    assert all(table[k] == v and k in table for k, v in low.items())       # byte ids: no dict made
    assert table._dict is None
    assert list(table.items()) == list(want.items()) and len(table) == len(want)
    assert write(nac) == data                                   # the writer walks it
    text = disassemble(nac)
    for k in extra:
        assert f".{'cmap' if tag == 'CMAP' else 'perm'} {k} " in text
    assert table._dict is None                                  # dis walked, made nothing
    assert table[7000] == "" and table == want and table.get(299) is None   # any other id: the dict
    table[301] = "K"
    assert table[301] == "K" and len(table) == len(want) + 1


def test_a_high_id_defined_twice_keeps_the_later_text():
    data = bytearray(_with_high_ids("CMAP", {300: "first", 400: "later"}))
    at = data.index(struct.pack("<HB", 400, 5) + b"later")
    data[at:at + 2] = struct.pack("<H", 300)
    nac = read(bytes(data), strict=False)
    assert any("op id 300 is defined twice" in p.reason for p in nac.problems)
    assert nac.cmap[300] == "later" and 400 not in nac.cmap
    assert [k for k, _ in nac.cmap.items()].count(300) == 1
    with pytest.raises(Exception, match="defined twice"):
        read(bytes(data))


# -- CNST: constants made when asked for ---------------------------------------------------------
def _with_constants(extra: dict) -> bytes:
    nac = small_file()
    nac.constants.update({cid: Constant(cid, typ, value) for cid, (typ, value) in extra.items()})
    return write(nac)


_KINDS = {100: (0, None), 101: (1, True), 102: (2, -7), 103: (3, 2.5), 104: (4, "héllo"), 105: (5, (1, -2)),
          106: (6, (0.5,)), 107: (5, ()), 300: (4, "")}


def test_a_read_files_constants_are_walked_not_made():
    data = _with_constants(_KINDS)
    nac = read(data)
    table = nac.constants
    assert type(table).__name__ == "ConstTable" and len(table) == len(small_file().constants) + len(_KINDS)
    assert 104 in table and 999 not in table and table.get(999) is None
    assert write(nac) == data                           # the writer walks the records
    disassemble(nac)
    verify(nac)
    assert table._dict is None and set(table._some) <= {2, 3}   # kept: only what the program uses
    c = table[105]                                      # a lookup makes that one, once
    assert (c.id, c.type, c.value) == (105, 5, (1, -2)) and table[105] is c and table.get(105) is c
    assert 105 in table._some and not set(table._some) & (set(_KINDS) - {105})
    import numpy as np
    assert table.get(np.int64(104)).value == "héllo"    # a numpy integer is an id too
    got = {cid: (k.type, k.value) for cid, k in table.items()}      # the mapping protocol makes them all
    assert {cid: got[cid] for cid in _KINDS} == {cid: (t, tuple(v) if isinstance(v, tuple) else v)
                                                 for cid, (t, v) in _KINDS.items()}
    assert table[105] is c                              # the one made before is the mapping's
    table[400] = Constant(400, 2, 1)
    assert 400 in table and len(table) == len(got) + 1


def test_a_constant_id_defined_twice_keeps_the_later_record():
    data = bytearray(_with_constants({100: (2, 1), 101: (2, 2)}))
    at = data.index(struct.pack("<HBH", 101, 2, 8))
    data[at:at + 2] = struct.pack("<H", 100)
    nac = read(bytes(data), strict=False)
    assert any("constant id 100 is defined twice" in p.reason for p in nac.problems)
    assert nac.constants[100].value == 2 and 101 not in nac.constants
    assert [c.value for c in constant_values(nac.constants) if c.id == 100] == [2]
    with pytest.raises(Exception, match="defined twice"):
        read(bytes(data))


def test_a_cnst_cut_short_keeps_the_constants_before_the_cut():
    nac = small_file()
    nac.layout = ["MMAP", "OPS", "PERM", "DATA", "ORCH", "CMAP", "CNST"]
    nac.constants.update({cid: Constant(cid, 4, "x" * 10) for cid in (100, 101)})
    data = write(nac)
    got = read(data[:-4], strict=False)                 # the last record's string is cut
    assert any(p.section == "CNST" for p in got.problems)
    assert got.constants[100].value == "x" * 10 and 101 not in got.constants
    assert got.span_at(len(data) - 6) is not None       # the cut record still has its spans


# -- ORCH's constant pool and ARRS: walked, not made -----------------------------------------------
def test_the_orch_pool_is_walked_and_looked_up_without_being_made():
    from nac_engine.format.const_table import pool_values
    from nac_engine.format.model import Orch
    nac = small_file()
    code = bytes.fromhex("100000001400010080000100010162000201040302005f020300fe0101")   # a real MEP program
    nac.orch = Orch(code, [Constant(i, 4, f"s{i}") for i in range(4)] + [Constant(2, 2, 7)])
    data = write(nac)
    got = read(data)
    pool = got.orch.pool
    assert type(pool).__name__ == "PoolTable" and len(pool) == 5
    assert write(got) == data
    text = disassemble(got)
    assert ".pool 2 int64 7" in text and pool._items is None          # dis walked it
    values = pool_values(pool)
    assert values[2] == 7 and values[0] == "s0" and 9 not in values and pool._items is None  # a later id wins
    assert [(c.id, c.value) for c in pool] == [(0, "s0"), (1, "s1"), (2, "s2"), (3, "s3"), (2, 7)]


def test_arrs_entries_are_walked_and_spanned_without_being_made():
    from nac_engine.format.model import NamedArray
    import numpy as np
    nac = small_file()
    nac.header.version = "1.8"
    nac.arrs = [NamedArray("a", 0, (2, 3), _payload=np.arange(6, dtype=np.float32).tobytes()),
                NamedArray("", 0, (), _payload=bytes(4)), NamedArray("bad", 0, (4,), _payload=bytes(8))]
    data = write(nac)
    got = read(data)
    arrs = got.arrs
    assert type(arrs).__name__ == "ArrayTable" and len(arrs) == 3
    assert write(got) == data
    assert ".array a float32 [2, 3] 24" in disassemble(got)
    assert any("array 'bad'" in p.reason for p in verify(got)) and arrs._items is None
    sec = got.spans.find("ARRS")
    leaf = got.span_at(sec.offset + 10)           # the first entry's name (after the tag, count, name length)
    assert (leaf.name, leaf.value, leaf.parent.name) == ("name", "a", "array[0]")
    assert arrs[0].array().tolist() == [[0, 1, 2], [3, 4, 5]] and arrs[2].shape == (4,)
    cut = read(data[:sec.offset + 48], strict=False)    # inside the first entry's data
    assert any(p.section == "ARRS" for p in cut.problems) and len(cut.arrs) == 0
    assert cut.span_at(sec.offset + 10).name == "name"       # the failing entry's spans, as far as it reads
