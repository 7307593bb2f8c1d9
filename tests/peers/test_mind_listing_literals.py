"""The MIND listing of a module with problems prints every literal as written: calls, ranges and
references inside an argument the checks refused (fuzzing found ``<...Call object at 0x...>``,
which also changed from run to run)."""
from __future__ import annotations

from nac_engine.peers.mind import decode as decode_mind


def test_calls_ranges_and_nested_literals_print_as_written():
    src = (b'%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>\n'
           b'%1 = Foo(%0, Bar(1, 2.5, [Baz()]), [1:3], [:2:1], [4:], (1, true)) : Tensor<f32, [2, 3]>\n'
           b'outputs: %1\n')
    f = decode_mind(src)
    assert f.problems                     # Foo is not a Core v1 instruction
    text = f.disassemble()
    assert " object at 0x" not in text
    assert "Foo(%0, Bar(1, 2.5, [Baz()]), [1:3], [:2:1], [4:], [1, true])" in text
    assert text == decode_mind(src).disassemble()
