"""A simulation's cost per layer of the model: cycles, DMA bytes and stalls of each decoder block
(``format/blocks.py`` says which tick belongs to which block). A block's cycles run from its first tick's issue to its last
tick's end (outside the blocks: the rest of the run's cycles); DMA bytes are those of the transfers that move its ticks' values (weight preloads
above all).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..format.blocks import tick_blocks

OUTSIDE = "(outside the layers)"


@dataclass
class LayerCost:
    layer: str
    first_tick: int
    last_tick: int
    cycles: int                  # first issue to last end
    compute_cycles: int
    stall_cycles: int
    dma_bytes: int
    instructions: int


def per_layer(result, nac) -> list[LayerCost]:
    """One :class:`LayerCost` per block in order of first appearance, then the rest; [] when the
    model has fewer than two blocks."""
    blocks = tick_blocks(nac)
    if len({b for b in blocks if b}) < 2:
        return []
    costs: dict[str, LayerCost] = {}
    span: dict[str, list] = {}
    for r in result.instructions:
        b = blocks[r.tick] if 0 <= r.tick < len(blocks) else None
        key = b or OUTSIDE
        c = costs.get(key)
        if c is None:
            c = costs[key] = LayerCost(key, r.tick, r.tick, 0, 0, 0, 0, 0)
            span[key] = [r.issue_cycle, r.end_cycle]
        c.first_tick, c.last_tick = min(c.first_tick, r.tick), max(c.last_tick, r.tick)
        c.compute_cycles += r.compute_cycles
        c.stall_cycles += r.stall_cycles
        c.instructions += 1
        span[key][0] = min(span[key][0], r.issue_cycle)
        span[key][1] = max(span[key][1], r.end_cycle)
    for t in result.transfers:
        b = blocks[t.value] if 0 <= t.value < len(blocks) else None
        c = costs.get(b or OUTSIDE)
        if c is not None:
            c.dma_bytes += t.bytes
    for key, c in costs.items():
        c.cycles = span[key][1] - span[key][0]
    if OUTSIDE in costs:        # before and after the blocks: what the blocks' spans leave of the run
        costs[OUTSIDE].cycles = max(0, result.total_cycles - sum(c.cycles for k, c in costs.items() if k != OUTSIDE))
    blocks_first = [c for k, c in costs.items() if k != OUTSIDE]
    return blocks_first + ([costs[OUTSIDE]] if OUTSIDE in costs else [])


def format_layers(costs: list) -> str:
    if not costs:
        return ""
    width = max(len(c.layer) for c in costs)
    lines = [f"  per layer:{'':{max(0, width - 8)}}      cycles     compute      stalls     DMA bytes  ticks"]
    for c in costs:
        lines.append(f"    {c.layer:<{width}}  {c.cycles:>10,}  {c.compute_cycles:>10,}  {c.stall_cycles:>10,}  "
                     f"{c.dma_bytes:>12,}  {c.first_tick}-{c.last_tick}")
    return "\n".join(lines)


__all__ = ["LayerCost", "per_layer", "format_layers", "OUTSIDE"]
