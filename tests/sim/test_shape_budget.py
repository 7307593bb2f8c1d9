"""Shape propagation on hostile files: ops with a meta kernel stay on meta, an op without one is
computed alone on the CPU under a byte budget, and absurd sizes are errors naming the tick.

The first program is the reviewer's reproduction (hostile_alloc2): ``nonzero`` (no meta
kernel) next to ``ones([23000, 23000])`` (2.1 GB if it ever ran for real)."""
import resource

import numpy as np
import pytest

from nac_engine.cli import main
from nac_engine.format import layout as L
from nac_engine.format import write
from nac_engine.format.model import Constant, Header, InputName, Instruction, NacFile
from nac_engine.sim import ShapeBudgetError, prepare, simulate
from nac_engine.runtime.shapes import DEFAULT_CPU_BUDGET, TensorInfo, parse_size
from nac_engine.sim.topology import _Builder

X = np.array([0.0, 1.0, 2.0, 0.0], dtype=np.float32)


def hostile_alloc(side: int = 23000) -> NacFile:
    """input x · nonzero(x) · ones([side, side]) · <OUTPUT> of both, as the review built it."""
    nac = NacFile(Header(version="1.8", num_inputs=1, num_outputs=2))
    nac.cmap = {32: "aten.nonzero.default", 33: "aten.ones.default"}
    nac.perms = {0: "", 1: "T", 2: "S"}
    nac.constants = {2: Constant(2, L.CONST_LIST_I32, (side, side))}
    nac.instructions = [Instruction(0, 2, 0, None, None), Instruction(1, 32, 1, None, (-1,)),
                        Instruction(2, 33, 2, (1, 2), (0,)), Instruction(3, 3, 0, (2, 0, 0), (-2, -1))]
    nac.input_names = [InputName(0, "x")]
    return nac


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_only_the_op_without_a_meta_kernel_runs_on_the_cpu():
    before = _rss_mib()
    prog = prepare(hostile_alloc(), inputs={"x": X})
    # the 2.1 GB ones() never materialised: the process's peak grew by far less than that
    assert _rss_mib() - before < 512
    assert prog.instructions[2].outputs == (TensorInfo((23000, 23000), "float32"),)
    assert prog.instructions[1].outputs == (TensorInfo((2, 1), "int64"),)    # nonzero's real result
    assert prog.shape_source == "mixed"
    assert prog.cpu_ticks == [0, 1]          # x (read by nonzero) and nonzero itself
    assert any("tick 1 (aten.nonzero.default)" in n for n in prog.notes)


def test_the_meta_run_goes_on_after_a_cpu_op():
    b = _Builder(with_data=False)
    x = b.input("x")
    n = b.op("aten.nonzero.default", (x,))
    big = b.op("aten.ones.default", [1 << 14, 1 << 14])            # 1 GiB on the CPU
    y = b.op("aten.mul.Tensor", (n,), (n,))
    s = b.op("aten.sum.default", (big,))
    b.op("aten.add.Tensor", (y,), (s,))
    nac = b.output(len(b.ins) - 1)
    prog = prepare(nac, inputs={"x": X})
    assert prog.cpu_ticks == [x, n]
    assert prog.instructions[y].outputs == (TensorInfo((2, 1), "int64"),)
    assert prog.instructions[big].outputs == (TensorInfo((1 << 14, 1 << 14), "float32"),)


def _nonzero_of_ones(side: int) -> NacFile:
    b = _Builder(with_data=False)
    b.input("x")
    ones = b.op("aten.ones.default", [side, side])
    b.op("aten.nonzero.default", (ones,))
    return b.output(len(b.ins) - 1)


def test_values_a_cpu_op_reads_are_computed_within_the_budget():
    prog = prepare(_nonzero_of_ones(64), inputs={"x": X})
    assert prog.cpu_ticks == [1, 2]
    assert prog.instructions[2].outputs == (TensorInfo((64 * 64, 2), "int64"),)
    with pytest.raises(ShapeBudgetError) as e:
        prepare(_nonzero_of_ones(1024), inputs={"x": X}, cpu_budget=1 << 20)
    msg = str(e.value)
    # names the op that needed real values, the value that would not fit, and the sizes
    assert "tick 2 (aten.nonzero.default)" in msg and "tick 1 (aten.ones.default" in msg
    assert "4,194,304 bytes" in msg and "1,048,576" in msg and "\n" not in msg
    assert (e.value.tick, e.value.op) == (1, "aten.ones.default")


def test_cpu_budget_zero_forbids_any_real_computation():
    with pytest.raises(ShapeBudgetError, match="tick 0"):
        prepare(hostile_alloc(4), inputs={"x": X}, cpu_budget=0)


def test_absurd_meta_shapes_are_errors():
    b = _Builder(with_data=False)
    b.input("x")
    b.op("aten.ones.default", [1 << 21, 1 << 21])               # 2**42 elements
    nac = b.output(len(b.ins) - 1)
    with pytest.raises(ShapeBudgetError) as e:
        prepare(nac, inputs={"x": X})
    assert "tick 1 (aten.ones.default)" in str(e.value) and "4,398,046,511,104 elements" in str(e.value)
    with pytest.raises(ValueError, match="elements"):
        prepare(nac, inputs={"x": "1048576x1048576x2"})     # an input spec of 2**41 elements
    b = _Builder(with_data=False)
    b.input("x")
    b.param("huge", (1 << 21, 1 << 21))                      # a TensorMeta claiming 2**42 elements
    nac = b.output(len(b.ins) - 1)
    with pytest.raises(ShapeBudgetError, match=r"tick 1 \(param 'huge'\)"):
        prepare(nac, inputs={"x": X})


def _branch_on_sum_of_ones(side: int) -> NacFile:
    """x · ones([side, side]) · sum · <CONTROL_FLOW> on the sum · a branch each · <OUTPUT>."""
    nac = NacFile(Header(version="1.8", num_inputs=1, num_outputs=1))
    nac.cmap = {32: "aten.ones.default", 33: "aten.sum.default", 34: "aten.neg.default"}
    nac.perms = {1: "T", 2: "S"}
    nac.constants = {2: Constant(2, L.CONST_LIST_I32, (side, side))}
    rows = [(2, 0, None, None), (32, 2, (1, 2), (0,)), (33, 1, None, (-1,)), (6, 0, (3, 2, 2), (-1,)),
            (34, 1, None, (-3,)), (3, 1, (1, 0), (-1,)),     # true: -ones, handed on
            (34, 1, None, (-5,)), (3, 1, (1, 0), (-1,)),     # false: the same
            (3, 0, (1, 0), (-3,))]
    nac.instructions = [Instruction(i, *r) for i, r in enumerate(rows)]
    nac.input_names = [InputName(0, "x")]
    return nac


def test_a_branch_predicate_is_computed_within_the_budget():
    prog = prepare(_branch_on_sum_of_ones(8), inputs={"x": X})
    assert prog.cpu_ticks == [1, 2]           # only what the predicate needs
    assert [x.kind for x in prog.instructions][4:] == ["op", "subreturn", "skipped", "skipped", "output"]
    assert any("<CONTROL_FLOW>" in n and "CPU" in n for n in prog.notes)
    with pytest.raises(ShapeBudgetError) as e:
        prepare(_branch_on_sum_of_ones(1024), inputs={"x": X}, cpu_budget="1M")
    assert "tick 3 (<CONTROL_FLOW>)" in str(e.value) and "tick 1 (aten.ones.default" in str(e.value)


def test_simulate_takes_the_budget():
    r = simulate(hostile_alloc(), "edge-32x32", inputs={"x": X})
    assert r.shape_source == "mixed" and r.total_cycles > 0
    with pytest.raises(ShapeBudgetError):
        simulate(_nonzero_of_ones(1024), "edge-32x32", inputs={"x": X}, cpu_budget=1 << 20)


def test_parse_size():
    assert parse_size("256M") == parse_size("256MiB") == 256 << 20 == DEFAULT_CPU_BUDGET
    assert parse_size("1G") == 1 << 30 and parse_size("4096") == 4096 and parse_size("0") == 0
    assert parse_size(123) == 123
    for bad in ("-1", "1T", "lots", "1.5M", -3, True):
        with pytest.raises(ValueError):
            parse_size(bad)


@pytest.mark.parametrize("make,argv,needles", [
    (lambda: _nonzero_of_ones(1024), ["--cpu-budget", "1M"], ["tick 2 (aten.nonzero.default)", "--cpu-budget"]),
    (lambda: hostile_alloc(1 << 21), [], ["tick 2 (aten.ones.default)", "elements"]),
    (lambda: hostile_alloc(4), ["--cpu-budget", "lots"], ["--cpu-budget"]),
])
def test_cli_errors_are_one_line(tmp_path, capsys, make, argv, needles):
    path = tmp_path / "hostile.nac"
    write(make(), str(path))
    assert main(["sim", str(path), "--input", "x=4"] + argv) == 2
    err = capsys.readouterr().err
    assert all(n in err for n in needles), err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_runs_the_reviewed_file(tmp_path, capsys):
    path = tmp_path / "hostile_alloc2.nac"
    write(hostile_alloc(), str(path))
    before = _rss_mib()
    assert main(["sim", str(path), "--input", "x=4", "--json"]) == 0
    assert '"shape_source": "mixed"' in capsys.readouterr().out
    assert _rss_mib() - before < 512
