"""A peer-format file (MIND Core IR, TVMR, NEFF, hwx…) as a Studio document (no Qt here).

:class:`PeerDocument` is a :class:`~nac_studio.model.document.Document` whose ``peer`` is the decoded
:class:`~nac_engine.peers.base.PeerFile`. Its ``nac`` is an empty :class:`NacFile` *shell* whose
span tree and byte buffer are the peer file's, so every byte-level view (hex, structure,
problems) shows the peer file unchanged, and a NAC-only view finds no instructions, parameters
or tables instead of crashing (the window covers those with "not available for this format").

Selections are byte spans: a click anywhere in a peer file selects its record (a child of a
top-level section — a MIND instruction line —, else the top-level span), ``Selection("span", path)``. The graph and the IR text view
map those to their nodes and lines.

``program`` is the peer file converted to NAC (MIND only today, :mod:`nac_engine.peers.mind.convert`),
built on first use: the Run/step path and the tick → IR line map come from it.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from nac_engine.format.model import NacFile
from nac_engine.spans import Span
from nac_engine.peers import detect_file, open_peer

from .document import Document, Selection


def is_peer_path(path: str) -> bool:
    """True when ``path`` is a peer-format file (by magic bytes, then extension)."""
    try:
        fmt = detect_file(path)
    except OSError:
        return False
    return fmt not in (None, "nac")


class PeerDocument(Document):
    def __init__(self, peer, path: Optional[str] = None):
        shell = NacFile(spans=peer.root, problems=list(peer.verify()), path=path or peer.path, _buf=peer.data)
        super().__init__(shell, path or peer.path)
        self.peer = peer
        self._program: Any = None
        self._program_error: Optional[Exception] = None

    @classmethod
    def open(cls, path: str) -> "PeerDocument":
        """Lenient decode; raises only for I/O errors and files over the size limit."""
        peer = open_peer(path, strict=False)
        doc = cls(peer, path)
        try:
            st = os.stat(path)
            doc.file_identity = (st.st_size, st.st_mtime_ns)
        except OSError:
            pass
        return doc

    @property
    def format(self) -> str:
        return self.peer.format

    @property
    def size(self) -> int:
        return self.peer.size

    # -- the converted program ---------------------------------------------------------------
    @property
    def convertible(self) -> bool:
        return self.peer.format == "mind" and not self.peer.problems

    def program(self):
        """The peer file as a NAC program (``ConvertResult``: ``.nac``, ``.tick_lines``), converted
        on first call (loads torch: call it off the UI thread); ``None`` when it cannot be converted,
        with the reason in :attr:`program_error`."""
        if self._program is None and self._program_error is None:
            if self.peer.format != "mind":
                self._program_error = ValueError(f"no converter for {self.peer.format}")
            else:
                from nac_engine.peers.mind.convert import convert_module
                try:
                    self._program = convert_module(self.peer.module, source_name=self.path and os.path.abspath(self.path),
                                                   source_text=self.peer.data)
                except Exception as e:       # refused constructs name their IR line
                    self._program_error = e
        return self._program

    @property
    def program_error(self) -> Optional[Exception]:
        return self._program_error

    # -- selection <-> bytes ------------------------------------------------------------------
    def select(self, sel: Optional[Selection], source: Any = None, *, record: bool = True) -> None:
        if sel is not None and sel.kind == "offset" and isinstance(sel.key, int):
            sel = self.selection_at(sel.key) or sel
        super().select(sel, source, record=record)

    def selection_at(self, offset: int) -> Optional[Selection]:
        root = self.peer.root
        if not (0 <= offset < root.length):
            return None
        leaf = root.span_at(offset)
        if leaf is None or leaf.parent is None:
            return Selection("offset", offset)
        if getattr(self.peer, "instruction_at", None) is not None and self.peer.instruction_at(offset) is not None:
            while leaf.parent is not None and leaf.length < 8:     # a TVMR byte: its whole instruction
                leaf = leaf.parent
            if leaf.length == 8:
                return Selection("span", leaf.path)
        return Selection("span", record_of(leaf).path)

    def span_of(self, sel: Optional[Selection]) -> Optional[Span]:
        if sel is None:
            return None
        root = self.peer.root
        if sel.kind in ("span", "section"):
            return root.find(sel.key)
        if sel.kind == "offset":
            return root.span_at(sel.key)
        return None

    def spans_of(self, sel: Optional[Selection]) -> list[Span]:
        span = self.span_of(sel)
        return [span] if span is not None else []

    def owner_of(self, span: Optional[Span]) -> Optional[Selection]:
        if span is None or span.parent is None:
            return None
        return Selection("span", record_of(span).path)

    def tick_of(self, sel: Optional[Selection]) -> Optional[int]:
        """For a steppable peer (TVMR: ``instruction_at``), the instruction a selection inside one
        instruction's 8 bytes belongs to, so the tick follows the selection as for NAC."""
        find = getattr(self.peer, "instruction_at", None)
        span = self.span_of(sel) if find is not None else None
        if span is None or span.length > 8:
            return None
        return find(span.offset)

    def set_tick(self, tick: Optional[int], source: Any = None) -> None:
        """Ticks index the peer's instructions (a TVMR machine's execution point); the shell has none."""
        n = len(getattr(self.peer, "instructions", ())) if hasattr(self.peer, "instruction_at") else 0
        if tick is not None and not (0 <= tick < n):
            raise IndexError(f"tick {tick} outside 0..{n - 1}")
        if tick != self.tick:
            self.tick = tick
            self._notify("tick", source)

    def prepare(self) -> None:
        pass

    def _index(self) -> dict:
        self._span_index, self._key_by_span = {}, {}
        return self._span_index

    def describe_span(self, span: Optional[Span]) -> str:
        if span is None:
            return ""
        text = span.path or "<file>"
        if span.value is not None and span.type != "file":
            v = span.value if isinstance(span.value, str) else repr(span.value)
            text += f" = {v if len(v) <= 48 else v[:47] + '…'}"
        return text

    def describe(self, sel: Optional[Selection]) -> str:
        if sel is None:
            return ""
        span = self.span_of(sel)
        if span is not None:
            return f"{self.describe_span(span)} @0x{span.offset:x}+{span.length}"
        return str(sel)


def record_of(span: Span) -> Span:
    """The record a byte belongs to: a child of a top-level ``section`` span (a MIND instruction
    line), else the top-level span itself (a NEFF header, an hwx load command); a section
    clicked in its own bytes (none of its records) is itself."""
    chain = []
    node = span
    while node.parent is not None:
        chain.append(node)
        node = node.parent
    top = chain[-1]
    if top.type == "section" and len(chain) >= 2:
        return chain[-2]
    return top


def open_any(path: str) -> Document:
    """A NAC file as a :class:`Document`, a peer-format file as a :class:`PeerDocument`."""
    if is_peer_path(path):
        return PeerDocument.open(path)
    return Document.open(path)
