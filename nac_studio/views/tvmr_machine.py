"""TVMR Machine pane: step a TVMR program in the engine's interpreter and see its registers.

Step / Step Back / Run / Reset (buttons and Debug-menu commands, no shortcuts: F5/F10 belong to
the NAC debugger) drive the document's :class:`~nac_studio.model.tvmr_session.TvmrSession`. Weights are
synthetic and seeded. After each action the instruction about to run becomes the document's
selection and tick, so structure, hex, graph and the text form follow it; the table lists every
register (name, type, shape, a summary of its values at that point; those the last step wrote in
bold), and host-only operations (LOAD_WEIGHTS, neuro, orchestration…) are listed as the machine
reports them: reached, not computed. A Run longer than a few hundred steps continues in a
background task with progress and cancel.
"""
from __future__ import annotations

from typing import Optional

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QSpinBox, QTableWidget, QTableWidgetItem,
                               QToolBar, QVBoxLayout, QWidget)

from ..qt_document import rebind
from ..model.tvmr_session import INLINE_STEPS, TvmrSession, tvmr_session_of

COLUMNS = ("Register", "Type", "Shape", "Value")


class TvmrMachineView(QWidget):
    object_name = "tvmr_machine"
    title = "TVMR Machine"
    dock_area = "right"
    message = Signal(str)
    changed = Signal()          # the machine moved or a run ended: commands re-evaluate enabled()

    def __init__(self, qdoc=None, parent=None):
        super().__init__(parent)
        self.setObjectName(self.object_name)
        self.qdoc = None
        self.session: Optional[TvmrSession] = None
        self.run_task = None
        self.toolbar = QToolBar(self)
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        self.seed_box = QSpinBox(self)
        self.seed_box.setRange(0, 2**31 - 1)
        self.seed_box.setPrefix("seed ")
        self.seed_box.setToolTip("Seed of the synthetic weights and input: a new seed resets the machine")
        self.seed_box.valueChanged.connect(self.set_seed)
        self._seed_action = None        # added after the command buttons (register_tvmr_commands)
        self.status = QLabel(self)
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.host = QLabel(self)
        self.host.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.toolbar)
        lay.addWidget(self.status)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.host)
        self.set_document(qdoc)

    # -- document ------------------------------------------------------------------------------
    def set_document(self, qdoc) -> None:
        rebind(self.qdoc, qdoc)
        self.qdoc = qdoc
        self.session = tvmr_session_of(qdoc.doc) if qdoc is not None else None
        if self.session is not None:
            self.seed_box.blockSignals(True)
            self.seed_box.setValue(self.session.seed)
            self.seed_box.blockSignals(False)
        self.seed_box.setEnabled(self.can_reset())
        self.refresh()

    @property
    def running(self) -> bool:
        return self.session is not None and self.session.busy

    def can_step(self) -> bool:
        return self.session is not None and self.session.can_step()

    def can_step_back(self) -> bool:
        return self.session is not None and self.session.can_step_back()

    def can_reset(self) -> bool:
        return self.session is not None and not self.session.busy

    # -- actions -------------------------------------------------------------------------------
    def step(self) -> bool:
        moved = self.can_step() and self.session.step()
        self._moved()
        return bool(moved)

    def step_back(self) -> bool:
        moved = self.can_step_back() and self.session.step_back()
        self._moved()
        return bool(moved)

    def reset(self) -> None:
        if not self.can_reset():
            return
        self.session.reset()
        self._moved()

    def set_seed(self, seed: int) -> None:
        """New synthetic weights and input: a fresh machine from ``seed``."""
        if not self.can_reset() or seed == self.session.seed:
            return
        self.session.seed = seed
        self.reset()

    def run(self):
        """Run to the end: a short program here, a longer one on in a TaskRunner worker (returns the
        Task then, else ``None``)."""
        if not self.can_step():
            return None
        s = self.session
        if s.run_inline(INLINE_STEPS):
            self._moved()
            return None
        s.busy = True
        self.refresh()
        self.changed.emit()

        def work(ctx):
            return s.run(check=ctx.check, progress=lambda n: ctx.progress(0, 0, f"{s.position:,} steps"))

        def ended(_result=None):
            s.busy = False
            self.run_task = None
            if self.session is s:
                self._moved()

        self.run_task = self.qdoc.tasks.submit("Running the TVMR program", work, on_done=ended,
                                               on_error=lambda exc: ended())
        return self.run_task

    # -- after an action: the document follows the execution point ----------------------------------
    def _moved(self) -> None:
        s, qdoc = self.session, self.qdoc
        if s is not None and qdoc is not None:
            k = s.exec_index if s.exec_index is not None else (s.last_step.index if s.last_step else None)
            if k is not None and 0 <= k < len(s.peer.instructions):
                sel = qdoc.doc.selection_at(s.peer.instructions[k].offset)
                qdoc.select(sel, source=self)
                qdoc.set_tick(k, source=self)
            qdoc.doc.debug_changed(source=self)     # the text form repaints its execution line
        self.refresh()
        self.changed.emit()

    def _enable_seed(self) -> None:
        self.seed_box.setEnabled(self.can_reset())

    def refresh(self) -> None:
        s = self.session
        self.table.setRowCount(0)
        if s is None:
            self.status.setText("Open a TVMR program (.tvmr) to step it here.")
            self.host.setText("")
            return
        if s.busy:
            self.status.setText("Running… (cancel it from the status bar's task indicator)")
            return
        self.status.setText(s.status() + "\nWeights: synthetic, seeded "
                            f"(seed {s.seed}); input: seeded random.")
        rows = s.registers()
        self.table.setRowCount(len(rows))
        bold = QFont(self.table.font())
        bold.setBold(True)
        for r, row in enumerate(rows):
            for c, text in enumerate((row.name, row.type, row.shape, row.value)):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                if row.changed:
                    item.setFont(bold)
                self.table.setItem(r, c, item)
        host = s.host_ops()
        self.host.setText("Host-only operations reached (yield a DomainOp; not computed): "
                          + ", ".join(f"[{h.index}] {h.mnemonic}" for h in host[-8:])
                          + (f" and {len(host) - 8} more" if len(host) > 8 else "") if host else "")
        self.host.setVisible(bool(host))

    def register_rows(self) -> list[tuple[str, str, str, str]]:
        """The table's text, row by row (tests)."""
        return [tuple(self.table.item(r, c).text() for c in range(len(COLUMNS))) for r in range(self.table.rowCount())]


def register_tvmr_commands(window, view: TvmrMachineView, dock) -> None:
    """Debug-menu commands (own entries, no shortcuts) and the pane's tool bar from the same actions."""
    c = window.commands

    def shown(fn):
        def go():
            dock.show()
            dock.raise_()
            return fn()
        return go

    c.add("tvmr.step", "TVMR: Step", shown(view.step), icon="debug-step-over", menu="Debug", group="y",
          enabled=view.can_step, tip="Execute the next TVMR instruction")
    c.add("tvmr.stepBack", "TVMR: Step Back", shown(view.step_back), icon="debug-step-back", menu="Debug",
          group="y", order=1, enabled=view.can_step_back, tip="Show the machine as it was one instruction earlier")
    c.add("tvmr.run", "TVMR: Run", shown(view.run), icon="debug-continue", menu="Debug", group="y", order=2,
          enabled=view.can_step, tip="Run the TVMR program to HALT or its end (in the background when long)")
    c.add("tvmr.reset", "TVMR: Reset", shown(view.reset), icon="debug-restart", menu="Debug", group="y", order=3,
          enabled=view.can_reset, tip="A fresh machine before the first instruction (same seeded weights)")
    for cid in ("tvmr.reset", "tvmr.stepBack", "tvmr.step", "tvmr.run"):
        view.toolbar.addAction(c.action(cid))
    view.toolbar.addWidget(view.seed_box)
    view.changed.connect(c.refresh)
    view.changed.connect(view._enable_seed)
