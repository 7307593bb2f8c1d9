"""Stage 3: each op node → its canonical NAC name and its encoded argument list.

Names. ATen overloads that *are* a standard NAC op (research §4.3, restricted to the cases whose
semantics match exactly, argument order included) get the ``nac.*`` name; every other op keeps
its ATen name (``aten.linear.default``) and goes to CMAP. ``operator.getitem`` is ``getitem``.
Reordering aliases of the reference compiler (``rsub``→``sub`` swapped, ``masked_fill``→``where``,
``squeeze``→``view``) are not used: they make the file harder to read and ``squeeze`` is ambiguous.

Arguments. NAC stores arguments without names, and our interpreter binds them to the ATen schema
by type. So we write them in *schema order*: positional arguments, then keyword-only ones, with
every gap before the last given argument filled by its schema default. Binding is then exact.
A list holding tensors (``cat``, ``index``) is flattened into its items, as the reference does.

Signature codes (seed 000 §5.2.3), from the schema argument: ``query``/``key``/``value`` → Q/K/V,
``attn_mask``/``mask`` → M, ``weight`` → W, ``bias`` → B, any other tensor read from a parameter
→ P, else T; constants: dims/axes → A, other lists → S, then b/i/f by Python type, ``s`` for a
string-typed argument, ``c`` for None and dtype/device/layout/memory-format (stored as strings).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Optional

import torch

from .errors import CompileError
from .graph import Graph, Node, target_name

# ATen overload → standard NAC op. Every entry is argument-compatible with the kernel of that op.
CANONICAL = {
    **{f"aten.add.{o}": "nac.add" for o in ("Tensor", "Scalar")},
    **{f"aten.sub.{o}": "nac.sub" for o in ("Tensor", "Scalar")},
    **{f"aten.mul.{o}": "nac.mul" for o in ("Tensor", "Scalar")},
    **{f"aten.div.{o}": "nac.div" for o in ("Tensor", "Scalar", "Tensor_mode", "Scalar_mode")},
    **{f"aten.gt.{o}": "nac.gt" for o in ("Tensor", "Scalar")},
    **{f"aten.le.{o}": "nac.le" for o in ("Tensor", "Scalar")},
    "aten.neg.default": "nac.neg",
    "aten.where.self": "nac.where",
    "aten.clone.default": "nac.clone",
    **{f"aten.{op}.default": "nac.view" for op in ("view", "_unsafe_view", "reshape")},
    "aten.transpose.int": "nac.transpose",
    "aten.t.default": "nac.transpose",
    **{f"aten.{op}.default": "nac.matmul" for op in ("mm", "bmm", "matmul")},
    **{f"aten.arange.{o}": "nac.arange" for o in ("default", "start", "start_step")},
    **{f"aten.{op}.default": f"nac.{op}" for op in ("zeros", "zeros_like", "new_zeros", "ones", "ones_like",
                                                    "new_ones", "full", "full_like")},
    "aten.detach.default": "nac.pass",
    "aten.alias.default": "nac.pass",
}

_DIM_NAMES = frozenset({"dim", "dim0", "dim1", "dims", "axis", "start_dim", "end_dim", "source", "destination"})
_TENSOR_ROLE = {"query": "Q", "key": "K", "value": "V", "attn_mask": "M", "mask": "M", "weight": "W", "bias": "B"}
_TORCH_OBJECTS = (torch.dtype, torch.device, torch.layout, torch.memory_format)


@dataclass
class Arg:
    code: str                      # signature character
    node: Optional[Node] = None    # producer, for tensor slots
    value: Any = None              # Python value, for constant slots

    @property
    def is_ref(self) -> bool:
        return self.node is not None


@dataclass
class CanonicalOp:
    node: Node
    name: str
    args: list[Arg]

    @property
    def signature(self) -> str:
        return "".join(a.code for a in self.args)


def canonical_name(target: Any) -> str:
    if target is operator.getitem:
        return "getitem"
    raw = target_name(target)
    return CANONICAL.get(raw, raw)


def torch_object_string(v: Any) -> str:
    """``torch.float32`` → ``"float32"``, ``device('cpu')`` → ``"cpu"``: how NAC stores them."""
    if isinstance(v, torch.device):
        return v.type if v.index is None else f"{v.type}:{v.index}"
    s = str(v)
    return s[6:] if s.startswith("torch.") else s


def schema_values(node: Node) -> list[tuple[Any, Any]]:
    """``[(schema argument, value), ...]`` in schema order, gaps filled with defaults."""
    schema = node.target._schema
    params = list(schema.arguments)
    given: dict[int, Any] = {}
    names = {p.name: i for i, p in enumerate(params)}
    positional = [i for i, p in enumerate(params) if not p.kwarg_only]
    if len(node.args) > len(positional):
        raise CompileError(f"{node.name}: {len(node.args)} positional arguments for {schema}", stage="canonicalize")
    for i, v in zip(positional, node.args):
        given[i] = v
    for k, v in node.kwargs.items():
        if k not in names:
            raise CompileError(f"{node.name}: keyword {k!r} is not in the schema {schema}", stage="canonicalize")
        given[names[k]] = v
    out = []
    for i in range(max(given) + 1 if given else 0):
        p = params[i]
        if i in given:
            out.append((p, given[i]))
        elif p.has_default_value():
            out.append((p, p.default_value))
        else:
            raise CompileError(f"{node.name}: required argument {p.name!r} of {schema} is missing",
                               stage="canonicalize")
    return out


def _tensor_code(name: str, producer: Node) -> str:
    role = _TENSOR_ROLE.get(name)
    if role is not None:
        return role
    return "P" if producer.kind == "param" else "T"


def _const_code(name: str, type_str: str, v: Any) -> str:
    if name in _DIM_NAMES and (isinstance(v, int) and not isinstance(v, bool)
                               or isinstance(v, (list, tuple)) and v and all(isinstance(x, int) for x in v)):
        return "A"
    if isinstance(v, (list, tuple)):
        return "S"
    if isinstance(v, bool):
        return "b"
    if isinstance(v, int):
        return "i"
    if isinstance(v, float):
        return "f"
    if isinstance(v, str) and "str" in type_str:
        return "s"
    return "c"


def encode_argument(node: Node, name: str, type_str: str, v: Any) -> list[Arg]:
    """One schema argument's value → its slots (a list holding tensors → one slot per item)."""
    if isinstance(v, Node):
        return [Arg(_tensor_code(name, v), node=v)]
    if isinstance(v, (list, tuple)) and any(isinstance(x, Node) for x in v):
        items = []
        for x in v:
            if isinstance(x, Node):
                items.append(Arg("P" if x.kind == "param" else "T", node=x))
            elif x is None:
                items.append(Arg("c", value=None))
            else:
                raise CompileError(f"{node.name} ({node.op_name}): a list mixing tensors and {x!r} cannot be "
                                   f"encoded", stage="canonicalize")
        return items
    if isinstance(v, _TORCH_OBJECTS):
        return [Arg("c", value=torch_object_string(v))]
    if isinstance(v, (list, tuple)):
        v = tuple(torch_object_string(x) if isinstance(x, _TORCH_OBJECTS) else x for x in v)
    if isinstance(v, torch.Tensor):
        raise CompileError(f"{node.name} ({node.op_name}): a tensor passed as a constant argument",
                           stage="canonicalize")
    return [Arg(_const_code(name, type_str, v), value=v)]


def canonicalize_op(node: Node) -> CanonicalOp:
    name = canonical_name(node.target)
    if isinstance(node.target, torch._ops.OpOverload):
        args: list[Arg] = []
        for p, v in schema_values(node):
            args.extend(encode_argument(node, p.name, str(p.type), v))
    elif node.target is operator.getitem:
        src, index = node.args
        args = [Arg("T" if src.kind != "param" else "P", node=src), Arg("i", value=int(index))]
    else:
        raise CompileError(f"{node.name}: cannot canonicalise {node.op_name}", stage="canonicalize")
    return CanonicalOp(node, name, args)


def canonicalize(graph: Graph) -> list[CanonicalOp]:
    return [canonicalize_op(n) for n in graph.nodes if n.kind == "op"]
