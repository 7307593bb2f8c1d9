"""The window's support for peer-format files (MIND Core IR, and the binary formats to come).

``register_peer_support(window)`` adds, without the window knowing the formats:

* the IR Text pane (:mod:`.views.ir_text`), raised when a MIND file becomes active, and for a binary
  peer with a text form (TVMR assembly, hwx register listing, NEFF engine slots: :mod:`.views.peer_text`);
* the TVMR Machine pane (:mod:`.views.tvmr_machine`) and its Debug commands, raised for a TVMR file;
* a "not available for this format" cover over every pane that only makes sense for NAC
  (disassembly, properties, debugger panes, timeline…) while a peer file is active; panes that
  read the span tree, bytes, problems or graph (structure, hex, problems, graph, IR text) work;
* the command Convert to NAC and Open…: the MIND program converted in the background (input
  signature and source map included) into a ``.nac`` the user names (beside the IR by default, as
  ``nac convert -o`` writes it; not a temporary file the user could neither keep nor find), opened
  beside the IR, where Run/step/breakpoints work and the IR Text pane follows each tick to its IR line.

``file_filter()`` is the Open dialog's filter, built from the peer registry.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QFileDialog, QLabel, QWidget

from nac_engine.peers import FORMATS, extensions

from .views.ir_text import IrTextView
from .views.peer_details import PeerDetailsView
from .views.tvmr_machine import TvmrMachineView, register_tvmr_commands

#: panes that show a peer file (span tree, bytes, problems, graph); every other pane is NAC-only
PEER_PANES = frozenset({"structure", "hex", "problems", "graph", "ir_text", "peer_details", "tvmr_machine"})
_TITLES = {"mind": "MIND Core IR"}


def document_for(pane: str, qdoc):
    """What ``pane`` shows: the document, or ``None`` for a NAC-only pane while a peer file is active
    (the pane is then covered with a note instead of computing anything for a file it cannot show)."""
    if qdoc is None or pane in PEER_PANES or getattr(qdoc.doc, "peer", None) is None:
        return qdoc
    return None


def file_filter() -> str:
    """``Supported files (*.nac *.ir …);;NAC models (*.nac);;MIND Core IR (*.ir …);;All files (*)``."""
    parts, every = [], ["*.nac"]
    for fmt in FORMATS:
        try:
            exts = [f"*{e}" for e in extensions(fmt)]
        except Exception:        # a decoder that fails to import must not break the Open dialog
            exts = []
        if exts:
            every += exts
            parts.append(f"{_TITLES.get(fmt, fmt.upper())} ({' '.join(exts)})")
    return ";;".join([f"Supported files ({' '.join(every)})", "NAC models (*.nac)", *parts, "All files (*)"])


def peer_status(peer) -> str:
    """The status-bar line for a peer file: format, dialect, what it holds, size."""
    s = peer.summary()
    parts = [getattr(peer, "title", peer.format) + (f" ({s['dialect']} dialect)" if s.get("dialect") else "")]
    if "instructions" in s:
        parts.append(f"{s['instructions']:,} instructions")
    n = s.get("size", peer.size)
    parts.append(f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} B")
    return " · ".join(parts)


class _Cover(QLabel):
    """A label laid over a pane, following its size, saying why the pane is empty."""

    def __init__(self, pane: QWidget):
        super().__init__(pane)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setAutoFillBackground(True)
        self.setMargin(12)
        self.setObjectName("peerCover")
        pane.installEventFilter(self)
        self.setGeometry(pane.rect())

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self.setGeometry(obj.rect())
        return False


def cover(pane: QWidget, text: Optional[str]) -> None:
    """Show ``text`` over ``pane`` (``None``: take the cover away)."""
    c = pane.findChild(_Cover, "peerCover", Qt.FindChildOption.FindDirectChildrenOnly)
    if text is None:
        if c is not None:
            c.hide()
        return
    if c is None:
        c = _Cover(pane)
    c.setText(text)
    c.setGeometry(pane.rect())
    c.show()
    c.raise_()


def covered_text(pane: QWidget) -> Optional[str]:
    c = pane.findChild(_Cover, "peerCover", Qt.FindChildOption.FindDirectChildrenOnly)
    return c.text() if c is not None and not c.isHidden() else None


class PeerSupport(QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.view, self.dock = window.add_view(IrTextView)
        # the binary formats' logical structure (archive members, registers, tables)
        self.details, self.details_dock = window.add_view(PeerDetailsView)
        # TVMR programs step in the engine's interpreter (own Debug entries: F5/F10 are the NAC debugger's)
        self.machine, self.machine_dock = window.add_view(TvmrMachineView)
        register_tvmr_commands(window, self.machine, self.machine_dock)
        window.documentChanged.connect(self._on_document_changed)
        window.commands.add("peer.convertOpen", "Convert to NAC and Open…", self.convert_and_open, menu="Debug",
                            group="z", enabled=self._can_convert,
                            tip="Convert this MIND Core IR program to NAC (with a source map back to its lines) "
                                "and open it to run, step and set breakpoints")

    # -- active document -----------------------------------------------------------------------
    def _on_document_changed(self, qdoc) -> None:
        peer = getattr(qdoc.doc, "peer", None) if qdoc is not None else None
        note = None
        if peer is not None:
            title = getattr(peer, "title", peer.format)
            note = f"Not available for {title} files.\n\nThis pane shows NAC programs"
            note += (": use Debug › Convert to NAC and Open to run this one." if peer.format == "mind" else ".")
        for name, pane in self.window.views.items():
            if name not in PEER_PANES:
                cover(pane, note)
        if peer is not None and peer.format == "mind" or self.view.mode == "source":
            self.dock.show()
            self.dock.raise_()
        if peer is not None and peer.format != "mind":
            self.details_dock.show()
            self.details_dock.raise_()
            if self.view.mode == "peer_text":      # a binary peer's text form (TVMR assembly, hwx, NEFF)
                self.dock.show()
                self.dock.raise_()
        if peer is not None and peer.format == "tvmr":
            self.machine_dock.show()
            self.machine_dock.raise_()
        if peer is not None and hasattr(self.window, "set_doc_summary"):
            self.window.set_doc_summary(peer_status(peer))

    def _can_convert(self) -> bool:
        qdoc = self.window.active
        return qdoc is not None and bool(getattr(qdoc.doc, "convertible", False))

    # -- Convert to NAC and Open -----------------------------------------------------------------
    def convert_and_open(self, out: Optional[str] = None):
        """Convert in the background, write ``out`` (asked for when not given), open it; returns the
        Task, or ``None`` when there is nothing to convert or the user cancelled."""
        qdoc = self.window.active
        if qdoc is None or not getattr(qdoc.doc, "convertible", False):
            return None
        doc = qdoc.doc
        if out is None:
            out, _ = QFileDialog.getSaveFileName(self.window, "Convert to NAC", default_output(doc.path),
                                                 "NAC models (*.nac)")
            if not out:
                return None

        def work(ctx):
            res = doc.program()
            if res is None:
                raise doc.program_error
            ctx.check()
            from nac_engine.compiler.external import write_compiled
            write_compiled(res.nac, out)         # atomic: a failed conversion leaves any older file whole
            return out

        return self.window.tasks.submit(f"Converting {Path(doc.path or 'program').name} to NAC", work,
                                        on_done=lambda path: self.window.open_path(path),
                                        on_error=lambda exc: self.window.show_message(f"Cannot convert: {exc}"))


def default_output(source: Optional[str]) -> str:
    """Where Convert to NAC suggests writing: ``<stem>.nac`` beside the IR file, or in the home folder
    when that folder cannot be written (a read-only checkout or corpus)."""
    src = Path(source or "program.ir")
    folder = src.parent if source and os.access(src.parent, os.W_OK) else Path.home()
    return str(folder / f"{src.stem}.nac")


def register_peer_support(window) -> PeerSupport:
    window.peer_support = PeerSupport(window)
    return window.peer_support
