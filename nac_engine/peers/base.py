"""What every peer-format decoder returns: one :class:`PeerFile` shape for all of them.

A peer decoder (MIND Core IR, TVMR, NEFF, ANE hwx, E5) produces the same things the NAC
codec does — a byte-span tree where every byte of a valid file sits in exactly one leaf
(gaps marked ``unparsed``), a list of problems (each a :class:`~nac_engine.errors.NacFormatError`
naming section, byte offset and reason), a summary for ``nac info`` and, where the format has
one, a dataflow graph — so the CLI and the Studio's hex, structure, problems and graph views
treat every format alike. No Qt and no torch here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..errors import NacFormatError
from ..spans import UNPARSED, Span


class PeerWarning(NacFormatError):
    """A finding that does not stop decoding or use (a package hash that does not match, which the
    real runtime checks only on request): listed with the problems, as a warning."""
    severity = "warning"


def is_warning(problem) -> bool:
    return getattr(problem, "severity", "error") == "warning"


@dataclass
class DetailItem:
    """One row of a peer file's logical structure that is not a byte range of the file itself
    (members of a compressed archive, a JSON document's tree, a table of variables)."""
    name: str
    value: Any = None
    children: list["DetailItem"] = field(default_factory=list)
    span: Optional[tuple[int, int]] = None     # bytes of the file it comes from, when it has them

    @classmethod
    def of(cls, name: Any, value: Any, span: Optional[tuple[int, int]] = None) -> "DetailItem":
        """A row for a value read from a JSON document: an object (or a long list) becomes child
        rows, one per field (item), a short list of numbers or words one line; shown as words,
        never as Python's repr. A list longer than :data:`DETAIL_ITEMS_MAX` shows its first ones."""
        if isinstance(value, dict):
            kids = [cls.of(k, v) for k, v in list(value.items())[:DETAIL_ITEMS_MAX]]
            return cls(str(name), _count(len(value), "field"), kids + _more(len(value)), span)
        if isinstance(value, (list, tuple)):
            if len(value) <= 16 and all(v is None or isinstance(v, (int, float, str)) for v in value):
                return cls(str(name), ", ".join(str(v) for v in value) if value else "(none)", [], span)
            kids = [cls.of(f"[{i}]", v) for i, v in enumerate(value[:DETAIL_ITEMS_MAX])]
            return cls(str(name), _count(len(value), "item"), kids + _more(len(value)), span)
        return cls(str(name), value, [], span)


#: Child rows a JSON object or list shows (a hostile file's million-item list is not a million rows).
DETAIL_ITEMS_MAX = 1000


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


def _more(n: int) -> list[DetailItem]:
    return [DetailItem(f"… {n - DETAIL_ITEMS_MAX:,} more")] if n > DETAIL_ITEMS_MAX else []


@dataclass
class PeerNode:
    """One node of a peer file's dataflow graph.

    ``kind`` is an op class the graph view colours by (``"matmul"``, ``"conv"``, ``"elementwise"``,
    ``"input"``, ``"output"``, ``"const"``, ``"control"``, ``"other"``…); ``span`` is the byte range
    (offset, length) that defines the node, so selecting it selects those bytes; ``inferred``
    marks attributes derived rather than read (the ANE's op kinds guessed from registers).
    """
    id: int
    label: str
    kind: str = "other"
    attrs: dict = field(default_factory=dict)
    span: Optional[tuple[int, int]] = None
    inferred: bool = False


@dataclass
class PeerEdge:
    src: int
    dst: int
    label: str = ""          # tensor/register name, shape, size… whatever the format knows


@dataclass
class PeerGraph:
    nodes: list[PeerNode] = field(default_factory=list)
    edges: list[PeerEdge] = field(default_factory=list)


class PeerFile:
    """A decoded peer-format file. Decoders subclass it or fill it in.

    ``data`` is the whole file (bytes, already bounded by the reader's size limit); ``root`` the
    span tree over it; ``problems`` every problem found in lenient mode.
    """

    format: str = "peer"        # "mind" | "tvmr" | "neff" | "hwx" | "e5"
    title: str = "peer format"  # human name, e.g. "AWS Neuron NEFF"

    def __init__(self, data: bytes, path: Optional[str] = None):
        self.data = data
        self.path = path
        self.root = Span(0, len(data), "", "file")
        self.problems: list[NacFormatError] = []

    @property
    def size(self) -> int:
        return len(self.data)

    def span_at(self, offset: int) -> Optional[Span]:
        return self.root.span_at(offset)

    def summary(self) -> dict[str, Any]:
        """Data behind ``nac info`` (JSON-serialisable); always has ``format`` and ``size``."""
        return {"format": self.format, "file": self.path, "size": self.size,
                "problems": len(self.problems)}

    def format_summary(self) -> str:
        """Human text for ``nac info`` (a decoder may override with something richer)."""
        lines = []
        for k, v in self.summary().items():
            lines.append(f"{k:>14}: {v}")
        return "\n".join(lines)

    def graph(self) -> Optional[PeerGraph]:
        """The dataflow graph, or ``None`` where the format has none worth drawing."""
        return None

    def details(self) -> list[DetailItem]:
        """Logical structure beyond the span tree (empty when the span tree says it all)."""
        return []

    def verify(self) -> list[NacFormatError]:
        """Every problem (decode problems plus semantic checks); empty when clean."""
        return list(self.problems)

    def disassemble(self) -> Optional[str]:
        """Text form for ``nac dis`` (``None``: the format has no text form)."""
        return None


def decode_into(f: PeerFile, body, strict: bool) -> PeerFile:
    """Run ``body(f)``, the format's decoding: lenient, a :class:`NacFormatError` it raises is kept
    on ``f.problems`` with what decoded before it; strict, the first problem that is not a
    warning is raised. Unclaimed bytes are marked (zero padding or unparsed) either way."""
    try:
        body(f)
    except NacFormatError as e:
        if strict:
            raise
        f.problems.append(e)
    mark_gaps(f.root, f.size, f.data)
    if strict:
        hard = [p for p in f.problems if not is_warning(p)]
        if hard:
            raise hard[0]
    return f


def mark_gaps(root: Span, size: int, data: Optional[bytes] = None) -> None:
    """Fill every byte of ``[0, size)`` no child of ``root`` claims: with a ``padding`` span where
    ``data`` shows the gap is all zero bytes (alignment, not something left undecoded), else with
    an ``unparsed`` span; the children stay sorted by offset (the span tree's invariant)."""
    kids = sorted(root.children, key=lambda s: s.offset)
    gaps = []
    pos = 0
    for k in kids:
        if k.offset > pos:
            gaps.append((pos, k.offset - pos))
        pos = max(pos, k.end)
    if pos < size:
        gaps.append((pos, size - pos))
    for off, n in gaps:
        if data is not None and not data[off:off + n].strip(b"\0"):
            root.add(off, n, f"padding@{off:#x}", "zero padding", f"{n:,} bytes")
        else:
            root.add(off, n, f"gap@{off:#x}", UNPARSED)
    if root._children:
        root._children.sort(key=lambda s: s.offset)
