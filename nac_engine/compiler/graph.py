"""The compiler's graph: a flat list of nodes in execution order, built from an ExportedProgram.

Why our own IR and not ``torch.fx.Graph``: the passes replace ops by new tensor constants
(folding), and NAC needs every tensor to be either a user input, a named parameter or the
result of an op. Here a constant is just a ``param`` node holding its tensor, so a pass never
has to touch module attributes or the export signature.

Node kinds:

* ``input`` — a user input (``<INPUT B=0>``), named after the forward signature;
* ``param`` — any tensor known at compile time: parameters, buffers (persistent or not),
  lifted tensor constants and folded constants (``<INPUT B=1>``);
* ``op``    — a call of ``target`` (an ATen ``OpOverload`` or ``operator.getitem``);
  ``args``/``kwargs`` hold nodes, Python constants and (possibly nested) lists of them.

``spec`` is what the op produces: a :class:`TensorSpec`, a tuple of them (multi-output ops;
``None`` for non-tensor items), or ``None``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch

from .errors import CompileError


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple
    dtype: torch.dtype

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * _itemsize(self.dtype)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def spec_nbytes(spec: Any) -> int:
    if isinstance(spec, TensorSpec):
        return spec.nbytes
    if isinstance(spec, (tuple, list)):
        return sum(spec_nbytes(s) for s in spec)
    return 0


def spec_of_value(v: Any) -> Any:
    """TensorSpec (or nested tuple of them) of a real or fake tensor value."""
    if isinstance(v, torch.Tensor):
        shape = []
        for s in v.shape:
            if not isinstance(s, int):
                try:
                    s = int(s)
                except Exception:   # an unbacked / symbolic size
                    raise CompileError(f"symbolic dimension {s} in a tensor shape: the compiler needs "
                                       f"static shapes (a size that depends on a tensor's values is not one)",
                                       stage="export")
            shape.append(s)
        return TensorSpec(tuple(shape), v.dtype)
    if isinstance(v, (tuple, list)):
        return tuple(spec_of_value(x) for x in v)
    return None


class Node:
    __slots__ = ("id", "kind", "name", "target", "args", "kwargs", "spec", "tensor", "origin")

    def __init__(self, id: int, kind: str, name: str, *, target: Any = None, args: tuple = (),
                 kwargs: Optional[dict] = None, spec: Any = None, tensor: Optional[torch.Tensor] = None,
                 origin: str = ""):
        self.id = id
        self.kind = kind
        self.name = name
        self.target = target
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.spec = spec
        self.tensor = tensor
        self.origin = origin      # params: "parameter" / "buffer" / "constant" / "folded"

    @property
    def op_name(self) -> str:
        return target_name(self.target) if self.kind == "op" else f"<{self.kind}>"

    def inputs(self) -> list["Node"]:
        """Distinct nodes this node reads, in argument order."""
        seen: dict[int, Node] = {}
        for n in iter_nodes((self.args, self.kwargs)):
            seen.setdefault(n.id, n)
        return list(seen.values())

    def __repr__(self) -> str:
        return f"Node({self.id} {self.kind} {self.name} {self.op_name})"


def target_name(target: Any) -> str:
    """``aten.linear.default`` for ATen overloads, ``getitem`` for ``operator.getitem``."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return getattr(target, "__name__", str(target))


def iter_nodes(value: Any) -> Iterator[Node]:
    if isinstance(value, Node):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from iter_nodes(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_nodes(v)


def map_nodes(value: Any, fn: Callable[[Node], Any]) -> Any:
    if isinstance(value, Node):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_nodes(v, fn) for v in value)
    if isinstance(value, list):
        return [map_nodes(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_nodes(v, fn) for k, v in value.items()}
    return value


class Graph:
    """Nodes in execution order plus the output list. Node ids are unique and never reused."""

    def __init__(self):
        self.nodes: list[Node] = []
        self.outputs: list[Node] = []
        self.warnings: list[str] = []
        self._next_id = 0

    # -- building ----------------------------------------------------------------------
    def new_node(self, kind: str, name: str, **kw) -> Node:
        node = Node(self._next_id, kind, name, **kw)
        self._next_id += 1
        return node

    def append(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def insert_before(self, anchor: Node, node: Node) -> Node:
        self.nodes.insert(self.nodes.index(anchor), node)
        return node

    # -- queries -----------------------------------------------------------------------
    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "input"]

    @property
    def params(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "param"]

    @property
    def ops(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "op"]

    def users(self) -> dict[int, list[Node]]:
        """node id → distinct consumer nodes in order (the output list is not a node)."""
        out: dict[int, list[Node]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for src in n.inputs():
                out.setdefault(src.id, []).append(n)
        return out

    def output_ids(self) -> set[int]:
        return {n.id for n in self.outputs}

    def instruction_count(self) -> int:
        """What the emitted OPS stream will hold: inputs, used params, ops and one <OUTPUT>."""
        used = {n.id for op in self.nodes if op.kind == "op" for n in op.inputs()} | self.output_ids()
        params = sum(1 for n in self.nodes if n.kind == "param" and n.id in used)
        return len(self.inputs) + params + len(self.ops) + 1

    # -- editing -----------------------------------------------------------------------
    def replace_uses(self, old: Node, new: Node) -> None:
        swap = lambda n: new if n is old else n   # noqa: E731
        for n in self.nodes:
            if n.kind == "op":
                n.args = map_nodes(n.args, swap)
                n.kwargs = map_nodes(n.kwargs, swap)
        self.outputs = [swap(n) for n in self.outputs]

    def remove(self, nodes) -> None:
        ids = {n.id for n in nodes}
        if ids:
            self.nodes = [n for n in self.nodes if n.id not in ids]

    def unique_param_name(self, base: str) -> str:
        taken = {n.name for n in self.nodes if n.kind == "param"}
        if base not in taken:
            return base
        k = 1
        while f"{base}_{k}" in taken:
            k += 1
        return f"{base}_{k}"

    def check(self) -> None:
        """Every node reads only nodes that come before it (passes keep this invariant)."""
        seen: set[int] = set()
        for n in self.nodes:
            for src in n.inputs():
                if src.id not in seen:
                    raise AssertionError(f"{n} reads {src}, which is not before it")
            seen.add(n.id)
        for n in self.outputs:
            if n.id not in seen:
                raise AssertionError(f"output {n} is not in the graph")

    def evaluate(self, *inputs: torch.Tensor) -> list:
        """Run the graph eagerly on ``inputs`` (in input order): the reference a pass must preserve."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"graph has {len(self.inputs)} inputs, {len(inputs)} given")
        env: dict[int, Any] = {n.id: v for n, v in zip(self.inputs, inputs)}
        # NAC has no memory layout: its view is a reshape (``nac.view``). After a pass removes a
        # ``contiguous``, an eager ``aten.view`` could refuse a strided input that NAC accepts.
        as_reshape = {torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default}
        with torch.no_grad():
            for n in self.nodes:
                if n.kind == "param":
                    env[n.id] = n.tensor if isinstance(n.tensor, torch.Tensor) else n.tensor.load()
                elif n.kind == "op":
                    get = lambda x: env[x.id]   # noqa: E731
                    target = torch.ops.aten.reshape.default if n.target in as_reshape else n.target
                    env[n.id] = target(*map_nodes(n.args, get), **map_nodes(n.kwargs, get))
        return [env[n.id] for n in self.outputs]

    def copy(self) -> "Graph":
        """Structural copy (tensors shared): nodes are new objects, so passes on it leave this one alone."""
        g = Graph()
        g._next_id = self._next_id
        g.warnings = list(self.warnings)
        new: dict[int, Node] = {}
        for n in self.nodes:
            c = Node(n.id, n.kind, n.name, target=n.target, spec=n.spec, tensor=n.tensor, origin=n.origin)
            c.args = map_nodes(n.args, lambda x: new[x.id])
            c.kwargs = map_nodes(n.kwargs, lambda x: new[x.id])
            new[n.id] = g.append(c)
        g.outputs = [new[n.id] for n in self.outputs]
        return g

    def dump(self) -> str:
        """One line per node, for debugging and test failure messages."""
        lines = []
        for n in self.nodes:
            if n.kind == "op":
                args = map_nodes(n.args, lambda x: f"%{x.name}")
                kw = map_nodes(n.kwargs, lambda x: f"%{x.name}")
                lines.append(f"%{n.name} = {n.op_name}{args}{kw or ''}")
            else:
                lines.append(f"%{n.name} = <{n.kind}>")
        lines.append("return " + ", ".join(f"%{n.name}" for n in self.outputs))
        return "\n".join(lines)
