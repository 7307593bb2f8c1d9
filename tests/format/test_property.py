"""Property tests: random programs built from the model classes survive write → read.

``read(write(x))`` equals ``x`` field by field (header, instructions' A/B/C/D, constants,
signatures, CMAP, parameter metadata and raw bytes, input names, MMAP, optional sections)
and ``write(read(write(x))) == write(x)``. Strategies: ``tests/strategies.py``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nac_engine import NacEncodeError, NacFormatError, read, verify, write
from nac_engine.format import layout as L
from nac_engine.format.model import Orch
from tests.strategies import nac_files, written_sections

PROPERTY = settings(max_examples=200, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# --------------------------------------------------------------------------- comparison
def _ins(instrs):
    return [(i.index, i.a, i.b, i.c, i.d) for i in instrs]


def _consts(consts):
    return [(c.id, c.type, c.value, c.length_field) for c in consts]


def _bits(arr):
    return None if arr is None else np.asarray(arr, dtype="<f4").tobytes()


def _meta(m):
    if m is None:
        return None
    return (m.dtype, tuple(m.shape), m.quant, m.scale_bits, m.axis, _bits(m.scales), m.block_size,
            None if m.original_shape is None else tuple(m.original_shape), m.extra)


def _payload(nac, p) -> bytes:
    if p._payload is not None:
        return bytes(p._payload)
    return bytes(nac._buf[p.data_offset:p.data_offset + p.data_length])


def assert_same_file(x, y, version=None) -> None:
    """``y`` (decoded) carries everything ``x`` (built) said, field by field."""
    version = version or x.header.version
    hx, hy = x.header, y.header
    assert hy.version == version
    assert (hy.quant_method, hy.weights_internal, hy.num_inputs, hy.num_outputs, hy.reserved, hy.d_model) == \
        (hx.quant_method, hx.weights_internal, hx.num_inputs, hx.num_outputs, hx.reserved, hx.d_model)
    if version == "1.6":
        assert hy.trng_flag is False
        if version == hx.version:
            assert hy.padding == hx.padding
    else:
        assert hy.trng_flag == (x.trng is not None)

    assert _ins(y.instructions) == _ins(x.instructions)
    assert _consts(y.constants.values()) == _consts(x.constants.values())
    assert list(y.perms.items()) == list(x.perms.items())
    if version == x.header.version:
        assert list(y.cmap.items()) == list(x.cmap.items())
    assert [(p.id, p.name) for p in y.params.values()] == [(p.id, p.name) for p in x.params.values()]
    for p in x.params.values():
        q = y.params[p.id]
        assert _meta(q.meta) == _meta(p.meta)
        if p.meta is not None:
            assert _payload(y, q) == _payload(x, p)
            assert q.data_length == len(_payload(x, p))
    if hx.weights_internal:
        expect = x.tensor_order or [pid for pid, p in x.params.items() if p.meta is not None]
        assert y.tensor_order == expect
    else:
        assert y.tensor_order == []
    assert [(n.index, n.name) for n in y.input_names] == [(n.index, n.name) for n in x.input_names]
    assert [(r.tick, [(c.action, c.target) for c in r.commands]) for r in y.mmap] == \
        [(r.tick, [(c.action, c.target) for c in r.commands]) for r in x.mmap]

    sections = written_sections(x, version)
    assert (y.proc is None) == ("PROC" not in sections)
    if x.proc is not None:
        assert y.proc.manifest == x.proc.manifest
    if "ORCH" in sections:
        orch = x.orch or Orch()
        assert y.orch.bytecode == orch.bytecode
        assert _consts(y.orch.pool) == _consts(orch.pool)
    else:
        assert y.orch is None
    if "RSRC" in sections:
        assert [(r.name, r.data) for r in y.rsrc] == [(r.name, r.data) for r in (x.rsrc or [])]
    else:
        assert y.rsrc is None
    if "ARRS" in sections:
        assert [(a.name, a.dtype, tuple(a.shape), a.data) for a in y.arrs] == \
            [(a.name, a.dtype, tuple(a.shape), a.data) for a in (x.arrs or [])]
    else:
        assert y.arrs is None
    if "TRNG" in sections:
        assert _ins(y.trng) == _ins(x.trng)
    else:
        assert y.trng is None
    assert y.layout == sections

    if version == x.header.version:
        assert y.trailing == x.trailing


def _tiles(nac, size) -> bool:
    pos = 0
    for leaf in nac.spans.leaves():
        if leaf.offset != pos:
            return False
        pos = leaf.end
    return pos == size


# --------------------------------------------------------------------------- properties
@PROPERTY
@given(nac_files(valid=True))
def test_roundtrip_valid_programs(x):
    data = write(x)
    y = read(data)
    assert y.problems == []
    assert_same_file(x, y)
    assert write(y) == data
    assert _tiles(y, len(data))
    problems = verify(data)
    if x.header.weights_internal or not x.params:
        assert problems == []
    else:   # from bytes, external weights cannot be located; that is the only complaint
        assert [p.section for p in problems] == ["DATA"] and "external" in problems[0].reason


@PROPERTY
@given(nac_files(valid=False))
def test_roundtrip_any_decodable_encoding(x):
    data = write(x)
    y = read(data)                      # strict: every generated encoding is decodable
    assert_same_file(x, y)
    assert write(y) == data
    for p in verify(data):
        assert isinstance(p, NacFormatError) and 0 <= p.offset <= len(data) and p.reason


@PROPERTY
@given(nac_files(valid=True), st.sampled_from(["1.6", "1.8"]))
def test_version_conversion_keeps_every_field(x, target):
    if target == "1.6" and (x.trng or x.arrs):
        with pytest.raises(NacEncodeError):
            write(x, version=target)
        return
    if x.header.quant_method > L.LAYOUTS[target].quant_mask:
        with pytest.raises(NacEncodeError):
            write(x, version=target)
        return
    src = read(write(x))
    data = write(src, version=target)
    y = read(data)
    assert_same_file(x, y, version=target)
    for ins in y.instructions:                       # each op keeps its meaning
        assert y.instruction_name(ins) == src.instruction_name(ins)
    back_bytes = write(y, version=x.header.version)
    if not x.layout:              # a converted file is laid out in the default order
        assert back_bytes == write(x)
    back = read(back_bytes)
    assert _ins(back.instructions) == _ins(x.instructions)
    for ins in back.instructions:
        assert back.instruction_name(ins) == src.instruction_name(ins)


@PROPERTY
@given(nac_files(valid=True), st.data())
def test_span_at_finds_every_instruction_field(x, data):
    blob = write(x)
    y = read(blob)
    for ins in y.instructions:
        off = data.draw(st.integers(ins.offset, ins.offset + ins.nbytes - 1), label=f"offset in {ins.index}")
        sp = y.span_at(off)
        assert sp.is_leaf and sp.offset <= off < sp.end
        assert sp.path.startswith(f"OPS/instr[{ins.index}]/")


@PROPERTY
@given(nac_files(valid=True), st.data())
def test_truncated_valid_programs_are_rejected(x, data):
    blob = write(x)
    cut = data.draw(st.integers(0, len(blob) - 1), label="cut")
    with pytest.raises(NacFormatError) as info:
        read(blob[:cut])
    assert 0 <= info.value.offset <= cut and info.value.reason
    lenient = read(blob[:cut], strict=False)
    assert lenient.problems
