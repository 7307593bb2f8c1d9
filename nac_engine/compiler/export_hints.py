"""What to tell the user when ``torch.export`` refuses their model: the fix, where one is known,
and the user's own line — never torch's generated code (``<eval_with_key>``, ``<string>``).

* a returned key/value cache (transformers ``DynamicCache`` and kin, ``use_cache=True``): the
  output is no tensor NAC can store; the fix is ``use_cache=False`` (``nac compile --hf`` does
  it). There is no user frame in that traceback (the failure is in flattening the outputs), so
  the place named is the model's ``forward``;
* a data-dependent guard inside a stock ``nn.Transformer``/``TransformerEncoder``: it compares
  the mask with a causal one to detect causality, which export cannot trace; the fix is
  ``is_causal``/``tgt_is_causal=True`` next to the mask;
* torch's advice about ``dynamic_shapes`` is dropped: the compiler exports with static shapes,
  so the user has none to change.
"""
from __future__ import annotations

import inspect
import os
import traceback
from typing import Any, Optional

_CACHE_WORDS = ("cache_utils", "DynamicCache", "StaticCache", "EncoderDecoderCache", "HybridCache")


def returns_cache(e: BaseException) -> bool:
    text = str(e)
    return "in output" in text and any(w in text for w in _CACHE_WORDS) or \
        "Cache" in text and "pytree" in text


def cache_hint(model: Any) -> str:
    return ("the model returns its key/value cache (use_cache=True), which is no tensor NAC can store: "
            "build or call it with use_cache=False (set model.config.use_cache = False, or pass "
            "use_cache=False to forward); nac compile --hf does this for you")


def _frames(e: BaseException) -> list:
    out, seen = [], set()
    exc: Optional[BaseException] = e
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out += traceback.extract_tb(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__
    return out


def transformer_causal_hint(e: BaseException) -> Optional[str]:
    """The stock nn.Transformer's causal-mask detection hit a data-dependent guard."""
    if "data-dependent" not in str(e) and "DataDependent" not in type(e).__name__:
        return None
    for fr in _frames(e):
        if fr.name == "_detect_is_causal_mask" or \
                fr.filename.replace(os.sep, "/").endswith("torch/nn/modules/transformer.py"):
            return ("nn.Transformer compares the attention mask with a causal mask to decide whether it is "
                    "causal, a data-dependent check export cannot trace: pass tgt_is_causal=True with "
                    "tgt_mask (is_causal=True / src_is_causal=True for an encoder mask) when the mask is "
                    "the causal one")
    return None


def forward_location(model: Any) -> Optional[str]:
    """``file:line: def forward(...)`` of the model's forward (where a returned value comes from)."""
    fwd = getattr(type(model), "forward", None)
    try:
        fwd = inspect.unwrap(fwd)          # transformers decorates forward (can_return_tuple, ...)
        lines, start = inspect.getsourcelines(fwd)
        k = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("def ")), 0)   # past decorators
        return f"{inspect.getsourcefile(fwd)}:{start + k}: {lines[k].strip()}"
    except (TypeError, OSError):
        return None


def without_dynamic_shapes_advice(text: str) -> str:
    """torch's lines suggesting ``dynamic_shapes`` changes: not applicable, none were used."""
    return "\n".join(ln for ln in text.splitlines() if "dynamic_shapes" not in ln and "Dim(" not in ln)


def data_dependent_hint(e: BaseException) -> Optional[str]:
    """A branch or a size that depends on a tensor's values (``if x.sum() > 0``,
    ``int((x > 0).sum())``): what a compiled program can do instead."""
    text = f"{type(e).__name__} {e}"
    if "DataDependent" not in text and "data-dependent" not in text:
        return None
    return ("the model decides something from a tensor's values (data-dependent control flow or "
            "size), which a compiled program cannot: choose values with torch.where, branch with "
            "torch.cond (compiled to <CONTROL_FLOW>), or make the size a constant")


def packed_quantized_hint(model: Any) -> Optional[str]:
    """torch.ao's dynamically quantised modules hold packed C++ parameters torch.export cannot
    trace: name the first such module and the way NAC quantises instead."""
    try:
        found = next(((name, type(m)) for name, m in model.named_modules()
                      if type(m).__module__.startswith("torch.ao.nn.quantized")), None)
    except Exception:       # not an nn.Module
        return None
    if found is None:
        return None
    name, cls = found
    return (f"module {name or '(the model)'!r} is a torch.ao quantised {cls.__name__}, whose packed "
            f"parameters torch.export cannot trace: compile the float model and quantise with NAC "
            f"instead (nac compile --quant int8_channel, or quantization='int8_channel')")


def is_generated(filename: str) -> bool:
    """Code torch generated (``<eval_with_key>.5``, ``<string>``), not a file the user wrote."""
    return filename.startswith("<")


__all__ = ["returns_cache", "cache_hint", "transformer_causal_hint", "forward_location",
           "without_dynamic_shapes_advice", "is_generated", "data_dependent_hint", "packed_quantized_hint"]
