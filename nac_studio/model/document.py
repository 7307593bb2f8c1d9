"""The open file and the one current selection and tick every view follows (no Qt here).

Views never talk to each other: each one observes a :class:`Document` and sets its
selection or tick; the document tells every observer, including the one that made the
change (``source`` lets it skip the echo). Keeping this Qt-free means selection sync is
tested headless, and the same object could back a different front end.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from nac_engine.format.model import NacFile
from nac_engine.spans import Span

#: Kinds of thing that can be selected; ``key`` means, per kind:
#: instruction → OPS index (= tick), param → parameter id, constant → CNST id,
#: cmap → op id, perm → signature id, mmap → tick of the MMAP record,
#: input → OPS index of the named <INPUT>, section → section name ("OPS", "header", …),
#: span → span path (any other field), offset → a byte offset no span claims.
KINDS = ("instruction", "param", "constant", "cmap", "perm", "mmap", "input", "section", "span", "offset")

_INDEXED = re.compile(r"^(\w+)\[(\d+)\]$")


@dataclass(frozen=True)
class Selection:
    kind: str
    key: Any

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown selection kind {self.kind!r}")

    def __str__(self) -> str:
        return f"{self.kind}:{self.key}"


#: How bad a problem is. Decode errors and definite MMAP schedule violations are errors;
#: MMAP hazards (same-tick races that an in-order core may well get away with) are warnings.
SEVERITIES = ("error", "warning")


@dataclass(frozen=True)
class Problem:
    """A finding about the file that is not a decode error (e.g. from the MMAP schedule
    check), shaped like :class:`~nac_engine.errors.NacFormatError` (``section``, ``offset``,
    ``reason``) so every view treats both alike. ``selection`` is what going to it selects
    (``None``: the byte at ``offset``)."""
    section: str
    offset: Optional[int]
    reason: str
    severity: str = "error"
    selection: Optional[Selection] = None
    kind: str = ""

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    def __str__(self) -> str:
        return self.reason


def severity_of(problem: Any) -> str:
    """``"error"`` or ``"warning"``; anything without a severity (a decode error) is an error."""
    sev = getattr(problem, "severity", "error")
    return sev if sev in SEVERITIES else "error"


def selection_for_problem(problem: Any) -> Optional[Selection]:
    """What going to ``problem`` selects: its own selection, else the byte it names."""
    sel = getattr(problem, "selection", None)
    if isinstance(sel, Selection):
        return sel
    offset = getattr(problem, "offset", None)
    return Selection("offset", offset) if isinstance(offset, int) else None


Observer = Callable[[str, "Document", Any], None]


class Document:
    """One open file: the decoded model, the problems found, the current selection/tick.

    Events sent to observers: ``"selection"``, ``"tick"``, ``"problems"`` (the problem list
    changed: a later check, e.g. the MMAP schedule lint, added or replaced its findings),
    ``"debug"`` (``doc.debug`` changed: execution point, values, breakpoints, watches),
    ``"simulation"`` (``doc.simulation`` changed: memory timeline, planners, hardware runs, sweeps).
    Observers are called on the thread that changed the document; the GUI only changes it
    from the UI thread.
    """

    def __init__(self, nac: NacFile, path: Optional[str] = None):
        self.nac = nac
        self.path = path or nac.path
        self.selection: Optional[Selection] = None
        self.tick: Optional[int] = None
        self._observers: list[Observer] = []
        self._back: list[Selection] = []
        self._forward: list[Selection] = []
        self._span_index: Optional[dict[tuple, Span]] = None
        self._key_by_span: dict[int, tuple] = {}
        self._found: dict[str, list] = {}     # problems from later checks, by check name
        #: (size, mtime_ns) of the file when it was read, to tell a later version of it apart
        self.file_identity: Optional[tuple[int, int]] = None
        #: the debug session (``nac_studio.debug_session.DebugSession``) once the user runs or
        #: sets a breakpoint; its execution tick is a second cursor, apart from ``tick``
        self.debug: Any = None
        #: memory timeline, planner comparison, hardware simulations and sweeps of this file
        #: (``nac_studio.model.simulation_state.SimulationState``; Qt-free)
        from .simulation_state import SimulationState
        self.simulation = SimulationState(self)

    @property
    def execution_tick(self) -> Optional[int]:
        """The debug session's execution point (the instruction executed last): the second
        cursor the timeline and hardware lanes draw; None with no run or before the first step."""
        t = getattr(self.debug, "tick", None)
        return t if isinstance(t, int) and t >= 0 else None

    @property
    def effective_tick(self) -> Optional[int]:
        """The tick a pane about one instruction shows (the Source pane's code, RenderDoc's current
        event): the execution point while a run has one, else the selection's tick."""
        t = self.execution_tick
        return self.tick if t is None else t

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str) -> "Document":
        """Lenient read: a damaged file still opens with what decoded and its problems listed.

        Raises only for I/O errors (missing file, permission); format damage never raises.
        """
        from nac_engine.format.reader import read
        from nac_engine.format.verify import verify

        nac = read(path, strict=False)
        doc = cls(nac, path)
        try:
            st = os.stat(path)
            doc.file_identity = (st.st_size, st.st_mtime_ns)
        except OSError:
            pass
        if nac.header_decoded:
            try:
                found = verify(nac)
            except Exception as exc:  # verify is best effort on a damaged model
                found = [exc]
            seen = {(getattr(p, "section", None), getattr(p, "offset", None), getattr(p, "reason", str(p)))
                    for p in nac.problems}
            for p in found:
                key = (getattr(p, "section", None), getattr(p, "offset", None), getattr(p, "reason", str(p)))
                if key not in seen:
                    nac.problems.append(p)
                    seen.add(key)
        return doc

    @property
    def problems(self) -> list:
        """Everything wrong with the file: what decoding found (``nac.problems``), then the
        findings of later checks (:meth:`set_problems`)."""
        if not any(self._found.values()):
            return self.nac.problems
        return [*self.nac.problems, *(p for found in self._found.values() for p in found)]

    def problems_from(self, check: str) -> list:
        """The findings :meth:`set_problems` stored for ``check`` (empty if it has not run)."""
        return list(self._found.get(check, ()))

    def debug_changed(self, source: Any = None) -> None:
        """Announce the ``"debug"`` event: the debug session's state, execution tick, values,
        breakpoints or watches changed."""
        self._notify("debug", source)

    def simulation_changed(self, what: str, source: Any = None) -> None:
        """Announce the ``"simulation"`` event (``what``: timeline, planners, run, sweep, config)."""
        self._notify("simulation", (what, source))

    def set_problems(self, check: str, problems: list, source: Any = None) -> None:
        """Replace the findings of ``check`` (e.g. ``"mmap"``) and tell the observers."""
        self._found[check] = list(problems)
        self._notify("problems", source)

    def engine_stopped(self, message: str) -> None:
        """The engine host died: the debug session (whose values lived there) ends in an error
        state naming how, and Problems lists it; the file and everything decoded stay."""
        if self.debug is not None:
            self.debug.engine_stopped(message)
        self.set_problems("engine", [Problem("engine", None, message, "error", kind="engine")])

    def engine_restarted(self) -> None:
        self.set_problems("engine", [])

    @property
    def size(self) -> int:
        return self.nac.spans.length if self.nac.spans is not None else 0

    # -- observers -------------------------------------------------------------------------
    def observe(self, fn: Observer) -> None:
        self._observers.append(fn)

    def unobserve(self, fn: Observer) -> None:
        if fn in self._observers:
            self._observers.remove(fn)

    def _notify(self, event: str, source: Any) -> None:
        for fn in list(self._observers):
            fn(event, self, source)

    # -- selection and tick ------------------------------------------------------------------
    def select(self, sel: Optional[Selection], source: Any = None, *, record: bool = True) -> None:
        """Make ``sel`` current. Selecting an instruction (or its MMAP record) also moves the tick."""
        if sel == self.selection:
            return
        if record and self.selection is not None:
            self._back.append(self.selection)
            del self._back[:-200]
            self._forward.clear()
        self.selection = sel
        self._notify("selection", source)
        tick = self.tick_of(sel)
        if tick is not None:
            self.set_tick(tick, source)

    def set_tick(self, tick: Optional[int], source: Any = None) -> None:
        if tick is not None and not (0 <= tick < len(self.nac.instructions)):
            raise IndexError(f"tick {tick} outside 0..{len(self.nac.instructions) - 1}")
        if tick == self.tick:
            return
        self.tick = tick
        self._notify("tick", source)

    @property
    def can_go_back(self) -> bool:
        return bool(self._back)

    @property
    def can_go_forward(self) -> bool:
        return bool(self._forward)

    def go_back(self, source: Any = None) -> None:
        if not self._back:
            return
        if self.selection is not None:
            self._forward.append(self.selection)
        self.select(self._back.pop(), source, record=False)

    def go_forward(self, source: Any = None) -> None:
        if not self._forward:
            return
        if self.selection is not None:
            self._back.append(self.selection)
        self.select(self._forward.pop(), source, record=False)

    # -- selection <-> bytes ------------------------------------------------------------------
    def tick_of(self, sel: Optional[Selection]) -> Optional[int]:
        if sel is None:
            return None
        if sel.kind in ("instruction", "input", "mmap") and isinstance(sel.key, int):
            return sel.key if 0 <= sel.key < len(self.nac.instructions) else None
        if sel.kind in ("span", "offset"):
            # a field inside an instruction or MMAP record is at that record's tick, so the
            # disassembly and graph follow a click on a single byte of it
            span = self.span_of(sel)
            owner = self.owner_of(span) if span is not None else None
            if owner is not None and owner.kind != sel.kind:
                return self.tick_of(owner)
        return None

    def owner_of(self, span: Optional[Span]) -> Optional[Selection]:
        """The innermost selectable record (instruction, param, constant, ...) holding ``span``."""
        self._index()
        node = span
        while node is not None and node.parent is not None:
            key = self._key_by_span.get(id(node))
            if key is not None:
                kind, k = key
                return Selection("param" if kind == "tensor" else kind, k)
            node = node.parent
        return None

    def span_of(self, sel: Optional[Selection]) -> Optional[Span]:
        """The span whose bytes ``sel`` stands for (``None`` if it has no bytes, e.g. external weights)."""
        if sel is None or self.nac.spans is None:
            return None
        if sel.kind == "span":
            return self.nac.spans.find(sel.key)
        if sel.kind == "offset":
            return self.nac.spans.span_at(sel.key)
        if sel.kind == "section":
            return self.nac.spans.find(sel.key)
        return self._index().get((sel.kind, sel.key))

    def spans_of(self, sel: Optional[Selection]) -> list[Span]:
        """All byte ranges of ``sel``: a parameter has its name record and its tensor record."""
        if sel is not None and sel.kind == "param":
            out = [s for s in (self._index().get(("param", sel.key)), self._index().get(("tensor", sel.key))) if s]
            return out
        span = self.span_of(sel)
        return [span] if span is not None else []

    def selection_at(self, offset: int) -> Optional[Selection]:
        """What the byte at ``offset`` belongs to, as the most useful selection."""
        root = self.nac.spans
        if root is None or not (0 <= offset < root.length):
            return None
        leaf = root.span_at(offset)
        if leaf is None:
            return Selection("offset", offset)
        node: Optional[Span] = leaf
        chain = []
        while node is not None and node.parent is not None:
            chain.append(node)
            node = node.parent
        chain.reverse()   # section first
        self._index()
        for node in chain:   # outermost record that is a selectable object
            key = self._key_by_span.get(id(node))
            if key is not None:
                kind, k = key
                return Selection("param" if kind == "tensor" else kind, k)
        if len(chain) == 1 and leaf.type == "section":
            return Selection("section", leaf.name)
        return Selection("span", leaf.path)

    def prepare(self) -> None:
        """Build the selection ↔ span lookups now (the Studio calls this off the UI thread),
        and what the panes read as the file opens: the source map (Source, IR Text, graph), the
        def-use index (which makes the instruction objects) and the MMAP commands by tick
        (disassembly, Properties, debugger marks)."""
        self._index()
        self.nac.def_use()
        self.nac.mmap_by_tick()
        from nac_engine.errors import NacFormatError
        from nac_engine.format.source_map import read_source_map
        try:
            read_source_map(self.nac)
        except NacFormatError:
            pass    # a damaged map: the panes that read it report it

    def _index(self) -> dict[tuple, Span]:
        """(kind, key) → span, built once. Instruction spans come straight from their index."""
        if self._span_index is not None:
            return self._span_index
        idx: dict[tuple, Span] = {}
        root = self.nac.spans
        nac = self.nac
        if root is None:
            self._span_index, self._key_by_span = idx, {}
            return idx
        ops = root.find("OPS")
        if ops is not None:
            for child in ops.children:
                m = _INDEXED.match(child.name)
                if m and m.group(1) == "instr":
                    idx[("instruction", int(m.group(2)))] = child
        mm = root.find("MMAP")
        if mm is not None:
            for child in mm.children:
                m = _INDEXED.match(child.name)
                if m and m.group(1) == "tick":
                    idx[("mmap", int(m.group(2)))] = child
        for section, record, kind, keys in (
                ("CMAP", "op", "cmap", list(nac.cmap)),
                ("PERM", "sig", "perm", list(nac.perms)),
                ("CNST", "const", "constant", list(nac.constants))):
            sec = root.find(section)
            if sec is None:
                continue
            records = [c for c in sec.children if c.name.startswith(record + "[")]
            for span, key in zip(records, keys):
                idx[(kind, key)] = span
        data = root.find("DATA")
        if data is not None:
            names = data.find("names")
            if names is not None:
                records = [c for c in names.children if c.name.startswith("param[")]
                for span, key in zip(records, list(nac.params)):
                    idx[("param", key)] = span
            tensors = data.find("tensors")
            if tensors is not None:
                records = [c for c in tensors.children if c.name.startswith("tensor[")]
                for span, key in zip(records, nac.tensor_order):
                    idx[("tensor", key)] = span
            inputs = data.find("inputs")
            if inputs is not None:
                records = [c for c in inputs.children if c.name.startswith("input[")]
                for span, inp in zip(records, nac.input_names):
                    idx.setdefault(("input", inp.index), span)
        self._span_index = idx
        self._key_by_span = {id(span): key for key, span in idx.items()}
        return idx

    def describe_span(self, span: Optional[Span]) -> str:
        """One field in words: ``OPS/instr[42]/D[1] = -3 → v39 (aten.relu.default)``."""
        if span is None:
            return ""
        text = span.path or "<file>"
        if span.value is not None and span.type not in ("section", "file"):
            text += f" = {_short(span.value)}"
        try:
            meaning = self._meaning(span)
        except Exception:   # a damaged file may hold any value in any field
            meaning = None
        if meaning:
            text += f" → {meaning}"
        return text

    def _meaning(self, span: Span) -> Optional[str]:
        nac = self.nac
        parent = span.parent
        if parent is None:
            return None
        m = _INDEXED.match(parent.name)
        if m and m.group(1) == "instr" and parent.parent is not None:
            table = nac.instructions if parent.parent.name == "OPS" else (nac.trng or [])
            i = int(m.group(2))
            if not (0 <= i < len(table)):
                return None
            return self._field_meaning(table[i], span.name, table is nac.instructions)
        if span.name == "target" and parent.type == "mmap_command" and isinstance(span.value, int):
            return self.value_name(span.value)
        if span.type == "tensor_data" and m and m.group(1) == "tensor":
            j = int(m.group(2))
            if j < len(nac.tensor_order) and nac.tensor_order[j] in nac.params:
                return nac.params[nac.tensor_order[j]].name
        return None

    def value_name(self, index: int) -> str:
        """``v39 (aten.relu.default)``: a value by the instruction that produces it."""
        ins = self.nac.instructions
        if 0 <= index < len(ins):
            return f"v{index} ({self.nac.instruction_name(ins[index])})"
        return f"v{index} (no such instruction)"

    def _field_meaning(self, ins, field: str, in_ops: bool) -> Optional[str]:
        from nac_engine.isa.optable import OP_CONVERGENCE, OP_INPUT
        nac = self.nac
        if field == "A":
            return nac.instruction_name(ins)
        if field == "B":
            if ins.a >= 10:
                sig = nac.perms.get(ins.b)
                return f"signature {sig!r}" if sig is not None else ("no arguments" if ins.b == 0 else "not in PERM")
            return nac.instruction_name(ins)
        m = _INDEXED.match(field)
        if not m:
            return None
        which, j = m.group(1), int(m.group(2))
        if which == "C" and ins.c is not None and j < len(ins.c):
            v = ins.c[j]
            if ins.a == OP_INPUT:
                if j == 0:
                    return "payload length"
                if ins.b == 1:
                    p = nac.params.get(v)
                    return f"param {p.name}" if p else f"param id {v} (not in DATA)"
                if ins.b == 3:
                    return self.const_text(v)
                return None
            if ins.a >= 10 or ins.a == OP_CONVERGENCE:
                return "constant count" if j == 0 else self.const_text(v)
            return None
        if which == "D" and ins.d is not None and j < len(ins.d):
            dv = ins.d[j]
            if ins.a == OP_CONVERGENCE:
                return f"jump {dv:+d}"
            if dv != 0:
                target = ins.index + dv
                return self.value_name(target) if in_ops else f"v{target}"
            k = ins.d[:j].count(0)
            ids = ins.const_ids
            return self.const_text(ids[k]) if k < len(ids) else "constant slot (no id in C)"
        return None

    def const_text(self, cid: int) -> str:
        """``c5 = 1.0``: a constant id with its value."""
        c = self.nac.constants.get(cid)
        return f"c{cid} = {_short(c.value)}" if c is not None else f"c{cid} (not in CNST)"

    def describe(self, sel: Optional[Selection]) -> str:
        """One line for status bars and tooltips."""
        if sel is None:
            return ""
        nac = self.nac
        if sel.kind == "instruction" and 0 <= sel.key < len(nac.instructions):
            return f"t{sel.key}: {nac.instruction_name(nac.instructions[sel.key])}"
        if sel.kind == "param" and sel.key in nac.params:
            p = nac.params[sel.key]
            return f"param {p.id} {p.name} {p.dtype or ''}{list(p.shape) if p.shape else ''}"
        if sel.kind == "constant" and sel.key in nac.constants:
            return f"const c{sel.key} = {nac.constants[sel.key].value!r}"
        if sel.kind == "cmap" and sel.key in nac.cmap:
            return f"op {sel.key} = {nac.cmap[sel.key]}"
        if sel.kind == "perm" and sel.key in nac.perms:
            return f"signature {sel.key} = {nac.perms[sel.key]!r}"
        span = self.span_of(sel)
        if span is not None:
            return f"{span.path} @0x{span.offset:x}+{span.length}"
        return str(sel)


def _short(value: Any, limit: int = 48) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit - 1] + "…"
