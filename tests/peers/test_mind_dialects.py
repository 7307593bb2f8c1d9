"""The other MIND text dialects (Python tool, Rust module printer, mic@2), error positions, and
constructs the converter refuses naming their IR line."""
from __future__ import annotations

import numpy as np
import pytest

import nac_engine
from nac_engine.peers import detect
from nac_engine.peers.mind import decode
from nac_engine.peers.mind.canonical import canonical_text
from nac_engine.peers.mind.convert import ConvertError, convert_module
from nac_engine.peers.mind.errors import MindError
from nac_engine.peers.mind.evaluator import evaluate, random_inputs

RUST = b"module {\n  %0 = const.i64 7\n  %1 = const.i64 5\n  %2 = mul %0 %1\n  %3 = sub %2 %0\n  output %3\n}  // next_id = 4\n"
PYTOOL = b"%0 = Input () {name=x} : tensor<f32[2, 4]>\n%1 = Input () {name=y} : tensor<f32[4]>\n" \
         b"%2 = Add (%0, %1) : tensor<f32[2, 4]>\n%3 = Mul (%2, %2) : tensor<f32[2, 4]>\noutputs: %3\n"
MIC2 = b"mic@2\n# residual block\nT0 f32 4 4\nT1 f32 4\na X T0\np W T0\np b T1\nm 0 1\n+ 3 2\nr 4\n+ 5 0\nO 6\n"


def _run_both(mod, seed=0):
    x = random_inputs(mod, seed=seed)
    ref = evaluate(mod, x)
    got = nac_engine.run(convert_module(mod).nac, inputs=x)
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    return x, ref


def test_rust_module_printer():
    f = decode(RUST)
    assert f.problems == [] and f.module.dialect == "module"
    _x, (out,) = _run_both(f.module)
    assert out.dtype == np.int64 and int(out) == 28
    # constant folding collapses the whole module to one constant
    assert canonical_text(f.module) == "%0 = ConstI64(28) : Tensor<i64, []>\noutputs: %0\n"


def test_python_tool_dialect_broadcasts():
    f = decode(PYTOOL)
    assert f.problems == [] and f.module.dialect == "python"
    x, (out,) = _run_both(f.module)
    np.testing.assert_allclose(out, (x["x"] + x["y"]) ** 2, rtol=1e-6)


def test_mic2_residual_block():
    assert detect(MIC2[:64], "block.txt") == "mind"
    f = decode(MIC2)
    assert f.problems == [] and f.module.dialect == "mic@2"
    assert [i.attrs.get("role") for i in f.module.inputs()] == [None, "param", "param"]
    x, (out,) = _run_both(f.module)
    np.testing.assert_allclose(out, np.maximum(x["X"] @ x["W"] + x["b"], 0) + x["X"], rtol=1e-5)


def test_mic2_header_after_comments_is_sniffed():
    data = b"# exported by a tool\n\n" + MIC2
    assert detect(data[:4096], None) == "mind"
    assert decode(data).problems == []


def test_mic2_non_core_op_and_bad_header():
    f = decode(b"mic@2\nT0 f32 4\na X T0\ngelu 0\nO 1\n")
    assert [p.rule for p in f.problems] == ["unknown-op"]
    with pytest.raises(MindError) as e:
        decode(b"mic@3\nT0 f32 4\n", strict=True)
    assert (e.value.line, e.value.column) == (1, 1)


def test_syntax_error_positions_and_all_problems_reported():
    text = (b'%0 = Input() {name: "x"} : Tensor<f32, [2]>\n'
            b'%1 = Relu(%0 : Tensor<f32, [2]>\n'          # unclosed call
            b'%2 = Neg(%0) : Tensor<q9, [2]>\n'           # unknown dtype
            b'%3 = Exp(%0) : Tensor<f32, [2]>\n'
            b'outputs: %3, %1\n')
    f = decode(text)
    got = [(p.line, p.column, p.rule) for p in f.problems]
    assert got == [(2, 14, None), (3, 23, None), (5, 14, "undefined-output")]
    with pytest.raises(MindError) as e:
        decode(text, strict=True)
    assert (e.value.line, e.value.column) == (2, 14)


@pytest.mark.parametrize("line, reason", [
    ('%1 = Slice(%0, [0, 2], [2, 0], [1, -1]) : Tensor<f32, [2, 2]>', "negative Slice steps"),
    ('%1 = Mean(%2, [0], false) : Tensor<i64, [3]>', "integer Mean"),
])
def test_converter_refuses_naming_the_line(line, reason):
    text = ('%0 = Input() {name: "x"} : Tensor<f32, [2, 3]>\n'
            '%2 = Input() {name: "i"} : Tensor<i64, [2, 3]>\n' + line + '\noutputs: %1\n').encode()
    f = decode(text)
    assert f.problems == []
    evaluate(f.module, random_inputs(f.module))          # the oracle itself has an answer
    with pytest.raises(ConvertError) as e:
        convert_module(f.module)
    assert e.value.line == 3 and reason in e.value.reason


def test_huge_dims_verify_but_are_not_materialised():
    f = decode(b'%0 = Input() {name: "x"} : Tensor<f32, [100000, 100000, 100000]>\n'
               b'%1 = Sum(%0, [1], false) : Tensor<f32, [100000, 100000]>\noutputs: %1\n')
    assert f.problems == []
    with pytest.raises(MindError):
        random_inputs(f.module)
