"""Properties view: the current selection in detail.

Instructions show their operands resolved (producers, constants, parameters), their
consumers and every MMAP command that touches their value; parameters show dtype,
shape, quantisation with its scales, and statistics plus a histogram of their values,
computed in a background task (automatically for tensors up to
:data:`AUTO_STATS_ELEMENTS`, on request above). Any other field shows its bytes decoded
as every scalar type (a data inspector).
"""
from __future__ import annotations

import struct
from typing import Any, Optional

import numpy as np
from PySide6.QtCore import QAbstractItemModel, QModelIndex, Qt
from PySide6.QtGui import QFont, QPixmap
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QHBoxLayout, QHeaderView, QLabel, QPushButton,
                               QSplitter, QTreeView, QVBoxLayout, QWidget)

from nac_engine.format import layout as L
from nac_engine.format.output_names import output_label, returned_names
from nac_engine.isa.coerce import use_note
from nac_engine.isa.optable import OP_INPUT, OP_OUTPUT

from ..qt_document import rebind
from ..model.document import Selection
from ..model.tensor_stats import tensor_stats  # noqa: F401  (re-exported for the tests)
from ..icons import icon
from ..theme import is_dark, mono_font

AUTO_STATS_ELEMENTS = 4_000_000
# Signature codes, seed 000 §5.2.3
_SIG_MEANING = {"Q": "query", "K": "key", "V": "value", "M": "mask", "B": "bias", "W": "weight", "T": "tensor",
                "P": "parameter / buffer", "S": "shape / size", "A": "axis / dim", "f": "float", "i": "int",
                "b": "bool", "s": "string", "c": "other constant"}


# --------------------------------------------------------------------------- model
# roles, alignments and flags as plain values: data()/flags() run per role per cell per repaint
from ..widgets.item_roles import (  # noqa: E402
    ITEM_FLAGS as _ITEM_FLAGS, DISPLAY as _DISPLAY, EDIT as _EDIT, TOOLTIP as _TOOLTIP, FONT as _FONT)
_ROLES = frozenset((_DISPLAY, _EDIT, _TOOLTIP, _FONT))


class PropertyModel(QAbstractItemModel):
    """Two-level tree: group rows, each with (name, value) rows. Internal id 0 = a group,
    otherwise 1 + group row."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._groups: list[tuple[str, list[tuple[str, str]]]] = []

    def set_groups(self, groups: list[tuple[str, list[tuple[str, Any]]]]) -> None:
        self.beginResetModel()
        self._groups = [(g, [(str(k), "" if v is None else str(v)) for k, v in rows]) for g, rows in groups if rows]
        self._fonts = None      # made again per content: the theme or the application font may have changed
        self.endResetModel()

    def _font(self, bold: bool) -> QFont:
        if getattr(self, "_fonts", None) is None:
            title = QFont()
            title.setBold(True)
            self._fonts = (title, mono_font(-0.5))
        return self._fonts[0 if bold else 1]

    def groups(self) -> list[tuple[str, list[tuple[str, str]]]]:
        return list(self._groups)

    def value(self, group: str, name: str) -> Optional[str]:
        for g, rows in self._groups:
            if g == group:
                for k, v in rows:
                    if k == name:
                        return v
        return None

    def index(self, row, column, parent=QModelIndex()):
        if column < 0 or column > 1 or row < 0:
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, column, 0) if row < len(self._groups) else QModelIndex()
        if parent.internalId() != 0:
            return QModelIndex()
        g = parent.row()
        if g >= len(self._groups) or row >= len(self._groups[g][1]):
            return QModelIndex()
        return self.createIndex(row, column, g + 1)

    def parent(self, index=QModelIndex()):
        if not index.isValid() or index.internalId() == 0:
            return QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, 0)

    def rowCount(self, parent=QModelIndex()):
        if not parent.isValid():
            return len(self._groups)
        if parent.internalId() == 0 and parent.column() == 0 and parent.row() < len(self._groups):
            return len(self._groups[parent.row()][1])
        return 0

    def columnCount(self, parent=QModelIndex()):
        return 2

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return ("Property", "Value")[section]
        return None

    def flags(self, index):
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return _ITEM_FLAGS

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role not in _ROLES or not index.isValid():
            return None
        if index.internalId() == 0:
            if role == _DISPLAY and index.column() == 0:
                return self._groups[index.row()][0]
            if role == _FONT:
                return self._font(True)
            return None
        name, value = self._groups[index.internalId() - 1][1][index.row()]
        if role == _DISPLAY or role == _EDIT:
            return name if index.column() == 0 else value
        if role == _TOOLTIP:   # a narrow dock elides both columns: the full row
            return f"{name}\n{value[:2000]}" if value else name
        if role == _FONT and index.column() == 1:
            return self._font(False)
        return None


# --------------------------------------------------------------------------- statistics
def _with_histogram(result: dict) -> dict:
    """The host's statistics with the histogram as ``(counts, edges)``, as the panel draws it."""
    if isinstance(result.get("hist"), list):
        result = {**result, "hist": tuple(result["hist"])}
    return result


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _hex_preview(buf, offset: int, length: int, limit: int = 32) -> str:
    if buf is None or length <= 0:
        return ""
    data = bytes(buf[offset:offset + min(length, limit)])
    return data.hex(" ").upper() + (" …" if length > limit else "")


def inspect_bytes(buf, offset: int) -> list[tuple[str, str]]:
    """The bytes at ``offset`` read as each little-endian scalar type."""
    size = len(buf) if buf is not None else 0
    rows = []
    for name, fmt, n in (("u8", "<B", 1), ("i8", "<b", 1), ("u16", "<H", 2), ("i16", "<h", 2),
                         ("u32", "<I", 4), ("i32", "<i", 4), ("u64", "<Q", 8), ("i64", "<q", 8),
                         ("f16", "<e", 2), ("f32", "<f", 4), ("f64", "<d", 8)):
        if offset + n <= size:
            v = struct.unpack(fmt, bytes(buf[offset:offset + n]))[0]
            rows.append((name, _fmt(v) if isinstance(v, float) else str(v)))
    if offset + 2 <= size:
        bits = struct.unpack("<H", bytes(buf[offset:offset + 2]))[0]
        rows.append(("bf16", _fmt(struct.unpack("<f", struct.pack("<I", bits << 16))[0])))
    if offset < size:
        text = bytes(buf[offset:offset + 16]).decode("latin-1")
        rows.append(("ascii", "".join(ch if 32 <= ord(ch) < 127 else "·" for ch in text)))
    return rows


# --------------------------------------------------------------------------- view
class PropertiesView(QWidget):
    title = "Properties"
    object_name = "properties"

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.qdoc = None
        self._mmap_targets: Optional[dict[int, list[tuple[int, str]]]] = None
        self._stats_task = None
        self._stats_for: Optional[tuple[int, Optional[Selection]]] = None   # (param id, selection)
        self.stats: Optional[dict] = None
        self._icon_name: Optional[str] = None   # the heading's icon, redrawn by retint
        self._drawn = None   # (stats, log scale) the histogram shows
        self.model = PropertyModel(self)

        self.icon_label = QLabel(self)
        self.heading = QLabel(self)
        hf = self.heading.font()
        hf.setPointSizeF(hf.pointSizeF() + 1.5)
        hf.setBold(True)
        self.heading.setFont(hf)
        self.heading.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.heading.setWordWrap(True)   # a long parameter name wraps instead of widening the dock
        self.subheading = QLabel(self)
        self.subheading.setWordWrap(True)
        self.subheading.setEnabled(False)
        self.tree = QTreeView(self)
        self.tree.setModel(self.model)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setRootIsDecorated(False)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        self.tree.header().setStretchLastSection(True)
        self.tree.setColumnWidth(0, 130)
        self.tree.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)

        # statistics panel (parameters only)
        self.stats_panel = QWidget(self)
        self.stats_button = QPushButton(icon("stats"), "Compute statistics", self.stats_panel)
        self.stats_button.clicked.connect(self.compute_stats)
        self.stats_label = QLabel(self.stats_panel)
        self.stats_label.setEnabled(False)
        self.log_check = QCheckBox("Log scale", self.stats_panel)
        self.log_check.toggled.connect(self._draw_histogram)
        self.plot = None   # pyqtgraph PlotWidget, made on first use (import costs ~0.4 s)
        sp = QVBoxLayout(self.stats_panel)
        sp.setContentsMargins(0, 0, 0, 0)
        sp.setSpacing(4)
        row = QHBoxLayout()
        row.addWidget(self.stats_button)
        row.addWidget(self.stats_label, 1)
        row.addWidget(self.log_check)
        sp.addLayout(row)
        self._plot_holder = QVBoxLayout()
        sp.addLayout(self._plot_holder, 1)

        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.tree)
        split.addWidget(self.stats_panel)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setChildrenCollapsible(False)
        self.splitter = split
        head = QHBoxLayout()
        head.setContentsMargins(6, 4, 6, 0)
        head.setSpacing(6)
        head.addWidget(self.icon_label)
        head.addWidget(self.heading, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(head)
        sub = QHBoxLayout()
        sub.setContentsMargins(6, 0, 6, 4)
        sub.addWidget(self.subheading)
        lay.addLayout(sub)
        lay.addWidget(split, 1)
        self.stats_panel.hide()
        self.set_document(qdoc)

    def retint(self) -> None:
        """Redraw what is drawn in palette colours: the icons and the histogram. The rows
        and the statistics stay (re-rendering the panel restarted a weight's statistics, and
        rebuilding it cost a theme switch 15-40 ms)."""
        self.stats_button.setIcon(icon("stats"))
        self.icon_label.setPixmap(icon(self._icon_name).pixmap(20, 20) if self._icon_name else QPixmap())
        if self.stats is not None and self.plot is not None and not self.plot.isHidden():
            self._draw_histogram()

    # -- document -------------------------------------------------------------------------
    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, selection=self._on_selection, problems=self._on_problems)
        self._cancel_stats()
        self.qdoc = qdoc
        self._mmap_targets = None
        self._on_selection(None)

    def _on_selection(self, _source) -> None:
        # this view never sets the selection, so there is no echo to skip
        self._cancel_stats()
        self.stats = None
        self._stats_for = None
        self.stats_panel.hide()
        if self.qdoc is None:
            self._show("", "", None, [])
            return
        sel = self.qdoc.selection
        try:
            self._render(sel)
        except Exception as exc:   # a damaged file must not take the panel down
            self._show("Unreadable selection", f"{sel}: {exc}", "error", [])

    def _on_problems(self, _source) -> None:
        """Problems found after opening (the MMAP schedule check): refresh the counts and
        lists shown, except over a parameter, whose statistics would start again."""
        sel = self.qdoc.selection if self.qdoc is not None else None
        if sel is None or sel.kind != "param":
            self._on_selection(None)

    def _show(self, heading: str, sub: str, icon_name: Optional[str], groups) -> None:
        self.heading.setText(heading)
        self.heading.setToolTip(heading)
        self.subheading.setText(sub)
        self.subheading.setVisible(bool(sub))
        self._icon_name = icon_name
        self.icon_label.setPixmap(icon(icon_name).pixmap(20, 20) if icon_name else QPixmap())
        self.model.set_groups(groups)
        self.tree.expandAll()

    def _render(self, sel: Optional[Selection]) -> None:
        doc = self.qdoc.doc
        nac = doc.nac
        if sel is None:
            name = (doc.path or "untitled").rsplit("/", 1)[-1]
            groups = [("File", self._file_rows())]
            hint = "Nothing selected — click a byte, a field, an instruction or a node."
            if doc.problems:
                hint += f" {len(doc.problems)} problems: F8 steps through them."
            self._show(name, hint, "file", groups)
            return
        kind, key = sel.kind, sel.key
        if kind == "instruction" and isinstance(key, int) and 0 <= key < len(nac.instructions):
            self._instruction(key)
        elif kind == "param" and key in nac.params:
            self._param(key)
        elif kind == "constant" and key in nac.constants:
            c = nac.constants[key]
            uses = [i.index for i in nac.instructions if key in i.const_ids and i.a >= 10]
            rows = [("ID", f"c{c.id}"), ("Type", c.type_name), ("Value", _long(c.value)),
                    ("Used by", _ticks(uses))]
            self._show(f"Constant c{c.id}", f"{c.type_name} = {_long(c.value, 80)}", "constant",
                       [("Constant", rows)] + self._byte_groups(sel))
        elif kind == "cmap" and key in nac.cmap:
            uses = [i.index for i in nac.instructions if i.a == key]
            self._show(nac.cmap[key], f"op id {key}", "instruction",
                       [("Operation", [("ID", key), ("Name", nac.cmap[key]), ("Used by", _ticks(uses))])]
                       + self._byte_groups(sel))
        elif kind == "perm" and key in nac.perms:
            sig = nac.perms[key]
            uses = [i.index for i in nac.instructions if i.a >= 10 and i.b == key]
            rows = [("ID", key), ("Signature", repr(sig)), ("Used by", _ticks(uses))]
            rows += [(f"argument {j}", f"{ch}: {_SIG_MEANING.get(ch, '?')}") for j, ch in enumerate(sig, 1)]
            self._show(f"Signature {sig!r}", f"signature id {key}", "record",
                       [("Signature", rows)] + self._byte_groups(sel))
        elif kind == "mmap":
            cmds = nac.mmap_by_tick().get(key, [])
            rows = [(c.name, doc.value_name(c.target)) for c in cmds]
            self._show(f"MMAP tick {key}", doc.describe(Selection("instruction", key)) if
                       0 <= key < len(nac.instructions) else "", "record",
                       [("Memory commands", rows)] + self._byte_groups(sel))
        elif kind == "input":
            name = nac.input_name_map.get(key, "?")
            self._show(f"Input {name}", f"user input at tick {key}", "record",
                       [("Input", [("Name", name), ("Tick", key)])] + self._byte_groups(sel))
        elif kind == "section":
            self._section(sel)
        else:
            span = doc.span_of(sel)
            title = span.path if span is not None else str(sel)
            self._show(title or "<file>", doc.describe_span(span) if span is not None else "", "field",
                       self._byte_groups(sel, inspector=True))

    # -- kinds ----------------------------------------------------------------------------
    def _file_rows(self) -> list:
        doc = self.qdoc.doc
        nac = doc.nac
        h = nac.header
        rows = [("Path", doc.path or "—"), ("Size", f"{nac.size:,} bytes")]
        if nac.header_decoded:
            rows += [("Format", f"NAC v{h.version}"), ("Quantisation", h.quant_name),
                     ("Weights", "internal" if h.weights_internal else f"external ({nac.weights_path})"),
                     ("Inputs / outputs", f"{h.num_inputs} / {h.num_outputs}"), ("d_model", h.d_model),
                     ("Instructions", f"{len(nac.instructions):,}"), ("Parameters", f"{len(nac.params):,}"),
                     ("Constants", f"{len(nac.constants):,}"), ("Sections", " ".join(nac.layout))]
        else:
            rows.append(("Format", "not a readable NAC header"))
        rows.append(("Problems", f"{len(doc.problems):,}"))
        return rows

    def _consumers_of(self, tick: int) -> list[int]:
        return list(self.qdoc.nac.users(tick))     # the file's def-use index, built once

    def _mmap_touching(self, tick: int) -> list[tuple[int, str]]:
        if self._mmap_targets is None:
            t: dict[int, list[tuple[int, str]]] = {}
            for rec in self.qdoc.nac.mmap:
                for c in rec.commands:
                    t.setdefault(c.target, []).append((rec.tick, c.name))
            self._mmap_targets = t
        return self._mmap_targets.get(tick, [])

    def _instruction(self, i: int) -> None:
        doc = self.qdoc.doc
        nac = doc.nac
        ins = nac.instructions[i]
        name = nac.instruction_name(ins)
        sig = nac.signature(ins)
        general = [("Tick", i), ("Operation", name), ("A (op id)", ins.a),
                   ("B", f"{ins.b}" + (f"  signature {sig!r}" if sig else "")),
                   ("Offset", f"0x{ins.offset:X} ({ins.offset:,})"), ("Size", f"{ins.nbytes} bytes")]
        if ins.c is not None:
            general.append(("C (raw)", list(ins.c)))
        if ins.d is not None:
            general.append(("D (raw)", list(ins.d)))
        args = []
        if ins.a == OP_INPUT:
            if ins.b == 0:
                args.append(("input", nac.input_name_map.get(i, "(unnamed)")))
            p = nac.param_for(ins)
            if p is not None:
                args.append(("param", p.name))
                if p.meta is not None:
                    args.append(("tensor", f"{p.dtype}{list(p.shape or ())}  {p.quant_name}"))
            elif ins.b == 3 and ins.c and len(ins.c) > 1:
                args.append(("constant", doc.const_text(ins.c[1])))
        elif ins.a == OP_OUTPUT:
            for j, (prod, name) in enumerate(zip(ins.producers(), returned_names(nac, ins))):
                args.append((output_label(j, name), doc.value_name(prod)))
        else:
            for j, arg in enumerate(nac.arguments(ins)):
                label = f"{j} · {arg.code} {_SIG_MEANING.get(arg.code, '')}".rstrip()
                if arg.kind == "ref":
                    args.append((label, doc.value_name(arg.producer)))
                else:
                    used = use_note(arg.value, arg.code)   # a shared constant as the op uses it
                    args.append((label, f"c{arg.const_id} = {used or _long(arg.value, 60)}"))
        consumers = [(f"t{c}", nac.instruction_name(nac.instructions[c])) for c in self._consumers_of(i)
                     if 0 <= c < len(nac.instructions)]
        memory = [(f"at t{t}", f"{action} v{i}") for t, action in self._mmap_touching(i) if t != i]
        here = nac.mmap_by_tick().get(i, [])
        memory += [("this tick", f"{c.name} {doc.value_name(c.target)}") for c in here]
        groups = [("Instruction", general), ("Arguments", args), ("Consumers", consumers[:200]),
                  ("Memory schedule", memory)]
        loads = nac.param_for(ins)
        if loads is not None:   # a parameter load is where users look for the tensor
            groups += self._param_groups(loads.id)[0]
        groups += self._byte_groups(Selection("instruction", i))
        sub = f"{len(consumers)} consumer{'s' if len(consumers) != 1 else ''}"
        if sig:
            sub += f" · signature {sig!r}"
        if loads is not None:
            sub += f" · {loads.name}"
        self._show(f"t{i} · {name}", sub, "instruction", groups)
        if loads is not None:
            self._offer_stats(loads.id)

    def _param_groups(self, pid: int) -> tuple[list, str]:
        """The parameter's groups (tensor, quantisation) and a one-line summary."""
        nac = self.qdoc.nac
        p = nac.params[pid]
        rows = [("Name", p.name), ("ID", pid)]
        loaded = [ins.index for ins in nac.instructions if ins.a == OP_INPUT and ins.b == 1 and ins.c
                  and len(ins.c) > 1 and ins.c[1] == pid]
        rows.append(("Loaded at", _ticks(loaded)))
        quant = []
        m = p.meta
        if m is not None:
            n = int(np.prod(m.logical_shape, dtype=np.int64)) if m.logical_shape else 1
            rows += [("Dtype", m.dtype_name), ("Shape", list(m.logical_shape)), ("Elements", f"{n:,}")]
            if m.shape != m.logical_shape:
                rows.append(("Stored shape", list(m.shape)))
            if p.data_offset >= 0:
                rows += [("Data offset", f"0x{p.data_offset:X} ({p.data_offset:,})"),
                         ("Data size", f"{p.data_length:,} bytes")]
            quant.append(("Method", L.QUANT_NAMES.get(m.quant, f"unknown {m.quant}")))
            if m.scale is not None:
                quant.append(("Scale", _fmt(m.scale)))
            if m.axis is not None:
                quant.append(("Axis", m.axis))
            if m.block_size is not None:
                quant.append(("Block size", m.block_size))
            if m.scales is not None and len(m.scales):
                sc = np.asarray(m.scales, np.float64)
                quant += [("Scales", f"{len(sc):,} (min {_fmt(sc.min())}, max {_fmt(sc.max())}, "
                                     f"mean {_fmt(sc.mean())})"),
                          ("First scales", ", ".join(_fmt(x) for x in sc[:8]) + (" …" if len(sc) > 8 else ""))]
            if m.extra:
                quant.append(("Extra metadata", f"{len(m.extra)} bytes not decoded"))
        else:
            rows.append(("Tensor", "external (.safetensors)" if not nac.header.weights_internal else "missing"))
        sub = f"{m.dtype_name}{list(m.logical_shape)}" if m is not None else "no tensor metadata"
        if m is not None and m.quant:
            sub += f" · {L.QUANT_NAMES.get(m.quant)}"
        return [("Parameter", rows), ("Quantisation", quant)], sub

    def _param(self, pid: int) -> None:
        groups, sub = self._param_groups(pid)
        groups += self._byte_groups(Selection("param", pid))
        self._show(self.qdoc.nac.params[pid].name, sub, "param", groups)
        self._offer_stats(pid)

    def _section(self, sel: Selection) -> None:
        doc = self.qdoc.doc
        span = doc.span_of(sel)
        if span is None:
            self._show(str(sel.key), "section not present", "section", [])
            return
        records = [c for c in span.children if c.name not in ("tag", "count")]
        problems = _problems_in(doc.problems, span.offset, span.end)
        rows = [("Offset", f"0x{span.offset:X} ({span.offset:,})"), ("Size", f"{span.length:,} bytes"),
                ("Records / fields", f"{len(records):,}"), ("Problems", len(problems))]
        groups = [("Section", rows)]
        if problems:
            groups.append(("Problems", [(f"0x{p.offset:X}", p.reason) for p in problems[:100]]))
        groups.append(("Bytes", [("First bytes", _hex_preview(doc.nac.buffer, span.offset, span.length))]))
        self._show(f"Section {span.name}", f"{span.length:,} bytes at 0x{span.offset:X}", "section", groups)

    def _byte_groups(self, sel: Selection, inspector: bool = False) -> list:
        doc = self.qdoc.doc
        spans = doc.spans_of(sel)
        buf = doc.nac.buffer
        groups = []
        rows = []
        for s in spans:
            rows.append((s.path or "<file>", f"0x{s.offset:X} + {s.length:,}"))
            rows.append(("bytes", _hex_preview(buf, s.offset, s.length)))
        if rows:
            groups.append(("Bytes", rows))
        if inspector:
            offset = sel.key if sel.kind == "offset" else (spans[0].offset if spans else None)
            if isinstance(offset, int) and buf is not None:
                groups.append((f"Data at 0x{offset:X}", inspect_bytes(buf, offset)))
        if spans:
            a = min(s.offset for s in spans)
            b = max(s.end for s in spans)
            found = _problems_in(doc.problems, a, b)
            if found:
                groups.append(("Problems", [(f"0x{p.offset:X}", p.reason) for p in found[:50]]))
        return groups

    # -- statistics -----------------------------------------------------------------------
    def _offer_stats(self, pid: int) -> None:
        """Show the statistics panel for parameter ``pid``; small tensors start at once."""
        self._stats_for = (pid, self.qdoc.selection)
        meta = self.qdoc.nac.params[pid].meta
        self.stats_panel.show()
        self.log_check.setVisible(False)
        if self.plot is not None:
            self.plot.hide()
        n = int(np.prod(meta.logical_shape, dtype=np.int64)) if meta is not None and meta.logical_shape else 0
        self.stats_button.setEnabled(True)
        if n and n <= AUTO_STATS_ELEMENTS:
            self.compute_stats()
        elif n:
            self.stats_label.setText(f"{n:,} elements — computed on request")
        else:
            self.stats_label.setText("Values come from the external weights file, on request"
                                     if meta is None else "")

    def compute_stats(self):
        """Start the background statistics task for the parameter on display."""
        if self.qdoc is None or self._stats_for is None:
            return None
        pid, owner = self._stats_for
        self._cancel_stats()
        p = self.qdoc.nac.params.get(pid)
        if p is None:
            return None
        self.stats_button.setEnabled(False)
        self.stats_label.setText("Computing…")
        # in the engine host: the values are read and dequantised there, never in this process;
        # a newer selection's statistics supersede these
        task = self.qdoc.host.request("nac/statistics", {"path": self.qdoc.doc.path, "param": pid},
                                      title=f"Statistics of {p.name}", supersede="properties-statistics")
        task.finished.connect(lambda r, s=owner: self._stats_done(s, _with_histogram(r)))
        task.failed.connect(lambda e, s=owner: self._stats_failed(s, e))
        self._stats_task = task
        return task

    def _cancel_stats(self) -> None:
        if self._stats_task is not None and not self._stats_task.done():
            self._stats_task.cancel()
        self._stats_task = None

    def _stats_failed(self, sel: Selection, exc) -> None:
        if self.qdoc is None or self.qdoc.selection != sel:
            return
        from ..tasks import Cancelled
        self.stats_button.setEnabled(True)
        self.stats_label.setText("Cancelled" if isinstance(exc, Cancelled) else f"Could not read values: {exc}")

    def _stats_done(self, sel: Selection, result: dict) -> None:
        if self.qdoc is None or self.qdoc.selection != sel:
            return   # the user moved on; a late result must not overwrite the panel
        self.stats = result
        self.stats_button.setEnabled(True)
        rows = [("Elements", f"{result.get('count', 0):,}")]
        if "min" in result:
            rows += [("Min", _fmt(result["min"])), ("Max", _fmt(result["max"])), ("Mean", _fmt(result["mean"])),
                     ("Std", _fmt(result["std"])), ("Zeros", f"{result['zeros']:,} ({result['sparsity']:.2%})")]
        if result.get("nan") or result.get("inf"):
            rows += [("NaN", f"{result['nan']:,}"), ("Inf", f"{result['inf']:,}")]
        groups = self.model.groups()
        groups.insert(1, ("Statistics", rows))
        self.model.set_groups(groups)
        self.tree.expandAll()
        self.stats_label.setText("Histogram of dequantised values" if "hist" in result else "")
        self.log_check.setVisible("hist" in result)
        self._draw_histogram()

    def _ensure_plot(self):
        if self.plot is None:
            import pyqtgraph as pg
            self.plot = pg.PlotWidget(self.stats_panel)
            self.plot.setMinimumHeight(140)
            self.plot.setMenuEnabled(False)
            self.plot.hideButtons()
            self.plot.getPlotItem().setMouseEnabled(x=True, y=False)
            self._plot_holder.addWidget(self.plot)
        return self.plot

    def _draw_histogram(self, *_):
        if not self.stats or "hist" not in self.stats:
            return
        import pyqtgraph as pg
        counts, edges = self.stats["hist"]
        plot = self._ensure_plot()
        plot.show()
        pal = self.palette()
        look = (pal.color(pal.ColorRole.Base).rgba(), pal.color(pal.ColorRole.Text).rgba())
        brush = pg.mkBrush(80, 140, 220, 200) if not is_dark() else pg.mkBrush(95, 155, 235, 210)
        if look != getattr(self, "_plot_look", None):
            # axis pens re-lay the axes out: set them when the theme changed, not per histogram
            self._plot_look = look
            plot.setBackground(pal.color(pal.ColorRole.Base))
            fg = pal.color(pal.ColorRole.Text)
            for axis in ("left", "bottom"):
                ax = plot.getAxis(axis)
                ax.setPen(pg.mkPen(fg))
                ax.setTextPen(pg.mkPen(fg))
        drawn = (self.stats, self.log_check.isChecked())
        bar = getattr(self, "_bar", None)
        if bar is not None and bar.scene() is not None and self._drawn is not None \
                and self._drawn[0] is drawn[0] and self._drawn[1] == drawn[1]:
            bar.setOpts(brush=brush)   # the same bars in a new theme: no new data, no new range
            return
        self._drawn = drawn
        heights = counts.astype(np.float64)
        if self.log_check.isChecked():
            heights = np.log10(heights + 1)
        if bar is None or bar.scene() is None:
            # one bar item, refilled per histogram (a new item per selection cost a scene rebuild)
            bar = self._bar = pg.BarGraphItem(x0=edges[:-1], x1=edges[1:], height=heights, brush=brush,
                                              pen=pg.mkPen(None))
            plot.addItem(bar)
        else:
            bar.setOpts(x0=edges[:-1], x1=edges[1:], height=heights, brush=brush)
        label = "log10(count+1)" if self.log_check.isChecked() else "count"
        if label != getattr(self, "_plot_label", None):
            self._plot_label = label
            plot.setLabel("left", label)
        plot.autoRange()


def _problems_in(problems: list, a: int, b: int) -> list:
    """The problems placed in bytes ``a``..``b`` (a problem may have no place: offset None)."""
    return [p for p in problems if isinstance(getattr(p, "offset", None), int) and a <= p.offset < b]


def _ticks(ticks: list[int], limit: int = 12) -> str:
    if not ticks:
        return "—"
    head = ", ".join(f"t{t}" for t in ticks[:limit])
    return head + (f" … ({len(ticks)} in all)" if len(ticks) > limit else "")


def _long(value: Any, limit: int = 400) -> str:
    text = repr(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
