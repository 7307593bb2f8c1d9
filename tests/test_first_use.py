"""Issue 15 §6: the mistakes a new user makes get a one-line error saying what to change (never
"internal error", never a traceback), run as a user runs them: ``python -m nac_engine.cli``."""
from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.cli_fork import run_cli

REPO = Path(__file__).resolve().parents[1]
MLP = REPO / "nac_studio" / "demos" / "demo_mlp.nac"

FACTORY = textwrap.dedent("""
    import torch
    from torch import nn

    def make_model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), (torch.randn(2, 8),)

    def broken():
        return helper_that_does_not_exist()
""")


def nac(*argv, cwd=None):
    r = run_cli(argv, cwd=cwd or REPO)
    return r.returncode, r.stdout, r.stderr


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nac: error: ") and "internal error" not in lines[0] and "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def external_mlp(tmp_path_factory):
    d = tmp_path_factory.mktemp("ext")
    (d / "m.py").write_text(FACTORY)
    rc, _, err = nac("compile", d / "m.py", "-o", d / "ext.nac", "--weights", "external")
    assert rc == 0, err
    return d / "ext.nac"


def test_compile_help_documents_the_factory_contract():
    rc, out, _ = nac("compile", "--help")
    assert rc == 0
    for text in ("Two sources of a model", "factory contract", "(model, args)", "(model, args, kwargs)",
                 "--input SHAPE[:DTYPE]", "make_model", "BertModel", "compile only code you trust"):
        assert text in out, text


def test_compile_syntax_error_in_the_model_file(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text("import torch\ndef make_model(:\n    pass\n")
    rc, _, err = nac("compile", f, "-o", tmp_path / "x.nac")
    line = one_line_error(err)
    assert rc == 2 and "syntax error" in line and f"{f}:2" in line


def test_compile_exception_in_the_factory_names_the_users_line(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(FACTORY)
    rc, _, err = nac("compile", f"{f}:broken", "-o", tmp_path / "x.nac")
    line = one_line_error(err)
    assert rc == 2 and "NameError" in line and f"{f}:10" in line


def test_compile_checks_the_output_before_compiling(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(FACTORY)
    rc, _, err = nac("compile", f, "-o", tmp_path / "missing" / "x.nac")
    assert rc == 2 and "does not exist; create it first" in one_line_error(err)
    rc, _, err = nac("compile", f, "-o", tmp_path)
    assert rc == 2 and "is a directory" in one_line_error(err)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_write_errors_name_the_users_path_not_a_temp(tmp_path):
    rc, _, err = nac("rewrite", MLP, "-o", tmp_path / "nowhere" / "x.nac")
    line = one_line_error(err)
    assert rc == 2 and str(tmp_path / "nowhere" / "x.nac") in line and ".tmp" not in line


@pytest.mark.heavy       # a `nac compile --hf` process: ~7 s
def test_compile_concrete_hf_class(tmp_path):
    import transformers  # noqa: F401  (a declared test dependency: failing to import is a failure)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(dict(model_type="bert", vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)))
    rc, out, err = nac("compile", "--hf", cfg, "--hf-class", "BertModel", "--seq-len", "8", "-o", tmp_path / "b.nac")
    assert rc == 0, err
    assert (tmp_path / "b.nac").stat().st_size > 0
    rc, _, err = nac("compile", "--hf", cfg, "--hf-class", "NoSuchModel", "-o", tmp_path / "c.nac")
    assert rc == 2 and "not a transformers model class" in one_line_error(err)


def test_break_on_a_tick_past_the_end():
    rc, _, err = nac("run", MLP, "--input", "x=1x8", "--break", "tick:999")
    assert rc == 2 and "tick 999 is outside 0..12" in one_line_error(err)


def test_break_with_deeply_nested_condition():
    rc, out, err = nac("run", MLP, "--input", "x=1x8", "--break", "if:" + "(" * 150 + "1" + ")" * 150 + " > 2")
    assert "RecursionError" not in err
    if rc != 0:
        one_line_error(err)


def test_missing_external_weights(external_mlp, tmp_path):
    lone = tmp_path / "lone.nac"
    lone.write_bytes(external_mlp.read_bytes())
    rc, _, err = nac("run", lone, "--input", "input=2x8")
    line = one_line_error(err)
    assert rc == 2 and "lone.safetensors" in line and "does not exist" in line


def test_sim_and_run_on_a_directory(tmp_path):
    for cmd in ("sim", "run", "dis", "lint"):
        rc, _, err = nac(cmd, tmp_path)
        assert rc == 2 and "is a directory" in one_line_error(err), cmd


def test_wrong_shaped_input_says_what_was_given():
    for cmd in ("run", "sim"):
        rc, _, err = nac(cmd, MLP, "--input", "x=1x9")
        line = one_line_error(err)
        assert rc == 2 and "x=1x9:float32" in line and "check their shapes" in line, cmd
        assert "budget" not in line


def test_run_input_by_shape_is_seeded_random(tmp_path):
    outs = []
    for seed in ("0", "0", "1"):
        d = tmp_path / f"o{len(outs)}"
        rc, out, err = nac("run", MLP, "--input", "x=2x8", "--seed", seed, "--out", d)
        assert rc == 0, err
        assert "output 0: float32[2, 4]" in out
        outs.append(np.load(d / "output_0.npy"))
    assert np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[0], outs[2])
    rc, _, err = nac("run", MLP, "--input", "x=2xq")
    assert rc == 2 and "--input x" in one_line_error(err)


def test_long_error_messages_are_capped():
    from nac_engine.cli import MESSAGE_LIMIT, one_line
    assert len(one_line("x " * 200_000)) <= MESSAGE_LIMIT
    assert one_line("a\n  b\tc") == "a b c"
