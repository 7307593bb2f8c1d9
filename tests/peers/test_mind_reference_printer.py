"""What the reference compiler's IR printer (``mindc --emit-ir``) writes, through the command line
(issue 22 §2): one ``output`` line per function result, ``const.tensor DTYPE ["d0", …] fill=V``,
quoted reshape dims, ``expand_dims %x axis=K``, a constant listed as an output, and files the
converter cannot take refused as one error naming the IR line (never "internal error")."""
from __future__ import annotations

import numpy as np
import pytest

from nac_engine.cli import main
from nac_engine.peers.mind import decode
from nac_engine.peers.mind.canonical import canonical_text
from nac_engine.peers.mind.evaluator import evaluate

# the shape of a gradient function's printout: a loss and two gradients, each on its own output line
MULTI_OUTPUT = b"""module {
  %0 = const.tensor F32 ["2", "3"] fill=1.5
  %1 = reshape %0 ["6"]
  %2 = expand_dims %1 axis=0
  %3 = const.i64 7
  %4 = const.i64 5
  %5 = mul %3 %4
  output %2
  output %5
  output %4
}  // next_id = 6
"""


def _write(tmp_path, name: str, text: bytes):
    path = tmp_path / name
    path.write_bytes(text)
    return str(path)


def test_every_output_line_is_an_output_and_every_form_parses(tmp_path, capsys):
    path = _write(tmp_path, "grad.ir", MULTI_OUTPUT)
    assert main(["verify", path]) == 0, capsys.readouterr()
    capsys.readouterr()
    f = decode(MULTI_OUTPUT)
    assert f.problems == [] and f.module.outputs == [2, 5, 4]
    fill, loss, seven_times_five = evaluate(f.module, {})
    np.testing.assert_array_equal(fill, np.full((1, 6), 1.5, np.float32))
    assert int(loss) == 35 and int(seven_times_five) == 5
    # nac convert keeps all three outputs, and the converted file computes them
    out = str(tmp_path / "grad.nac")
    assert main(["convert", path, "-o", out]) == 0
    capsys.readouterr()
    assert main(["run", out]) == 0
    printed = capsys.readouterr().out
    assert "output 0: float32[1, 6]  min 1.5 max 1.5" in printed
    assert "output 1: int64[]  min 35 max 35" in printed
    assert "output 2: int64[]  min 5 max 5" in printed     # a constant output is not pruned


def test_a_filled_constant_is_never_expanded_and_prints_back_the_same():
    # 10^10 elements from one line: kept as a fill, not as ten billion list items
    f = decode(b'module {\n  %0 = const.tensor F32 ["100000", "100000"] fill=0.5\n  output %0\n}\n')
    assert f.problems == []
    text = canonical_text(f.module)
    assert "fill=0.5" in text and len(text) < 200
    again = decode(text.encode())
    assert again.problems == [] and canonical_text(again.module) == text


@pytest.mark.parametrize("line,why", [
    (b'%0 = const.tensor I8 ["2"] fill=300', "not a valid i8"),
    (b'%0 = const.tensor F32 ["N"] fill=1', "not static"),
    (b'%0 = const.tensor F32 ["2"] fill=true', "fill must be a number"),
    (b'%0 = const.tensor Q9 ["2"] fill=1', "needs a dtype"),
])
def test_bad_filled_constants_are_refused_at_their_line(line, why):
    f = decode(b"module {\n  " + line + b"\n  output %0\n}\n")
    assert [p.line for p in f.problems] == [2] and why in f.problems[0].reason


@pytest.mark.parametrize("text,where,why", [
    # a constant the converter would have to write whole: 40 GB
    (b'module {\n  %0 = const.tensor F32 ["100000", "100000"] fill=0.5\n  output %0\n}\n', " 2:",
     "more than the 1,073,741,824"),
    # a dimension NAC cannot store (u32): verify calls it clean, convert names the line
    (b'%0 = Input() {name: "x"} : Tensor<f32, [99999999999, 2]>\n%1 = Relu(%0) : Tensor<f32, [99999999999, 2]>\n'
     b"outputs: %1\n", " 1:", "above 4,294,967,295"),
    # an input too large for the input signature
    (b'%0 = Input() {name: "x"} : Tensor<f32, [100000, 100000, 1000]>\n'
     b'%1 = Relu(%0) : Tensor<f32, [100000, 100000, 1000]>\noutputs: %1\n', " 1:", "input signature"),
])
def test_what_convert_cannot_take_is_one_error_at_its_line(tmp_path, capsys, text, where, why):
    path = _write(tmp_path, "big.ir", text)
    assert main(["convert", path, "-o", str(tmp_path / "big.nac")]) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and where in err and why in err, err


def test_a_module_too_long_for_nac_names_its_outputs_line(tmp_path, capsys):
    n = 65_600      # more values than a NAC program has ticks (u16)
    lines = [b'%0 = Input() {name: "x"} : Tensor<f32, [2]>']
    lines += [b"%%%d = Relu(%%%d) : Tensor<f32, [2]>" % (i, i - 1) for i in range(1, n)]
    lines.append(b"outputs: %%%d" % (n - 1))
    path = _write(tmp_path, "long.ir", b"\n".join(lines) + b"\n")
    assert main(["convert", path, "-o", str(tmp_path / "long.nac")]) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and f" {n + 1}:" in err and "at most 65536" in err, err
