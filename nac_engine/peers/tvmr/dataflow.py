"""Register dataflow of a TVMR program: which instruction's result each instruction reads.

Each instruction's reads and writes come from its operand pattern (first register written, the
others read) with the exceptions the ISA spells out (``store_output`` reads B, branches and
host ops that send a register read it). Straight-line code gets SSA names by renaming each write
(``H1.3`` is the third value H1 holds); with LOOP / END_LOOP / BREAK / JUMP / CALL / RETURN / IF_* the
program is cut into basic blocks and reaching definitions are iterated over the control-flow graph,
so a read inside a loop gets an edge from the write before the loop and from the write at the end of
the body (a phi). Registers read before any write come from their definition (cold weights: const
nodes keyed by thermogram key).
"""
from __future__ import annotations

from typing import Optional

from ..base import PeerEdge, PeerGraph, PeerNode
from . import isa

# core opcodes with control flow
LOOP, END_LOOP, BREAK, CALL, RETURN, JUMP, IF_ZERO, IF_NONZERO, SKIP, HALT = \
    0x6000, 0x6001, 0x6002, 0x6006, 0x6007, 0x6008, 0x6009, 0x600A, 0x600B, 0x0001
_BRANCH = {CALL, JUMP, IF_ZERO, IF_NONZERO}
_ENDS_BLOCK = {LOOP, END_LOOP, BREAK, CALL, RETURN, JUMP, IF_ZERO, IF_NONZERO, SKIP, HALT}
#: host ops whose first register receives a value (the rest send theirs)
_RECEIVES = ("READ", "RECV", "PEEK", "POP", "STATUS", "FIRE", "COLLECT", "EXEC", "QUERY", "COUNT", "LOAD",
             "TRAVERSE", "SCORE")
MAX_CFG_INSTRUCTIONS = 50_000
MAX_PHI_EDGES = 16


def _kind(i) -> str:
    op = i.op
    if op is None:
        return "other"
    m = op.mnemonic
    if i.ext_id == 0 and i.opcode == 0x1007:
        return "input"
    if i.ext_id == 0 and i.opcode == 0x1008:
        return "output"
    if "MATMUL" in m or m in ("WIRE_FORWARD", "EMBED_LOOKUP", "EMBED_SEQUENCE"):
        return "matmul"
    if i.ext_id == 0 and 0x6000 <= i.opcode <= 0x600B:
        return "control"
    if op.domain:
        return "host"
    if m in ("RELU", "SIGMOID", "TANH", "GELU", "SOFTMAX"):
        return "activation"
    if m in ("ADD", "SUB", "MUL", "SHIFT", "SCALE", "CLAMP", "NEGATE", "CMP_GT", "TERNARY_ADD_BIAS", "GATE_UPDATE",
             "DEQUANTIZE", "QUANTIZE"):
        return "elementwise"
    if m in ("COPY_REG", "SWAP_REG", "ZERO_REG", "CONCAT", "SLICE", "SQUEEZE", "UNSQUEEZE", "TRANSPOSE"):
        return "data"
    return "other"


def reads_writes(i) -> tuple[list[int], list[int]]:
    """Registers an instruction reads and writes (register bytes)."""
    op = i.op
    if op is None:
        return [], []
    b = i.operands
    regs = [b[n] for n, k in enumerate(op.kinds) if k == "R"]
    if i.ext_id == 0:
        if i.opcode in (0x1008, 0x7000, 0x7004, 0x7005, 0x6005):     # store_output B; trace/assert/dump read
            return ([b[1]] if i.opcode == 0x1008 else regs[:1]), []
        if i.opcode in (IF_ZERO, IF_NONZERO):
            return [b[0]], []
        if i.opcode == 0x1005:                                       # swap writes both
            return [b[0], b[1]], [b[0], b[1]]
        if i.opcode in (0x1002, 0x1006, 0x1007, 0x1009, 0x1000, 0x200A):   # load/zero/alloc/init write A
            return [], [b[0]]
        if 0x6000 <= i.opcode <= 0x600B or not regs:
            return [], []
        if i.opcode in (0x1003, 0x1001):                             # store_weights / free read A
            return [b[0]], []
        if 0x2000 <= i.opcode < 0x3000 or 0x5000 <= i.opcode < 0x6000:  # in-place on A
            return regs, regs[:1]
        return regs[1:], regs[:1]
    if not regs:
        return [], []
    if op.domain or i.ext_id in (0x0009, 0x000B, 0x000C, 0x0005, 0x0007, 0x0008):
        if any(r in op.mnemonic for r in _RECEIVES):
            return regs[1:], regs[:1]
        return regs, []
    if i.ext_id == 0x000A:                                           # test: assertions read
        return regs, []
    return regs[1:], regs[:1]


def _successors(ins: list) -> list[list[int]]:
    n = len(ins)
    loop_stack: list[int] = []
    loop_of_end: dict[int, int] = {}
    end_of_loop: dict[int, int] = {}
    for i in ins:
        if i.ext_id == 0 and i.opcode == LOOP:
            loop_stack.append(i.index)
        elif i.ext_id == 0 and i.opcode == END_LOOP and loop_stack:
            s = loop_stack.pop()
            loop_of_end[i.index] = s
            end_of_loop[s] = i.index
    returns_to = [i.index + 1 for i in ins if i.ext_id == 0 and i.opcode == CALL and i.index + 1 < n]
    succ: list[list[int]] = []
    open_loops: list[int] = []
    for i in ins:
        k = i.index
        nxt = [k + 1] if k + 1 < n else []
        if i.ext_id != 0:
            succ.append(nxt)
            continue
        t = int.from_bytes(i.operands[2:4], "big")
        tgt = [t] if t < n else []
        if i.opcode == LOOP:
            open_loops.append(k)
        if i.opcode == END_LOOP and open_loops:
            open_loops.pop()
        o = i.opcode
        if o == HALT:
            succ.append([])
        elif o == JUMP:
            succ.append(tgt)
        elif o in (CALL, IF_ZERO, IF_NONZERO):
            succ.append(sorted(set(tgt + nxt)))
        elif o == RETURN:
            succ.append(returns_to)
        elif o == END_LOOP and k in loop_of_end:
            succ.append(sorted(set([loop_of_end[k] + 1] + nxt)) if loop_of_end[k] + 1 < n else nxt)
        elif o == BREAK and open_loops and open_loops[-1] in end_of_loop:
            e = end_of_loop[open_loops[-1]] + 1
            succ.append([e] if e < n else [])
        elif o == SKIP:
            s = k + 1 + i.operands[0]
            succ.append([s] if s < n else [])
        else:
            succ.append(nxt)
    return succ


def basic_blocks(f) -> list[tuple[int, int]]:
    """(first, last) instruction index of each basic block, in program order."""
    ins = f.instructions
    if not ins:
        return []
    succ = _successors(ins)
    leaders = {0}
    for i in ins:
        if i.ext_id == 0 and i.opcode in _ENDS_BLOCK:
            leaders.add(i.index + 1)
            leaders.update(succ[i.index])
    leaders = sorted(x for x in leaders if x < len(ins))
    return [(s, (leaders[k + 1] - 1) if k + 1 < len(leaders) else len(ins) - 1) for k, s in enumerate(leaders)]


def build_graph(f) -> Optional[PeerGraph]:
    ins = f.instructions
    if not ins:
        return PeerGraph()
    g = PeerGraph()
    control = _ENDS_BLOCK - {HALT}
    straight = not any(i.ext_id == 0 and i.opcode in control for i in ins)
    blocks = basic_blocks(f)
    block_of = {}
    for b, (s, e) in enumerate(blocks):
        for k in range(s, e + 1):
            block_of[k] = b
    rw = [reads_writes(i) for i in ins]
    # SSA versions: each write of a register is the next version of it
    version: dict[int, int] = {}
    out_name: dict[tuple[int, int], str] = {}          # (instr, reg) -> "H1.2"
    for i in ins:
        for r in rw[i.index][1]:
            version[r] = version.get(r, 0) + 1
            out_name[(i.index, r)] = f"{isa.reg_name(r)}.{version[r]}"
    # reaching definitions: reg -> set of defining instruction indices (-1 = the register's definition)
    if straight or len(ins) > MAX_CFG_INSTRUCTIONS:
        reach_at = []
        cur: dict[int, frozenset] = {}
        for i in ins:
            reach_at.append(cur)
            reads, writes = rw[i.index]
            if writes:
                cur = dict(cur)
                for r in writes:
                    cur[r] = frozenset([i.index])
    else:
        reach_at = _reaching(ins, rw, blocks, block_of)
    node_of_instr: dict[int, int] = {}
    def_node: dict[int, int] = {}

    def reg_def_node(r: int) -> int:
        if r not in def_node:
            d = f.register(r)
            label = isa.reg_name(r) + (f" {isa.TYPE_TO_ASM.get(d.type_id, d.type_name)}{d.dims}" if d else " (undefined)")
            node = PeerNode(len(g.nodes), label, "const" if r >> 6 == 1 else "input",
                            {"register": isa.reg_name(r), "key": d.key_text if d else None,
                             "dims": d.dims if d else None},
                            span=(d.offset, d.size) if d else None)
            g.nodes.append(node)
            def_node[r] = node.id
        return def_node[r]

    for i in ins:
        if i.ext_id == 0 and i.opcode in (0x0000, HALT):
            continue
        reads, writes = rw[i.index]
        op = i.op
        node = PeerNode(len(g.nodes), i.mnemonic, _kind(i),
                        {"index": i.index, "block": block_of.get(i.index, 0), "operands": i.operands.hex(),
                         "writes": [out_name[(i.index, r)] for r in writes],
                         "reads": [isa.reg_name(r) for r in reads],
                         "host_only": bool(op and op.domain)},
                        span=(i.offset, 8), inferred=i.ext_id != 0 and bool(op and op.domain))
        g.nodes.append(node)
        node_of_instr[i.index] = node.id
        for r in dict.fromkeys(reads):
            defs = reach_at[i.index].get(r)
            srcs = sorted(defs) if defs else [-1]
            if len(srcs) > MAX_PHI_EDGES:        # a read reached by very many writes: draw the nearest few
                node.attrs.setdefault("phi_sources_not_drawn", {})[isa.reg_name(r)] = len(srcs) - MAX_PHI_EDGES
                srcs = sorted(srcs, key=lambda d: (d > i.index, abs(i.index - d)))[:MAX_PHI_EDGES]
            for d in srcs:
                if d == -1:
                    g.edges.append(PeerEdge(reg_def_node(r), node.id, isa.reg_name(r)))
                elif d in node_of_instr:
                    g.edges.append(PeerEdge(node_of_instr[d], node.id, out_name[(d, r)]))
                else:      # a def later in program order reaching through a back edge: added below
                    node.attrs.setdefault("_pending", []).append((d, r))
    for node in g.nodes:
        for d, r in node.attrs.pop("_pending", []):
            if d in node_of_instr:
                g.edges.append(PeerEdge(node_of_instr[d], node.id, out_name[(d, r)] + " (back edge)"))
    return g


def _reaching(ins, rw, blocks, block_of) -> list[dict[int, frozenset]]:
    succ = _successors(ins)
    nb = len(blocks)
    bsucc = [sorted({block_of[s] for s in succ[e]}) for (_, e) in blocks]
    preds: list[list[int]] = [[] for _ in range(nb)]
    for b, ss in enumerate(bsucc):
        for s in ss:
            preds[s].append(b)
    gen: list[dict[int, frozenset]] = []
    for s, e in blocks:
        g: dict[int, frozenset] = {}
        for k in range(s, e + 1):
            for r in rw[k][1]:
                g[r] = frozenset([k])
        gen.append(g)
    out: list[dict[int, frozenset]] = [dict(x) for x in gen]
    inn: list[dict[int, frozenset]] = [{} for _ in range(nb)]
    changed, rounds = True, 0
    while changed and rounds < 1000:
        changed, rounds = False, rounds + 1
        for b in range(nb):
            m: dict[int, frozenset] = {}
            for p in preds[b]:
                for r, ds in out[p].items():
                    m[r] = m.get(r, frozenset()) | ds
            if m != inn[b]:
                inn[b] = m
                o = dict(m)
                o.update(gen[b])
                if o != out[b]:
                    out[b] = o
                changed = True
    reach_at: list[dict[int, frozenset]] = [{} for _ in ins]
    for b, (s, e) in enumerate(blocks):
        cur = dict(inn[b])
        for k in range(s, e + 1):
            reach_at[k] = cur
            if rw[k][1]:
                cur = dict(cur)
                for r in rw[k][1]:
                    cur[r] = frozenset([k])
    return reach_at
