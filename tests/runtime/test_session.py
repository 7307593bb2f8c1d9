"""Session on small programs built with the codec (written and read back, so the bytes are real)."""
import numpy as np
import pytest
import torch

from nac_engine import read, write
from nac_engine.format.model import Constant, Header, InputName, Instruction, NacFile
from nac_engine.runtime import KernelError, MissingInputError, NacRuntimeError, NotSupported, Session, run

FLOAT, STR = 3, 4


def program(tmp_path, instructions, *, cmap=None, perms=None, constants=None, names=None, outputs=1):
    nac = NacFile(header=Header(version="1.8", num_inputs=len(names or ()), num_outputs=outputs))
    nac.cmap = dict(cmap or {})
    nac.perms = dict(perms or {})
    nac.constants = {c.id: c for c in (constants or ())}
    nac.instructions = [Instruction(i, *abcd) for i, abcd in enumerate(instructions)]
    nac.input_names = [InputName(i, n) for i, n in (names or {}).items()]
    path = tmp_path / "p.nac"
    path.write_bytes(write(nac))
    return read(path)


@pytest.fixture
def stateful(tmp_path):
    """y = hardtanh(x + state, -0.5, 0.5) * lifted,  lifted = CNST 2.0 (B=3)."""
    nac = program(tmp_path, [
        (2, 0, None, None),                 # 0 x
        (2, 2, (1, 7), None),               # 1 state 7
        (11, 2, None, (-2, -1)),            # 2 nac.add(x, state)
        (32, 3, (2, 1, 2), (-1, 0, 0)),     # 3 aten.hardtanh.default(t, -0.5, 0.5)
        (2, 3, (1, 3), None),               # 4 lifted constant #3
        (20, 2, None, (-2, -1)),            # 5 nac.mul
        (3, 0, (1, 0), (-1,)),              # 6 output
    ], cmap={32: "aten.hardtanh.default"}, perms={1: "T", 2: "TT", 3: "Tff"},
        constants=[Constant(1, FLOAT, -0.5), Constant(2, FLOAT, 0.5), Constant(3, FLOAT, 2.0)],
        names={0: "x"})
    yield nac
    nac.close()


def test_run_named_input_state_and_stored_lifted_constant(stateful):
    x = np.array([-1.0, 0.1, 2.0], np.float32)
    s = Session(stateful, inputs={"x": x}, states={7: np.array([0.0, 0.2, -3.0], np.float32)},
                keep_results=True)
    out = s.run()
    want = torch.nn.functional.hardtanh(torch.tensor([-1.0, 0.3, -1.0]), -0.5, 0.5) * 2.0
    np.testing.assert_allclose(out[0], want.numpy(), rtol=0, atol=1e-7)
    assert s.outputs is out and s.finished and s.tick == 7
    assert set(s.results) == set(range(7))


def test_state_is_kept_across_runs_of_one_session(stateful):
    x = np.zeros(3, np.float32)
    s = Session(stateful, inputs={"x": x}, states={7: np.full(3, 0.25, np.float32)})
    first = s.run()[0].copy()
    np.testing.assert_allclose(first, 0.5)
    assert torch.equal(s.states[7], torch.full((3,), 0.25))
    s.states[7] = torch.full((3,), -0.1)         # the caller updates state; it persists
    np.testing.assert_allclose(s.run()[0], -0.2, rtol=1e-6)
    np.testing.assert_allclose(s.run()[0], -0.2, rtol=1e-6)


def test_missing_state_is_named(stateful):
    with pytest.raises(MissingInputError, match="state 7"):
        Session(stateful, inputs={"x": np.zeros(3, np.float32)}).run()


def test_positional_feeds_cover_b0_and_b3_in_order(stateful):
    s = Session(stateful, feeds=[np.ones(3, np.float32), np.float32(-1.0)],
                states={7: np.zeros(3, np.float32)})
    assert [(sl.tick, sl.variant) for sl in s.slots] == [(0, 0), (4, 3)]
    np.testing.assert_allclose(s.run()[0], -0.5)     # fed lifted value wins over CNST's 2.0


def test_feeds_are_copied_not_aliased(stateful):
    x = np.zeros(3, np.float32)
    Session(stateful, feeds=[x], states={7: np.zeros(3, np.float32)}).run()
    assert not x.any()


def test_input_errors(stateful):
    with pytest.raises(NacRuntimeError, match="unknown input name.*'y'.*'x'"):
        Session(stateful, inputs={"y": 1})
    with pytest.raises(NacRuntimeError, match="3 feeds given.*2"):
        Session(stateful, feeds=[1, 2, 3])
    with pytest.raises(MissingInputError, match=r"instruction 0 \(<INPUT B=0> user input 'x'") as err:
        Session(stateful, states={7: np.zeros(3)}).run()
    assert [m.tick for m in err.value.missing] == [0]


def test_kernel_errors_name_tick_op_and_arguments(stateful):
    s = Session(stateful, inputs={"x": np.zeros(3, np.float32)}, states={7: np.zeros(4, np.float32)})
    with pytest.raises(KernelError, match=r"instruction 2: nac.add\(Tensor\(3,\) float32, Tensor\(4,\) float32\)"):
        s.run()


@pytest.mark.parametrize("a, b, c, d, what", [
    (6, 0, (3, 1, 1), (-1,), "CONTROL_FLOW.*do not fit"),
    (7, 50, (1, -1), (2,), "CONVERGENCE"),
    (0, 0, None, None, "A=0"),
])
def test_undefined_system_ops_raise_not_supported_naming_the_tick(tmp_path, a, b, c, d, what):
    nac = program(tmp_path, [(2, 0, None, None), (a, b, c, d), (3, 0, (1, 0), (-2,))], names={0: "x"})
    with pytest.raises(NotSupported, match=f"instruction 1: .*{what}") as err:
        Session(nac, inputs={"x": np.zeros(1)}).run()
    assert err.value.tick == 1
    nac.close()


def test_unknown_custom_op_is_not_supported(tmp_path):
    nac = program(tmp_path, [(2, 0, None, None), (32, 1, None, (-1,)), (3, 0, (1, 0), (-1,))],
                  cmap={32: "aten.definitely_not_an_op.default"}, perms={1: "T"}, names={0: "x"})
    with pytest.raises(NotSupported, match="instruction 1: .*definitely_not_an_op"):
        run(nac, inputs={"x": np.zeros(1)})
    nac.close()


def test_v16_tensor_placeholder_string_as_operand_is_not_supported(tmp_path):
    nac = program(tmp_path, [(2, 0, None, None), (11, 2, (1, 1), (-1, 0)), (3, 0, (1, 0), (-1,))],
                  perms={2: "TS"}, constants=[Constant(1, STR, "Tensor_torch.Size([])_torch.int32")],
                  names={0: "x"})
    with pytest.raises(NotSupported, match="instruction 1: .*placeholder"):
        run(nac, inputs={"x": np.zeros(1)})
    nac.close()


def test_stream_without_output_ends_with_no_outputs(tmp_path):
    nac = program(tmp_path, [(2, 0, None, None), (14, 1, None, (-1,))], perms={1: "T"},
                  names={0: "x"}, outputs=0)
    s = Session(nac, inputs={"x": np.ones(2, np.float32)}, keep_results=True)
    assert s.run() == [] and s.finished
    assert torch.equal(s.results[1], -torch.ones(2))
    nac.close()
