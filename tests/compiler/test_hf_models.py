"""Hugging Face models from small configs (random weights, use_cache=False), built by
``nac_engine.compiler.hf`` from a config.json, compiled, and run by our interpreter against eager."""
from __future__ import annotations

import json

import pytest

from nac_engine.compiler import hf  # noqa: E402
from tests.compiler.helpers import compile_and_check, named_inputs  # noqa: E402

CONFIGS = {
    "bert": dict(model_type="bert", vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64),
    "gpt2": dict(model_type="gpt2", vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                 bos_token_id=0, eos_token_id=0),
    "vit": dict(model_type="vit", hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                image_size=16, patch_size=4),
    "resnet": dict(model_type="resnet", embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic"),
    "patchtst": dict(model_type="patchtst", num_input_channels=2, context_length=32, patch_length=8, patch_stride=8,
                     d_model=16, num_attention_heads=2, num_hidden_layers=1, ffn_dim=32),
    "mixtral": dict(model_type="mixtral", vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    num_key_value_heads=1, intermediate_size=64, max_position_embeddings=64, num_local_experts=4,
                    num_experts_per_tok=2),
}


def build(tmp_path, name, **shape):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(CONFIGS[name]))
    return hf.build(str(path), **shape)


def test_bert_with_padding_mask(tmp_path):
    m = build(tmp_path, "bert", batch=2, seq_len=8)
    m.kwargs["attention_mask"][1, 5:] = 0            # padded second sequence
    c = compile_and_check(m.model, (), m.kwargs)
    assert [n.name for n in c.nac.input_names] == ["input_ids", "attention_mask"]
    assert c.nac.header.d_model == 32 and c.nac.header.num_outputs == 2
    names = {p.name for p in c.nac.params.values()}
    assert "embeddings.word_embeddings.weight" in names
    # the token-type buffer (non-persistent) is a named parameter, never an unnamed user input
    assert c.nac.header.num_inputs == 2 and sum(1 for i in c.nac.instructions if i.a == 2 and i.b == 0) == 2


def test_gpt2_causal(tmp_path):
    m = build(tmp_path, "gpt2", batch=1, seq_len=8)
    c = compile_and_check(m.model, (), m.kwargs)
    assert c.nac.header.d_model == 32
    # the causal mask is built from arange at trace time: folded into one small parameter
    assert not any(c.nac.instruction_name(i).startswith("nac.arange") for i in c.nac.instructions)


def test_vit(tmp_path):
    m = build(tmp_path, "vit")
    c = compile_and_check(m.model, (), m.kwargs)
    assert "aten.cat.default" in {c.nac.instruction_name(i) for i in c.nac.instructions}


def test_resnet(tmp_path):
    m = build(tmp_path, "resnet", image_size=32)
    c = compile_and_check(m.model, (), m.kwargs)
    assert c.nac.header.num_outputs == 2


def test_a_time_series_model_gets_its_past_values(tmp_path):
    """PatchTST (as PatchTSMixer): the main input is a window of past values, context_length steps of
    each channel ("no example inputs for main input 'past_values'" before)."""
    m = build(tmp_path, "patchtst")
    assert tuple(m.kwargs["past_values"].shape) == (1, 32, 2)
    c = compile_and_check(m.model, (), m.kwargs)
    assert [n.name for n in c.nac.input_names] == ["past_values"]


def test_mixture_of_experts_runs_and_simulates(tmp_path):
    """Mixtral (as Qwen-MoE and OLMoE): its expert layers export to transformers' grouped matrix
    product, a custom op; the file runs and equals eager, and the simulator costs those layers
    as the GEMMs they are, its shape pass on the meta device (no fallback, no CPU values)."""
    from nac_engine.sim import simulate
    m = build(tmp_path, "mixtral", seq_len=16)
    c = compile_and_check(m.model, (), m.kwargs)
    grouped = [i.index for i in c.nac.instructions
               if c.nac.instruction_name(i) == "transformers.grouped_mm_fallback.default"]
    assert len(grouped) == 4                          # gate-up and down, in each of the 2 layers
    r = simulate(c.nac, "edge-32x32", inputs=named_inputs(c.nac, (), m.kwargs))
    assert "transformers.grouped_mm_fallback.default" not in r.unknown_ops
    assert not any("grouped_mm" in w for w in r.warnings)
    rec = r.instructions[grouped[0]]
    assert rec.unit == "systolic" and rec.macs == 16 * 2 * 32 * 128    # S = tokens x top-2 rows of K x N


def test_hf_build_errors(tmp_path):
    from nac_engine.compiler.errors import CompileError
    with pytest.raises(CompileError, match="no config.json"):
        hf.build(str(tmp_path))
    with pytest.raises(CompileError, match="exceeds the model's 64 positions"):
        build(tmp_path, "bert", seq_len=65)
    with pytest.raises(CompileError, match="not a transformers model class"):
        hf.load_model(str(tmp_path / "x.json"), model_class="os")


def test_buffers_become_named_parameters_without_optimisation(tmp_path):
    """Non-persistent buffers (BERT's position/token-type ids) are parameters by name, never unnamed
    user inputs — also when no pass runs (the reference compiler's flaw, research §8.2)."""
    import nac_engine
    from nac_engine.compiler import compile_model
    from nac_engine.format.verify import verify
    from nac_engine.runtime.mmap_check import check_schedule
    m = build(tmp_path, "bert", seq_len=8)
    res = compile_model(m.model, (), m.kwargs, optimize=False)
    nac = nac_engine.read(nac_engine.write(res.nac))
    assert verify(nac) == [] and check_schedule(nac).violations == []
    user_inputs = [i.index for i in nac.instructions if i.a == 2 and i.b == 0]
    assert sorted(nac.input_name_map) == user_inputs and len(user_inputs) == 2
    names = {p.name for p in nac.params.values()}
    assert {"embeddings.position_ids", "embeddings.token_type_ids"} <= names
    assert not any(i.a == 2 and i.b == 3 for i in nac.instructions)
