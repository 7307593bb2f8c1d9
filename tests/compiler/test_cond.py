"""``torch.cond`` compiles to ``<CONTROL_FLOW>`` (issue 15 §1): both branches in the file, the code
after the cond in each block, and the interpreter's result matches eager for either predicate."""
from __future__ import annotations


import torch

import nac_engine
from nac_engine.compiler import compile_model
from nac_engine.compiler.external import write_compiled
from nac_engine.format.verify import verify
from nac_engine.text.asm import assemble
from nac_engine.text.disasm import disassemble
from nac_engine.isa.optable import OP_CONTROL_FLOW, OP_OUTPUT
from nac_engine.runtime.debugger import Debugger
from tests.compiler.helpers import eager_outputs, rel_error


class Branchy(torch.nn.Module):
    """A cond whose result is used afterwards, next to code that does not depend on it."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        y = torch.cond(x.sum() > 0, lambda t: self.lin(t).relu(), lambda t: t * 2.0 - 1.0, (x,))
        return self.head(y + 1), x * 3


class TwoConds(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = torch.cond(x.mean() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))
        z = torch.cond(y.sum() > 1, lambda t: self.lin(t), lambda t: t - 1, (y,))
        return z * y


class Nested(torch.nn.Module):
    def forward(self, x):
        def outer_true(t):
            return torch.cond(t.max() > 1, lambda u: u * 10, lambda u: u + 10, (t,))
        return torch.cond(x.sum() > 0, outer_true, lambda t: -t, (x,)) + 0.5


def _compile(model, x, tmp_path):
    res = compile_model(model.eval(), (x,))
    path = str(tmp_path / "m.nac")
    write_compiled(res.nac, path)
    return res, path


def _check_against_eager(model, path, inputs):
    with nac_engine.read(path) as nac:
        assert verify(nac) == []
        for x in inputs:
            out = nac_engine.run(nac, inputs={"x": x.numpy()})
            ref = eager_outputs(model, (x,))
            assert len(out) == len(ref)
            for o, r in zip(out, ref):
                assert rel_error(o, r) <= 1e-5


POS = torch.tensor([[1.0, 2.0, 0.5, 0.1], [0.3, 0.2, 0.1, 0.9], [1.0, 1.0, 1.0, 1.0]])


def test_cond_compiles_to_control_flow_and_runs_both_ways(tmp_path):
    m = Branchy()
    res, path = _compile(m, POS, tmp_path)
    ins = res.nac.instructions
    ctl = [i for i in ins if i.a == OP_CONTROL_FLOW]
    assert len(ctl) == 1 and ctl[0].c[0] == 3
    t_len, f_len = ctl[0].c[1], ctl[0].c[2]
    assert ctl[0].index + t_len + f_len == len(ins) - 1
    # each block ends with its own return; x * 3 (independent of the cond) runs before the branch
    assert ins[ctl[0].index + t_len].a == OP_OUTPUT and ins[-1].a == OP_OUTPUT
    names = [res.nac.instruction_name(i) for i in ins[:ctl[0].index]]
    assert "nac.mul" in names
    assert any("torch.cond" in w for w in res.report.warnings)
    _check_against_eager(m, path, [POS, -POS])


def test_two_conds_in_sequence(tmp_path):
    m = TwoConds()
    x = torch.tensor([[0.5, 1.0, 0.2, 0.3], [0.1, 0.2, 0.4, 0.6], [1.0, 0.1, 0.2, 0.3]])
    _, path = _compile(m, x, tmp_path)
    inputs = [x, -x, x * 0.01, -x * 0.01]
    seen = set()
    for v in inputs:
        a = bool(v.mean() > 0)
        y = v.sin() if a else v.cos()
        seen.add((a, bool(y.sum() > 1)))
    assert len(seen) >= 3           # the inputs take different paths through both conds
    _check_against_eager(m, path, inputs)


def test_nested_cond(tmp_path):
    m = Nested()
    x = torch.tensor([[2.0, 0.5, 0.1, 0.2]])
    _, path = _compile(m, x, tmp_path)
    _check_against_eager(m, path, [x, x * 0.1, -x])


def test_debugger_and_text_form_handle_the_compiled_branches(tmp_path):
    m = Branchy()
    _, path = _compile(m, POS, tmp_path)
    with nac_engine.read(path) as nac:
        text = disassemble(nac)
        assert nac_engine.write(assemble(text, weights=path)) == open(path, "rb").read()
        dbg = Debugger(nac, inputs={"x": (-POS).numpy()})
        dbg.continue_()
        ref = eager_outputs(m, (-POS,))
        assert rel_error(dbg.outputs[0], ref[0]) <= 1e-5
