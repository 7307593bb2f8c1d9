"""Details pane: a peer file's logical structure beyond its bytes (``PeerFile.details()``).

A NEFF's archive members and its manifests (``def.json`` variables and queue sets, engine DMA
descriptors, opcode histograms), an hwx file's task descriptors with every register written and
its named fields, an E5 descriptor's symbols and sections: one tree, children added when a row
is expanded (a 10k-member archive does not build 10k rows up front). A row that comes from a
byte range selects it, so hex and structure follow. Archive members can be exported (atomic
save; nothing is written unless asked) and a ``.npy`` constant shows its statistics, computed in
a background task.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel, QToolButton, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from nac_engine.format.writer import atomic_write

from ..icons import icon
from ..qt_document import rebind

MAX_CHILDREN = 2000          # rows shown under one node; the rest is summarised in one row
_ITEM = Qt.ItemDataRole.UserRole
_MEMBER = Qt.ItemDataRole.UserRole + 1
_LOADED = Qt.ItemDataRole.UserRole + 2


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        inner = ", ".join(f"{k}: {_text(v)}" for k, v in list(value.items())[:12] if not str(k).startswith("_"))
        return "{" + inner + (", …" if len(value) > 12 else "") + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_text(v) for v in value[:16]) + (", …" if len(value) > 16 else "") + "]"
    s = " ⏎ ".join(part.strip() for part in str(value).splitlines() if part.strip())   # one row, one line
    return s if len(s) <= 300 else s[:300] + "…"


def array_stats(arr: np.ndarray) -> str:
    a = np.asarray(arr, dtype=np.float64) if arr.dtype.kind in "biuf" else None
    head = f"{arr.dtype}{list(arr.shape)}"
    if a is None or a.size == 0:
        return head
    finite = np.isfinite(a)
    vals = a[finite]
    if not vals.size:
        return f"{head}: no finite values"
    return (f"{head}: min {vals.min():.6g}, max {vals.max():.6g}, mean {vals.mean():.6g}, std {vals.std():.6g}, "
            f"zeros {int((a == 0).sum()):,}, NaN/Inf {int((~finite).sum()):,}")


class PeerDetailsView(QWidget):
    object_name = "peer_details"
    title = "Details"
    dock_area = "right"

    def __init__(self, qdoc=None, parent=None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.tree = QTreeWidget(self)
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Name", "Value"])
        self.tree.setUniformRowHeights(True)
        self.tree.setColumnWidth(0, 220)
        self.tree.itemExpanded.connect(self._fill)
        self.tree.currentItemChanged.connect(self._on_current)
        self.export_button = QToolButton(self)
        self.export_button.setIcon(icon("copy"))
        self.export_button.setText("Export Member…")
        self.export_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self.export_dialog)
        self.info = QLabel(self)
        self.info.setWordWrap(True)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.setContentsMargins(2, 2, 2, 0)
        row.addWidget(self.export_button)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(row)
        lay.addWidget(self.tree, 1)
        lay.addWidget(self.info)
        self._stats_task = None
        self.set_document(qdoc)

    @property
    def peer(self):
        return getattr(self.qdoc.doc, "peer", None) if self.qdoc is not None else None

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc)
        self.qdoc = qdoc
        self.tree.clear()
        self.info.setText("")
        self.export_button.setEnabled(False)
        peer = self.peer
        if peer is None:
            self.info.setText("Details of peer-format files (NEFF archives, hwx task descriptors, E5 tables) "
                              "appear here.")
            return
        try:
            items = peer.details()
        except Exception as e:     # a decoder's view of a damaged file: say so, keep the pane alive
            self.info.setText(f"Details unavailable: {e}")
            return
        self._add_children(self.tree.invisibleRootItem(), items, in_archive=False)
        if not items:
            self.info.setText(f"{getattr(peer, 'title', peer.format)}: the structure pane shows everything "
                              "this format holds.")

    def _add_children(self, parent: QTreeWidgetItem, items: list, in_archive: bool) -> None:
        for it in items[:MAX_CHILDREN]:
            row = QTreeWidgetItem([str(it.name), _text(it.value)])
            row.setData(0, _ITEM, it)
            row.setToolTip(1, _text(it.value))
            if in_archive:
                row.setData(0, _MEMBER, str(it.name))
            if it.children:
                row.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
            parent.addChild(row)
        if len(items) > MAX_CHILDREN:
            parent.addChild(QTreeWidgetItem([f"… {len(items) - MAX_CHILDREN:,} more", ""]))

    def _fill(self, row: QTreeWidgetItem) -> None:
        if row.data(0, _LOADED):
            return
        row.setData(0, _LOADED, True)
        it = row.data(0, _ITEM)
        if it is not None:
            self._add_children(row, it.children, in_archive=it.name == "archive")

    # -- current row -------------------------------------------------------------------------
    def current_member(self) -> Optional[str]:
        row = self.tree.currentItem()
        return row.data(0, _MEMBER) if row is not None else None

    def _on_current(self, row: Optional[QTreeWidgetItem], _prev=None) -> None:
        member = self.current_member()
        peer = self.peer
        has_bytes = member is not None and hasattr(peer, "member_bytes")
        self.export_button.setEnabled(bool(has_bytes))
        it = row.data(0, _ITEM) if row is not None else None
        if it is not None and it.span is not None and self.qdoc is not None:
            doc = self.qdoc.doc
            sel = doc.selection_at(it.span[0]) if hasattr(doc, "selection_at") else None
            if sel is not None:
                self.qdoc.select(sel, source=self)
        if has_bytes and member.endswith(".npy") and hasattr(peer, "constant"):
            self._start_stats(peer, member)
        elif has_bytes:
            try:
                self.info.setText(f"{member}: {len(peer.member_bytes(member)):,} bytes")
            except KeyError as e:
                self.info.setText(str(e).strip("'\""))

    def _start_stats(self, peer, member: str) -> None:
        self.info.setText(f"{member}: computing statistics…")
        if self._stats_task is not None:
            self._stats_task.cancel()

        def work(ctx):
            return array_stats(peer.constant(member))

        def done(text, name=member):
            if self.current_member() == name:
                self.info.setText(f"{name}: {text}")

        def failed(exc, name=member):
            if self.current_member() == name:
                self.info.setText(f"{name}: {exc}")

        self._stats_task = self.qdoc.tasks.submit(f"Statistics of {member}", work, on_done=done, on_error=failed)

    # -- export ------------------------------------------------------------------------------
    def export_member(self, member: str, path: str) -> int:
        data = self.peer.member_bytes(member)
        atomic_write(path, data)
        return len(data)

    def export_dialog(self) -> None:
        member = self.current_member()
        if member is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export Archive Member", member.rsplit("/", 1)[-1])
        if not path:
            return
        try:
            n = self.export_member(member, path)
            self.info.setText(f"Exported {member} ({n:,} bytes) to {path}")
        except (OSError, KeyError) as e:
            self.info.setText(f"Cannot export {member}: {e}")
