"""Shared constants (issue 15 §1): a value stored in another type than its use is coerced
exactly — by signature code, by schema type, by a standard op's definition — the same way in
the interpreter, debugger, shape pass and readable text; an inexact one is refused naming the
tick, the argument and both types."""
import numpy as np
import pytest
import torch

from nac_engine import read, write
from nac_engine.format.model import Constant
from nac_engine.text.asm import assemble
from nac_engine.isa.coerce import InexactCoercion, as_used, exact
from nac_engine.text.disasm import disassemble
from nac_engine.runtime import NotSupported, run
from nac_engine.runtime.debugger import Debugger
from nac_engine.runtime.errors import CoercionError

from .test_corpus_run import REL_TOL, _case, corpus, load_case, rel_error
from .test_session import program

BOOL, INT, FLOAT, STR = 1, 2, 3, 4
X = np.arange(8, dtype=np.float32).reshape(2, 4)


# --------------------------------------------------------------------------- the rule
@pytest.mark.parametrize("value, wanted, expect", [
    (1.0, int, 1), (0.0, int, 0), (-2.0, int, -2), (False, int, 0), (True, int, 1),
    (0, bool, False), (1, bool, True), (1.0, bool, True), (0.0, bool, False),
    (2, float, 2.0), (True, float, 1.0), (7, int, 7), (0.5, float, 0.5), (2 ** 60, float, 2.0 ** 60),
])
def test_exact_conversions(value, wanted, expect):
    got = exact(value, wanted)
    assert got == expect and type(got) is wanted


@pytest.mark.parametrize("value, wanted", [
    (1.5, int), (float("nan"), int), (float("inf"), int), (2, bool), (-1, bool), (0.5, bool),
    (2 ** 60 + 1, float), (10 ** 400, float),
])
def test_inexact_conversions_are_refused(value, wanted):
    with pytest.raises(InexactCoercion) as err:
        exact(value, wanted, "2 (dim)")
    assert type(value).__name__ in str(err.value) and wanted.__name__ in str(err.value)


def test_signature_codes_decide_scalars_only():
    assert as_used(1.0, "A") == 1 and type(as_used(1.0, "A")) is int
    assert as_used(False, "i") == 0 and type(as_used(False, "i")) is int
    assert as_used(1, "b") is True
    assert as_used(1, "f") == 1.0 and type(as_used(1, "f")) is float
    assert as_used((1.0, 2.0), "S") == (1.0, 2.0)          # lists: the schema decides
    assert as_used("cpu", "c") == "cpu" and as_used(None, "i") is None
    assert as_used([1, 2], "A") == [1, 2]                  # our compiler codes dim lists A


# --------------------------------------------------------------------------- interpreter
def _one_op(tmp_path, op, sig, consts, n_refs=1, extra_cmap=None):
    """x → OP(x ×n_refs, consts...)<sig> → output."""
    cmap = {40: op, **(extra_cmap or {})}
    c = (len(consts),) + tuple(range(2, 2 + len(consts)))
    d = tuple([-1] * n_refs) + (0,) * len(consts)
    return program(tmp_path, [
        (2, 0, None, None),
        (40, 1, c, d),
        (3, 0, (1, 0), (-1,)),
    ], cmap=cmap, perms={1: sig},
        constants=[Constant(2 + k, t, v) for k, (t, v) in enumerate(consts)], names={0: "x"})


def test_cat_dim_stored_as_float_is_dim_1(tmp_path):
    with _one_op(tmp_path, "aten.cat.default", "TTA", [(FLOAT, 1.0)], n_refs=2) as nac:
        out = run(nac, inputs={"x": X})
    np.testing.assert_array_equal(out[0], np.concatenate([X, X], axis=1))


def test_cat_dim_coerced_by_schema_when_the_code_says_float(tmp_path):
    # a file whose signature code does not help: the schema's `int dim` decides
    with _one_op(tmp_path, "aten.cat.default", "TTf", [(FLOAT, 1.0)], n_refs=2) as nac:
        out = run(nac, inputs={"x": X})
    np.testing.assert_array_equal(out[0], np.concatenate([X, X], axis=1))


def test_inexact_dim_by_signature_names_tick_argument_and_types(tmp_path):
    with _one_op(tmp_path, "aten.cat.default", "TTA", [(FLOAT, 1.5)], n_refs=2) as nac:
        with pytest.raises(CoercionError) as err:
            run(nac, inputs={"x": X})
    msg = str(err.value)
    assert err.value.tick == 1 and "instruction 1" in msg and "aten.cat.default" in msg
    assert "argument 3" in msg and "float" in msg and "int" in msg and "1.5" in msg


def test_dis_flags_an_inexact_constant_and_still_reencodes(tmp_path):
    with _one_op(tmp_path, "aten.cat.default", "TTA", [(FLOAT, 1.5)], n_refs=2) as nac:
        text = disassemble(nac)
        line = next(ln for ln in text.splitlines() if ln.startswith("v1 ="))
        assert "aten.cat.default(v0, v0, 1.5)<TTA>" in line and "argument 3: 1.5 is not usable as int" in line
        with pytest.raises(CoercionError, match="argument 3 "):      # run counts the same way
            run(nac, inputs={"x": X})
        assert write(assemble(text)) == (tmp_path / "p.nac").read_bytes()


def test_inexact_dim_by_schema_names_tick_argument_and_types(tmp_path):
    with _one_op(tmp_path, "aten.cat.default", "TTf", [(FLOAT, 1.5)], n_refs=2) as nac:
        with pytest.raises(CoercionError) as err:
            run(nac, inputs={"x": X})
    msg = str(err.value)
    assert err.value.tick == 1 and "aten.cat.default" in msg
    assert "argument 3 (dim: int)" in msg and "float 1.5" in msg


def test_transpose_dim_stored_as_false(tmp_path):
    for sig in ("Tii", "Tib"):            # by code, and by the standard op's definition
        sub = tmp_path / sig
        sub.mkdir()
        with _one_op(sub, "nac.transpose", sig, [(INT, 1), (BOOL, False)]) as nac:
            out = run(nac, inputs={"x": X})
        np.testing.assert_array_equal(out[0], X.T)


def test_transpose_inexact_dim_refused(tmp_path):
    with _one_op(tmp_path, "nac.transpose", "Tif", [(INT, 1), (FLOAT, 0.5)]) as nac:
        with pytest.raises(CoercionError) as err:
            run(nac, inputs={"x": X})
    assert "instruction 1" in str(err.value) and "nac.transpose" in str(err.value)
    assert "float 0.5" in str(err.value) and "int" in str(err.value)


def test_keepdim_stored_as_int_and_float(tmp_path):
    for i, (t, v, code) in enumerate([(INT, 1, "i"), (FLOAT, 1.0, "f"), (FLOAT, 1.0, "b")]):
        sub = tmp_path / str(i)
        sub.mkdir()
        with _one_op(sub, "aten.sum.dim_IntList", "TS" + code, [(5, (1,)), (t, v)]) as nac:
            out = run(nac, inputs={"x": X})
        np.testing.assert_array_equal(out[0], X.sum(axis=1, keepdims=True))


def test_arange_pin_memory_stored_as_int(tmp_path):
    # nac.arange(0, 8, 'cpu', 0): 0 where `pin_memory: bool` is meant
    nac = program(tmp_path, [
        (19, 1, (4, 2, 3, 4, 2), (0, 0, 0, 0)),
        (3, 0, (1, 0), (-1,)),
    ], perms={1: "iici"}, constants=[Constant(2, INT, 0), Constant(3, INT, 8), Constant(4, STR, "cpu")])
    with nac:
        out = run(nac)
    np.testing.assert_array_equal(out[0], np.arange(8))


def test_getitem_index_stored_as_float(tmp_path):
    nac = program(tmp_path, [
        (2, 0, None, None),
        (40, 2, (1, 2), (-1, 0)),            # aten.max.dim(x, 1) -> (values, indices)
        (41, 3, (1, 3), (-1, 0)),            # getitem(·, 1.0)
        (3, 0, (1, 0), (-1,)),
    ], cmap={40: "aten.max.dim", 41: "getitem"}, perms={2: "Ti", 3: "Tf"},
        constants=[Constant(2, INT, 1), Constant(3, FLOAT, 1.0)], names={0: "x"})
    with nac:
        out = run(nac, inputs={"x": X})
    np.testing.assert_array_equal(out[0], torch.from_numpy(X).max(dim=1).indices.numpy())


def test_float_code_keeps_an_int_stored_scalar_a_float(tmp_path):
    # `x + 1.0` on an int tensor stored as int 1 (met first): the code says float, so the
    # result is float as in eager
    nac = program(tmp_path, [
        (2, 0, None, None),
        (11, 1, (1, 2), (-1, 0)),
        (3, 0, (1, 0), (-1,)),
    ], perms={1: "Tf"}, constants=[Constant(2, INT, 1)], names={0: "x"})
    with nac:
        out = run(nac, inputs={"x": np.arange(3, dtype=np.int64)})
    assert out[0].dtype == np.float32
    np.testing.assert_array_equal(out[0], np.arange(3) + 1.0)


# --------------------------------------------------------------------------- corpus cases
SHARED_CONSTANT_CASES = ["consts_mixed", "consts_mixed__torch2.13", "consts_mixed__v1.6",
                         "transpose_kw", "transpose_kw__torch2.13", "transpose_kw__v1.6",
                         "arange_positions__v1.6", "split_getitem"]


@corpus
@pytest.mark.parametrize("name", SHARED_CONSTANT_CASES)
def test_debugger_steps_shared_constant_cases_to_the_expected_output(name):
    path, _, feeds, expected = load_case(_case(name))
    dbg = Debugger(str(path), feeds=feeds)
    while not dbg.finished:
        dbg.step()
    for got, want in zip(dbg.outputs, expected):
        assert rel_error(got, want) <= REL_TOL
    dbg.session.close()


@corpus
def test_shape_pass_sees_dims_as_the_op_uses_them():
    from nac_engine.runtime.shapes import program_shapes
    path, _, feeds, expected = load_case(_case("consts_mixed"))
    with read(path) as nac:
        prog = program_shapes(nac, feeds=[f for f in feeds])
        cat = prog.instructions[8]
        assert cat.op == "aten.cat.default"
        assert cat.args[2] == ("c", 1) and type(cat.args[2][1]) is int
        assert cat.outputs[0].shape == (2, 8)
        assert tuple(prog.instructions[21].outputs[0].shape) == expected[0].shape


@corpus
def test_dis_shows_the_used_value_with_the_stored_form_and_reencodes_exactly(tmp_path):
    path, *_ = load_case(_case("consts_mixed"))
    with read(path) as nac:
        text = disassemble(nac)
    line = next(ln for ln in text.splitlines() if ln.startswith("v8 ="))
    assert line.startswith("v8 = aten.cat.default(v4, v7, 1)<TTA>") and "stored as 1.0" in line
    t13 = next(ln for ln in text.splitlines() if ln.startswith("v13 ="))
    assert "nac.transpose(v12, 0, 1)<Tii>" in t13
    assert write(assemble(text, weights=str(path))) == path.read_bytes()


@corpus
def test_dis_of_false_dims_reencodes_exactly():
    path, *_ = load_case(_case("transpose_kw__torch2.13"))
    with read(path) as nac:
        text = disassemble(nac)
    assert "nac.transpose(v3, 1, 0)<Tii>   ; argument 3 stored as False" in text
    assert write(assemble(text, weights=str(path))) == path.read_bytes()


@corpus
def test_v16_none_node_keeps_its_not_supported_naming_the_tick(tmp_path):
    # A=0 (<NONE>) stands for a value the v1.6 writer could not encode (a folded constant)
    path, _, feeds, _ = load_case(_case("cnn__v1.6"))
    with read(path) as nac:
        ins = list(nac.instructions)
        victim = next(i for i in ins if i.a >= 10)
        ins[victim.index] = type(victim)(victim.index, 0, 0, None, None)
        nac.instructions = ins
        out = tmp_path / "none.nac"
        out.write_bytes(write(nac))
    with pytest.raises(NotSupported) as err:
        run(out, feeds=feeds)
    assert err.value.tick == victim.index
    assert f"instruction {victim.index}" in str(err.value) and "<NONE>" in str(err.value)
