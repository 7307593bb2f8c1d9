"""``nac compile``: both model sources, the options that change the file, the report, and one-line errors."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

import nac_engine
from nac_engine.cli import main

FACTORY = textwrap.dedent("""
    import torch
    from torch import nn

    def make_model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), (torch.randn(2, 8),)

    def bare():
        torch.manual_seed(0)
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())

    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x
            return -x

    def branchy():
        return Branchy(), (torch.randn(3),)

    def listed():
        torch.manual_seed(0)
        return nn.Linear(8, 4), [torch.randn(2, 8)]
""")


@pytest.fixture
def factory(tmp_path):
    p = tmp_path / "models.py"
    p.write_text(FACTORY)
    return p


def test_compile_factory_file_verify_lint_run(tmp_path, factory, capsys):
    out = tmp_path / "mlp.nac"
    assert main(["compile", str(factory), "-o", str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"{out}: ")
    assert main(["verify", str(out)]) == 0 and main(["lint", str(out)]) == 0
    ns = {}
    exec(FACTORY, ns)
    model, (x,) = ns["make_model"]()
    got = nac_engine.run(str(out), inputs={"input": x.numpy()})[0]
    assert np.allclose(got, model(x).detach().numpy(), rtol=0, atol=1e-6)


def test_compile_bare_module_with_inputs_external_quantised_v18(tmp_path, factory, capsys):
    out = tmp_path / "conv.nac"
    rc = main(["compile", f"{factory}:bare", "--input", "1x3x8x8", "-o", str(out), "--weights", "external",
               "--quant", "int8_channel", "--version", "1.8", "--mmap", "reference", "--lookahead", "1", "--report"])
    text = capsys.readouterr().out
    assert rc == 0
    assert (tmp_path / "conv.safetensors").exists()
    nac = nac_engine.read(str(out))
    assert nac.header.version == "1.8" and not nac.header.weights_internal and nac.header.quant_name == "INT8_CHANNEL"
    assert "max rel error" in text and "0.weight" in text
    assert "mmap       reference" in text and "(written)" in text
    assert main(["verify", str(out)]) == 0 and main(["lint", str(out)]) == 0


def test_compile_hf_config_report_json(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(dict(model_type="bert", vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)))
    out = tmp_path / "bert.nac"
    assert main(["compile", "--hf", str(cfg), "--seq-len", "6", "--batch", "2", "-o", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["options"]["version"] == "1.6" and rep["instructions"] < rep["instructions_exported"]
    assert set(rep["mmap"]) == {"min-peak", "reference"} and rep["file_bytes"] == out.stat().st_size
    assert any(p["name"] == "identities" and p["rewrites"] for p in rep["passes"])
    nac = nac_engine.read(str(out))
    assert [n.name for n in nac.input_names] == ["input_ids", "attention_mask"]
    ids = np.arange(12).reshape(2, 6) % 50
    out0 = nac_engine.run(nac, inputs={"input_ids": ids, "attention_mask": np.ones((2, 6), np.int64)})[0]
    assert out0.shape == (2, 6, 16)


def test_compile_hf_text_and_image_model(tmp_path, capsys):
    """CLIP (as SigLIP): the token figures are in text_config ("the config has no vocab_size to
    draw token ids from" before), and both towers run: the file takes ids and pixels and its
    outputs equal the model's."""
    import torch
    import transformers as tf
    cfg = dict(model_type="clip", projection_dim=8,
               text_config=dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=16),
               vision_config=dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                  image_size=16, patch_size=8))
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "clip.nac"
    assert main(["compile", "--hf", str(tmp_path), "--seq-len", "5", "-o", str(out)]) == 0, capsys.readouterr().err
    nac = nac_engine.read(str(out))
    assert [n.name for n in nac.input_names] == ["input_ids", "attention_mask", "pixel_values"]
    torch.manual_seed(0)
    model = tf.CLIPModel(tf.CLIPConfig.from_dict(cfg)).eval()      # the compile's seed-0 weights
    ids, pix = np.arange(5).reshape(1, 5) % 50, np.random.default_rng(0).standard_normal((1, 3, 16, 16), np.float32)
    got = nac_engine.run(nac, inputs={"input_ids": ids, "pixel_values": pix, "attention_mask": np.ones((1, 5), np.int64)})
    with torch.no_grad():
        ref = model(input_ids=torch.from_numpy(ids), pixel_values=torch.from_numpy(pix))
    np.testing.assert_allclose(got[0], ref.logits_per_image.numpy(), rtol=1e-4, atol=1e-5)


def test_errors_are_one_line_with_the_users_source(tmp_path, factory, capsys):
    assert main(["compile", f"{factory}:branchy", "-o", str(tmp_path / "x.nac")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("nac: error: ")
    # where first (the user's line), then what failed and what to change
    assert "models.py:15: if x.sum() > 0: — torch.export failed: " in err and "torch.where" in err
    assert not (tmp_path / "x.nac").exists()
    assert main(["compile", f"{factory}:bare", "-o", str(tmp_path / "x.nac")]) == 2
    err = capsys.readouterr().err
    # what to give: how many inputs forward takes, and the other way (return the example inputs)
    assert "--input SHAPE" in err and "forward takes (input)" in err and "(model, example_inputs)" in err
    assert main(["compile", f"{factory}:nope", "-o", str(tmp_path / "x.nac")]) == 2
    assert "no callable 'nope'" in capsys.readouterr().err
    assert main(["compile", str(factory), "--tokenizer", "-o", str(tmp_path / "x.nac")]) == 2
    assert "--tokenizer without DIR needs --hf" in capsys.readouterr().err


def test_compile_does_not_import_torch_at_parser_build():
    import subprocess
    import sys
    code = "import sys; from nac_engine.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_the_weights_progress_bar_is_shown_when_asked_for_on_a_pipe(tmp_path, factory, capsys, monkeypatch):
    """Piped stderr has no bar (logs stay clean) unless NAC_PROGRESS=1: the Studio's Compile Model
    dialog reads the bar's last line from its process."""
    out = tmp_path / "ext.nac"
    args = ["compile", f"{factory}:bare", "--input", "1x3x8x8", "-o", str(out), "--weights", "external"]
    assert main(args) == 0
    assert "weights:" not in capsys.readouterr().err
    monkeypatch.setenv("NAC_PROGRESS", "1")
    assert main(args) == 0
    assert "weights:" in capsys.readouterr().err


def test_without_o_the_nac_goes_beside_the_model(tmp_path, factory, capsys, monkeypatch):
    """`nac compile model.py` writes model.nac beside it (as the Studio's dialog and `nac dap` do);
    a Hugging Face folder's goes beside the folder, named after it."""
    from nac_engine.compiler.command import default_output
    monkeypatch.chdir(tmp_path)
    assert main(["compile", f"{factory.name}:bare", "--input", "1x3x8x8"]) == 0
    assert capsys.readouterr().out.startswith(f"{factory.stem}.nac: ") and (tmp_path / f"{factory.stem}.nac").is_file()
    assert default_output("/m/model.py:big") == "/m/model.nac"
    assert default_output("/m/tiny/") == "/m/tiny.nac" and default_output("/m/tiny/config.json") == "/m/tiny.nac"
    assert default_output("tiny") == str(tmp_path / "tiny.nac")


def test_example_inputs_given_as_a_list_are_forwards_arguments(tmp_path, factory, capsys):
    """`return model, [x]` means forward(x), as `return model, (x,)` does (it was forward([x]): a
    TypeError from inside torch.export)."""
    out = tmp_path / "listed.nac"
    assert main(["compile", f"{factory}:listed", "-o", str(out)]) == 0, capsys.readouterr().err
    ns = {}
    exec(FACTORY, ns)
    model, (x,) = ns["listed"]()
    got = nac_engine.run(str(out), inputs={"input": x.numpy()})[0]
    assert np.allclose(got, model(x).detach().numpy(), rtol=0, atol=1e-6)
