"""What `nac compile` records beside the program: the input signature (default inputs of `nac run` and
`nac sim`) and the source map (tick -> module path, node, the user's file:line and its text)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nac_engine
from nac_engine.cli import main
from nac_engine.format.build_recipe import RESOURCE_NAME as BUILD
from nac_engine.format.input_signature import RESOURCE_NAME as SIG, make_inputs, read_input_signature
from nac_engine.format.source_map import RESOURCE_NAME as SMAP, locate_source, read_source_map
from tests.corpus_paths import CORPUS

REPO = Path(__file__).resolve().parents[2]
FACTORY = '''
import torch


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, h):
        return torch.softmax(self.proj(h), -1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.head = Head()

    def forward(self, x, ids):
        return self.head(torch.relu(self.body(x))) + ids.float().sum()


def make_model():
    torch.manual_seed(0)
    return Net(), (torch.randn(2, 6), torch.tensor([[3, 9, 4]]))
'''


def _cli(capsys, *argv):
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


def _factory(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model.py"
    path.write_text(FACTORY)
    return path


def test_signature_and_source_map_of_a_factory_model(tmp_path, capsys):
    src = _factory(tmp_path / "a")
    out = tmp_path / "m.nac"
    assert _cli(capsys, "compile", src, "-o", out)[0] == 0
    nac = nac_engine.read(str(out))
    sig = read_input_signature(nac)
    assert [(s.name, s.shape, s.dtype, s.kind) for s in sig] == [("x", (2, 6), "float32", "input"),
                                                                ("ids", (1, 3), "int64", "input")]
    assert (sig[1].low, sig[1].high) == (3.0, 9.0)
    smap = read_source_map(nac)
    assert len(smap) == len(nac.instructions)
    names = {e.tick: nac.instruction_name(nac.instructions[e.tick]) for e in smap.entries}
    soft = next(e for e in smap.entries if "softmax" in names[e.tick])
    assert soft.module_path == "head" and soft.file == "model.py"       # a temp dir keeps only the name
    assert FACTORY.splitlines()[soft.line - 1].strip() == soft.code.strip() == \
        "return torch.softmax(self.proj(h), -1)"
    lin = next(e for e in smap.entries if names[e.tick] == "aten.linear.default" and e.module_path == "head.proj")
    assert lin.node_name.startswith("linear")
    # the whole call stack in the user's code, outermost first: the model's forward at the line
    # calling the head, then the head's forward at the line of the op (Linear's own forward is torch's)
    lines = FACTORY.splitlines()
    assert [(name, file) for name, file, _, _ in lin.stack] == [("Net.forward", "model.py"),
                                                                ("head (Head.forward)", "model.py")]
    assert [lines[ln - 1].strip() for _, _, ln, _ in lin.stack] == \
        ["return self.head(torch.relu(self.body(x))) + ids.float().sum()", "return torch.softmax(self.proj(h), -1)"]
    assert lin.stack[-1][2] == lin.line
    assert [f[0] for f in soft.stack] == ["Net.forward", "head (Head.forward)"]
    assert smap.modules()["body"] and set(smap.modules()) >= {"", "body", "head", "head.proj"}
    # parameters belong to their module
    w = next(e for e in smap.entries if e.node_name == "head.proj.weight")
    assert w.module_path == "head.proj" and w.file is None
    # nac dis comments the module path
    code, text, _ = _cli(capsys, "dis", out)
    assert code == 0 and any(line.startswith(f"v{soft.tick} = ") and line.endswith("in head")
                             for line in text.splitlines())


def test_no_debug_info_drops_only_the_source_map(tmp_path, capsys):
    src = _factory(tmp_path / "a")
    with_map, without = tmp_path / "with.nac", tmp_path / "without.nac"
    assert _cli(capsys, "compile", src, "-o", with_map)[0] == 0
    assert _cli(capsys, "compile", src, "-o", without, "--no-debug-info")[0] == 0
    a, b = nac_engine.read(str(with_map)), nac_engine.read(str(without))
    assert [r.name for r in a.rsrc] == [SIG, SMAP, BUILD] and [r.name for r in b.rsrc] == [SIG, BUILD]
    assert read_source_map(b) is None and read_input_signature(b) == read_input_signature(a)
    assert [i.a for i in a.instructions] == [i.a for i in b.instructions]


@pytest.mark.heavy
def test_two_temp_directories_and_two_processes_write_identical_bytes(tmp_path):
    outs = []
    for k in range(2):
        work = tmp_path / f"run{k}"
        src = _factory(work / "src")
        out = work / "m.nac"
        r = subprocess.run([sys.executable, "-m", "nac_engine.cli", "compile", str(src), "-o", str(out)],
                           cwd=work, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
        assert r.returncode == 0, r.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_run_and_sim_need_no_flags_on_a_fresh_compile(tmp_path, capsys):
    out = tmp_path / "m.nac"
    assert _cli(capsys, "compile", _factory(tmp_path / "a"), "-o", out)[0] == 0
    code, text, err = _cli(capsys, "run", out)
    assert code == 0 and text.startswith("output 0: float32[2, 4]"), err
    code, text, err = _cli(capsys, "sim", out, "--json")
    assert code == 0 and json.loads(text)["total_cycles"] > 0, err


@pytest.mark.skipif(not (CORPUS / "nac" / "mlp").is_dir(), reason="../shared/corpus is absent")
@pytest.mark.parametrize("command", ["run", "sim"])
def test_reference_files_without_a_signature_still_ask(capsys, command):
    code, _, err = _cli(capsys, command, CORPUS / "nac" / "mlp" / "mlp.nac")
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "--input NAME=SHAPE:DTYPE" in err and "'x'" in err


def test_bert_first_softmax_maps_to_transformers_softmax_line(tmp_path, capsys):
    """Acceptance: `nac compile --hf` of a tiny BERT config; the first attention softmax's tick maps to
    the module path and the line of transformers' code that calls softmax."""
    import transformers  # a declared test dependency: failing to import is a failure
    cfg = tmp_path / "bert.json"
    # eager attention: matmul/softmax/matmul as transformers writes it, not one fused SDPA op
    cfg.write_text(json.dumps(dict(model_type="bert", vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                   attn_implementation="eager")))
    out = tmp_path / "bert.nac"
    assert _cli(capsys, "compile", "--hf", cfg, "-o", out, "--seq-len", "8")[0] == 0
    nac = nac_engine.read(str(out))
    smap = read_source_map(nac)
    first = next(i for i in nac.instructions if "softmax" in nac.instruction_name(i))
    e = smap.entry(first.index)
    assert e.module_path == "encoder.layer.0.attention.self"
    assert e.file == "transformers/models/bert/modeling_bert.py"
    path = locate_source(e.file)
    assert path is not None and Path(path).resolve().is_relative_to(Path(transformers.__file__).resolve().parent)
    line = Path(path).read_text().splitlines()[e.line - 1]
    assert "softmax" in line and line.strip() == e.code.strip()
    # its stack: BertModel.forward outward, each module's forward in between, the softmax's helper
    # function innermost (named with its module); transformers' decorators' pass-through wrappers
    # (one around every forward since 5.24) are left out
    names = [f[0] for f in e.stack]
    assert names == ["BertModel.forward", "encoder (BertEncoder.forward)", "encoder.layer.0 (BertLayer.forward)",
                     "encoder.layer.0.attention (BertAttention.forward)",
                     "encoder.layer.0.attention.self (BertSelfAttention.forward)",
                     "encoder.layer.0.attention.self (eager_attention_forward)"]
    assert (e.stack[-1][1], e.stack[-1][2]) == (e.file, e.line)
    # the layer-1 softmax is the same line of code in the next layer
    second = next(i for i in nac.instructions[first.index + 1:] if "softmax" in nac.instruction_name(i))
    e2 = smap.entry(second.index)
    assert (e2.module_path, e2.file, e2.line) == ("encoder.layer.1.attention.self", e.file, e.line)
    code, text, _ = _cli(capsys, "dis", out)
    assert any(ln.startswith(f"v{first.index} = aten.softmax") and ln.endswith("in encoder.layer.0.attention.self")
               for ln in text.splitlines())
    sig = read_input_signature(nac)
    assert [(s.name, s.shape, s.dtype) for s in sig] == [("input_ids", (1, 8), "int64"),
                                                         ("attention_mask", (1, 8), "int64")]
    assert 0 <= sig[0].low <= sig[0].high < 100
    outs = nac_engine.run(nac, inputs=make_inputs(sig))
    assert outs[0].shape == (1, 8, 32) and np.isfinite(outs[0]).all()


def test_call_stack_leaves_out_pass_through_wrappers_but_never_the_op_line():
    """A decorator's wrapper that only hands its arguments on says nothing about the model; the
    innermost frame and a module's forward stay even when their lines look like one."""
    from nac_engine.compiler.debug_info import call_stack
    trace = "\n".join([
        'File "/site-packages/lib/generic.py", line 10, in wrapper',
        '    output = func(self, *args, **kwargs)',
        'File "/project/model.py", line 20, in forward',
        '    y = self.block(x)',
        'File "/site-packages/lib/deprecation.py", line 30, in wrapped_func',
        '    return func(*args, **kwargs)',
        'File "/project/model.py", line 40, in forward',
        '    return self.helper(*args, **kwargs)',
        'File "/project/model.py", line 50, in helper',
        '    return torch.relu(*args, **kwargs)',
    ])
    stack = {"a": ("", "model.Net"), "b": ("block", "model.Block")}
    names = [(f[0], f[2]) for f in call_stack(stack, trace)]
    assert names == [("Net.forward", 20), ("block (Block.forward)", 40), ("block (helper)", 50)]
