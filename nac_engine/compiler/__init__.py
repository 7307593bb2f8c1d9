"""The compiler: any ``torch.export``-able PyTorch model → an optimised, canonical, deterministic NacFile.

Pipeline, one module per stage: ``export`` (torch.export + inference decompositions → our
``graph``), ``passes/`` (constant folding, CSE, DCE, identities, inverse pairs, algebra,
constant indexing), ``canonicalize`` (standard NAC ops, schema-ordered arguments, signature
codes), ``tables`` (CMAP/PERM/CNST IDs), ``emit`` (ABCD + DATA), then ``quantize``, ``tokenizer``
and ``schedule`` (MMAP); ``external`` writes the result. ``hf`` builds Hugging Face models,
``command`` is ``nac compile``.

Importing this package does not import torch; :func:`compile` does.
"""
from __future__ import annotations

from typing import Optional

from .errors import CompileError

__all__ = ["compile", "compile_model", "CompileError"]


def compile(model, args=(), kwargs=None, *, optimize: bool = True, quantization: Optional[str] = None,
            weights: str = "internal", version: str = "1.6", mmap: str = "min-peak", preload_lookahead: int = 2,
            tokenizer: Optional[str] = None, debug_info: bool = True):
    """Compile ``model(*args, **kwargs)`` into a :class:`~nac_engine.format.model.NacFile`.

    * ``optimize``: run the optimiser passes (``False`` = the exported graph as is);
    * ``quantization``: ``None``/``"none"``, ``"fp16"``, ``"int8_tensor"``, ``"int8_channel"``, ``"block_fp8"``;
    * ``weights``: ``"internal"`` (DATA) or ``"external"`` (``<base>.safetensors``, written by
      :func:`nac_engine.compiler.external.write_compiled`);
    * ``version``: ``"1.6"`` or ``"1.8"``;
    * ``mmap``: ``"min-peak"`` (default) or ``"reference"`` (the reference compiler's planner);
    * ``preload_lookahead``: how many instructions ahead weights are preloaded;
    * ``tokenizer``: a local Hugging Face tokenizer directory to embed (RSRC).
    * ``debug_info``: record the source map (tick -> module path, node, user's file:line) in RSRC;
      the input signature is always recorded.

    The model is exported in eval mode (its training flag is restored afterwards); ``model`` may
    also be a ``torch.export.ExportedProgram``. Unquantised parameter payloads are views of the
    model's own tensors (no copy, so a GPT-2-size compile stays within 3× the weight bytes):
    write the file before changing the model's weights.

    Raises :class:`CompileError` (export failures carry torch's message and the user's source line).
    ``compile_model`` takes the same arguments and also returns the :class:`~.report.CompileReport`.
    """
    return compile_model(model, args, kwargs, optimize=optimize, quantization=quantization, weights=weights,
                         version=version, mmap=mmap, preload_lookahead=preload_lookahead,
                         tokenizer=tokenizer, debug_info=debug_info).nac


def compile_model(*args, **kwargs):
    """:func:`compile` returning ``CompileResult(nac, report)``."""
    from .pipeline import compile_model as _compile_model
    return _compile_model(*args, **kwargs)
