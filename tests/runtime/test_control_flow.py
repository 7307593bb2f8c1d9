"""<CONTROL_FLOW> executes the structure seed 000 §7.3.1 gives it; what the spec leaves open is
NotSupported naming the tick. Programs are built with the codec and read back."""
import numpy as np
import pytest
import torch

from nac_engine.runtime import NacRuntimeError, NotSupported, Session, run
from nac_engine.runtime.debugger import Debugger
from nac_engine.runtime.session import NotTaken

from .test_session import FLOAT, program
from nac_engine.format.model import Constant

# v1.8 standard ops: 11 nac.add, 13 nac.gt, 14 nac.neg; 32 = aten.sum.default (CMAP)
IF_ELSE = [
    (2, 0, None, None),             # 0 x
    (32, 1, None, (-1,)),           # 1 s = sum(x)
    (13, 2, (1, 1), (-1, 0)),       # 2 p = s > 0.0
    (6, 0, (3, 2, 3), (-1,)),       # 3 if p: [4, 5] else: [6, 7, 8]
    (11, 3, None, (-4, -4)),        # 4   x + x
    (3, 0, (1, 0), (-1,)),          # 5   return it
    (14, 1, None, (-6,)),           # 6   -x
    (14, 1, None, (-1,)),           # 7   -(-x)
    (3, 0, (1, 0), (-2,)),          # 8   return -x
]


@pytest.fixture
def if_else(tmp_path):
    nac = program(tmp_path, IF_ELSE, cmap={32: "aten.sum.default"},
                  perms={1: "T", 2: "Tf", 3: "TT"}, constants=[Constant(1, FLOAT, 0.0)], names={0: "x"})
    yield nac
    nac.close()


def test_true_branch_runs_and_false_branch_is_stepped_over(if_else):
    x = np.array([1.0, 2.0, -0.5], np.float32)
    s = Session(if_else, inputs={"x": x})
    (out,) = s.run()
    np.testing.assert_array_equal(out, x + x)
    assert s.branch_taken == {3: True}


def test_false_branch_runs_when_predicate_is_false(if_else):
    x = np.array([-1.0, -2.0, 0.5], np.float32)
    s = Session(if_else, inputs={"x": x}, keep_results=True)
    (out,) = s.run()
    np.testing.assert_array_equal(out, -x)
    assert isinstance(s.results[4], NotTaken) and s.results[4].control == 3
    assert isinstance(s.results[5], NotTaken)
    assert torch.equal(s.results[6], torch.from_numpy(-x))


def test_debugger_steps_and_steps_back_across_a_branch(if_else):
    x = np.array([-1.0, -2.0, 0.5], np.float32)
    dbg = Debugger(if_else, inputs={"x": x})
    dbg.run_to(3)
    assert dbg.result().value is False
    dbg.step()
    assert dbg.tick == 4 and isinstance(dbg.value(4), NotTaken)
    dbg.continue_()
    np.testing.assert_array_equal(dbg.outputs[0], -x)
    dbg.run_to(5)              # backwards: tick 5 was stepped over, not executed
    assert isinstance(dbg.value(5), NotTaken)
    dbg.continue_()
    np.testing.assert_array_equal(dbg.outputs[0], -x)


def test_nested_branches(tmp_path):
    prog = [
        (2, 0, None, None),             # 0 x (scalar)
        (13, 2, (1, 1), (-1, 0)),       # 1 x > 0
        (6, 0, (3, 4, 2), (-1,)),       # 2 if x > 0:
        (13, 2, (1, 2), (-3, 0)),       # 3    x > 10
        (6, 0, (3, 1, 1), (-1,)),       # 4    if x > 10:
        (3, 0, (1, 0), (-5,)),          # 5       return x
        (3, 0, (1, 0), (-4,)),          # 6    else: return (x > 0)
        (14, 1, None, (-7,)),           # 7 else: -x
        (3, 0, (1, 0), (-1,)),          # 8    return -x
    ]
    nac = program(tmp_path, prog, perms={1: "T", 2: "Tf"},
                  constants=[Constant(1, FLOAT, 0.0), Constant(2, FLOAT, 10.0)], names={0: "x"})
    assert run(nac, inputs={"x": np.float32(20)})[0] == 20
    assert run(nac, inputs={"x": np.float32(5)})[0] == np.True_
    assert run(nac, inputs={"x": np.float32(-3)})[0] == 3
    nac.close()


def test_reading_a_value_from_the_branch_not_taken_is_not_supported(tmp_path):
    prog = [
        (2, 0, None, None),             # 0 x
        (13, 2, (1, 1), (-1, 0)),       # 1 x > 0
        (6, 0, (3, 1, 0), (-1,)),       # 2 if: [3]
        (14, 1, None, (-3,)),           # 3   -x
        (3, 0, (1, 0), (-1,)),          # 4 return the branch's value: no merge rule in the spec
    ]
    nac = program(tmp_path, prog, perms={1: "T", 2: "Tf"}, constants=[Constant(1, FLOAT, 0.0)],
                  names={0: "x"})
    assert run(nac, inputs={"x": np.float32(2)})[0] == -2
    with pytest.raises(NotSupported, match="instruction 4: .*branch not taken at <CONTROL_FLOW> 2") as e:
        run(nac, inputs={"x": np.float32(-2)})
    assert e.value.tick == 4
    nac.close()


def test_subgraph_output_hands_a_branch_value_on(tmp_path):
    prog = [
        (2, 0, None, None),             # 0 x
        (13, 2, (1, 1), (-1, 0)),       # 1 x > 0
        (6, 0, (3, 2, 0), (-1,)),       # 2 if: [3, 4]
        (14, 1, None, (-3,)),           # 3   -x
        (3, 1, (1, 0), (-1,)),          # 4   <OUTPUT B=1> -x  (does not end the run)
        (11, 3, None, (-1, -5)),        # 5 (-x) + x
        (3, 0, (1, 0), (-1,)),          # 6 return
    ]
    nac = program(tmp_path, prog, perms={1: "T", 2: "Tf", 3: "TT"},
                  constants=[Constant(1, FLOAT, 0.0)], names={0: "x"})
    s = Session(nac, inputs={"x": np.float32(3)})
    assert s.run()[0] == 0 and len(s.sub_outputs) == 1
    nac.close()


@pytest.mark.parametrize("c, d, match", [
    ((3, 5, 5), (-1,), "do not fit"),
    ((3, -1, 0), (-1,), "do not fit"),
    ((4, 1, 0), (-1,), "needs C=\\[3, true_len, false_len\\]"),
])
def test_malformed_control_flow_is_not_supported_naming_the_tick(tmp_path, c, d, match):
    prog = [(2, 0, None, None), (6, 0, c, d), (14, 1, None, (-2,)), (3, 0, (1, 0), (-1,))]
    nac = program(tmp_path, prog, perms={1: "T"}, names={0: "x"})
    with pytest.raises(NotSupported, match=f"instruction 1: .*{match}") as e:
        run(nac, inputs={"x": np.float32(1)})
    assert e.value.tick == 1
    nac.close()


def test_predicate_must_be_one_element(tmp_path):
    prog = [(2, 0, None, None), (6, 0, (3, 1, 0), (-1,)), (14, 1, None, (-2,)), (3, 0, (1, 0), (-1,))]
    nac = program(tmp_path, prog, perms={1: "T"}, names={0: "x"})
    with pytest.raises(NacRuntimeError, match="predicate .* 3 elements"):
        run(nac, inputs={"x": np.ones(3, np.float32)})
    nac.close()


def test_overlapping_branches_are_not_supported(tmp_path):
    prog = [
        (2, 0, None, None), (13, 2, (1, 1), (-1, 0)),
        (6, 0, (3, 2, 0), (-1,)),        # 2 branch [3, 4]
        (14, 1, None, (-3,)),            # 3
        (6, 0, (3, 2, 0), (-3,)),        # 4 branch [5, 6]: crosses the end of 2's
        (14, 1, None, (-5,)), (14, 1, None, (-6,)),
        (3, 0, (1, 0), (-1,)),
    ]
    nac = program(tmp_path, prog, perms={1: "T", 2: "Tf"}, constants=[Constant(1, FLOAT, 0.0)],
                  names={0: "x"})
    with pytest.raises(NotSupported, match="instruction 2: .*overlaps"):
        run(nac, inputs={"x": np.float32(1)})
    nac.close()
