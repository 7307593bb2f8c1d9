"""Which of a model's repeated blocks (decoder layers) each instruction belongs to.

A model's repeated blocks are the items of its ``ModuleList``\\ s (``model.layers.3``,
``transformer.h.11``, ``encoder.layer.0``): a module path with a number in it. Each tick belongs
to the block its source-map entry's module path names (up to the first numbered component); a
weight load belongs to the block its parameter name does; everything else (embeddings, final
norm, head) to none. The simulator's and the diff's per-layer tables group ticks by it.
"""
from __future__ import annotations

import re
from typing import Optional

_BLOCK = re.compile(r"^(.*?\.\d+)(?:\.|$)")


def block_of(path: str) -> Optional[str]:
    """``model.layers.3.self_attn.q_proj`` → ``model.layers.3``; None without a numbered part."""
    m = _BLOCK.match(path or "")
    return m.group(1) if m else None


def tick_blocks(nac) -> list:
    """The block (or None) of each tick of ``nac``, from its source map and parameter names."""
    from ..isa.optable import OP_INPUT
    from .source_map import read_source_map
    try:
        sm = read_source_map(nac)
    except Exception:          # noqa: BLE001 - a damaged map only loses the grouping
        sm = None
    out = []
    for ins in nac.instructions:
        block = None
        if ins.a == OP_INPUT and ins.b == 1 and ins.c and len(ins.c) >= 2:
            p = nac.params.get(ins.c[1])
            block = block_of(p.name) if p is not None else None
        elif sm is not None:
            e = sm.entry(ins.index)
            block = block_of(e.module_path) if e is not None else None
        out.append(block)
    return out


__all__ = ["block_of", "tick_blocks"]
