"""What the compiler refuses says how to fix it and where, in the user's code (issue 15 §1), and
``--hf`` picks inputs that fit the model. Tiny configs, random weights, nothing downloaded."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
import torch

from nac_engine.compiler import CompileError, compile_model, hf
from nac_engine.cli import main as cli_main
from tests.compiler.helpers import compile_and_check

HERE = __file__


def _refusal(model, args, kwargs=None) -> CompileError:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CompileError) as err:
            compile_model(model.eval(), args, kwargs)
    return err.value


def _tiny_gpt2(use_cache: bool):
    import transformers
    cfg = transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=32,
                                  bos_token_id=0, eos_token_id=0, use_cache=use_cache)
    return transformers.GPT2LMHeadModel(cfg)


def test_a_returned_kv_cache_names_the_fix_and_the_models_forward():
    e = _refusal(_tiny_gpt2(True), (torch.randint(0, 50, (1, 8)),))
    assert "use_cache=False" in e.message and "key/value cache" in e.message
    assert e.source and "def forward" in e.source and "modeling_gpt2.py" in e.source
    assert "<string>" not in str(e)


def test_the_same_model_without_the_cache_compiles():
    c = compile_and_check(_tiny_gpt2(False).eval(), (torch.randint(0, 50, (1, 8)),))
    assert c.rel_errors and max(c.rel_errors) <= 1e-4


class _Causal(torch.nn.Module):
    def __init__(self, is_causal: bool):
        super().__init__()
        self.is_causal = is_causal
        self.t = torch.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                      dim_feedforward=16, batch_first=True)

    def forward(self, src, tgt):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        if self.is_causal:
            return self.t(src, tgt, tgt_mask=mask, tgt_is_causal=True)
        return self.t(src, tgt, tgt_mask=mask)   # LINE: stock transformer, mask only


def _line_of(marker: str) -> int:
    with open(HERE) as f:
        return next(i for i, ln in enumerate(f, 1) if marker in ln and "_line_of" not in ln)


def test_stock_transformer_mask_gets_the_tgt_is_causal_hint_at_the_users_line():
    e = _refusal(_Causal(False), (torch.randn(1, 5, 8), torch.randn(1, 4, 8)))
    first = e.message.splitlines()[0]
    assert "data-dependent" in first and "tgt_is_causal=True" in first
    assert e.source.startswith(f"{HERE}:{_line_of('LINE: stock transformer')}:")
    assert "dynamic_shapes" not in str(e)


def test_with_the_hint_applied_it_compiles_and_matches():
    c = compile_and_check(_Causal(True).eval(), (torch.randn(1, 5, 8), torch.randn(1, 4, 8)))
    assert max(c.rel_errors) <= 1e-4


class _DataDependent(torch.nn.Module):
    def forward(self, x):
        n = int((x > 0).sum())   # LINE: data-dependent count
        return x[:n] * 2


def test_data_dependent_shape_names_the_users_line_without_dynamic_shapes_advice():
    e = _refusal(_DataDependent(), (torch.randn(5),))
    assert e.source.startswith(f"{HERE}:{_line_of('LINE: data-dependent count')}:")
    assert "dynamic_shapes" not in str(e) and "<eval_with_key>" not in str(e)


# --------------------------------------------------------------------------- --hf inputs
def _config(tmp_path, name, cfg) -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


T5 = dict(model_type="t5", vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
          num_heads=2, relative_attention_num_buckets=8, decoder_start_token_id=0, pad_token_id=0,
          eos_token_id=1)
W2V = dict(model_type="wav2vec2", vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
           intermediate_size=32, conv_dim=[8, 8], conv_kernel=[10, 3], conv_stride=[5, 2],
           num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, feat_extract_norm="group")


def test_t5_config_gets_decoder_inputs_and_runs(tmp_path):
    m = hf.build(_config(tmp_path, "t5", T5), seq_len=6)
    assert set(m.kwargs) >= {"input_ids", "decoder_input_ids"}
    assert m.kwargs["decoder_input_ids"].shape == (1, 6)
    c = compile_and_check(m.model, (), m.kwargs)
    assert max(c.rel_errors) <= 1e-4


def test_t5_encoder_class_gets_the_encoder_inputs_only(tmp_path):
    m = hf.build(_config(tmp_path, "t5", T5), model_class="T5EncoderModel", seq_len=6)
    assert "decoder_input_ids" not in m.kwargs


def test_audio_default_sample_count_survives_the_conv_stack(tmp_path):
    m = hf.build(_config(tmp_path, "w2v", W2V))
    n = m.kwargs["input_values"].shape[1]
    # 16 frames after kernel 10 / stride 5 then kernel 3 / stride 2
    assert n == hf.audio_min_samples(m.model.config, 16) == ((16 - 1) * 2 + 3 - 1) * 5 + 10
    c = compile_and_check(m.model, (), m.kwargs)
    assert c.outputs[0].shape[1] == 16 and max(c.rel_errors) <= 1e-4


def test_audio_too_short_names_seq_len(tmp_path):
    path = _config(tmp_path, "w2v", W2V)
    with pytest.raises(CompileError) as err:
        hf.build(path, seq_len=19)
    assert "--seq-len 19" in err.value.message and "at least 20 samples" in err.value.message
    assert hf.build(path, seq_len=20).kwargs["input_values"].shape == (1, 20)


WHISPER = dict(model_type="whisper", vocab_size=64, num_mel_bins=8, encoder_layers=1, decoder_layers=1,
               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
               d_model=16, max_source_positions=8, max_target_positions=16, decoder_start_token_id=1,
               pad_token_id=0, bos_token_id=1, eos_token_id=2)


def test_whisper_config_gets_its_mel_frames_and_decoder_ids(tmp_path):
    m = hf.build(_config(tmp_path, "whisper", WHISPER), seq_len=5)
    assert m.kwargs["input_features"].shape == (1, 8, 16)       # num_mel_bins x 2 * max_source_positions
    assert m.kwargs["decoder_input_ids"].shape == (1, 5)
    c = compile_and_check(m.model, (), m.kwargs)
    assert max(c.rel_errors) <= 1e-4


AST = {"model_type": "audio-spectrogram-transformer", "hidden_size": 16, "num_hidden_layers": 1,
       "num_attention_heads": 2, "intermediate_size": 32, "patch_size": 16, "max_length": 32, "num_mel_bins": 32,
       "frequency_stride": 16, "time_stride": 16}


def test_spectrogram_audio_model_gets_its_frames_by_mel_bins(tmp_path):
    m = hf.build(_config(tmp_path, "ast", AST))
    assert m.kwargs["input_values"].shape == (1, 32, 32)         # max_length x num_mel_bins
    c = compile_and_check(m.model, (), m.kwargs)
    assert max(c.rel_errors) <= 1e-4


def test_generated_code_is_never_the_users_line():
    from nac_engine.compiler.fx_source import is_internal as _is_internal
    assert _is_internal("<eval_with_key>.5") and _is_internal("<string>")
    assert not _is_internal(HERE)


def test_hf_turns_the_cache_off_and_says_so(tmp_path, capsys):
    cfg = dict(model_type="gpt2", vocab_size=50, n_embd=16, n_layer=1, n_head=2, n_positions=32,
               bos_token_id=0, eos_token_id=0, use_cache=True)
    path = _config(tmp_path, "gpt2", cfg)
    m = hf.build(path, seq_len=8)
    assert m.model.config.use_cache is False and any("use_cache turned off" in n for n in m.notes)
    out = tmp_path / "g.nac"
    assert cli_main(["compile", "--hf", path, "--seq-len", "8", "-o", str(out)]) == 0
    assert "nac: note: use_cache turned off" in capsys.readouterr().err


class _Branches(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:          # LINE: data-dependent branch
            return x * 2
        return x - 1


def test_a_refusal_leads_with_the_users_line_and_the_fix_then_torchs_text_shortened():
    e = _refusal(_Branches(), (torch.randn(5),))
    text = str(e).splitlines()
    assert text[0].startswith(f"{HERE}:{_line_of('LINE: data-dependent branch')}:")
    assert "torch.where" in text[1] and "torch.cond" in text[1]
    assert text[2].lstrip().startswith("torch says: GuardOnDataDependentSymNode")
    assert len(text) <= 7 and len(str(e)) < 1000
    assert "dynamic_shapes" not in str(e)


def test_a_torch_ao_dynamic_quant_model_is_told_to_quantise_with_nac():
    model = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(4, 4)), {torch.nn.Linear},
                                                   dtype=torch.qint8)
    e = _refusal(model, (torch.randn(1, 4),))
    assert "module '0' is a torch.ao quantised" in e.message and "--quant int8_channel" in e.message
    assert "torch says: AttributeError" in e.message and "Traceback" not in str(e)


def test_a_shape_error_is_said_once_without_torchs_fake_tensor_traceback(tmp_path):
    """A wrong example-input shape: our one-line refusal, not torch's 20-line fake-tensor log
    written straight to the terminal before it (torch's handler holds the real stderr, so this
    runs in a process of its own)."""
    model = tmp_path / "model.py"
    model.write_text("import torch\n"
                     "def make_model():\n"
                     "    return torch.nn.Linear(8, 4), (torch.randn(1, 9),)\n")
    r = subprocess.run([sys.executable, "-m", "nac_engine.cli", "compile", f"{model}:make_model",
                        "-o", str(tmp_path / "m.nac")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "same reduction dim" in r.stderr
    assert "fake_tensor" not in r.stderr and "Traceback" not in r.stderr, r.stderr[:2000]
    assert len(r.stderr.strip().splitlines()) <= 3, r.stderr
