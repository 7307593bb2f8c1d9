"""Flattened ``Tensor[]`` arguments: proof at compile time that the interpreter reads them back as written.

NAC has no list boundaries: ``cat([a, b], 1)`` is stored as ``a, b, 1`` (one D slot per tensor).
The interpreter (:func:`nac_engine.runtime.kernels.bind`) regroups the slots by searching the
ATen schema. For most ops only one grouping fits, but not for all: ``lstm.input(input, hx:
Tensor[], params: Tensor[], ...)`` has two lists side by side and ``lstm_cell(input, hx:
Tensor[], w_ih, w_hh, ...)`` a list followed by plain tensors, so ``x, h, c, w_ih, ...`` fits
several groupings and the search picks one — the wrong one computes garbage or fails at run time.

So every op that had a list holding tensors is bound here exactly as the interpreter will bind
it: each tensor slot a distinct meta tensor of the producer's shape and dtype, each constant the
value the CNST table stores. The binding must put every tensor in the schema argument (and list
position) it came from, and every given constant in its own argument. :func:`regroup_problems`
lists the ops for which it does not; the pipeline decomposes those during export when torch has
a decomposition for them and refuses the model otherwise (:func:`regroup_error`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from .canonicalize import _TORCH_OBJECTS, encode_argument, schema_values, torch_object_string
from .errors import CompileError
from .graph import Graph, Node, TensorSpec
from .tables import constant_record

_META = torch.device("meta")


@dataclass(frozen=True)
class RegroupProblem:
    node: Node
    op: Any            # the OpOverload
    reason: str

    def describe(self) -> str:
        return (f"{self.node.name} ({self.op}): NAC stores its tensor lists flattened and the interpreter "
                f"would regroup them differently: {self.reason}")


def has_tensor_list(node: Node) -> bool:
    """An ATen op with a list argument holding at least one tensor."""
    if node.kind != "op" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    return any(isinstance(v, (list, tuple)) and any(isinstance(x, Node) for x in v)
               for v in (*node.args, *node.kwargs.values()))


def regroup_problems(graph: Graph) -> list[RegroupProblem]:
    """Ops of ``graph`` whose flattened arguments the interpreter would not regroup as written."""
    out = []
    for node in graph.nodes:
        if has_tensor_list(node):
            reason = regroup_mismatch(node)
            if reason is not None:
                out.append(RegroupProblem(node, node.target, reason))
    return out


def regroup_error(problem: RegroupProblem, stage: str = "export") -> CompileError:
    return CompileError(problem.describe() + "; torch has no decomposition for this op, so it cannot be "
                        "written unambiguously", stage=stage, source=problem.node.origin or None)


def _slot_tensor(producer: Node) -> torch.Tensor:
    spec = producer.spec
    if isinstance(spec, tuple):        # a multi-output producer read directly means its first result
        spec = next((s for s in spec if isinstance(s, TensorSpec)), None)
    if not isinstance(spec, TensorSpec):
        return torch.empty((), device=_META)
    return torch.empty(spec.shape, dtype=spec.dtype, device=_META)


def regroup_mismatch(node: Node) -> Optional[str]:
    """Why the interpreter's binding of ``node``'s flattened arguments differs from the original
    grouping, or None when it is the same."""
    from ..runtime.kernels import bind

    flat: list = []
    expected = []        # (schema argument, original value, [(flat index, list position or None)])
    for p, v in schema_values(node):
        slots = []
        for k, a in enumerate(encode_argument(node, p.name, str(p.type), v)):
            if a.is_ref:
                slots.append((len(flat), k if isinstance(v, (list, tuple)) else None))
                flat.append(_slot_tensor(a.node))
            else:
                flat.append(constant_record(a.value, node.name)[1])
        expected.append((p, v, slots))
    try:
        positional, keyword = bind(node.target, tuple(flat), _META)
    except TypeError as e:
        return f"the flattened arguments do not bind at all ({e})"
    bound = dict(keyword)
    rest = iter(positional)
    for a in node.target._schema.arguments:
        if a.name in keyword:
            continue
        try:
            bound[a.name] = next(rest)
        except StopIteration:
            break

    for p, v, slots in expected:
        got = bound.get(p.name)
        if slots:
            if isinstance(v, (list, tuple)):
                if not isinstance(got, (list, tuple)) or len(got) != len(v):
                    return (f"{p.name} should get the {len(v)} items written for it, got "
                            f"{_describe(got)}")
                wrong = [k for i, k in slots if got[k] is not flat[i]]
                wrong += [k for k, x in enumerate(v) if x is None and got[k] is not None]
            else:
                wrong = [] if got is flat[slots[0][0]] else [0]
            if wrong:
                return f"{p.name} would receive {_describe(got)} instead of the tensor(s) written for it"
        elif isinstance(v, (list, tuple)) and any(isinstance(x, Node) for x in v):
            continue                  # a list of only Nones where tensors may go: nothing to place
        elif v is None or "Device" in str(p.type):
            continue                  # None binds to the default; devices follow the session
        elif p.name not in bound:
            return f"{p.name} = {v!r} would not be bound"
        elif not _same_constant(v, got):
            return f"{p.name} should be {v!r} but would be {_describe(got)}"
    return None


def _same_constant(expected: Any, got: Any) -> bool:
    if isinstance(expected, _TORCH_OBJECTS) or isinstance(got, _TORCH_OBJECTS):
        as_text = lambda x: torch_object_string(x) if isinstance(x, _TORCH_OBJECTS) else x   # noqa: E731
        return as_text(expected) == as_text(got)
    if isinstance(expected, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(expected) and all(
            _same_constant(e, g) for e, g in zip(expected, got))
    if isinstance(got, (list, tuple)) and len(got) == 1:       # int[] given as a bare int
        return _same_constant(expected, got[0])
    if isinstance(expected, bool) or isinstance(got, bool):
        return isinstance(expected, bool) and isinstance(got, bool) and expected == got
    if isinstance(got, torch.Tensor):
        return False
    return expected == got


def _describe(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return f"Tensor{tuple(v.shape)}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_describe(x) for x in v) + "]"
    return repr(v)


__all__ = ["RegroupProblem", "has_tensor_list", "regroup_problems", "regroup_mismatch", "regroup_error"]
