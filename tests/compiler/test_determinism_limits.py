"""Deterministic tables (byte-identical files across processes and directories), the format's
limits as named CompileErrors, and export failures reported with the user's source line."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

import nac_engine
from nac_engine.compiler import CompileError, compile_model
from nac_engine.compiler.canonicalize import Arg, CanonicalOp, canonicalize
from nac_engine.compiler.emit import emit
from nac_engine.compiler.graph import Graph, Node, TensorSpec
from nac_engine.compiler.tables import assign, constant_record
from nac_engine.format import layout as L
from nac_engine.text.literals import format_literal

REPO = Path(__file__).resolve().parents[2]
aten = torch.ops.aten

# One script, run in two fresh processes from two directories with different hash seeds: a tiny BERT
# from a config (random weights from a fixed seed) and a CNN, each compiled and hashed.
_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys, warnings
    warnings.filterwarnings("ignore")
    sys.path.insert(0, sys.argv[1])
    import torch
    from torch import nn
    import nac_engine
    from nac_engine.compiler import hf
    cfg = sys.argv[2]
    m = hf.build(cfg, seq_len=8, seed=3)
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(4, 2))
    out = {}
    for name, model, args, kw, opts in [("bert", m.model, (), m.kwargs, {"version": "1.8"}),
                                        ("cnn", cnn, (torch.randn(1, 3, 8, 8),), None, {"quantization": "int8_channel"})]:
        data = nac_engine.write(nac_engine.compile(model, args, kw, **opts))
        out[name] = hashlib.sha256(data).hexdigest()
    print(json.dumps(out))
""")


@pytest.mark.heavy
def test_two_processes_in_two_directories_write_identical_bytes(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "bert", "vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 1, '
                   '"num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 16}')
    script = tmp_path / "compile_twice.py"
    script.write_text(_SCRIPT)
    outputs = []
    for k, seed in enumerate(("1", "12345")):
        cwd = tmp_path / f"run{k}"
        cwd.mkdir()
        env = dict(os.environ, PYTHONHASHSEED=seed, HF_HUB_OFFLINE="1")
        r = subprocess.run([sys.executable, str(script), str(REPO), str(cfg)], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        outputs.append(r.stdout.strip().splitlines()[-1])
        assert list(cwd.iterdir()) == []             # no registry or other file left behind
    assert outputs[0] == outputs[1]


def _small():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Softmax(-1)), (torch.randn(2, 4),)


def test_ids_do_not_depend_on_what_was_compiled_before():
    model, args = _small()
    first = nac_engine.write(nac_engine.compile(model, args))

    class Other(nn.Module):
        def forward(self, x):
            return torch.cumsum(x.transpose(0, 1), 0).clamp(-1.5, 2.5).sum(dim=[0], keepdim=True)
    nac_engine.compile(Other(), (torch.randn(3, 5),))
    assert nac_engine.write(nac_engine.compile(model, args)) == first


def test_tables_are_sorted_and_none_is_constant_one():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 3, padding=1)

        def forward(self, x):
            y = torch.nn.functional.gelu(self.conv(x), approximate="tanh").clamp(min=-1.0)
            return torch.nn.functional.interpolate(y, scale_factor=2.0, mode="nearest").mean(dim=(2, 3))
    nac = nac_engine.compile(M(), (torch.randn(1, 2, 4, 4),), version="1.8")
    assert list(nac.cmap) == sorted(nac.cmap) and [nac.cmap[k] for k in sorted(nac.cmap)] == sorted(nac.cmap.values())
    assert min(nac.cmap) == 32
    sigs = [nac.perms[k] for k in sorted(nac.perms) if k]
    assert sigs == sorted(sigs) and nac.perms[0] == ""
    texts = [(format_literal(c.type, c.value), c.type) for cid, c in sorted(nac.constants.items()) if cid != 1]
    assert texts == sorted(texts)
    if 1 in nac.constants:
        assert nac.constants[1].type == L.CONST_NULL
    assert min(k for k in nac.constants if k != 1) == 2


def test_constants_keep_their_type():
    assert constant_record(1, "x") == (L.CONST_INT64, 1)
    assert constant_record(1.0, "x") == (L.CONST_FLOAT64, 1.0)
    assert constant_record(True, "x") == (L.CONST_BOOL, True)
    assert constant_record([1, -2], "x") == (L.CONST_LIST_I32, (1, -2))
    assert constant_record([0.5, 2], "x") == (L.CONST_LIST_F32, (0.5, 2.0))
    with pytest.raises(CompileError, match="outside int32"):
        constant_record([2 ** 40], "op7 (aten.x)")
    with pytest.raises(CompileError, match="not exact in float32"):
        constant_record([0.1], "op7 (aten.x)")
    with pytest.raises(CompileError, match="no CNST encoding"):
        constant_record(object(), "op7 (aten.x)")


# --------------------------------------------------------------------------- limits
def _fake_ops(n, name=lambda k: f"aten.op{k:03d}.default", sig=lambda k: "T"):
    node = Node(0, "op", "n")
    return [CanonicalOp(Node(k, "op", f"n{k}"), name(k), [Arg(ch, node=node) for ch in sig(k)]) for k in range(n)]


def test_too_many_op_names_for_u8_a():
    assign("1.8", _fake_ops(224))                     # 32..255 fits exactly
    with pytest.raises(CompileError, match=r"A \(u8\).*aten.op224.default"):
        assign("1.8", _fake_ops(225))


def test_too_many_signatures_for_u8_b():
    sigs = [format(k, "08b").replace("0", "T").replace("1", "P") for k in range(256)]
    with pytest.raises(CompileError, match=r"B \(u8\)"):
        assign("1.6", _fake_ops(256, name=lambda k: "aten.x.default", sig=lambda k: sigs[k]))


def test_signature_longer_than_255():
    with pytest.raises(CompileError, match="n0 .* 300 arguments"):
        assign("1.6", _fake_ops(1, sig=lambda k: "T" * 300))


def test_too_many_constants_for_int16_c():
    def ops(n):      # n distinct ints, 200 per instruction
        return [CanonicalOp(Node(j, "op", f"op{j}"), "aten.x.default",
                            [Arg("i", value=k) for k in range(j * 200, min(n, (j + 1) * 200))])
                for j in range((n + 199) // 200)]
    assert max(assign("1.6", ops(32766)).constants) == 32767      # ids 2..32767
    with pytest.raises(CompileError, match="32767 distinct constants; C holds int16"):
        assign("1.6", ops(32767))


def test_producer_too_far_back_for_int16_d():
    g = Graph()
    x = g.append(g.new_node("input", "x", spec=TensorSpec((1,), torch.float32)))
    prev = x
    for k in range(32770):
        prev = g.append(g.new_node("op", f"relu{k}", target=aten.relu.default, args=(prev,),
                                   spec=TensorSpec((1,), torch.float32)))
    last = g.append(g.new_node("op", "far", target=aten.add.Tensor, args=(prev, x),
                               spec=TensorSpec((1,), torch.float32)))
    g.outputs = [last]
    with pytest.raises(CompileError, match=r"instruction 32771 \(far \(nac.add\)\) reads instruction 0.*int16"):
        emit(g, canonicalize(g), version="1.6")


# --------------------------------------------------------------------------- export errors
class _DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:          # the line the error must point at
            return x * 2
        return x


def test_export_failure_has_torchs_message_and_the_users_line(capfd):
    with pytest.raises(CompileError) as info:
        compile_model(_DataDependent(), (torch.randn(3),))
    e = info.value
    assert e.stage == "export" and "torch.export failed" in e.message
    assert "data-dependent" in e.message and len(e.message.splitlines()) <= 26
    assert e.source is not None and e.source.endswith("if x.sum() > 0:          # the line the error must point at")
    assert "test_determinism_limits.py" in e.source
    assert "def forward" not in capfd.readouterr().err       # torch's half-traced graph is not dumped


def test_dynamic_output_shape_names_the_op_and_line():
    class M(nn.Module):
        def forward(self, x):
            return x.nonzero()
    with pytest.raises(CompileError, match="static shapes") as info:
        compile_model(M(), (torch.randn(3),))
    assert info.value.source.endswith("return x.nonzero()")


def test_bad_options_fail_before_export():
    model, args = _small()
    for kw, msg in [({"version": "1.7"}, "version"), ({"weights": "cloud"}, "weights"), ({"mmap": "x"}, "mmap"),
                    ({"quantization": "int4"}, "quantization"), ({"preload_lookahead": -1}, "preload_lookahead")]:
        with pytest.raises(CompileError, match=msg):
            compile_model(model, args, **kw)


def test_more_instructions_than_u16_ticks():
    g = Graph()
    for k in range(65536):
        g.append(g.new_node("input", f"x{k}", spec=TensorSpec((1,), torch.float32)))
    g.outputs = [g.nodes[0]]
    with pytest.raises(CompileError, match="65537 instructions: MMAP ticks"):
        emit(g, [], version="1.6")
