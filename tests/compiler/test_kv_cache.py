"""Generation with a key/value cache: a prefill file and a decode-step file, chained by
``nac_engine.generate``, give transformers' greedy ``generate`` tokens and logits."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from nac_engine.cli import main as nac
from nac_engine.generate import GenerationError, generate

VOCAB = 120
# one worker builds the module's checkpoint once (8 s) instead of each worker its own
pytestmark = pytest.mark.xdist_group("kv_cache")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    root = tmp_path_factory.mktemp("kv")
    config = transformers.AutoConfig.for_model(
        model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=128)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    directory = root / "hf"
    model.save_pretrained(directory, max_shard_size="100KB")
    # a word-level tokenizer over the model's vocabulary, so --prompt TEXT has one to use
    words = [f"w{i}" for i in range(VOCAB - 1)] + ["[UNK]"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")          # joins words with spaces
    tok.save(str(directory / "tokenizer.json"))
    files = {}
    for kind, extra in (("prefill", ["--tokenizer"]), ("decode", [])):
        files[kind] = str(root / f"{kind}.nac")
        assert nac(["compile", "--hf", str(directory), "--kv-cache", kind, "--seq-len", "8", "--cache-slots", "40",
                    "-o", files[kind]] + extra) == 0
    return model, files, tok


def _reference(model, prompt: list, n: int):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False, output_logits=True,
                             return_dict_in_generate=True, min_new_tokens=n)
    return out.sequences[0, len(prompt):].tolist(), [x[0].numpy() for x in out.logits]


# the prefill's length shorter than the file's (padded) in the default tier; equal and longer (~7 s apiece) in the heavy one
@pytest.mark.parametrize("prompt_len", [pytest.param(8, marks=pytest.mark.heavy), 5,
                                        pytest.param(11, marks=pytest.mark.heavy)])
def test_chained_decode_steps_equal_greedy_generate(llama, prompt_len):
    model, files, _ = llama
    prompt = [int(x) for x in np.random.default_rng(prompt_len).integers(0, VOCAB, prompt_len)]
    got = generate(files["prefill"], files["decode"], prompt, 16)
    want_tokens, want_logits = _reference(model, prompt, 16)
    for step, (a, b) in enumerate(zip(got.logits, want_logits)):
        rel = float(np.abs(a - b).max() / np.abs(b).max())
        assert rel <= 1e-4, (step, rel)
    # greedy tokens are equal wherever the top-2 margin leaves no near-tie
    for step, (t, w, lg) in enumerate(zip(got.tokens, want_tokens, want_logits)):
        top2 = np.sort(lg)[-2:]
        if top2[1] - top2[0] > 1e-3:
            assert t == w, step
        else:
            break                 # after a near-tie the two runs may go different ways
    assert len(got.tokens) == 16


def test_nac_generate_prints_the_text_as_it_grows(llama, capsys):
    model, files, tok = llama
    prompt_text = "w3 w17 w42 w7"
    ids = tok.encode(prompt_text).ids
    assert nac(["generate", files["prefill"], files["decode"], "--prompt", prompt_text, "--tokens", "6"]) == 0
    want_tokens, _ = _reference(model, ids, 6)
    assert capsys.readouterr().out.strip() == tok.decode(want_tokens)
    assert nac(["generate", files["prefill"], files["decode"], "--ids", ",".join(map(str, ids)), "--tokens", "6"]) == 0
    assert capsys.readouterr().out.split() == [str(t) for t in want_tokens]


def test_a_tokenizer_folder_stands_in_for_an_embedded_one(llama, tmp_path, capsys):
    """Files compiled without --tokenizer still generate from text: --tokenizer DIR reads the model
    folder's tokenizer as the compile would have embedded it."""
    from nac_engine.compiler.tokenizer import TOKENIZER_FILES
    from nac_engine.format import read, write
    model, files, tok = llama
    bare = str(tmp_path / "prefill_bare.nac")
    with read(files["prefill"]) as prefill:
        prefill.rsrc = [r for r in prefill.rsrc if r.name not in TOKENIZER_FILES]
        write(prefill, bare)
    prompt = "w3 w17 w42 w7"
    assert nac(["generate", bare, files["decode"], "--prompt", prompt, "--tokens", "4"]) == 2
    assert "give the model's folder with --tokenizer DIR" in capsys.readouterr().err
    folder = str(Path(files["prefill"]).parent / "hf")
    assert nac(["generate", bare, files["decode"], "--prompt", prompt, "--tokens", "4", "--tokenizer", folder]) == 0
    want, _ = _reference(model, tok.encode(prompt).ids, 4)
    assert capsys.readouterr().out.strip() == tok.decode(want)
    assert nac(["generate", bare, files["decode"], "--prompt", prompt, "--tokenizer", str(tmp_path)]) == 2
    assert f"--tokenizer {tmp_path}: no tokenizer files" in capsys.readouterr().err


def test_refusals(llama, capsys):
    _, files, _ = llama
    with pytest.raises(GenerationError, match="slots"):
        generate(files["prefill"], files["decode"], list(range(30)), 20)
    with pytest.raises(GenerationError, match="not a prefill and a decode-step"):
        generate(files["decode"], files["prefill"], [1, 2], 2)
    assert nac(["generate", files["prefill"], files["decode"], "--ids", "1,x"]) == 2
    assert "--ids" in capsys.readouterr().err


def test_a_decode_step_needs_no_seq_len_and_a_mismatched_pair_is_named(llama, tmp_path, capsys):
    """A decode step's position is an input: a cache smaller than the default --seq-len (32)
    compiles without --seq-len. A prefill whose cache has other slots than the decode step's
    is refused by name (it was an internal error from the first decode run)."""
    _, files, _ = llama
    directory = str(Path(files["prefill"]).parent / "hf")
    small = str(tmp_path / "dec16.nac")
    assert nac(["compile", "--hf", directory, "--kv-cache", "decode", "--cache-slots", "16", "-o", small]) == 0
    capsys.readouterr()
    assert nac(["generate", files["prefill"], small, "--ids", "1,2,3", "--tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert "(40 slots against 16): compile both with the same --cache-slots" in err and "internal error" not in err
    assert nac(["compile", "--hf", directory, "--kv-cache", "prefill", "--seq-len", "8", "--cache-slots", "8",
                "-o", str(tmp_path / "p.nac")]) == 2
    assert "leaves none to generate into: raise --cache-slots" in capsys.readouterr().err


@pytest.mark.parametrize("family", ["falcon", "mixtral"])
@pytest.mark.heavy       # transformers' generate on two more families: ~6 s apiece
def test_other_families_decode_as_transformers_generates(tmp_path, family):
    """Falcon's multi-query layers keep one key/value head whatever its config's num_kv_heads says
    (the cache was sized for one per attention head and the prefill's export failed); Mixtral's
    expert layers run through transformers' grouped matrix product."""
    import transformers
    extra = dict(num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2, intermediate_size=64) \
        if family == "mixtral" else {}
    config = transformers.AutoConfig.for_model(model_type=family, hidden_size=32, num_hidden_layers=2,
                                               num_attention_heads=2, vocab_size=VOCAB, max_position_embeddings=64,
                                               **extra)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(tmp_path / "hf")
    files = {}
    for kind in ("prefill", "decode"):
        files[kind] = str(tmp_path / f"{kind}.nac")
        assert nac(["compile", "--hf", str(tmp_path / "hf"), "--kv-cache", kind, "--seq-len", "6", "--cache-slots",
                    "16", "-o", files[kind]]) == 0
    prompt = [5, 17, 3, 99, 42, 8]
    got = generate(files["prefill"], files["decode"], prompt, 6)
    want_tokens, want_logits = _reference(model, prompt, 6)
    for step, (a, b) in enumerate(zip(got.logits, want_logits)):
        assert float(np.abs(a - b).max() / np.abs(b).max()) <= 1e-4, step


@pytest.mark.parametrize("fits", [True, False])
def test_a_decode_file_too_big_for_one_run_is_held_across_the_tokens_when_it_fits(llama, monkeypatch, fits):
    """A model above the per-run holding limit (an LLM) is read per use and released in a single
    run; a generation runs its decode file once per token, so its weights are held across the
    steps when they fit in memory (read once), and read again per step only when they do not."""
    from nac_engine.runtime import session as session_module
    _, files, _ = llama
    monkeypatch.setattr(session_module, "RESIDENT_WEIGHTS_MAX", 0)      # every file "too big to hold"
    monkeypatch.setattr(session_module, "can_hold", lambda nbytes: fits)
    reads: dict = {}
    real = session_module.Session._param_tensor

    def counted(self, p, stored=None):
        if self.nac.path == files["decode"]:
            reads[p.name] = reads.get(p.name, 0) + 1
        return real(self, p, stored)
    monkeypatch.setattr(session_module.Session, "_param_tensor", counted)
    got = generate(files["prefill"], files["decode"], [3, 17, 42], 6)
    assert len(got.tokens) == 6 and reads
    assert set(reads.values()) == ({1} if fits else {5})        # 5 decode runs after the prefill's token
