"""verify's bulk pass over OPS bytes (format/ops_suspects.py) against judging every instruction as
an object: the same problems, in the same order, on crafted files with every kind of bad
reference, seeded mutants and the corpus; and the flagged set holds every faulty instruction."""
from __future__ import annotations

import numpy as np

from nac_engine import read, write
from nac_engine.format.model import Constant, Instruction, Parameter
from nac_engine.format.ops_suspects import suspect_instructions
from nac_engine.format.verify import _instruction_problems, _semantic
from tests.format.test_decoder_cost import _ops_cases, _plain, crafted
from tests.format.test_regressions import small_file
from tests.isa.ops_mutants import _ops_mutants


def _bad_references() -> bytes:
    nac = small_file()
    nac.params[5] = Parameter(5, "no_tensor")              # internal weights, no tensor in DATA
    nac.constants[20] = Constant(20, 2, 4)
    nac.perms[4] = "Ti"
    base = nac.instructions[2].a
    body = [
        Instruction(2, 2, 1, (1, 1), None),                 # a parameter that is there
        Instruction(3, 2, 1, (1, 9), None),                 # ... that is not
        Instruction(4, 2, 1, (1, 5), None),                 # ... without its tensor
        Instruction(5, 2, 3, (1, 20), None),                # a lifted constant that is there
        Instruction(6, 2, 3, (1, 77), None),                # ... that is not
        Instruction(7, 0, 0, None, None),                   # op id 0
        Instruction(8, base + 1, 4, (1, 20), (-1, 0)),
        Instruction(9, base + 1, 4, (1, -5), (-1, 0)),      # a constant id that CNST lacks
        Instruction(10, base + 1, 3, (2, 3, 300), (-1, 0, 0)),
        Instruction(11, 99, 4, (1, 300), (-1, 0)),          # an unknown op: its C is not judged
        Instruction(12, base + 1, 3, (0,), (-1, -1, -1)),
    ]
    nac.instructions = nac.instructions[:2] + body + [Instruction(13, 3, 0, (1, 0), (-1,))]
    return write(nac)


def _judged(data: bytes) -> tuple:
    nac = read(data, strict=False)
    fast = [(p.section, p.offset, p.reason) for p in _semantic(nac)]
    slow = [(p.section, p.offset, p.reason) for p in _semantic(_plain(nac))]
    return nac, fast, slow


def test_bulk_verify_equals_the_object_walk():
    datas = [_bad_references(), crafted("ops_distinct", 1)] + [d for _, d in _ops_cases()]
    datas += _ops_mutants(_bad_references(), 24, seed=11) + _ops_mutants(crafted("ops_distinct", 1), 12, seed=12)
    for k, data in enumerate(datas):
        _, fast, slow = _judged(data)
        assert fast == slow, k


def test_every_faulty_instruction_is_a_suspect():
    nac = read(_bad_references(), strict=False)
    enc = nac.instructions.encoded()
    suspects = set(suspect_instructions(nac, enc, nac.op_names).tolist())
    faulty = set()
    for j in range(len(nac.instructions)):
        found: list = []
        _instruction_problems(nac, nac.instructions.decode(j), nac.op_names, found)
        if found:
            faulty.add(j)
    assert faulty == {3, 4, 6, 7, 9, 10}
    assert faulty <= suspects
    assert not suspects & {2, 5, 8, 12}        # not every instruction: clean ones are left alone
    reasons = " ".join(r for _, _, r in _judged(_bad_references())[1])
    for why in ("parameter id 9", "'no_tensor' has no tensor", "lifted constant id 77", "op id 0",
                "constant id -5", "constant id 300"):
        assert why in reasons


def test_an_empty_or_const_free_section_has_no_suspects():
    nac = read(crafted("ops", 1), strict=False)
    got = suspect_instructions(nac, nac.instructions.encoded(), nac.op_names)
    assert got.dtype.kind == "i" and np.all(np.diff(got) > 0)
