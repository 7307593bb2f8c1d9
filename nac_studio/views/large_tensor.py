"""The tensor inspector's view of a parameter too large to hold: a 32000×4096 embedding of a 7B
Llama is 256 MB in float16 and 512 MB widened, more than the Studio's own process should ever
carry. Nothing of it crosses whole. The engine host answers three questions about it:

* ``nac/paramWindow``: the values of a window (a range with a stride on the two axes the
  heatmap shows, an index on the others), read row by row from the file. The heatmap first asks
  for the whole slice at a stride that fits the screen (decimated: every k-th row and column),
  then, as the user zooms, for the visible part at a finer stride, down to every value;
* ``nac/statistics``: statistics and histogram in chunks of rows, with progress;
* pages of the values table (:class:`PagedValuesModel`), a block of first-axis rows per request,
  fetched when scrolled to.

Requests are asynchronous and superseded per panel: the UI thread never waits for a value.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QColor

#: The most samples per axis a heatmap window asks for (about a screen's pixels).
DISPLAY_SIDE = 1024
#: Values per page of the table, and pages kept.
PAGE_VALUES = 4096
PAGES_KEPT = 64


@dataclass(frozen=True)
class LargeTensor:
    """A parameter the host holds: where it is and what it looks like."""
    path: str
    param: int
    name: str
    shape: tuple
    dtype: np.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def stride_for(count: int, side: int = DISPLAY_SIDE) -> int:
    """The stride that samples ``count`` values in at most ``side``."""
    return max(1, -(-count // side))


def heat_window(shape: tuple, y: Optional[int], x: int, fixed: dict, y_range: tuple, x_range: tuple) -> tuple:
    """(``window`` for ``nac/paramWindow``, (y stride, x stride)) of the region ``y_range`` ×
    ``x_range`` (half-open, clamped) of axes ``y`` (None for a 1-D tensor) and ``x``, the other
    axes at ``fixed[axis]``."""
    window: list = []
    steps = [1, 1]
    for d, n in enumerate(shape):
        if d == x or d == y:
            lo, hi = (y_range if d == y else x_range)
            lo, hi = max(0, min(int(lo), n - 1)), max(1, min(int(math.ceil(hi)), n))
            hi = max(hi, lo + 1)
            step = stride_for(hi - lo)
            steps[0 if d == y else 1] = step
            window.append([lo, hi, step])
        else:
            window.append(int(fixed.get(d, 0)))
    return window, tuple(steps)


def value_cell(v, role):
    """A value's text, or for NaN/±Inf the heatmap's colour of its kind behind dark text."""
    if role == Qt.ItemDataRole.DisplayRole:
        return f"{v:.7g}" if isinstance(v, (float, np.floating)) else str(v)
    from ..widgets.heatmap import NONFINITE_COLOURS, nonfinite_kind
    kind = nonfinite_kind(v)
    if kind is None:
        return None
    return QColor(*NONFINITE_COLOURS[kind]) if role == Qt.ItemDataRole.BackgroundRole else QColor(0, 0, 0)


def stride_note(steps: tuple, y_axis: Optional[int], x_axis: int) -> str:
    sy, sx = steps
    if sy == 1 and sx == 1:
        return "exact values"
    parts = []
    if y_axis is not None and sy > 1:
        parts.append(f"every {_ordinal(sy)} row")
    if sx > 1:
        parts.append(f"every {_ordinal(sx)} column")
    return " and ".join(parts) + " shown — zoom in for exact values"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class PagedValuesModel(QAbstractTableModel):
    """Every element of a :class:`LargeTensor` as a row (index columns, then the value), read a
    page at a time from the engine host when scrolled to; "…" until it arrives."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.tensor: Optional[LargeTensor] = None
        self.host = None
        self._pages: "OrderedDict[int, np.ndarray]" = OrderedDict()
        self._pending: dict = {}
        self._failed: dict[int, str] = {}       # page -> why the host could not read it (not asked again)
        self._rows_per_page = 1
        self._row_values = 1

    def set_tensor(self, tensor: Optional[LargeTensor], host) -> None:
        self.beginResetModel()
        for task in self._pending.values():
            task.cancel()
        self._pending.clear()
        self._pages.clear()
        self._failed.clear()
        self.tensor, self.host = tensor, host
        if tensor is not None:
            self._row_values = max(1, math.prod(tensor.shape[1:]))
            self._rows_per_page = max(1, PAGE_VALUES // self._row_values)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() or self.tensor is None else min(self.tensor.size, 2**31 - 1)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() or self.tensor is None else len(self.tensor.shape) + 1

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role != Qt.ItemDataRole.DisplayRole or orientation != Qt.Orientation.Horizontal or self.tensor is None:
            return None
        return "value" if section == len(self.tensor.shape) else f"i{section}"

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or self.tensor is None:
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        display = role == Qt.ItemDataRole.DisplayRole
        if not display and role not in (Qt.ItemDataRole.BackgroundRole, Qt.ItemDataRole.ForegroundRole):
            return None
        shape = self.tensor.shape
        idx = np.unravel_index(index.row(), shape)
        if index.column() < len(shape):
            return str(int(idx[index.column()])) if display else None
        page = int(idx[0]) // self._rows_per_page
        values = self._pages.get(page)
        if values is None:
            if not display:
                return None
            if page in self._failed:
                return "(unreadable)"
            self._request(page)
            return "…"
        if display:
            self._pages.move_to_end(page)
        return value_cell(values.reshape(-1)[index.row() - page * self._rows_per_page * self._row_values], role)

    def _request(self, page: int) -> None:
        if page in self._pending or self.host is None:
            return
        t = self.tensor
        first = page * self._rows_per_page
        window = [[first, min(t.shape[0], first + self._rows_per_page), 1]] + [[0, n, 1] for n in t.shape[1:]]
        task = self.host.request("nac/paramWindow", {"path": t.path, "param": t.param, "window": window},
                                 title=f"Values of {t.name}", track=False)
        self._pending[page] = task
        task.finished.connect(lambda arr, p=page, tt=t: self._arrived(tt, p, arr))
        task.failed.connect(lambda e, p=page, tt=t: self._refused(tt, p, e))

    def _refused(self, tensor: LargeTensor, page: int, exc) -> None:
        if tensor is not self.tensor:
            return
        self._pending.pop(page, None)
        if type(exc).__name__ != "Cancelled":      # a page the host cannot read is not asked for again
            self._failed[page] = str(exc)

    def _arrived(self, tensor: LargeTensor, page: int, values) -> None:
        if tensor is not self.tensor:
            return
        self._pending.pop(page, None)
        self._pages[page] = np.asarray(values)
        while len(self._pages) > PAGES_KEPT:
            self._pages.popitem(last=False)
        first = page * self._rows_per_page * self._row_values
        last = min(self.rowCount(), first + self._rows_per_page * self._row_values) - 1
        if last >= first:
            col = len(tensor.shape)
            self.dataChanged.emit(self.index(first, col), self.index(last, col))

    def page_loaded(self, row: int) -> bool:
        """Whether the page holding table row ``row`` has arrived (tests)."""
        if self.tensor is None:
            return False
        return int(np.unravel_index(row, self.tensor.shape)[0]) // self._rows_per_page in self._pages
