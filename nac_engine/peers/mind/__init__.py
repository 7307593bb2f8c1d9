"""MIND Core IR (seed 001) as a peer format: ``.ir`` text in every dialect, and ``mic@2``.

``decode(data)`` parses (:mod:`.parser`, :mod:`.mic2`), verifies (:mod:`.verifier`) and returns a
:class:`MindFile`: the span tree (one span per line, one per token inside instruction lines, built
on first access), problems (syntax and verification, each a :class:`~.errors.MindError` with
line:column and, for rules, a stable code), the dataflow graph, and canonical text for ``nac dis``
(:mod:`.canonical`). :mod:`.evaluator` runs a module in numpy; :mod:`.convert` turns it into NAC.
"""
from __future__ import annotations

import collections
from typing import Any, Optional

from ...format.gc_pause import collector_paused
from ...spans import UNPARSED, Span
from ..base import PeerEdge, PeerFile, PeerGraph, PeerNode
from .errors import MindError
from .ir import ALIAS, Instr, Module
from .limit import MAX_PROBLEMS, merge
from .mic2 import parse_mic2
from .parser import Parsed, is_mic2, parse
from .verifier import RULES, verify_module

FORMAT = "mind"
EXTENSIONS = (".ir", ".mic", ".mic2")

_KIND = {"Input": "input", "ConstI64": "const", "ConstF32": "const", "ConstF64": "const", "ConstTensor": "const",
         "MatMul": "matmul", "Dot": "matmul", "Conv2d": "conv", "BinOp": "elementwise", "Relu": "activation",
         "Neg": "elementwise", "Exp": "activation", "Log": "activation", "Sum": "reduce", "Mean": "reduce",
         "Reshape": "shape", "Transpose": "shape", "ExpandDims": "shape", "Squeeze": "shape", "Index": "index",
         "Slice": "index", "Gather": "index"}


def sniff(head: bytes) -> bool:
    """``mic@2`` files have a header; ``.ir`` text has no magic and is found by extension."""
    return is_mic2(head)


class MindFile(PeerFile):
    format = FORMAT
    title = "MIND Core IR"

    def __init__(self, data: bytes, parsed: Parsed, path: Optional[str] = None):
        super().__init__(data, path)
        self.parsed = parsed
        self.module: Module = parsed.module
        self.syntax_problems: list[MindError] = list(parsed.problems)
        self.verified = verify_module(self.module)
        # in file order, at most MAX_PROBLEMS of them, then one summary problem for the rest (see .limit)
        self.problems = merge(self.syntax_problems, parsed.limit, self.verified.problems, self.verified.limit)
        self._build_spans()

    # -- spans ----------------------------------------------------------------------------
    def _build_spans(self) -> None:
        """Three sections — ``header`` (lines before the first instruction), ``instructions`` (up to
        the outputs line) and ``outputs`` (from it to the end) — holding one span per line; an
        instruction line's token spans are built when first asked for. Sections keep the top
        level small, so a 10k-instruction file opens without 10k top-level records."""
        root = self.root
        parsed = self.parsed
        n = len(parsed.lines)
        first = next((k for k in range(n) if parsed.kind(k) == "instr"), n)
        # the outputs section: from the first outputs line after the last instruction (the Rust
        # printer writes one line per result; an outputs line between instructions stays there)
        out = n
        for k in range(n - 1, -1, -1):
            kind = parsed.kind(k)
            if kind == "instr":
                break
            if kind == "outputs":
                out = k
        if out < first:
            first = out
        for name, lo, hi in (("header", 0, first), ("instructions", first, out), ("outputs", out, n)):
            if lo >= hi:
                continue
            start, end = parsed.record(lo)[2], parsed.record(hi - 1)[3]
            sec = root.add(start, end - start, name, "section", f"{hi - lo} line(s)")
            sec.set_builder(lambda s, lo=lo, hi=hi: self._line_spans(s, lo, hi))

    def _line_spans(self, sec: Span, lo: int, hi: int) -> None:
        """One span per line of a section (built when the section is first opened)."""
        for kind, number, start, end, payload in self.parsed.records(lo, hi):
            if kind == "instr":
                ins: Instr = payload
                sp = sec.add(start, end - start, f"L{number} %{ins.vid}", "instruction", ins.label())
                sp.set_builder(lambda s, ins=ins, start=start, end=end: self._token_spans(s, ins, start, end))
            elif kind == "error":
                sec.add(start, end - start, f"L{number}", UNPARSED, payload.reason)
            else:
                text = self.data[start:end].decode("utf-8", "replace").strip()
                sec.add(start, end - start, f"L{number}", kind, text[:80])

    def _token_spans(self, span: Span, ins: Instr, start: int, end: int) -> None:
        pos = start
        used = set()
        for role, tok in sorted(ins.tokens, key=lambda rt: rt[1].offset):
            if tok.offset < pos:
                continue
            if tok.offset > pos:
                span.add(pos, tok.offset - pos, f"text@{pos - start}", "text")
            name = role if role not in used else f"{role}@{tok.offset - start}"
            used.add(name)
            span.add(tok.offset, tok.length, name, "token", tok.text[:80])
            pos = tok.offset + tok.length
        if pos < end:
            span.add(pos, end - pos, f"text@{pos - start}", "text")

    # -- what the CLI and the Studio read ------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        s = super().summary()
        mod = self.module
        types = self.verified.types
        s.update(
            title=self.title, dialect=mod.dialect, instructions=len(mod.instrs),
            inputs=[{"id": i.vid, "name": str(i.attrs.get("name", "")), "line": i.line,
                     "type": types[i.vid].text() if types.get(i.vid) else None} for i in mod.inputs()],
            outputs=[{"id": v, "type": types[v].text() if types.get(v) else None} for v in mod.outputs],
            ops=dict(collections.Counter(i.label() for i in mod.instrs)),
            codes=sorted({p.code for p in self.problems if p.code}),
        )
        return s

    def format_summary(self) -> str:
        s = self.summary()
        lines = [f"{'format':>14}: {self.title} ({s['dialect']} dialect)", f"{'file':>14}: {s['file']}",
                 f"{'size':>14}: {s['size']:,} bytes", f"{'instructions':>14}: {s['instructions']}"]
        for i in s["inputs"]:
            lines.append(f"{'input':>14}: %{i['id']} {i['name']} {i['type'] or '?'}")
        for o in s["outputs"]:
            lines.append(f"{'output':>14}: %{o['id']} {o['type'] or '?'}")
        lines.append(f"{'ops':>14}: " + ", ".join(f"{k} {v}" for k, v in sorted(s["ops"].items())))
        lines.append(f"{'problems':>14}: {s['problems']}" + (f" ({', '.join(s['codes'])})" if s["codes"] else ""))
        return "\n".join(lines)

    def verify(self) -> list:
        return list(self.problems)

    def disassemble(self) -> Optional[str]:
        """Canonical text when the module verifies; else each instruction as parsed in the reference
        encoding (its source text where it does not fit its opcode) with the outputs line."""
        from .canonical import _template, canonical_text, instr_text
        if not self.problems:
            with collector_paused():
                return canonical_text(self.module, self.verified)
        lines = []
        memo: dict = {}     # lines differing only in their ids (one params dict, opcode, type): one %-template
        for ins in self.module.instrs:
            if not ins.arg_error and not ins.attrs:
                key = (id(ins.params), ins.opcode, id(ins.type), len(ins.operands))
                tmpl = memo.get(key, False)
                if tmpl is False:
                    try:
                        tmpl = _template(ins, ins.type)
                    except (KeyError, TypeError, ValueError, IndexError):
                        tmpl = None
                    if len(memo) < 65536:
                        memo[key] = tmpl
                if tmpl is not None:
                    try:
                        lines.append(tmpl % (ins.vid, *ins.operands))
                        continue
                    except TypeError:           # an id that is not an int: printed the plain way
                        pass
            try:
                lines.append(instr_text(ins) if not ins.arg_error else None)
            except (KeyError, TypeError, ValueError, IndexError):
                lines.append(None)
            if lines[-1] is None:
                lines[-1] = self.data[ins.offset:ins.offset + ins.length].decode("utf-8", "replace")
        lines.append("outputs: " + ", ".join(f"%{v}" for v in self.module.outputs))
        lines.append("")                # the final newline without a second copy of the text
        return "\n".join(lines)

    def graph(self) -> PeerGraph:
        g = PeerGraph()
        mod = self.module
        alias: dict[int, int] = {}
        node_of: dict[int, int] = {}
        types = self.verified.types
        for ins in mod.instrs:
            if ins.opcode == ALIAS and ins.operands:
                src = ins.operands[0]
                alias[ins.vid] = alias.get(src, src)
                continue
            if ins.vid in node_of:
                continue
            nid = len(g.nodes)
            t = types.get(ins.vid)
            label = str(ins.attrs["name"]) if ins.opcode == "Input" and "name" in ins.attrs else ins.label()
            g.nodes.append(PeerNode(nid, f"%{ins.vid} {label}", _KIND.get(ins.opcode, "other"),
                                    attrs={"line": ins.line, "type": t.text() if t else None,
                                           "params": {k: v for k, v in ins.params.items() if k != "data"}},
                                    span=(ins.offset, ins.length)))
            node_of[ins.vid] = nid
            for v in ins.operands:
                src = node_of.get(alias.get(v, v))
                if src is not None:
                    st = types.get(alias.get(v, v))
                    g.edges.append(PeerEdge(src, nid, st.text() if st else ""))
        for k, v in enumerate(mod.outputs):
            nid = len(g.nodes)
            line, col, off = mod.output_cols[k] if k < len(mod.output_cols) else (mod.outputs_line, 1, mod.outputs_offset)
            g.nodes.append(PeerNode(nid, f"output {k}", "output", attrs={"line": line}, span=(off, len(f"%{v}"))))
            src = node_of.get(alias.get(v, v))
            if src is not None:
                g.edges.append(PeerEdge(src, nid, ""))
        return g


#: the largest IR text decoded (the reference parser stops at 10 MB)
MAX_TEXT_BYTES = 64 << 20


def decode(data: bytes, path: Optional[str] = None, strict: bool = False) -> MindFile:
    if len(data) > MAX_TEXT_BYTES:
        raise MindError(1, 1, 0, f"{len(data):,} bytes of IR text is more than the {MAX_TEXT_BYTES:,}-byte limit")
    with collector_paused():        # one Instr per line: no collector pass every 700 of them
        data = bytes(data)
        parsed = parse_mic2(data, strict) if is_mic2(data) else parse(data, strict=strict)
        f = MindFile(bytes(data), parsed, path)
    if strict and f.problems:
        raise f.problems[0]
    return f


__all__ = ["EXTENSIONS", "FORMAT", "MAX_PROBLEMS", "MindError", "MindFile", "RULES", "decode", "sniff"]
