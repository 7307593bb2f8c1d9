"""``torch.cond`` → ``<CONTROL_FLOW>`` (seed 000 §7.3.1: C = [3, true_len, false_len], D = [predicate]).

NAC's branches have no merge: an instruction after the two blocks cannot read a value either
block computed (the interpreter steps the untaken block over as placeholders). So the code that
depends on the ``cond`` result is **duplicated into both blocks** (tail duplication) and each block
ends with its own ``<OUTPUT B=0>``: the true block is the true branch's ops, then its copy of the
rest of the program, then ``return``; the false block the same with the false branch. Code that
does not depend on the result stays before the ``<CONTROL_FLOW>``; parameters the blocks read are
loaded before it (a load inside one block would be a placeholder for the other). A later or
nested ``cond`` is expanded the same way inside each block.

In the graph, a ``cond`` is one opaque op node until :func:`expand_control_flow` runs (after the
optimiser, so no pass moves code across a branch): its arguments are the predicate node, the two
branch ``GraphModule``\\ s and the operand nodes. Expansion leaves two marker kinds for ``emit``:
``control`` (args: the predicate; target: :class:`Blocks`, the last node of each block) and
``branch_return`` (args: the block's outputs). The MMAP planner does not model branches, so a file
with control flow gets no MMAP schedule (every value stays resident).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch

from .errors import CompileError
from .fx_source import fx_source, map_fx
from .graph import Graph, Node, map_nodes, spec_of_value


def is_cond(target: Any) -> bool:
    return target is getattr(torch.ops.higher_order, "cond", None)


@dataclass
class Blocks:
    """Target of a ``control`` node: the last node of its true and of its false block."""
    true_end: Node
    false_end: Node

    @property
    def __name__(self) -> str:       # target_name() of the marker
        return "<CONTROL_FLOW>"


def has_control_flow(graph: Graph) -> bool:
    return any(n.kind == "control" for n in graph.nodes)


def expand_control_flow(graph: Graph) -> int:
    """Expand every ``cond`` node (module docstring); returns how many were expanded."""
    if not any(n.kind == "op" and is_cond(n.target) for n in graph.nodes):
        return 0
    counter = [0]
    graph.nodes = _expand(graph, list(graph.nodes), list(graph.outputs), counter, top=True)
    return counter[0]


def _depends_on(nodes: list, root: Node) -> set:
    dep = {root.id}
    for n in nodes:
        if any(s.id in dep for s in n.inputs()):
            dep.add(n.id)
    return dep


def _expand(graph: Graph, nodes: list, outputs: list, counter: list, top: bool = False) -> list:
    k = next((i for i, n in enumerate(nodes) if n.kind == "op" and is_cond(n.target)), None)
    if k is None:
        if top:
            return nodes
        ret = graph.new_node("branch_return", f"branch_return_{counter[0]}", args=tuple(outputs))
        return nodes + [ret]
    cond = nodes[k]
    counter[0] += 1
    dep = _depends_on(nodes[k + 1:], cond)
    prefix = nodes[:k] + [n for n in nodes[k + 1:] if n.id not in dep]
    tail = [n for n in nodes[k + 1:] if n.id in dep]
    pred, true_gm, false_gm, operands = cond.args[0], cond.args[1], cond.args[2], tuple(cond.args[3])
    if not isinstance(pred, Node):
        raise CompileError(f"{cond.name}: torch.cond with a Python predicate {pred!r} (export would have "
                           f"inlined it)", stage="control_flow")
    blocks = []
    for side, gm in (("true", true_gm), ("false", false_gm)):
        tag = f"{cond.name}_{side}"
        body, results = _inline(graph, gm, operands, tag, cond.origin)
        mapping, copies = _copy_tail(graph, tail, cond, results, tag)
        outs = [mapping.get(o.id, o) if o.id != cond.id else _only(results, cond) for o in outputs]
        blocks.append(_expand(graph, body + copies, outs, counter))
    control = graph.new_node("control", f"{cond.name}_control", args=(pred,),
                             target=Blocks(blocks[0][-1], blocks[1][-1]))
    control.origin = cond.origin
    return prefix + [control] + blocks[0] + blocks[1]


def _only(results: list, cond: Node) -> Node:
    if len(results) != 1:
        raise CompileError(f"{cond.name}: the model returns the whole torch.cond tuple", stage="control_flow")
    return results[0]


def _copy_tail(graph: Graph, tail: list, cond: Node, results: list, tag: str) -> tuple[dict, list]:
    """Fresh copies of the nodes after ``cond`` that read its result, with ``getitem(cond, i)``
    replaced by the branch's i-th result: (old id → node standing for it, the copies in order)."""
    mapping: dict[int, Node] = {}
    copies: list[Node] = []

    def remap(x: Node) -> Node:
        if x.id == cond.id:
            return _only(results, cond)
        return mapping.get(x.id, x)

    for n in tail:
        if n.kind == "op" and n.target is operator.getitem and n.args and n.args[0] is cond:
            mapping[n.id] = results[int(n.args[1])]
            continue
        c = graph.new_node(n.kind, f"{n.name}__{tag}", target=n.target, spec=n.spec, tensor=n.tensor,
                           origin=n.origin)
        c.args = map_nodes(n.args, remap)
        c.kwargs = map_nodes(n.kwargs, remap)
        mapping[n.id] = c
        copies.append(c)
    return mapping, copies


def _inline(graph: Graph, gm: torch.fx.GraphModule, operands: tuple, tag: str,
            origin: str) -> tuple[list, list]:
    """The branch's ops as new graph nodes reading ``operands``; (nodes, result nodes)."""
    env: dict[str, Any] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(operands):
        raise CompileError(f"{tag}: the branch takes {len(placeholders)} operands, torch.cond passes "
                           f"{len(operands)}", stage="control_flow")
    for ph, v in zip(placeholders, operands):
        env[ph.name] = v
    body: list[Node] = []
    results: list = []
    resolve = lambda n: env[n.name]   # noqa: E731
    for fx in gm.graph.nodes:
        if fx.op == "placeholder":
            continue
        if fx.op == "output":
            results = [map_fx(v, resolve) for v in (fx.args[0] if isinstance(fx.args[0], (tuple, list))
                                                    else (fx.args[0],))]
            break
        if fx.op == "get_attr":
            env[fx.name] = getattr(gm, fx.target)
            continue
        if fx.op != "call_function" or not (isinstance(fx.target, torch._ops.OpOverload) or
                                            fx.target is operator.getitem or is_cond(fx.target)):
            raise CompileError(f"{tag}: branch node {fx.name!r} ({fx.op} {fx.target}) is not an ATen call",
                               stage="control_flow", source=fx_source(fx))
        node = graph.new_node("op", f"{tag}_{fx.name}", target=fx.target, args=map_fx(fx.args, resolve),
                              kwargs=map_fx(dict(fx.kwargs), resolve), spec=spec_of_value(fx.meta.get("val")))
        node.origin = fx_source(fx) or origin
        env[fx.name] = node
        body.append(node)
    for r in results:
        if not isinstance(r, Node):
            raise CompileError(f"{tag}: a branch result is {r!r}, not a tensor", stage="control_flow")
    return body, results


__all__ = ["expand_control_flow", "has_control_flow", "is_cond", "Blocks"]
