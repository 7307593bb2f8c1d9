"""Llama checkpoints with seeded random weights, written as a Hugging Face directory would be.

    python benchmarks/llm_checkpoints.py tinyllama|llama7b DIR [--dtype float32|float16]

No hub access: the configuration is the published one (TinyLlama-1.1B, Llama-2-7B), and every
weight is drawn from a seeded normal (standard deviation 0.02, as transformers initialises
Llama; RMSNorm scales 1) and written parameter by parameter into 2 GB safetensors shards with
transformers' index file, so a 7B model (27 GB in float32) never has to be in memory. The shapes
come from the model class built without weights (``nac_engine.compiler.hf._without_weights``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = {
    # TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json
    "tinyllama": dict(model_type="llama", hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                      num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, hidden_act="silu"),
    # meta-llama/Llama-2-7b-hf config.json
    "llama7b": dict(model_type="llama", hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                    max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                    tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, hidden_act="silu"),
}
SHARD_BYTES = 2 << 30


def shapes(config) -> list:
    """(name, shape) of every parameter of LlamaForCausalLM for ``config``, in module order."""
    import transformers
    from nac_engine.compiler.hf import _without_weights
    model = _without_weights(transformers.LlamaForCausalLM, config, True)
    return [(n, tuple(p.shape)) for n, p in model.named_parameters()]


def write_checkpoint(name: str, directory, dtype: str = "float32", seed: int = 0, log=print) -> Path:
    """Write the checkpoint (skipped when its index is already there); returns the directory."""
    import transformers
    from nac_engine.format.safetensors_file import Pending, dtype_name, write_safetensors
    out = Path(directory)
    index_path = out / "model.safetensors.index.json"
    if index_path.is_file():
        return out
    out.mkdir(parents=True, exist_ok=True)
    config = transformers.AutoConfig.for_model(**CONFIGS[name])
    config.dtype = dtype
    np_dtype = np.dtype(dtype)
    params = shapes(config)
    itemsize = np_dtype.itemsize
    shards, current, size = [], [], 0
    for pname, shape in params:
        n = int(np.prod(shape)) * itemsize
        if current and size + n > SHARD_BYTES:
            shards.append(current)
            current, size = [], 0
        current.append((pname, shape))
        size += n
    shards.append(current)
    weight_map, total = {}, 0
    rng_seed = np.random.SeedSequence(seed)
    children = iter(rng_seed.spawn(len(params)))
    for k, shard in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        entries = []
        for pname, shape in shard:
            child = next(children)

            def produce(shape=shape, child=child):
                if len(shape) == 1:                       # RMSNorm scales
                    return np.ones(shape, np_dtype)
                rng = np.random.default_rng(child)
                return (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)).astype(np_dtype)
            entries.append(Pending(pname, dtype_name(np_dtype), shape, produce))
            weight_map[pname] = fname
            total += int(np.prod(shape)) * itemsize
        tmp = out / (fname + ".tmp")
        with open(tmp, "wb") as fh:
            write_safetensors(fh, entries, {"format": "pt"})
        os.replace(tmp, out / fname)
        log(f"  wrote {fname} ({len(shard)} tensors)")
    config.save_pretrained(out)
    with open(index_path, "w") as fh:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, fh, indent=2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", choices=sorted(CONFIGS))
    ap.add_argument("directory")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    write_checkpoint(a.config, a.directory, a.dtype, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
