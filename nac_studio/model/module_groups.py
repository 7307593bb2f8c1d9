"""Repeated blocks from the file's source map: the module hierarchy the compiler recorded.

``nac compile`` stores, per tick, the module path of the ``nn.Module`` that emitted it
(:mod:`nac_engine.format.source_map`). That is exact membership: a block's residual ``add``,
reshapes and softmax belong to ``h.3`` because the compiler says so, not because they sit
between two of its weight loads. A module path's first numeric component after the first
marks a repeat (``h.3.attn.c_attn`` → stem ``h``, block ``h.3``; ``features.4`` → block
``features.4``), and a stem seen with two or more indices is a repeated block, as in Model
Explorer's layer view. Files without a source map (older files, other compilers) keep the
parameter-name rule of :mod:`graph_model`, which is what a file with one falls back to
when it records no repeated module.

The map is read once per file and kept on the ``NacFile`` until its resource list is
replaced (a damaged map is the same as none: the Problems view reports it; the graph must
still draw).
"""
from __future__ import annotations

import re
from typing import Optional

_INDEX = re.compile(r"^\d+$")
_CACHE_ATTR = "_studio_module_blocks"


def module_block_of(path: str) -> Optional[tuple[str, str, int]]:
    """``h.3.attn.c_attn`` → (stem ``h``, block ``h.3``, 3); ``None`` without a repeat index."""
    parts = path.split(".")
    for k in range(1, len(parts)):
        if _INDEX.match(parts[k]):
            return ".".join(parts[:k]), ".".join(parts[:k + 1]), int(parts[k])
    return None


def module_block_ticks(nac) -> Optional[dict[str, list[int]]]:
    """Repeated-block prefix → its ticks (sorted), from the source map, in block order;
    ``None`` when the file has no (readable) source map or it records no repeated module."""
    rsrc = getattr(nac, "rsrc", None)
    cached = getattr(nac, _CACHE_ATTR, None)
    if cached is not None and cached[0] is rsrc:      # the same resource list: the same map
        return cached[1]
    result = _compute(nac)
    try:
        setattr(nac, _CACHE_ATTR, (rsrc, result))
    except AttributeError:     # a file object that takes no attributes: no cache
        pass
    return result


def _compute(nac) -> Optional[dict[str, list[int]]]:
    from nac_engine.errors import NacFormatError
    from nac_engine.format.source_map import read_source_map
    try:
        smap = read_source_map(nac)
    except (NacFormatError, ValueError, KeyError, TypeError):
        return None
    if smap is None or not len(smap):
        return None
    n = len(nac.instructions)
    by_stem: dict[str, dict[int, str]] = {}
    ticks: dict[str, list[int]] = {}
    for path, module_ticks in smap.modules().items():
        found = module_block_of(path) if path else None
        if found is None:
            continue
        stem, prefix, index = found
        by_stem.setdefault(stem, {})[index] = prefix
        ticks.setdefault(prefix, []).extend(t for t in module_ticks if 0 <= t < n)
    out: dict[str, list[int]] = {}
    for stem, by_index in by_stem.items():
        if len(by_index) < 2:
            continue
        for i in sorted(by_index):
            prefix = by_index[i]
            if ticks.get(prefix):
                out[prefix] = sorted(set(ticks[prefix]))
    if not out:
        return None
    return dict(sorted(out.items(), key=lambda kv: kv[1][0]))
