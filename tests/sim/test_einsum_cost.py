"""``aten.einsum`` is costed as the contraction it is (issue 15 §1), and an op costed by the
fallback is listed in ``nac sim``'s text and JSON output."""
import json

import numpy as np
import pytest
import torch

from nac_engine.cli import main
from nac_engine.format.model import Constant
from nac_engine.sim import load_hardware
from nac_engine.sim.costs import Gemm, gemm_cycles, instruction_cost
from nac_engine.sim.einsum_cost import einsum_gemms, parse_equation
from nac_engine.runtime.shapes import InstrInfo, TensorInfo
from tests.runtime.test_session import program

T = lambda *shape: ("t", TensorInfo(tuple(shape), "float32"))  # noqa: E731


def _einsum(eq, *shapes, out):
    return InstrInfo(0, "aten.einsum.default", "op", (("c", eq),) + tuple(T(*s) for s in shapes),
                     (TensorInfo(tuple(out), "float32"),))


def _macs(eq, *shapes):
    """Multiply count of a pairwise contraction, from the shapes alone."""
    terms, out = parse_equation(eq, [len(s) for s in shapes])
    size = {ch: n for t, s in zip(terms, shapes) for ch, n in zip(t, s)}
    letters = set("".join(terms))
    return int(np.prod([size[ch] for ch in letters]))


@pytest.mark.parametrize("eq, a, b", [
    ("bhid,bhjd->bhij", (2, 3, 5, 8), (2, 3, 7, 8)),        # attention scores (MaxViT)
    ("bhij,bhjd->bhid", (2, 3, 5, 7), (2, 3, 7, 8)),        # attention output
    ("ij,jk->ik", (4, 5), (5, 6)),
    ("bij,jk", (3, 4, 5), (5, 6)),                          # implicit output
    ("...ij,...jk->...ik", (2, 3, 4, 5), (2, 3, 5, 6)),
])
def test_two_operand_einsum_is_one_gemm_with_the_einsum_macs(eq, a, b):
    gs = einsum_gemms(eq, [a, b])
    assert len(gs) == 1 and gs[0].macs == _macs(eq, a, b)
    out = torch.einsum(eq, torch.zeros(a), torch.zeros(b)).shape
    hw = load_hardware("edge-32x32")
    cost = instruction_cost(_einsum(eq, a, b, out=out), hw)
    assert (cost.op_class, cost.unit, cost.known) == ("gemm", "systolic", True)
    assert cost.macs == _macs(eq, a, b)
    assert cost.cycles == gemm_cycles(gs[0], hw)[0]      # no softmax added (that is SDPA's)


def test_attention_einsum_costs_what_the_equivalent_matmul_costs():
    hw = load_hardware("edge-32x32")
    e = instruction_cost(_einsum("bhid,bhjd->bhij", (2, 3, 5, 8), (2, 3, 7, 8), out=(2, 3, 5, 7)), hw)
    mm = instruction_cost(InstrInfo(0, "aten.matmul.default", "op", (T(2, 3, 5, 8), T(2, 3, 8, 7)),
                                    (TensorInfo((2, 3, 5, 7), "float32"),)), hw)
    assert (e.cycles, e.macs) == (mm.cycles, mm.macs)


def test_three_operands_contract_left_to_right():
    gs = einsum_gemms("ij,jk,kl->il", [(4, 5), (5, 6), (6, 7)])
    assert gs == [Gemm(4, 5, 6, 1), Gemm(4, 6, 7, 1)]


def test_one_operand_is_a_reduction_and_bad_shapes_fall_back():
    hw = load_hardware("edge-32x32")
    c = instruction_cost(_einsum("bij->b", (2, 3, 4), out=(2,)), hw)
    assert (c.op_class, c.known) == ("reduction", True)
    assert einsum_gemms("ij,jk->ik", [(4, 5)]) == []
    bad = instruction_cost(_einsum("ijk,jk->i", (4, 5), (5, 6), out=(4,)), hw)
    assert bad.known is False


def test_nac_sim_lists_fallback_ops_not_einsum(tmp_path, capsys):
    # x → einsum("bij,bkj->bik", x, x) → digamma (no cost model) → output
    nac = program(tmp_path, [
        (2, 0, None, None),
        (40, 1, (1, 2), (0, -1, -1)),
        (41, 2, None, (-1,)),
        (3, 0, (1, 0), (-1,)),
    ], cmap={40: "aten.einsum.default", 41: "aten.digamma.default"}, perms={1: "sTT", 2: "T"},
        constants=[Constant(2, 4, "bij,bkj->bik")], names={0: "x"})
    nac.close()
    path = str(tmp_path / "p.nac")
    assert main(["sim", path, "--input", "x=2x3x4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["unknown_ops"] == {"aten.digamma.default": 1}
    einsum = next(r for r in d["instructions"] if r["op"] == "aten.einsum.default")
    assert einsum["op_class"] == "gemm" and einsum["macs"] == 2 * 3 * 3 * 4
    assert main(["sim", path, "--input", "x=2x3x4"]) == 0
    text = capsys.readouterr().out
    assert "costed by a fallback" in text and "aten.digamma.default ×1" in text
    assert "einsum" not in text.split("costed by a fallback")[1]
