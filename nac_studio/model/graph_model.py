"""The ABCD dataflow of a file as a graph the Studio can draw (no Qt here).

Nodes are instructions (tick = OPS index), optionally constants (one node per use, so a
constant like ``1`` used 300 times does not become a hub that ruins the layout), and
collapsed blocks. Edges come from the D field: producer tick → consumer tick, exactly
:meth:`Instruction.producers`, de-duplicated (``mul(v5, v5)`` is one edge).

Blocks
------
Repeated structure is found from parameter names: a name like
``m.encoder.layer.3.attention.self.query.weight`` has its first numeric component at
``3``; the *stem* ``m.encoder.layer`` seen with two or more different numbers marks a
repeated block, and ``m.encoder.layer.3`` is one block prefix.

The instructions of a block are a **contiguous tick interval**: from the first load of one
of its parameters (or first consumer of one) to the last consumer of one, extended over a
trailing tail of instructions whose producers all lie inside the block (GPT-2's residual
``add`` after the MLP projection). Everything scheduled between those ticks belongs to the
block, even an instruction unrelated to its parameters. That is the price of the rule's
soundness: the instruction stream is topologically ordered, so every edge goes from a lower
tick to a higher one, and a path that leaves a tick interval can never come back into it.
Collapsing an interval into one node therefore can never create a cycle, whatever the
schedule. Intervals of different prefixes that overlap (an interleaving schedule) are
clipped in tick order so they stay disjoint and contiguous, which keeps the same guarantee.
One exception keeps blocks meaningful: a *source* (parameter load, input) scheduled inside
the interval but read outside it too — GPT-2's folded causal mask, loaded once in block 0
and read by all twelve — stays out of the block. No edge enters a source, so that cannot
create a cycle either.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np

from nac_engine.isa.coerce import use_note
from nac_engine.format.model import NacFile
from nac_engine.format.output_names import returned_names
from nac_engine.text.literals import format_literal
from nac_engine.isa.optable import CUSTOM_OP_KIN, OP_CONTROL_FLOW, OP_CONVERGENCE, OP_INPUT, OP_OUTPUT

from .document import Selection
from .graph_labels import node_attributes, op_base_name
from .module_groups import module_block_ticks

# --------------------------------------------------------------------------- op classes
#: Colour classes, in legend order.
OP_CLASSES = ("matmul", "elementwise", "normalisation", "activation", "data", "reduction", "io", "group", "other")
OP_CLASS_TITLES = {
    "matmul": "Matmul / conv", "elementwise": "Elementwise", "normalisation": "Normalisation",
    "activation": "Activation", "data": "Data movement", "reduction": "Reduction",
    "io": "Input / output / param", "group": "Collapsed block", "other": "Other",
}

_EXACT = {}
for _cls, _names in {
    "matmul": "matmul mm bmm addmm baddbmm addbmm linear einsum conv1d conv2d conv3d convolution conv_transpose1d "
              "conv_transpose2d conv_transpose3d scaled_dot_product_attention scaled_dot_product_flash_attention "
              "scaled_dot_product_efficient_attention addmv mv dot outer bilinear grouped_mm",
    "elementwise": "add sub rsub mul div neg pow sqrt rsqrt exp exp2 expm1 log log2 log10 log1p where gt ge lt le "
                   "eq ne abs clamp clamp_min clamp_max clip maximum minimum reciprocal erf erfc sin cos tan sign "
                   "floor ceil round trunc masked_fill fill bitwise_and bitwise_or bitwise_not bitwise_xor "
                   "logical_and logical_or logical_not logical_xor remainder fmod lerp addcmul addcdiv "
                   "square isnan isinf nan_to_num copysign atan2 floor_divide true_divide pass",
    "normalisation": "layer_norm native_layer_norm batch_norm native_batch_norm group_norm native_group_norm "
                     "instance_norm rms_norm local_response_norm normalize",
    "activation": "relu relu6 gelu silu sigmoid tanh softmax log_softmax hardtanh leaky_relu elu selu celu mish "
                  "hardswish hardsigmoid softplus softsign glu prelu threshold logsigmoid tanhshrink",
    "data": "view reshape transpose permute slice select expand expand_as unsqueeze squeeze cat concat stack split "
            "split_with_sizes chunk clone contiguous to copy index index_select gather scatter embedding "
            "flatten unflatten narrow pad constant_pad_nd repeat t roll flip unbind alias detach lift_fresh_copy "
            "movedim unfold tile broadcast_to masked_select take index_put slice_scatter select_scatter "
            "as_strided dropout native_dropout type_as view_as reshape_as squeeze_copy unsqueeze_copy getitem",
    "reduction": "sum mean max min amax amin argmax argmin prod var std var_mean std_mean norm linalg_vector_norm "
                 "max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d "
                 "adaptive_avg_pool2d adaptive_max_pool2d logsumexp cumsum cumprod any all topk sort "
                 "max_pool2d_with_indices count_nonzero",
}.items():
    for _n in _names.split():
        _EXACT[_n] = _cls

def op_class(name: str) -> str:
    """Colour class of an op name (one of :data:`OP_CLASSES`)."""
    if name.startswith("<") or name in ("input", "param", "state", "lifted", "saved", "target",
                                         "return", "subreturn", "sgd_step", "end_train"):
        return "other" if name in ("<CONTROL_FLOW>", "<CONVERGENCE>") else "io"
    base = op_base_name(CUSTOM_OP_KIN.get(name, name)).rstrip("_")
    key = base.lstrip("_")
    if key in _EXACT:
        return _EXACT[key]
    # Names the table does not know: recognise the family from the word they are built on.
    for word, cls in (("conv", "matmul"), ("matmul", "matmul"), ("attention", "matmul"),
                      ("batch_norm", "normalisation"), ("layer_norm", "normalisation"),
                      ("group_norm", "normalisation"), ("rms_norm", "normalisation"),
                      ("pool", "reduction"), ("softmax", "activation"), ("relu", "activation"),
                      ("gelu", "activation"), ("sigmoid", "activation"),
                      ("view", "data"), ("copy", "data"), ("slice", "data"), ("index", "data"),
                      ("reshape", "data"), ("permute", "data"), ("transpose", "data")):
        if word in key:
            return cls
    return "other"


# --------------------------------------------------------------------------- blocks
_BLOCK_INDEX = re.compile(r"^\d+$")


def block_prefix(param_name: str) -> Optional[tuple[str, str, int]]:
    """``encoder.layer.3.attn.w`` → (stem ``encoder.layer``, prefix ``encoder.layer.3``, 3).

    The outermost numeric component wins, so nested repeats (``layers.0.experts.3``) group
    by the outer block. ``None`` when the name has no numeric component after the first.
    """
    parts = param_name.split(".")
    for k in range(1, len(parts) - 1):
        if _BLOCK_INDEX.match(parts[k]):
            return ".".join(parts[:k]), ".".join(parts[:k + 1]), int(parts[k])
    return None


def detect_block_prefixes(nac: NacFile) -> list[str]:
    """Prefixes of repeated blocks: stems seen with at least two different indices. From
    the source map's module paths when the file has one (:mod:`module_groups`), else from
    parameter names."""
    modules = module_block_ticks(nac)
    if modules:
        return list(modules)
    by_stem: dict[str, dict[int, str]] = {}
    for p in nac.params.values():
        bp = block_prefix(p.name)
        if bp is not None:
            by_stem.setdefault(bp[0], {})[bp[2]] = bp[1]
    out = []
    for stem, by_index in by_stem.items():
        if len(by_index) >= 2:
            out.extend(by_index[i] for i in sorted(by_index))
    return out


@dataclass
class Block:
    """The ticks ``lo..hi`` (inclusive) of parameter prefix ``prefix``, less ``shared``."""
    prefix: str
    lo: int
    hi: int
    n_params: int = 0
    shared: tuple = ()     # sources in the interval that belong elsewhere (see block_intervals)

    @property
    def ticks(self) -> list[int]:
        if not self.shared:
            return list(range(self.lo, self.hi + 1))
        out = set(self.shared)
        return [t for t in range(self.lo, self.hi + 1) if t not in out]

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1 - len(self.shared)


def block_intervals(nac: NacFile, prefixes: Iterable[str]) -> list[Block]:
    """Tick interval of each prefix (see the module docstring for the rule), in tick order.

    A prefix that matches no parameter, or whose interval is swallowed by an earlier one,
    is left out.
    """
    instrs = nac.instructions
    n = len(instrs)
    wanted = list(dict.fromkeys(prefixes))
    if not wanted or not n:
        return []
    loads: dict[int, list[int]] = {}          # param id -> ticks that load it
    for ins in instrs:
        if ins.a == OP_INPUT and ins.b == 1 and ins.c and len(ins.c) >= 2:
            loads.setdefault(ins.c[1], []).append(ins.index)
    consumers = _consumers(nac)
    blocks = []
    modules = module_block_ticks(nac) or {}
    # every dotted prefix of every parameter name -> its ids: one pass, not one per block
    # (400 blocks x 2,400 parameters was 2 s of startswith on a 20k-node model)
    by_prefix: dict[str, list[int]] = {}
    for p in nac.params.values():
        parts = p.name.split(".")
        for k in range(1, len(parts) + 1):
            by_prefix.setdefault(".".join(parts[:k]), []).append(p.id)
    for prefix in wanted:
        pids = by_prefix.get(prefix, [])
        ticks = list(modules.get(prefix, ()))       # what the compiler recorded for the module
        for pid in pids:
            for t in loads.get(pid, ()):
                ticks.append(t)
                ticks.extend(consumers.get(t, ()))
        if not ticks:
            continue
        blocks.append(Block(prefix, min(ticks), max(ticks), len(pids)))
    blocks.sort(key=lambda b: (b.lo, b.hi))
    out: list[Block] = []
    for b in blocks:          # clip overlaps in tick order: intervals stay disjoint and contiguous
        if out and b.lo <= out[-1].hi:
            b.lo = out[-1].hi + 1
        if b.lo <= b.hi:
            out.append(b)
    for k, b in enumerate(out):   # absorb the tail whose producers are all inside the block
        limit = out[k + 1].lo if k + 1 < len(out) else n
        while b.hi + 1 < limit:
            ins = instrs[b.hi + 1]
            prods = ins.producers()
            if ins.a == OP_OUTPUT or not prods or not all(b.lo <= p <= b.hi for p in prods):
                break
            b.hi += 1
    # A source scheduled inside the interval but read outside it too (a causal mask loaded
    # once and used by every block, an input) is not part of the block: otherwise every
    # later block would seem to depend on this one. Leaving a source out cannot create a
    # cycle, since no edge enters a source.
    for b in out:
        dotted = b.prefix + "."
        shared = []
        for t in range(b.lo, b.hi + 1):
            ins = instrs[t]
            if ins.producers() or ins.a == OP_OUTPUT:
                continue
            p = nac.param_for(ins)
            if p is not None and (p.name.startswith(dotted) or p.name == b.prefix):
                continue
            if any(not b.lo <= c <= b.hi for c in consumers.get(t, ())):
                shared.append(t)
        b.shared = tuple(shared)
    return out


def _consumers(nac: NacFile) -> dict[int, list[int]]:
    du = nac.def_use()     # the file's one def-use index
    return {p: list(du.users(p)) for p in du.read_values() if 0 <= p < du.n}


# --------------------------------------------------------------------------- the graph
@dataclass
class Node:
    key: tuple            # ("ins", tick) | ("const", consumer tick, argument position) | ("group", prefix)
    kind: str             # instruction | param | input | output | const | group
    label: str            # short text drawn in the box
    op_class: str
    tick: int             # first tick it stands for (a const: its consumer's tick)
    last_tick: int        # last tick it stands for (a group: the block end)
    op: str = ""          # full op name ("aten.linear.default"), param name, const literal, block prefix
    param_id: Optional[int] = None
    const_id: Optional[int] = None
    params: tuple = ()    # ids of hidden parameters this instruction reads
    detail: str = ""      # secondary line (signature, shape, instruction count)
    composition: tuple = ()   # a group: ((op class, count), ...) of its instructions

    def selection(self) -> Selection:
        """What selecting this node selects in the document."""
        if self.kind == "param" and self.param_id is not None:
            return Selection("param", self.param_id)
        if self.kind == "const" and self.const_id is not None:
            return Selection("constant", self.const_id)
        return Selection("instruction", self.tick)


@dataclass
class DataflowGraph:
    nodes: list[Node]
    edges: np.ndarray                     # (m, 2) int32 node indices, src → dst, unique, src before dst
    node_of_tick: np.ndarray              # tick -> node index standing for it, -1 when hidden
    blocks: list[Block] = field(default_factory=list)          # every detected block (collapsed or not)
    collapsed: tuple = ()                 # prefixes drawn as one node
    problems: list[str] = field(default_factory=list)          # edges dropped (bad producer offsets)
    show_params: bool = True
    show_consts: bool = False

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def n_edges(self) -> int:
        return int(self.edges.shape[0])

    def node_for_selection(self, sel: Optional[Selection]) -> Optional[int]:
        """The node standing for ``sel`` (instruction, param or constant), or ``None``."""
        if sel is None:
            return None
        if sel.kind in ("instruction", "input", "mmap") and isinstance(sel.key, int):
            if 0 <= sel.key < len(self.node_of_tick):
                k = int(self.node_of_tick[sel.key])
                return k if k >= 0 else None
            return None
        if sel.kind == "param":
            for i, nd in enumerate(self.nodes):   # a visible load of it, else the first reader
                if nd.kind == "param" and nd.param_id == sel.key:
                    return i
            for i, nd in enumerate(self.nodes):
                if sel.key in nd.params:
                    return i
            return None
        if sel.kind == "constant":
            for i, nd in enumerate(self.nodes):
                if nd.const_id == sel.key:
                    return i
        return None

    def nodes_reading_param(self, pid: int) -> list[int]:
        return [i for i, nd in enumerate(self.nodes) if pid in nd.params]

    def search(self, text: str) -> list[int]:
        """Nodes whose op, label, parameter name or ``v<tick>`` matches ``text`` (case-insensitive)."""
        q = text.strip().lower()
        if not q:
            return []
        m = re.fullmatch(r"[vt]?(\d+)", q)
        if m:
            t = int(m.group(1))
            if 0 <= t < len(self.node_of_tick) and self.node_of_tick[t] >= 0:
                return [int(self.node_of_tick[t])]
        return [i for i, nd in enumerate(self.nodes)
                if q in nd.op.lower() or q in nd.label.lower()]


def build_graph(nac: NacFile, *, show_params: bool = True, show_consts: bool = False,
                collapse_prefixes: Optional[Iterable[str]] = None) -> DataflowGraph:
    """The dataflow of ``nac`` with the given parts shown; see the module docstring.

    ``collapse_prefixes``: block prefixes (usually from :func:`detect_block_prefixes`) drawn
    as one node each; ``None`` collapses nothing. Any parameter prefix works, not only
    detected ones.
    """
    instrs = nac.instructions
    n = len(instrs)
    detected = detect_block_prefixes(nac)
    wanted = list(collapse_prefixes or ())
    blocks = block_intervals(nac, list(dict.fromkeys(detected + wanted)))
    collapse = set(wanted)
    collapsed_blocks = [b for b in blocks if b.prefix in collapse]
    group_of = np.full(n, -1, dtype=np.int64)
    for gi, b in enumerate(collapsed_blocks):
        group_of[b.lo:b.hi + 1] = gi
        group_of[list(b.shared)] = -1

    names = {i.index: i.name for i in nac.input_names}
    attr_memo: dict = {}       # node_attributes per (op, constants): layers repeat them
    problems: list[str] = []
    nodes: list[Node] = []
    node_of_tick = np.full(n, -1, dtype=np.int64)
    group_node: dict[int, int] = {}
    hidden_param: dict[int, int] = {}           # tick of a hidden param load -> param id
    const_edges: list[tuple[int, int]] = []

    def add_instruction(ins) -> None:
        t = ins.index
        node = _instruction_node(nac, ins, names, attr_memo)
        if node.kind == "param" and not show_params:
            hidden_param[t] = node.param_id if node.param_id is not None else -1
            return
        if show_consts and ins.a >= 10 and ins.d:
            # const nodes go right before their consumer so node order stays topological
            consts = [a for a in nac.arguments(ins) if a.kind == "const"]
            first = len(nodes)
            for pos, arg in enumerate(consts):
                const = nac.constants.get(arg.const_id) if arg.const_id is not None else None
                text = _const_text(const) if const is not None else f"c{arg.const_id}"
                text = use_note(arg.value, arg.code) or text     # a shared constant as the op uses it
                nodes.append(Node(("const", t, pos), "const", _elide(text, 18), "io", t, t,
                                  op=text, const_id=arg.const_id, detail=f"c{arg.const_id}"))
            const_edges.extend((k, len(nodes)) for k in range(first, len(nodes)))
        node_of_tick[t] = len(nodes)
        nodes.append(node)

    emitted = np.zeros(n, dtype=bool)
    for ins in instrs:
        t = ins.index
        gi = int(group_of[t])
        if emitted[t]:
            continue
        if gi >= 0:
            if gi not in group_node:
                b = collapsed_blocks[gi]
                for st in b.shared:      # sources it reads go first: node order stays topological
                    add_instruction(instrs[st])
                    emitted[st] = True
                group_node[gi] = len(nodes)
                nodes.append(Node(("group", b.prefix), "group", _tail(b.prefix, 3), "group", b.lo, b.hi,
                                  op=b.prefix,
                                  detail=f"v{b.lo}–v{b.hi} · {b.size} ops",
                                  composition=_composition(nac, b)))
            node_of_tick[t] = group_node[gi]
            continue
        add_instruction(ins)

    edges = set()
    reads: dict[int, set] = {}
    for ins in instrs:
        t = ins.index
        dst = int(node_of_tick[t])
        for p in ins.producers():
            if not (0 <= p < t):
                problems.append(f"t{t}: producer {p} is not an earlier instruction (edge dropped)")
                continue
            if p in hidden_param:
                if dst >= 0 and hidden_param[p] >= 0:
                    reads.setdefault(dst, set()).add(hidden_param[p])
                continue
            src = int(node_of_tick[p])
            if src < 0 or dst < 0 or src == dst:
                continue
            edges.add((src, dst))
    edges.update(const_edges)
    for k, pids in reads.items():
        nodes[k].params = tuple(sorted(pids))
        # weights folded into their consumer (Netron style): their names and shapes become
        # attributes on its detail line
        folded = []
        for pid in nodes[k].params:
            p = nac.params.get(pid)
            if p is not None:
                shape = "×".join(str(d) for d in p.shape) if p.shape is not None else "?"
                folded.append(f"{p.name.rsplit('.', 1)[-1]}[{shape}]")
        if folded and nodes[k].kind != "group":
            nodes[k].detail = " · ".join([nodes[k].detail] + folded) if nodes[k].detail else " · ".join(folded)
    arr = np.array(sorted(edges), dtype=np.int32).reshape(-1, 2)
    return DataflowGraph(nodes, arr, node_of_tick, blocks, tuple(b.prefix for b in collapsed_blocks),
                         problems, show_params, show_consts)


def _instruction_node(nac: NacFile, ins, names: dict, memo: Optional[dict] = None) -> Node:
    t = ins.index
    name = nac.instruction_name(ins)
    if ins.a == OP_INPUT:
        p = nac.param_for(ins)
        if ins.b == 1:
            pname = p.name if p is not None else f"param #{ins.c[1] if ins.c and len(ins.c) > 1 else '?'}"
            shape = f"{p.dtype}{list(p.shape)}" if p is not None and p.shape is not None else ""
            return Node(("ins", t), "param", _short_param(pname), "io", t, t, op=pname,
                        param_id=p.id if p is not None else None, detail=f"v{t} · {shape}" if shape else f"v{t}")
        if ins.b == 3 and ins.c and len(ins.c) >= 2:
            const = nac.constants.get(ins.c[1])
            text = _const_text(const) if const is not None else f"c{ins.c[1]}"
            return Node(("ins", t), "input", "lifted " + _elide(text, 14), "io", t, t, op=f"lifted {text}",
                        const_id=ins.c[1], detail="lifted constant")
        label = names.get(t, name)
        return Node(("ins", t), "input", label, "io", t, t, op=f"{name} {label}".strip(),
                    detail=f"v{t} · {name}" if label != name else f"v{t}")
    if ins.a == OP_OUTPUT:
        named = [x for x in returned_names(nac, ins) if x]
        shown = ", ".join(named[:6]) + (f" (+{len(named) - 6} more)" if len(named) > 6 else "")
        return Node(("ins", t), "output", name, "io", t, t, op=name,
                    detail=f"v{t} · {shown or f'{len(ins.producers())} values'}")
    if ins.a in (OP_CONTROL_FLOW, OP_CONVERGENCE):
        return Node(("ins", t), "instruction", name.strip("<>").lower(), "other", t, t, op=name, detail=f"v{t}")
    base = op_base_name(name)
    attrs = node_attributes(nac, ins, base, memo)     # dim=-1, eps=1e-05: what a reader looks for
    return Node(("ins", t), "instruction", base, op_class(name), t, t, op=name,
                detail=f"v{t} · {attrs}" if attrs else f"v{t}")


def _composition(nac: NacFile, b: Block) -> tuple:
    counts: dict[str, int] = {}
    for t in b.ticks:
        cls = op_class(nac.instruction_name(nac.instructions[t]))
        counts[cls] = counts.get(cls, 0) + 1
    return tuple((c, counts[c]) for c in OP_CLASSES if c in counts)


def _short_param(name: str) -> str:
    return _tail(name, 2)


def _tail(name: str, k: int) -> str:
    return ".".join(name.split(".")[-k:])


def _const_text(const) -> str:
    try:
        return format_literal(const.type, const.value)
    except (ValueError, TypeError):
        return repr(const.value)


def _elide(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"
