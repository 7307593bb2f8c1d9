"""A causal language model as two static programs: a prefill and one decode step with a key/value cache.

NAC programs have static shapes and no state that outlives a run, so generation is compiled as:

* **prefill** (``KvStep(model, slots)`` called with ``input_ids`` ``[1, T]``): runs the prompt and
  returns ``(logits [1, T, vocab], keys, values)``, where ``keys``/``values`` are the whole cache,
  ``[layers, 1, kv_heads, slots, head_dim]``, with positions ``0..T-1`` written;
* **decode step** (called with ``input_ids`` ``[1, 1]``, ``cache_position`` ``[1]``, ``past_keys``,
  ``past_values``): writes the new token's keys and values at ``cache_position`` and returns the
  logits and the updated cache. Run it once per generated token, feeding its cache back.

The cache is a transformers ``Cache`` whose layers hold the given tensors and update them *out of
place* (``index_copy``), so the exported program reads the cache as inputs and returns the new
one as outputs. Attention sees only the slots written so far: a 2-D mask ``slot <= position``
goes in with the tokens, and each layer reports ``cache_position[0]`` as its query offset, which is
where transformers' mask puts the new tokens. Logits equal transformers' own cached generation
(tested against ``generate``).
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from .errors import CompileError

STEPS = ("prefill", "decode")


def _layer_class():
    from transformers.cache_utils import StaticLayer

    class InputLayer(StaticLayer):
        """One layer's cache over given tensors, updated out of place at given positions."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor):
            super().__init__(max_cache_len=keys.shape[2])
            self.keys, self.values, self.positions = keys, values, positions
            self.dtype, self.device = keys.dtype, keys.device
            self.batch_size, self.num_heads = keys.shape[:2]
            self.k_head_dim, self.v_head_dim = keys.shape[-1], values.shape[-1]
            self.is_initialized = True
            self.cumulative_length = positions[0]      # the mask's query offset: where the new tokens go

        def update(self, key_states, value_states, *args, **kwargs):
            self.keys = self.keys.index_copy(2, self.positions, key_states)
            self.values = self.values.index_copy(2, self.positions, value_states)
            return self.keys, self.values

    return InputLayer


class KvStep(torch.nn.Module):
    """``model`` (a transformers causal LM) as one prefill or decode step over a ``slots``-long cache."""

    def __init__(self, model: Any, slots: int):
        super().__init__()
        config = model.config
        for attr in ("num_hidden_layers", "num_attention_heads", "hidden_size"):
            if not isinstance(getattr(config, attr, None), int):
                raise CompileError(f"a key/value cache needs the config's {attr}", stage="hf")
        self.model = model
        self.slots = int(slots)
        self.layers = config.num_hidden_layers
        self.kv_heads = _kv_heads(model)
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self._layer = _layer_class()

    def cache_shape(self) -> tuple:
        return (self.layers, 1, self.kv_heads, self.slots, self.head_dim)

    def forward(self, input_ids: torch.Tensor, cache_position: Optional[torch.Tensor] = None,
                past_keys: Optional[torch.Tensor] = None, past_values: Optional[torch.Tensor] = None):
        from transformers.cache_utils import Cache
        if cache_position is None:                     # prefill: the prompt from position 0
            cache_position = torch.arange(input_ids.shape[1])
        if past_keys is None:
            past_keys = past_values = torch.zeros(self.cache_shape())
        cache = Cache(layers=[self._layer(past_keys[i], past_values[i], cache_position) for i in range(self.layers)])
        # the slots written so far, through the last new position; the rest are never attended
        filled = (torch.arange(self.slots) <= cache_position[-1]).to(torch.long).unsqueeze(0)
        out = self.model(input_ids=input_ids, attention_mask=filled, past_key_values=cache,
                         position_ids=cache_position.unsqueeze(0), use_cache=True)
        return (out.logits, torch.stack([layer.keys for layer in cache.layers]),
                torch.stack([layer.values for layer in cache.layers]))


def step_inputs(step: KvStep, kind: str, tokens: int) -> dict:
    """Example inputs for a ``kind`` step: the prompt's ``tokens`` ids for a prefill; one id, its
    position and an empty cache for a decode step (the position is an input of the file, so the
    example's value, ``tokens`` where the cache has room, does not shape it)."""
    if kind not in STEPS:
        raise CompileError(f"--kv-cache must be one of {', '.join(STEPS)}, not {kind!r}", stage="hf")
    if kind == "prefill" and tokens >= step.slots:
        raise CompileError(f"the cache has {step.slots} slots (--cache-slots); a {tokens}-token prompt (--seq-len) "
                           "leaves none to generate into: raise --cache-slots", stage="hf")
    if step.slots < 2:
        raise CompileError(f"a decode step needs a cache of at least 2 slots, not {step.slots} (--cache-slots)",
                           stage="hf")
    vocab = int(getattr(step.model.config, "vocab_size", 2) or 2)
    gen = torch.Generator().manual_seed(0)
    if kind == "prefill":
        return {"input_ids": torch.randint(0, vocab, (1, tokens), generator=gen)}
    return {"input_ids": torch.randint(0, vocab, (1, 1), generator=gen),
            "cache_position": torch.tensor([min(tokens, step.slots - 1)]),
            "past_keys": torch.zeros(step.cache_shape()), "past_values": torch.zeros(step.cache_shape())}


def _kv_heads(model: Any) -> int:
    """Key/value heads per layer: the config's ``num_key_value_heads`` (grouped-query models), else
    what the attention modules keep (Falcon's multi-query layers have one, whatever its config's
    ``num_kv_heads`` says), else one per attention head."""
    config = model.config
    n = getattr(config, "num_key_value_heads", None)
    if isinstance(n, int) and n > 0:
        return n
    for module in model.modules():
        for attr in ("num_key_value_heads", "num_kv_heads"):
            n = getattr(module, attr, None)
            if isinstance(n, int) and n > 0:
                return n
    return config.num_attention_heads


__all__ = ["KvStep", "step_inputs", "STEPS"]
