"""Tensor inspector: one tensor's values — a tick's result, a parameter or an input — as
statistics, histogram, heatmap of any two axes (sliders pick the others), a 1-D line plot and
a virtualised table of raw values; several inspectors pinned side by side.

The first panel follows the execution point (the current result of the debug session); *Pin*
copies what it shows into a panel of its own that stays put while you step, and the Variables
pane opens more (``inspect``). A quantised parameter has a *Dequantised / Stored* choice: the
float values the interpreter uses and the raw stored integers. Statistics and the histogram are
computed in the document's background tasks (the engine's ``TickResult`` — the same numbers
``Debugger.result`` gives); the heatmap shows a numpy view of one 2-D slice, so a 4096×4096
float32 tensor opens and re-slices without copying the whole tensor. Export writes ``.npy``
atomically; Copy Stats puts the statistics on the clipboard.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QFileDialog, QHBoxLayout, QHeaderView, QLabel, QMessageBox,
                               QScrollArea, QSizePolicy, QSlider, QSpinBox, QSplitter, QTableView, QTabWidget, QToolButton,
                               QVBoxLayout, QWidget)

from nac_engine.format.output_names import returned_names
from nac_engine.isa.optable import OP_INPUT, OP_OUTPUT

from ..widgets.image_files import could_not_write
from ..widgets.task_indicator import ElidedText
from ..debug_session import Subject
from ..icons import icon
from ..qt_document import rebind
from .large_tensor import LargeTensor, PagedValuesModel, heat_window, stride_for, stride_note, value_cell

#: Panels beyond the follower; the oldest is closed when one more is pinned.
MAX_PINNED = 4
HIST_BINS = 128


@dataclass
class Loaded:
    """What a background load produced for a panel."""
    title: str
    array: Optional[np.ndarray]
    stats: Any                      # nac_engine.runtime.debugger.TickResult (or None)
    hist: Optional[tuple]           # (counts, edges) over the finite values
    raw: Optional[np.ndarray] = None    # the stored form of a quantised parameter
    raw_stats: Any = None
    raw_hist: Optional[tuple] = None
    tick: Optional[int] = None
    note: str = ""
    large: Optional[LargeTensor] = None     # a parameter read in windows (large_tensor.py)


def _histogram(arr: Optional[np.ndarray]) -> Optional[tuple]:
    if arr is None or arr.dtype.kind not in "biufc" or arr.size == 0:
        return None
    if arr.dtype.kind == "c":           # of the magnitudes |z|, as the statistics
        arr = np.abs(arr)
    a = arr.astype(np.float64, copy=False) if arr.dtype.kind in "bf" or arr.dtype.itemsize > 4 else arr
    finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a.ravel()
    if finite.size == 0:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.histogram(finite, bins=HIST_BINS, range=(lo, hi))


def load_subject(session, nac, subject: Subject, host=None, path: Optional[str] = None) -> Loaded:
    """Background part: the array, its statistics and histogram (no Qt). Values come from the
    engine host (``host.call``: this runs on a worker thread), which reads and dequantises them."""
    from nac_engine.runtime.tick_result import TickResult
    if subject.kind == "result" and session is not None and session.debugger is not None:
        tick = session.tick if subject.follows else subject.key
        ins = nac.instructions[tick] if tick is not None and 0 <= tick < len(nac.instructions) else None
        if ins is not None and ins.a == OP_INPUT and ins.b == 1 and ins.c and len(ins.c) >= 2 \
                and ins.c[1] in nac.params and tick <= session.tick:
            # a weight's tick: its value is the parameter, read in windows when large (the run's
            # copy would cross to this process whole: 256 MB for a 1B model's embedding)
            loaded = load_subject(session, nac, Subject("param", ins.c[1]), host, path)
            loaded.tick = tick
            loaded.title = f"t{tick}  {loaded.title}"
            return loaded
    if subject.kind == "param":
        p = nac.params.get(subject.key)
        if p is None:
            return Loaded(f"param {subject.key}", None, None, None, note="no such parameter")
        got = host.call("nac/paramValues", {"path": path, "param": p.id})
        big = got.get("large")
        if big is not None:
            shape = tuple(int(d) for d in big["shape"])
            dims = "×".join(str(d) for d in shape)
            return Loaded(f"{p.name}  ·  param {p.id} · {dims}", None, None, None,
                          large=LargeTensor(path, p.id, p.name, shape, np.dtype(big["dtype"])))
        stats = TickResult.from_summary(got["value"])
        arr = stats.tensor
        raw = raw_stats = raw_hist = None
        if got.get("raw") is not None:
            raw_stats = TickResult.from_summary(got["raw"])
            raw, raw_hist = raw_stats.tensor, _histogram(raw_stats.tensor)
        # no dims here: the statistics line below gives the shape
        return Loaded(f"{p.name}  ·  param {p.id}", arr, stats, _histogram(stats.tensor), raw, raw_stats,
                      raw_hist, note="quantised: dequantised and stored forms" if raw is not None else "")
    if session is None or session.debugger is None:
        return Loaded("no run", None, None, None, note="Start the debugger (F5) or step (F10) to see values")
    tick = session.tick if subject.follows else subject.key
    if tick is None or tick < 0:
        return Loaded("before tick 0", None, None, None, note="Nothing has executed yet (F10 steps)")
    if tick > session.tick:
        return Loaded(f"t{tick}", None, None, None, tick=tick, note=f"tick {tick} has not executed yet")
    r = session.result(tick)
    title = f"t{tick}  {session.name_of(tick)}"
    ins = nac.instructions[tick]
    if r.tensor is None and ins.a == OP_OUTPUT:
        # the return instruction has no value of its own: show what it returns (after Continue to
        # the end the inspector follows it)
        returned = [(p, name) for p, name in zip(ins.producers(), returned_names(nac, ins)) if 0 <= p <= session.tick]
        if returned:
            first, name = returned[0]
            r = session.result(first)
            more = f"; {len(returned)} outputs: " + ", ".join(
                f"v{p} ({n})" if n else f"v{p}" for p, n in returned) if len(returned) > 1 else ""
            # "returns v87 (last_hidden_state)"; unnamed, "returns v87 aten.layer_norm.default" (name_of
            # starts with "v87" for an op, not for a weight or an input)
            what = session.name_of(first)
            what = what if what.startswith(f"v{first} ") else f"v{first} {what}"
            title = f"t{tick}  returns " + (f"v{first} ({name})" if name else what)
            if r.tensor is not None:
                return Loaded(title, r.tensor, r, _histogram(r.tensor), tick=tick, note=f"output of the run{more}")
    if r.tensor is None:
        return Loaded(title, None, r, None, tick=tick, note=f"no tensor: {r.value!r}"[:200])
    return Loaded(title, r.tensor, r, _histogram(r.tensor), tick=tick)


#: A line of at most this many values shows each value as a point too.
LINE_POINTS_MARKED = 256


def stats_text(r) -> str:
    """One block of text for the stats line and the clipboard."""
    if r is None or r.tensor is None:
        return ""
    def f(v):
        return "—" if v is None else f"{v:.6g}"
    of = "  (of |z|)" if str(r.dtype).startswith("complex") else ""
    return (f"shape {list(r.shape)}  {r.dtype}{of}\nmin {f(r.min)}  max {f(r.max)}  mean {f(r.mean)}  std {f(r.std)}"
            f"\nNaN {r.nan_count:,}  Inf {r.inf_count:,}  zero {r.zero_count:,}")


def large_stats_text(tensor: LargeTensor, r: dict) -> str:
    """The stats block of a parameter read in windows (``nac/statistics``'s answer)."""
    def f(v):
        return "—" if v is None else f"{v:.6g}"
    return (f"shape {list(tensor.shape)}  {tensor.dtype}\nmin {f(r.get('min'))}  max {f(r.get('max'))}  "
            f"mean {f(r.get('mean'))}  std {f(r.get('std'))}\nNaN {r.get('nan', 0):,}  Inf {r.get('inf', 0):,}  "
            f"zero {r.get('zeros', 0):,}")


# --------------------------------------------------------------------------- raw values
class ValuesModel(QAbstractTableModel):
    """Every element as a row: one index column per axis, then the value. Rows are formatted
    on demand, so a 16M-element tensor costs nothing until scrolled to."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.array: Optional[np.ndarray] = None

    def set_array(self, arr: Optional[np.ndarray]) -> None:
        self.beginResetModel()
        self.array = arr if arr is None or arr.ndim else arr.reshape(1)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() or self.array is None else min(int(self.array.size), 2**31 - 1)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() or self.array is None else self.array.ndim + 1

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role != Qt.ItemDataRole.DisplayRole or orientation != Qt.Orientation.Horizontal or self.array is None:
            return None
        return "value" if section == self.array.ndim else f"i{section}"

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or self.array is None:
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role not in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.BackgroundRole, Qt.ItemDataRole.ForegroundRole):
            return None
        idx = np.unravel_index(index.row(), self.array.shape)
        if index.column() < self.array.ndim:
            return str(int(idx[index.column()])) if role == Qt.ItemDataRole.DisplayRole else None
        return value_cell(self.array[idx], role)


# --------------------------------------------------------------------------- one panel
class InspectorPanel(QWidget):
    pinRequested = Signal(object)      # Subject
    closeRequested = Signal(object)    # self

    def __init__(self, subject: Subject, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.subject = subject
        self.loaded: Optional[Loaded] = None
        self.array: Optional[np.ndarray] = None     # the form shown (dequantised or stored)
        self.result = None                          # its TickResult
        self._task = None
        self._gen = 0
        self._image = None
        self._hist_plot = None
        self._line_plot = None
        self._sliders: dict[int, tuple[QSlider, QSpinBox]] = {}    # axis -> its slider (axes longer than 1)
        # a parameter too large to hold (large_tensor.py): read in windows from the engine host
        self.large: Optional[LargeTensor] = None
        self.large_stats: Optional[dict] = None
        self.window: Optional[tuple] = None         # (values, window, (y stride, x stride)) on show
        self._host = None
        self._stats_task = None
        self._window_task = None
        self._zoom_timer = QTimer(self)
        self._zoom_timer.setSingleShot(True)
        self._zoom_timer.setInterval(150)
        self._zoom_timer.timeout.connect(self._zoomed)

        # elided at the end with a mark (a clipped label read as the name "c_attn.bi"), the whole
        # title in the tooltip; the tick and the name come first
        self.title = ElidedText(self, align=Qt.AlignmentFlag.AlignLeft, elide=Qt.TextElideMode.ElideRight)
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.title.setMinimumWidth(40)
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.form = QComboBox(self)
        self.form.addItems(["Dequantised", "Stored"])
        self.form.setToolTip("A quantised parameter: the float values the interpreter uses, or the stored integers")
        self.form.currentIndexChanged.connect(lambda _i: self._show_form())
        self.form.hide()
        # one row: the title, then the form and the tools (a row of their own cost the heatmap
        # 25 px of a short dock at 1024x700)
        buttons = QHBoxLayout()
        buttons.setSpacing(2)
        buttons.addWidget(self.title, 1)
        buttons.addWidget(self.form)
        self.pin_button = self._tool("bookmark", "Pin: keep this tensor in its own panel while stepping",
                                     lambda: self.pinRequested.emit(self.pinned_subject()))
        self.export_button = self._tool("image", "Export .npy…", self.export_dialog)
        self.copy_button = self._tool("copy", "Copy statistics", self.copy_stats)
        self.close_button = self._tool("close", "Close this inspector", lambda: self.closeRequested.emit(self))
        for b in (self.pin_button, self.export_button, self.copy_button, self.close_button):
            buttons.addWidget(b)
        self.close_button.setVisible(not subject.follows)
        self.pin_button.setVisible(subject.follows)
        self.stats = QLabel("", self)
        self.stats.setWordWrap(True)
        self.stats.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.stats.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        # fixed heights: new numbers at every step must not re-lay the panel out (a resize
        # makes pyqtgraph rebuild the colour gradient's lookup table and repaint it all)
        self.stats.setFixedHeight(self.fontMetrics().lineSpacing() * 4 + 4)   # 3 lines, one may wrap
        self.title.setFixedHeight(self.fontMetrics().lineSpacing() + 4)

        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        # heatmap page: axis choice + sliders + ImageView (made on first data)
        self.heat_page = QWidget(self)
        hl = QVBoxLayout(self.heat_page)
        hl.setContentsMargins(0, 2, 0, 0)
        axes = QHBoxLayout()
        self.y_axis, self.x_axis = QComboBox(self), QComboBox(self)
        axes.addWidget(QLabel("rows", self))
        axes.addWidget(self.y_axis)
        axes.addWidget(QLabel("columns", self))
        axes.addWidget(self.x_axis)
        axes.addStretch(1)
        self.y_axis.currentIndexChanged.connect(lambda _i: self._axes_changed())
        self.x_axis.currentIndexChanged.connect(lambda _i: self._axes_changed())
        hl.addLayout(axes)
        # the other axes' sliders sit in a strip as high as they need, scrolling past two; a
        # size-1 axis has no slider (its only index is 0), so a [1, 12, 16, 64] attention map
        # gives the heatmap two rows more than a strip of useless sliders would
        holder = QWidget(self)
        self.slider_box = QVBoxLayout(holder)
        self.slider_box.setSpacing(1)
        self.slider_box.setContentsMargins(0, 0, 0, 0)
        self.slider_box.addStretch(1)
        self.slider_area = QScrollArea(self)
        self.slider_area.setWidgetResizable(True)
        self.slider_area.setWidget(holder)
        self.slider_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self._slider_row_height = QSpinBox().sizeHint().height() + 1
        self.slider_area.setFixedHeight(0)
        hl.addWidget(self.slider_area)
        # a large parameter's heatmap says what it samples ("every 32nd row shown — zoom in ...")
        self.heat_note = QLabel("", self)
        self.heat_note.setWordWrap(True)         # a narrow dock must not cut "zoom in for exact values" off
        self.heat_note.hide()
        hl.addWidget(self.heat_note)
        # what the non-finite cells' colours mean, and how many this slice has
        self.nonfinite_note = QLabel("", self)
        self.nonfinite_note.setWordWrap(True)
        self.nonfinite_note.hide()
        hl.addWidget(self.nonfinite_note)
        self.heat_holder = QVBoxLayout()
        hl.addLayout(self.heat_holder, 1)
        self.tabs.addTab(self.heat_page, "Heatmap")
        self.hist_page = QWidget(self)
        self.hist_holder = QVBoxLayout(self.hist_page)
        self.hist_holder.setContentsMargins(0, 2, 0, 0)
        self.tabs.addTab(self.hist_page, "Histogram")
        self.line_page = QWidget(self)
        self.line_holder = QVBoxLayout(self.line_page)
        self.line_holder.setContentsMargins(0, 2, 0, 0)
        self.tabs.addTab(self.line_page, "Line")
        self.values = ValuesModel(self)
        self.paged = PagedValuesModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.values)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.tabs.addTab(self.table, "Values")
        # a 1-D value opens on the Line tab (a one-row heatmap says little) and the next 2-D one on
        # the heatmap again, unless the user picked a tab themselves
        self._switching = False
        self._auto_line = False            # the Line tab shows because a 1-D value switched to it
        self._heatmap_for_1d = False       # the user chose the heatmap while a 1-D value showed
        self.tabs.currentChanged.connect(self._tab_changed)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.setSpacing(2)
        lay.addLayout(buttons)
        lay.addWidget(self.stats)
        lay.addWidget(self.tabs, 1)
        lay.addStretch(0)       # takes the room only while the tabs are hidden (no value to show)
        self._set_title("")

    def _tool(self, icon_name: str, tip: str, slot) -> QToolButton:
        b = QToolButton(self)
        b.setIcon(icon(icon_name))
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(lambda _c=False: slot())
        return b

    def _set_title(self, text: str) -> None:
        # the follower's title is the value itself (a "Current result:" prefix pushed the name out
        # of a 250 px dock); the tooltip says what the panel follows
        if self.subject.follows:
            self.title.setText(text or "Current result")
            self.title.setToolTip(f"Current result (follows the execution point): {text}" if text else
                                  "Current result (follows the execution point)")
        else:
            self.title.setText(f"Pinned: {text}" if text else "Pinned")
            self.title.setToolTip(self.title.text())

    def pinned_subject(self) -> Subject:
        if self.subject.follows and self.loaded is not None and self.loaded.tick is not None:
            return Subject("result", self.loaded.tick)
        return self.subject

    # -- loading ----------------------------------------------------------------------------
    def reload(self, qdoc) -> None:
        """Load the subject for ``qdoc`` in its background tasks; the newest load wins."""
        self._gen += 1
        gen = self._gen
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if qdoc is None:
            self.show_loaded(Loaded("", None, None, None, note="No file"))
            return
        self._host = qdoc.host
        session = qdoc.doc.debug
        subject = self.subject
        cached = None
        if session is not None and session.debugger is not None and subject.kind == "result" and not session.running:
            tick = session.tick if subject.follows else subject.key
            r = session.cached_result(tick) if tick is not None and 0 <= tick <= session.tick else None
            if r is not None and r.tensor is not None and r.tensor.size <= 65536:
                cached = Loaded(f"t{tick}  {session.name_of(tick)}", r.tensor, r, _histogram(r.tensor), tick=tick)
        if cached is not None:
            self.show_loaded(cached)
            return
        if session is not None and session.running and subject.kind == "result":
            return    # keep showing the last stop while it runs
        target = (session.tick if subject.follows else subject.key) \
            if session is not None and session.debugger is not None and subject.kind == "result" else None
        if target is not None and self.loaded is not None and self.loaded.tick is not None \
                and self.loaded.tick != target:
            # what is on show belongs to another tick until the new one arrives: say so, and grey it
            self._set_title(f"{self.loaded.title}  —  t{target} loading…")
            self.stats.setEnabled(False)
        nac, host, path = qdoc.nac, qdoc.host, qdoc.doc.path
        self._task = qdoc.tasks.submit("Tensor statistics",
                                       lambda _ctx: load_subject(session, nac, subject, host, path),
                                       on_done=lambda loaded, g=gen: self._loaded(g, loaded),
                                       on_error=lambda exc, g=gen: self._failed(g, exc))

    def _loaded(self, gen: int, loaded: Loaded) -> None:
        if gen == self._gen:
            self.show_loaded(loaded)

    def _failed(self, gen: int, exc: BaseException) -> None:
        if gen == self._gen and type(exc).__name__ != "Cancelled":
            self.show_loaded(Loaded("error", None, None, None, note=str(exc)[:300]))

    def show_loaded(self, loaded: Loaded) -> None:
        self.loaded = loaded
        self._set_title(loaded.title)
        self.stats.setEnabled(True)
        self.form.blockSignals(True)
        self.form.setCurrentIndex(0)
        self.form.blockSignals(False)
        self.form.setVisible(loaded.raw is not None)
        self._show_form()

    def _show_form(self) -> None:
        loaded = self.loaded
        if loaded is None:
            return
        self._show_large(loaded.large)
        if loaded.large is not None:
            return
        stored = self.form.isVisible() and self.form.currentIndex() == 1 and loaded.raw is not None
        self.array = loaded.raw if stored else loaded.array
        self.result = loaded.raw_stats if stored else loaded.stats
        self._hist = loaded.raw_hist if stored else loaded.hist
        text = stats_text(self.result)
        self.stats.setText(text or loaded.note)
        # no value (before tick 0, no run, a non-tensor): its note alone, not an empty black plot
        self.tabs.setVisible(self.array is not None)
        self.export_button.setEnabled(self.array is not None)
        self.copy_button.setEnabled(bool(text))
        self._rebuild_axes()
        self.values.set_array(self.array if self.array is not None and self.array.dtype.kind != "O" else None)
        if not self._fit_page_to_rank():
            self._refresh_page()

    def _tab_changed(self, _index: int) -> None:
        if not self._switching:               # the user's choice
            self._auto_line = False
            self._heatmap_for_1d = self.tabs.currentWidget() is self.heat_page and self._rank() == 1
        self._refresh_page()

    def _rank(self) -> Optional[int]:
        """The axes that hold more than one value: a [1, 16] pooled output is a vector, drawn as a
        line as a [16] one is (its heatmap is a one-row strip)."""
        return sum(1 for n in self.array.shape if n > 1) if self.array is not None else None

    def _fit_page_to_rank(self) -> bool:
        """Line for a 1-D value shown on the heatmap; the heatmap back for a 2-D one after that
        switch. True when the page changed (and was drawn)."""
        nd, page = self._rank(), self.tabs.currentWidget()
        if nd == 1 and page is self.heat_page and not self._heatmap_for_1d:
            target, self._auto_line = self.line_page, True
        elif nd is not None and nd >= 2 and page is self.line_page and self._auto_line:
            target, self._auto_line = self.heat_page, False
        else:
            return False
        self._switching = True
        try:
            self.tabs.setCurrentWidget(target)
        finally:
            self._switching = False
        return True

    # -- a parameter too large to hold ------------------------------------------------------
    def _show_large(self, large: Optional[LargeTensor]) -> None:
        """Switch the panel to (or away from) windowed reading of ``large``."""
        for task in (self._stats_task, self._window_task):
            if task is not None and not task.done():
                task.cancel()
        self._stats_task = self._window_task = None
        self.large, self.large_stats, self.window = large, None, None
        self.paged.set_tensor(large, self._host)
        want = self.paged if large is not None else self.values
        if self.table.model() is not want:
            self.table.setModel(want)
        if large is None:
            return
        self.tabs.setVisible(True)
        self._fitted_shape = None          # a held tensor shown after this one is fitted afresh
        self.array = self.result = self._hist = None
        self.export_button.setEnabled(False)
        self.copy_button.setEnabled(False)
        self.stats.setText(f"shape {list(large.shape)}  {large.dtype}  ·  {large.size:,} values, read in windows"
                           f"\nstatistics: reading…")
        self._rebuild_axes()
        self.values.set_array(None)
        if self._host is None:
            return
        task = self._host.request("nac/statistics", {"path": large.path, "param": large.param},
                                  title=f"Statistics of {large.name}", supersede=f"inspector-stats-{id(self)}")
        task.progressed.connect(lambda frac, _m, t=large: self._stats_progress(t, frac))
        task.finished.connect(lambda r, t=large: self._stats_arrived(t, r))
        task.failed.connect(lambda e, t=large: self._stats_failed(t, e))
        self._stats_task = task
        self._refresh_page()

    def _stats_progress(self, tensor: LargeTensor, frac: float) -> None:
        if tensor is self.large and self.large_stats is None:
            head = self.stats.text().split("\n")[0]
            self.stats.setText(f"{head}\nstatistics: reading… {100 * frac:.0f}%")     # frac: 0..1

    def _stats_failed(self, tensor: LargeTensor, exc) -> None:
        if tensor is self.large and type(exc).__name__ != "Cancelled":
            head = self.stats.text().split("\n")[0]
            self.stats.setText(f"{head}\nstatistics failed: {str(exc)[:200]}")

    def _stats_arrived(self, tensor: LargeTensor, r: dict) -> None:
        if tensor is not self.large:
            return
        self.large_stats = r
        hist = r.get("hist")
        self._hist = (np.asarray(hist[0]), np.asarray(hist[1])) if hist is not None else None
        self.stats.setText(large_stats_text(tensor, r))
        self.copy_button.setEnabled(True)
        if self.window is not None and self._image is not None:
            self._draw_window(fit=False)       # the whole tensor's colour scale, now known
        if self.tabs.currentWidget() is self.hist_page:
            self._show_histogram()

    def _shown_axes(self) -> tuple:
        """(y axis or None, x axis) the heatmap shows."""
        shape = self._shape() or ()
        if len(shape) >= 2:
            return self.y_axis.currentIndex(), self.x_axis.currentIndex()
        return None, 0

    def _request_window(self, y_range: Optional[tuple] = None, x_range: Optional[tuple] = None,
                        fit: bool = True) -> None:
        """Ask the host for the heatmap's window: the whole slice at a screen's stride, or the
        region given (the visible part after a zoom)."""
        large = self.large
        if large is None or self._host is None or not large.shape:
            return
        y, x = self._shown_axes()
        fixed = self._fixed_indices()
        y_range = y_range or ((0, large.shape[y]) if y is not None else (0, 1))
        x_range = x_range or (0, large.shape[x])
        window, steps = heat_window(large.shape, y, x, fixed, y_range, x_range)
        if self._window_task is not None and not self._window_task.done():
            self._window_task.cancel()
        task = self._host.request("nac/paramWindow", {"path": large.path, "param": large.param, "window": window},
                                  title=f"Values of {large.name}", supersede=f"inspector-window-{id(self)}",
                                  track=False)
        task.finished.connect(lambda arr, t=large, w=window, st=steps, f=fit: self._window_arrived(t, arr, w, st, f))
        self._window_task = task

    def _window_arrived(self, tensor: LargeTensor, values, window: list, steps: tuple, fit: bool) -> None:
        if tensor is not self.large:
            return
        self.window = (np.asarray(values), window, steps)
        page = self.tabs.currentWidget()
        if page is self.heat_page:
            self._draw_window(fit)
        elif page is self.line_page:
            self._show_line()

    def _window_slice(self) -> Optional[np.ndarray]:
        """The fetched window as rows × columns (what ``current_slice`` is for a held array)."""
        if self.window is None:
            return None
        values, window, _steps = self.window
        y, x = self._shown_axes()
        if y is None:
            return values.reshape(1, -1)
        return values if y < x else values.T

    def _draw_window(self, fit: bool) -> None:
        sl = self._window_slice()
        if sl is None:
            return
        _values, window, (sy, sx) = self.window
        y, x = self._shown_axes()
        y0 = window[y][0] if y is not None else 0
        x0 = window[x][0]
        img = sl.astype(np.float32, copy=False) if sl.dtype.kind in "bc" or sl.dtype == np.float16 else sl
        r = self.large_stats or {}
        if "min" in r:
            lo, hi = float(r["min"]), float(r["max"])
        else:                      # until the statistics arrive: this window's finite range
            finite = img[np.isfinite(img)] if img.dtype.kind == "f" else img
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        self._ensure_image()
        finite = "nan" in r and not r.get("nan") and not r.get("inf")       # the whole tensor has none
        self._image.setImage(img.T, autoRange=fit, levels=(lo, hi), pos=(x0, y0), scale=(sx, sy), finite=finite)
        self._show_nonfinite(img.size)
        self.heat_note.setText(stride_note((sy, sx), y, x))
        self.heat_note.show()

    def _zoomed(self) -> None:
        """After the view settles: ask for the visible region at the stride it needs, when the
        window on show is coarser than that or does not cover it."""
        large = self.large
        if large is None or self.window is None or self._image is None:
            return
        y, x = self._shown_axes()
        (vx0, vx1), (vy0, vy1) = self._image.getView().viewRange()
        x_range = (max(0, math.floor(vx0)), min(large.shape[x], math.ceil(vx1)))
        y_range = (max(0, math.floor(vy0)), min(large.shape[y], math.ceil(vy1))) if y is not None else (0, 1)
        if x_range[1] <= x_range[0] or y_range[1] <= y_range[0]:
            return
        _values, window, (sy, sx) = self.window
        need_x = stride_for(x_range[1] - x_range[0])
        need_y = stride_for(y_range[1] - y_range[0]) if y is not None else 1
        wx = window[x]
        covers = wx[0] <= x_range[0] and x_range[1] <= wx[1]
        if y is not None:
            wy = window[y]
            covers = covers and wy[0] <= y_range[0] and y_range[1] <= wy[1]
        if covers and sx <= need_x and sy <= need_y:
            return
        self._request_window(y_range, x_range, fit=False)

    def _shape(self) -> Optional[tuple]:
        if self.large is not None:
            return self.large.shape
        return self.array.shape if self.array is not None else None

    # -- heatmap ----------------------------------------------------------------------------
    def _rebuild_axes(self) -> None:
        shape = self._shape()
        if shape == getattr(self, "_axes_shape", ()):
            return        # same shape (the next step's result): keep the axes and slider positions
        self._axes_shape = shape
        nd = len(shape) if shape is not None else 0
        for box in (self.y_axis, self.x_axis):
            box.blockSignals(True)
            box.clear()
            for d in range(nd):
                box.addItem(f"axis {d} ({shape[d]})")
        if nd >= 2:
            # a new shape shows its two largest axes (the later one on a tie), the others on
            # sliders: [1, 12, 16, 64] is 16 x 64, not a 1 x 12 strip left over from the last shape
            largest = sorted(range(nd), key=lambda d: (shape[d], d))[-2:]
            y, x = sorted(largest)
            self.y_axis.setCurrentIndex(y)
            self.x_axis.setCurrentIndex(x)
        elif nd == 1:
            self.x_axis.setCurrentIndex(0)
        for box in (self.y_axis, self.x_axis):
            box.blockSignals(False)
        self.y_axis.setEnabled(nd >= 2)
        self.x_axis.setEnabled(nd >= 1)
        self._rebuild_sliders()

    def _axes_changed(self) -> None:
        shape = self._shape()
        if shape is None or len(shape) < 2:
            return
        if self.y_axis.currentIndex() == self.x_axis.currentIndex():
            # keep the two axes distinct: move the other one off
            other = (self.x_axis.currentIndex() + 1) % len(shape)
            box = self.y_axis if self.sender() is self.x_axis else self.x_axis
            box.blockSignals(True)
            box.setCurrentIndex(other)
            box.blockSignals(False)
        self._rebuild_sliders()
        self._refresh_page()

    def _other_axes(self) -> list[int]:
        shape = self._shape()
        if shape is None:
            return []
        shown = {self.x_axis.currentIndex()} | ({self.y_axis.currentIndex()} if len(shape) >= 2 else set())
        return [d for d in range(len(shape)) if d not in shown]

    def _rebuild_sliders(self) -> None:
        while self.slider_box.count() > 1:       # the last item is the stretch
            item = self.slider_box.takeAt(0)
            lay = item.layout()
            if lay is not None:
                while lay.count():
                    w = lay.takeAt(0).widget()
                    if w is not None:
                        w.deleteLater()
        self._sliders = {}
        shape = self._shape()
        for d in self._other_axes():
            if shape[d] <= 1:
                continue
            row = QHBoxLayout()
            row.addWidget(QLabel(f"axis {d}", self))
            s = QSlider(Qt.Orientation.Horizontal, self)
            s.setRange(0, max(0, shape[d] - 1))
            spin = QSpinBox(self)
            spin.setRange(0, max(0, shape[d] - 1))
            s.valueChanged.connect(spin.setValue)
            spin.valueChanged.connect(s.setValue)
            s.valueChanged.connect(lambda _v: self._refresh_page())
            row.addWidget(s, 1)
            row.addWidget(spin)
            self.slider_box.insertLayout(self.slider_box.count() - 1, row)
            self._sliders[d] = (s, spin)
        # the strip changes height only with the shape (same-shape steps keep the layout)
        self.slider_area.setFixedHeight(min(len(self._sliders), 2) * self._slider_row_height
                                        + (2 if self._sliders else 0))

    @property
    def slider_axes(self) -> list[int]:
        """The axes that have a slider: those the heatmap does not show, longer than 1."""
        return list(self._sliders)

    def _fixed_indices(self) -> dict[int, int]:
        """The index of every axis the heatmap does not show: a slider's, 0 for a size-1 axis."""
        return {d: (self._sliders[d][0].value() if d in self._sliders else 0) for d in self._other_axes()}

    def set_slice(self, axis_values: dict[int, int]) -> None:
        """Move the sliders of the other axes (``{axis: index}``); tests and scripts."""
        for d, (s, _spin) in self._sliders.items():
            if d in axis_values:
                s.setValue(int(axis_values[d]))

    def current_slice(self) -> Optional[np.ndarray]:
        """The 2-D (or 1-D) numpy view the heatmap/line shows: rows × columns at the sliders."""
        arr = self.array
        if arr is None or arr.dtype.kind not in "biufc":
            return None
        if arr.ndim == 0:
            return arr.reshape(1, 1)
        index: list[Any] = [slice(None)] * arr.ndim
        for d, at in self._fixed_indices().items():
            index[d] = at
        view = arr[tuple(index)]
        if arr.ndim == 1:
            return view.reshape(1, -1)
        y, x = self.y_axis.currentIndex(), self.x_axis.currentIndex()
        return view if y < x else view.T

    def _refresh_page(self) -> None:
        page = self.tabs.currentWidget()
        if page is self.heat_page:
            self._show_heatmap()
        elif page is self.hist_page:
            self._show_histogram()
        elif page is self.line_page:
            self._show_line()

    def _show_heatmap(self) -> None:
        if self.large is not None:
            self._request_window()      # the slice or axes changed: the whole slice, at a screen's stride
            return
        self.heat_note.hide()
        sl = self.current_slice()
        if sl is None:
            if self._image is not None:
                self._image.clear()
            self.nonfinite_note.hide()
            return
        self._ensure_image()
        self._draw_held(sl)

    def _ensure_image(self) -> None:
        if self._image is None:
            from ..widgets.heatmap import Heatmap
            self._image = Heatmap(self.heat_page)
            self._image.getView().sigRangeChanged.connect(lambda *_a: self._zoom_timer.start())
            self.heat_holder.addWidget(self._image)

    def _draw_held(self, sl: np.ndarray) -> None:
        # complex values as their magnitude |z|, as the statistics, levels and Line tab take them
        img = np.abs(sl) if sl.dtype.kind == "c" else sl
        img = img.astype(np.float32, copy=False) if img.dtype.kind == "b" or img.dtype == np.float16 else img
        # Levels from the whole tensor's finite range (computed off the UI thread): slices
        # compare on one colour scale, and NaN/Inf never reach pyqtgraph's range maths.
        r = self.result
        lo, hi = (r.min, r.max) if r is not None and r.min is not None else (0.0, 1.0)
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        # pyqtgraph's ImageItem is column-major (x first): hand it columns × rows. The view's
        # range is fitted again only when the slice's shape changes (each step's result of the
        # same shape keeps the zoom the user chose, and skips a relayout of the view box)
        fit = img.shape != getattr(self, "_fitted_shape", None)
        self._fitted_shape = img.shape
        finite = r is not None and not r.nan_count and not r.inf_count      # the whole tensor has none
        self._image.setImage(img.T, autoRange=fit, levels=(lo, hi), finite=finite)
        self._show_nonfinite(img.size)

    def _show_nonfinite(self, cells: int) -> None:
        from ..widgets.heatmap import nonfinite_legend
        counts = self._image.nonfinite
        self.nonfinite_note.setText(nonfinite_legend(counts, cells))
        self.nonfinite_note.setVisible(bool(counts))

    def _show_histogram(self) -> None:
        import pyqtgraph as pg
        if self._hist_plot is None:
            self._hist_plot = pg.PlotWidget(self.hist_page)
            self._hist_plot.setLabel("bottom", "value")
            self._hist_plot.setLabel("left", "count")
            self.hist_holder.addWidget(self._hist_plot)
        self._hist_plot.clear()
        h = getattr(self, "_hist", None)
        if h is None:
            return
        counts, edges = h
        self._hist_plot.plot(edges, counts, stepMode="center", fillLevel=0, brush=(70, 130, 200, 150))

    def _show_line(self) -> None:
        import pyqtgraph as pg
        if self._line_plot is None:
            self._line_plot = pg.PlotWidget(self.line_page)
            self._line_plot.setLabel("bottom", "index")
            self.line_holder.addWidget(self._line_plot)
        self._line_plot.clear()
        xs = None
        if self.large is not None:
            sl = self._window_slice()
            if sl is None:
                self._request_window()
                return
            _values, window, (_sy, sx) = self.window
            xs = window[self._shown_axes()[1]][0] + sx * np.arange(sl.shape[-1])
        else:
            sl = self.current_slice()
        if sl is None:
            return
        # 1-D: the tensor; N-D: the first row of the heatmap slice (the columns' axis)
        row = sl[0] if sl.ndim == 2 else sl
        row = (np.abs(row) if row.dtype.kind == "c" else row).astype(np.float64, copy=False)
        xs = np.arange(row.size) if xs is None else xs
        finite = np.isfinite(row)
        # NaN and ±Inf break the line where they are (one of them in a path drew nothing at all),
        # and are marked at the finite range's middle, top and bottom in the heatmap's colours;
        # a short row shows every point (a finite one between two breaks is a lone point)
        few = row.size <= LINE_POINTS_MARKED
        if finite.any():
            # ±Inf as NaN: the view's range then comes from the finite values alone
            line = row if finite.all() else np.where(finite, row, np.nan)
            self._line_plot.plot(xs, line, connect="finite", pen=pg.mkPen((40, 110, 200), width=1.5),
                                 symbol="o" if few else None, symbolSize=5, symbolPen=None, symbolBrush=(40, 110, 200))
        if not finite.all():
            from ..widgets.heatmap import NONFINITE_COLOURS, nonfinite_masks
            vals = row[finite]
            lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 1.0)
            if self._line_plot.plotItem.legend is None:
                self._line_plot.addLegend(offset=(-8, 8))
            where = {"NaN": ((lo + hi) / 2, "x"), "+Inf": (hi, "t1"), "−Inf": (lo, "t")}    # y and marker
            for kind, mask, n in nonfinite_masks(row):
                y, symbol = where[kind]
                self._line_plot.plot(xs[mask], np.full(n, y), pen=None, symbol=symbol, symbolSize=9, symbolPen=None,
                                     symbolBrush=NONFINITE_COLOURS[kind], name=f"{kind} ({n:,})")
        elif self._line_plot.plotItem.legend is not None:
            self._line_plot.plotItem.legend.clear()

    # -- export ----------------------------------------------------------------------------
    def export_npy(self, path: str) -> None:
        """Write the shown form as ``.npy``, atomically."""
        from nac_engine.format.writer import atomic_write
        if self.array is None:
            raise ValueError("nothing to export")
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(self.array), allow_pickle=False)
        atomic_write(path, buf.getvalue())

    def export_dialog(self) -> None:
        if self.array is None:
            return
        name = (self.loaded.title.split()[0] if self.loaded and self.loaded.title else "tensor").replace("/", "_")
        path, _ = QFileDialog.getSaveFileName(self, "Export tensor", f"{name}.npy", "NumPy (*.npy)")
        if path:
            try:
                self.export_npy(path)
            except OSError as e:
                QMessageBox.warning(self, "Export failed", could_not_write(path, e))

    def copy_stats(self) -> str:
        body = large_stats_text(self.large, self.large_stats) if self.large is not None and self.large_stats \
            else stats_text(self.result)
        text = (self.loaded.title + "\n" if self.loaded else "") + body
        QGuiApplication.clipboard().setText(text)
        return text


# --------------------------------------------------------------------------- the view
class TensorInspectorView(QWidget):
    title = "Tensor Inspector"
    object_name = "tensor_inspector"
    dock_area = "right"
    message = Signal(str)

    def __init__(self, qdoc=None, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setChildrenCollapsible(False)
        self.follower = self._add_panel(Subject("result"))
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.splitter)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(scroll)
        self.set_document(qdoc)

    def resizeEvent(self, event) -> None:
        # side by side in a wide dock (the bottom strip), stacked in a tall one (a side column)
        wide = event.size().width() >= 1.2 * event.size().height()
        self.splitter.setOrientation(Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical)
        super().resizeEvent(event)

    @property
    def panels(self) -> list[InspectorPanel]:
        return [self.splitter.widget(i) for i in range(self.splitter.count())]

    def _add_panel(self, subject: Subject) -> InspectorPanel:
        panel = InspectorPanel(subject, self.splitter)
        panel.setMinimumSize(240, 320)   # a heatmap stays readable; the dock scrolls beyond that
        panel.pinRequested.connect(self.inspect)
        panel.closeRequested.connect(self.close_panel)
        self.splitter.addWidget(panel)
        return panel

    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc, debug=self._on_debug)
        self.qdoc = qdoc
        for p in self.panels[1:]:
            self.close_panel(p)
        self.follower.reload(qdoc)

    def _on_debug(self, _source) -> None:
        s = self.qdoc.doc.debug if self.qdoc is not None else None
        if s is not None and s.running:
            return
        for p in self.panels:
            if p.subject.kind == "result":
                p.reload(self.qdoc)

    def inspect(self, subject: Subject) -> InspectorPanel:
        """Open (or bring back) a pinned panel for ``subject``."""
        for p in self.panels[1:]:
            if p.subject == subject:
                return p
        pinned = self.panels[1:]
        if len(pinned) >= MAX_PINNED:
            self.close_panel(pinned[0])
        panel = self._add_panel(subject)
        panel.reload(self.qdoc)
        return panel

    def close_panel(self, panel: InspectorPanel) -> None:
        if panel is self.follower:
            return
        panel.hide()
        panel.setParent(None)
        panel.deleteLater()
