"""The Studio's main window: open files as tabs, views as docks, commands everywhere.

Every view is built once and shown in a dock; switching the file tab hands the views the
other document (``set_document``), so a layout the user arranged stays put across files.
Opening parses in a background task (the UI stays live on a 1 GB file); the status bar
shows every task's progress with a Cancel button. Layout, window geometry, recent files
and the theme are kept in ``QSettings``.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Optional

from PySide6.QtCore import QByteArray, QEvent, QRect, QSettings, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QPalette
from PySide6.QtWidgets import (QApplication, QDialog, QLineEdit, QDockWidget, QFileDialog, QHBoxLayout, QInputDialog,
                               QLabel, QListWidget, QListWidgetItem, QMainWindow, QMenu, QMessageBox,
                               QSizePolicy, QStackedWidget, QTabBar, QTableWidget, QTableWidgetItem,
                               QToolBar, QToolButton, QVBoxLayout, QWidget)

from nac_engine.errors import NacFormatError, with_compile_hint

from .widgets.image_files import could_not_write
from . import dock_layout, icons, ui_gc
from .model import schedule_problems
from .commands import CommandRegistry
from .debug_commands import register_debug_commands
from .generation_commands import register_generation_commands
from .simulation_commands import register_simulation_commands
from .window_commands import register_help_commands, register_window_commands
from .model.byte_sizes import human_bytes
from .model.document import Document, Selection, severity_of
from .icons import icon
from .qt_compat import guard_singleton_refcounts
from .qt_document import QtDocument
from .tasks import Cancelled, Task, TaskRunner
from .model.tab_names import tab_titles
from .theme import apply_theme
from .views.disassembly import DisassemblyView
from .views.graph import GraphView
from .views.hex import HexView
from .views.problems import ProblemsView
from .views.properties import PropertiesView
from .views.structure import StructureView
from .views.breakpoints import BreakpointsView
from .views.tensor_inspector import TensorInspectorView
from .views.variables import VariablesView
from .views.watches import WatchesView
from .views.debug_console import DebugConsoleView
from .views.timeline import TimelineView
from .views.hardware import HardwareView
from .views.sweep import SweepView
from .diff_commands import register_diff_commands
from .views.diff import DiffView
from .views.source import SourceView
from .focus_return import FocusReturn
from .widgets.command_palette import CommandPalette
from .widgets.task_indicator import TEXT_WIDTH as TASK_TEXT_WIDTH, TaskIndicator

STATE_VERSION = 9          # bump when the dock set changes, so an old saved layout is ignored
MAX_RECENT = 10
COMPILES_REMEMBERED = 20     # models whose Compile dialog options are kept
DEFAULT_SIZE = QSize(1600, 1000)
FILE_FILTER = "NAC models (*.nac);;All files (*)"

#: The panels, in the order of the View menu. The graph is the central widget.
VIEW_CLASSES = (StructureView, HexView, DisassemblyView, PropertiesView, ProblemsView, VariablesView, WatchesView,
                BreakpointsView, TensorInspectorView, TimelineView, HardwareView, SourceView, DiffView,
                SweepView, DebugConsoleView)


def fitted_geometry(window: QRect, available: QRect) -> QRect:
    """``window`` shrunk to fit ``available`` and moved inside it (kept where it already fits)."""
    w, h = min(window.width(), available.width()), min(window.height(), available.height())
    x = min(max(window.x(), available.left()), available.left() + available.width() - w)
    y = min(max(window.y(), available.top()), available.top() + available.height() - h)
    return QRect(x, y, w, h)


def open_document(ctx, path: str) -> Document:
    """Background part of opening: parse leniently, then build the lookups the views
    need first (span index, instruction spans) so the UI thread does not."""
    from .model.peer_document import open_any      # a .nac, or a peer format (MIND Core IR, …)
    doc = open_any(path)
    ctx.check()
    doc.prepare()
    ctx.check()
    # the graph asks for the repeated blocks as it gets the document (decoding the source map:
    # 25 ms on 2,314 ticks); made here they are cached on the file
    from .model.graph_model import detect_block_prefixes
    detect_block_prefixes(doc.nac)
    return doc


class WelcomePage(QWidget):
    """What the central area shows with no file open: how to open one, and recent files."""

    def __init__(self, window: "MainWindow"):
        super().__init__(window)
        self.window_ = window
        lay = QVBoxLayout(self)
        lay.addStretch(2)
        logo = QLabel(self)
        logo.setPixmap(icons.pixmap("app", 64))
        logo.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(logo)
        title = QLabel("NAC Studio", self)
        f = title.font()
        f.setPointSizeF(f.pointSizeF() * 1.8)
        f.setBold(True)
        title.setFont(f)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(title)
        hint = QLabel(f"Open a .nac file ({QKeySequence('Ctrl+O').toString(QKeySequence.SequenceFormat.NativeText)})"
                      " or drop one here.", self)
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint.setEnabled(False)
        lay.addWidget(hint)
        # a file that could not be opened: the whole reason (with the command that makes a .nac of
        # it), where the user is looking, not only for ten seconds in the status bar
        self.failure = QLabel(self)
        self.failure.setObjectName("openFailure")
        self.failure.setWordWrap(True)
        self.failure.setMaximumWidth(620)
        # as wide as it may be (a word-wrapped label otherwise picks a narrow column)
        self.failure.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.failure.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.failure.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.failure.setStyleSheet("color: #c0392b")
        self.failure.hide()
        failure_row = QHBoxLayout()
        failure_row.addStretch(1)
        failure_row.addWidget(self.failure, 10)
        failure_row.addStretch(1)
        lay.addSpacing(10)
        lay.addLayout(failure_row)

        self.recent = QListWidget(self)
        self.recent.setMaximumWidth(520)
        self.recent.setMaximumHeight(220)
        self.recent.itemActivated.connect(lambda item: window.open_path(item.data(Qt.ItemDataRole.UserRole)))
        self.recent.itemClicked.connect(lambda item: window.open_path(item.data(Qt.ItemDataRole.UserRole)))
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.recent)
        row.addStretch(1)
        lay.addSpacing(12)
        lay.addLayout(row)
        lay.addStretch(3)

    def show_failure(self, text: str) -> None:
        """Say why the last open failed ("" hides it: a file opened since)."""
        self.failure.setText(text)
        self.failure.setVisible(bool(text))

    def refresh(self, recent: list[str]) -> None:
        self.recent.clear()
        for path in recent:
            item = QListWidgetItem(icon("file"), f"{Path(path).name}    {path}")
            item.setData(Qt.ItemDataRole.UserRole, path)
            self.recent.addItem(item)
        self.recent.setVisible(bool(recent))


class MainWindow(QMainWindow):
    documentOpened = Signal(object)      # QtDocument
    documentChanged = Signal(object)     # active QtDocument or None
    openFailed = Signal(str, str)        # path, message

    def __init__(self, settings: Optional[QSettings] = None, *, restore: bool = True, persist: bool = True,
                 theme: str = "system", fit_screen: bool = False):
        guard_singleton_refcounts()
        ui_gc.collect_on_ui_thread()           # collections on the UI thread, never on a worker
        super().__init__()
        self.setObjectName("nacStudioMain")
        self.setWindowTitle("NAC Studio")
        self.setWindowIcon(icon("app"))
        self.settings = settings if settings is not None else QSettings("NAC Studio", "NAC Studio")
        self.persist = persist
        self.theme = theme
        self.tasks = TaskRunner(parent=self)
        from .host.client import EngineHost
        self.host = EngineHost(self, tasks=self.tasks)     # engine work runs there (started on first use)
        self.host.stopped.connect(self._on_engine_stopped)
        self.commands = CommandRegistry(self)
        self.commands.set_action_parent(self)
        self.docs: list[QtDocument] = []
        self.active: Optional[QtDocument] = None
        self._opening: dict[str, Task] = {}
        self._checks: dict[int, Task] = {}       # id(QtDocument) -> its running MMAP schedule check
        self.open_times: dict[str, float] = {}   # path -> seconds from request to views populated
        self.setDockNestingEnabled(True)
        self.setAcceptDrops(True)
        self.setDocumentMode(True)

        # central: file tabs over the graph (or the welcome page)
        self.graph = GraphView(None, self)
        self.graph.setObjectName(GraphView.object_name)
        self.tabs = QTabBar(self)
        self.tabs.setDocumentMode(True)
        self.tabs.setTabsClosable(False)   # our own close buttons: Fusion's are red boxes
        self.tabs.setMovable(True)
        self.tabs.setExpanding(False)
        self.tabs.setElideMode(Qt.TextElideMode.ElideMiddle)
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self.tabs.tabMoved.connect(self._on_tab_moved)
        self.welcome = WelcomePage(self)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.graph)
        central = QWidget(self)
        cl = QVBoxLayout(central)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(0)
        cl.addWidget(self.tabs)
        from .reload_bar import ReloadBar      # "changed on disk" + Reload, above the views
        self.reload_bar = ReloadBar(self, central)
        cl.addWidget(self.reload_bar)
        cl.addWidget(self.stack, 1)
        self.setCentralWidget(central)
        self.tabs.hide()   # shown with the first file

        # docks
        self.views: dict[str, QWidget] = {GraphView.object_name: self.graph}
        self.docks: dict[str, QDockWidget] = {}
        for cls in VIEW_CLASSES:
            self.add_view(cls)
        self.problems_view.countChanged.connect(self._on_problem_count)
        if persist:   # bookmarks per file, next to the layout and recent files
            self.hex_view.set_settings(self.settings)
        self.palette_popup = CommandPalette(self.commands, self)
        self.focus_return = FocusReturn(self)     # a closed dialog hands the keyboard back

        self._register_commands()
        self._build_menus()
        # right-click on an instruction (a disassembly row, a graph node): the debugger's actions on it
        node_actions = [None if i is None else self.commands.action(i) for i in
                        ("debug.runToCursor", "debug.toggleBreakpoint", "debug.addLogpoint", None, "debug.inspect")]
        self.disassembly_view.row_actions = node_actions
        self.graph.node_actions = node_actions
        self.views["source"].line_actions = node_actions[:3]     # run to, break and log at a line
        self._build_toolbar()
        self._build_statusbar()
        self.tasks.started.connect(self._task_started)
        self.tasks.ended.connect(self._task_ended)
        # ``fit_screen`` (the Studio's own window; not a screenshot, benchmark or test, which
        # want the same 1600×1000 on any screen): a 1024×700 screen gets a window, and a dock
        # layout, that fit it, and a geometry saved with a larger monitor is brought back onto it
        self.resize(DEFAULT_SIZE)
        if fit_screen:
            self.fit_to_screen()
        self.apply_default_layout()
        if restore:
            self._restore()
            if fit_screen:
                self.fit_to_screen()
        self._refresh_recent()
        self._update_title()
        self.commands.refresh()
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(self._on_scheme_changed)
        ui_gc.freeze_start_up()

    # -- views ----------------------------------------------------------------------------
    def add_view(self, cls) -> tuple[QWidget, QDockWidget]:
        """Build pane ``cls`` in its own dock and register both (by ``cls.object_name``); the
        default layout places docks it does not know by their ``dock_area``."""
        view = cls(None, self)
        dock = QDockWidget(cls.title, self)
        dock.setObjectName(f"dock.{cls.object_name}")
        dock.setWidget(view)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.views[cls.object_name] = view
        self.docks[cls.object_name] = dock
        if hasattr(view, "message"):
            view.message.connect(self.show_message)
        dock.visibilityChanged.connect(lambda _v: self.commands.refresh())
        if getattr(view, "usable_height", 0):
            dock.visibilityChanged.connect(lambda shown, d=dock, v=view: shown and QTimer.singleShot(
                0, lambda: self._give_room(d, v.usable_height)))
        return view, dock

    def _give_room(self, dock: QDockWidget, usable: int) -> None:
        """A pane that is illegible below ``usable`` pixels (lanes over lanes: the timeline and the
        hardware view) is given that height when it comes to the front, at most half the window."""
        if dock.isFloating() or not dock.isVisible() or dock.height() >= usable \
                or self.dockWidgetArea(dock) not in (Qt.DockWidgetArea.BottomDockWidgetArea,
                                                     Qt.DockWidgetArea.TopDockWidgetArea):
            return
        self.resizeDocks([dock], [min(usable, self.height() // 2)], Qt.Orientation.Vertical)

    @property
    def structure_view(self) -> StructureView:
        return self.views["structure"]

    @property
    def hex_view(self) -> HexView:
        return self.views["hex"]

    @property
    def disassembly_view(self) -> DisassemblyView:
        return self.views[DisassemblyView.object_name]

    @property
    def properties_view(self) -> PropertiesView:
        return self.views["properties"]

    @property
    def problems_view(self) -> ProblemsView:
        return self.views["problems"]

    @property
    def graph_view(self) -> GraphView:
        return self.graph

    def fit_to_screen(self) -> None:
        """Keep the window on its screen: no larger than the screen's available area, and moved
        back onto it when it lies (partly) outside (a geometry saved with another monitor)."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return
        fitted = fitted_geometry(self.geometry(), screen.availableGeometry())
        if fitted.size() != self.size():
            self.resize(fitted.size())
        if fitted.topLeft() != self.geometry().topLeft():
            self.move(fitted.topLeft())

    def apply_default_layout(self, preset: Optional[str] = None) -> None:
        """The docks arranged for the window's size (see :mod:`dock_layout`): "wide" from
        1300×820 on, "compact" (tabbed) below; docks it does not know are tabbed in."""
        self.layout_preset = preset or dock_layout.preset_for(self.size())
        dock_layout.apply_layout(self, self.docks, self.layout_preset, self.size(),
                                 hex_width=self.hex_view.preferred_width)

    # -- commands -------------------------------------------------------------------------
    def _register_commands(self) -> None:
        register_window_commands(self)   # File, Edit, Go, View, the graph's
        from .peer_views import register_peer_support
        register_peer_support(self)      # peer-format files: IR Text pane, NAC-only panes covered, Convert to NAC
        register_debug_commands(self)    # Debug menu, keys and toolbar, the debug controller (self.debug)
        self.generation = register_generation_commands(self)     # a decode-step file, token by token
        register_diff_commands(self, self.views[DiffView.object_name])  # First Divergence, graph error overlay
        register_simulation_commands(self)   # Simulate menu, graph overlay from the hardware run (self.simulation)
        register_help_commands(self)

    def _build_menus(self) -> None:
        bar = self.menuBar()
        bar.clear()
        self._menus: dict[str, QMenu] = {}
        for top in ("File", "Edit", "Go", "View", "Debug", "Simulate", "Help"):
            self._menus[top] = bar.addMenu(f"&{top}")
        for path in self.commands.menus():
            menu = self._menu_for(path)
            last_group = None
            for cmd in self.commands.in_menu(path):
                if last_group is not None and cmd.group != last_group:
                    menu.addSeparator()
                last_group = cmd.group
                menu.addAction(self.commands.action(cmd.id))
                if path == "File" and cmd.id == "file.close":
                    self.recent_menu = menu.addMenu(icon("file"), "Open &Recent")
        for m in self._menus.values():
            m.aboutToShow.connect(self.commands.refresh)

    def _menu_for(self, path: str) -> QMenu:
        if path in self._menus:
            return self._menus[path]
        parent_path, _, leaf = path.rpartition("/")
        parent = self._menu_for(parent_path) if parent_path else self.menuBar().addMenu(leaf)
        menu = parent.addMenu(leaf) if parent_path else parent
        self._menus[path] = menu
        return menu

    def _build_toolbar(self) -> None:
        tb = QToolBar("Main", self)
        tb.setObjectName("toolbar.main")
        tb.setIconSize(QSize(18, 18))
        tb.setMovable(False)
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
        for cmd_id in ("file.open", "file.reload", None, "nav.back", "nav.forward", None, "nav.gotoOffset",
                       "edit.find", "nav.toggleBookmark", None, "view.commandPalette"):
            if cmd_id is None:
                tb.addSeparator()
            else:
                tb.addAction(self.commands.action(cmd_id))
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, tb)
        self.toolbar = tb

    def _build_statusbar(self) -> None:
        sb = self.statusBar()
        self.selection_label = QLabel(self)
        self.selection_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        sb.addWidget(self.selection_label, 1)
        # one fixed-size painted widget: task updates never re-lay out the window (task_indicator)
        self.task_indicator = TaskIndicator(self)
        self.task_label = self.task_indicator.label
        self.progress = self.task_indicator.progress
        self.cancel_button = self.task_indicator.cancel_button
        self.cancel_button.setIcon(icon("cancel"))
        self.cancel_button.setToolTip("Cancel the running task")
        self.cancel_button.clicked.connect(self.cancel_current_task)
        self.doc_label = QLabel(self)
        self._doc_summary = ""            # the whole line; the label shows what fits (_fit_doc_summary)
        sb.addPermanentWidget(self.task_indicator)
        sb.addPermanentWidget(self.doc_label)

    # -- tasks in the status bar ----------------------------------------------------------
    def _shown_task(self) -> Optional[Task]:
        return self.tasks.active[-1] if self.tasks.active else None

    def _task_started(self, task: Task) -> None:
        task.progressed.connect(lambda frac, text, t=task: self._task_progress(t, frac, text))
        self._update_task_widgets()

    def _task_progress(self, task: Task, frac: float, text: str) -> None:
        if task is self._shown_task():
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(frac * 1000))
            if text:
                self.task_label.setText(f"{task.title}: {text}")

    def _task_ended(self, task: Task) -> None:
        self._update_task_widgets()

    def _update_task_widgets(self) -> None:
        task = self._shown_task()
        self.task_indicator.set_active(task is not None)
        if task is None:
            return
        more = len(self.tasks.active) - 1
        self.task_label.setText(task.title + "…" + (f"  (+{more} more)" if more > 0 else ""))
        self.progress.setRange(0, 0)   # busy until the first progress report
        self.cancel_button.setToolTip(f"Cancel: {task.title}")

    def cancel_current_task(self) -> None:
        task = self._shown_task()
        if task is not None:
            task.cancel()
            self.show_message(f"Cancelling {task.title}…")

    # -- opening and closing --------------------------------------------------------------
    def open_dialog(self) -> None:
        start = self.settings.value("lastDir", "", type=str) or str(Path.cwd())
        from .peer_views import file_filter
        paths, _ = QFileDialog.getOpenFileNames(self, "Open NAC file", start, file_filter())
        for p in paths:
            self.open_path(p)

    def compile_dialog(self, source: str = "") -> QDialog:
        """File ▸ Compile Model…: a model file or Hugging Face directory to a .nac, then opened."""
        from .widgets.compile_dialog import CompileDialog
        if not source:
            source = self.settings.value("lastCompiled", "", type=str) if self.persist else ""
        dlg = CompileDialog(self, source, self._compile_options())
        dlg.setObjectName("compileDialog")
        dlg.compiled.connect(self._open_compiled)
        if self.persist:
            dlg.compiled.connect(lambda _p, d=dlg: self._remember_compile(d.source.text().strip(), d.options()))
        dlg.finished.connect(dlg.deleteLater)
        dlg.open()          # window-modal, not a nested event loop
        return dlg

    def _compile_options(self) -> dict:
        """Model source -> the Compile dialog's options of its last compile (settings: JSON)."""
        if not self.persist:
            return {}
        try:
            saved = json.loads(self.settings.value("compileOptions", "{}", type=str) or "{}")
        except ValueError:
            return {}
        return saved if isinstance(saved, dict) else {}

    def _remember_compile(self, source: str, options: dict) -> None:
        saved = self._compile_options()
        saved.pop(source, None)
        saved[source] = options
        for old in list(saved)[:-COMPILES_REMEMBERED]:
            del saved[old]
        self.settings.setValue("compileOptions", json.dumps(saved))
        self.settings.setValue("lastCompiled", source)

    def _open_compiled(self, path: str) -> None:
        """A file just compiled: opened, or read again where its older version is open."""
        path = os.path.abspath(path)
        for i, qd in enumerate(self.docs):
            if qd.doc.path and os.path.abspath(qd.doc.path) == path:
                self.tabs.setCurrentIndex(i)
                self.reload_active()
                return
        self.open_path(path)

    def open_path(self, path: str) -> Optional[Task]:
        """Open ``path`` in the background; an already open file just becomes active. A model
        (a ``.py`` file, a Hugging Face directory) is no .nac yet: the Compile Model dialog opens
        on it instead."""
        path = os.path.abspath(os.fspath(path))
        from .widgets.compile_dialog import compilable
        if compilable(path):
            self.compile_dialog(path)
            self.show_message(f"{Path(path).name} is a model, not a .nac: compile it to open it")
            return None
        for i, qd in enumerate(self.docs):
            if qd.doc.path and os.path.abspath(qd.doc.path) == path:
                self.tabs.setCurrentIndex(i)
                return None
        if path in self._opening:
            return self._opening[path]
        started = time.perf_counter()
        task = self.tasks.submit(f"Opening {Path(path).name}", open_document, path,
                                 on_done=lambda doc, p=path, t=started: self._show_opened(p, doc, t),
                                 on_error=lambda exc, p=path: self._open_failed(p, exc))
        self._opening[path] = task
        self.show_message(f"Opening {path}…")
        return task

    def _show_opened(self, path: str, doc: Document, started: float) -> None:
        self._opening.pop(path, None)
        qdoc = QtDocument(doc, tasks=self.tasks, parent=self, host=self.host)
        qdoc.selectionChanged.connect(self._on_selection_changed)
        qdoc.tickChanged.connect(lambda _s: self.commands.refresh())
        qdoc.problemsChanged.connect(lambda _s, d=qdoc: self._on_problems_changed(d))
        self.docs.append(qdoc)
        name = Path(path).name
        self.tabs.blockSignals(True)
        idx = self.tabs.addTab(name)
        self._decorate_tab(idx, qdoc)
        close = QToolButton(self.tabs)
        close.setIcon(icon("close"))
        close.setIconSize(QSize(12, 12))
        close.setAutoRaise(True)
        close.setToolTip("Close")
        close.setFixedSize(18, 18)
        close.clicked.connect(lambda _c=False, d=qdoc: self.close_document(d))
        self.tabs.setTabButton(idx, QTabBar.ButtonPosition.RightSide, close)
        # made current with the tab bar's signals blocked: its currentChanged would hand every
        # view the document once more, right before set_active below does (two rounds per open)
        self.tabs.setCurrentIndex(idx)
        self.tabs.blockSignals(False)
        self._retitle_tabs()
        self.set_active(qdoc)
        self.welcome.show_failure("")
        self._add_recent(path)
        self.settings.setValue("lastDir", str(Path(path).parent)) if self.persist else None
        self.open_times[path] = time.perf_counter() - started
        n = len(doc.problems)
        stale = len(self.hex_view.stale_bookmarks())
        self.show_message(f"Opened {name} in {self.open_times[path]:.2f} s" +
                          (f" — {n} problem{'s' if n != 1 else ''}" if n else "") +
                          (f" — {stale} bookmark{'s' if stale != 1 else ''} from an earlier version of the file"
                           " not applied (Bookmarks menu)" if stale else ""))
        self.documentOpened.emit(qdoc)
        self._check_schedule(qdoc)

    # -- the MMAP schedule check (background; its findings join the problem list) -------
    def _check_schedule(self, qdoc: QtDocument) -> Optional[Task]:
        """Lint the MMAP schedule off the UI thread (the check is torch-free, see
        schedule_problems); the file is interactive meanwhile and the problem list grows
        when it is done."""
        if not schedule_problems.wanted(qdoc.nac):
            return None
        name = Path(qdoc.doc.path or "file").name
        task = self.tasks.submit(f"Checking the MMAP schedule of {name}", schedule_problems.check, qdoc.nac,
                                 on_done=lambda report, d=qdoc: self._schedule_checked(d, report),
                                 on_error=lambda exc, d=qdoc: self._schedule_check_failed(d, exc))
        self._checks[id(qdoc)] = task
        return task

    def _schedule_checked(self, qdoc: QtDocument, report) -> None:
        self._checks.pop(id(qdoc), None)
        if qdoc not in self.docs:
            return   # closed while the check ran
        try:
            found = schedule_problems.to_problems(qdoc.doc, report)
        except Exception as exc:   # a damaged file may hold any value in any field
            found = [schedule_problems.failure_problem(exc)]
        qdoc.doc.set_problems(schedule_problems.CHECK, found)

    def _schedule_check_failed(self, qdoc: QtDocument, exc: BaseException) -> None:
        self._checks.pop(id(qdoc), None)
        if isinstance(exc, Cancelled) or qdoc not in self.docs:
            return
        qdoc.doc.set_problems(schedule_problems.CHECK, [schedule_problems.failure_problem(exc)])

    def _on_problems_changed(self, qdoc: QtDocument) -> None:
        if qdoc not in self.docs:
            return
        self._decorate_tab(self.docs.index(qdoc), qdoc)
        self.commands.refresh()
        if qdoc is not self.active:
            return
        self._make_room_for_problems()
        found = qdoc.doc.problems_from(schedule_problems.CHECK)
        if found:
            errors = sum(1 for p in found if severity_of(p) == "error")
            warnings = len(found) - errors
            self.show_message(f"MMAP schedule: {errors} violation{'s' if errors != 1 else ''}, "
                              f"{warnings} hazard{'s' if warnings != 1 else ''} (see Problems)")

    def _retitle_tabs(self) -> None:
        """Same-named files get the folders that tell them apart (tab_names)."""
        for i, title in enumerate(tab_titles([d.doc.path or "" for d in self.docs])):
            if i < self.tabs.count() and self.tabs.tabText(i) != title:   # each set relays the bar out
                self.tabs.setTabText(i, title)

    def _decorate_tab(self, index: int, qdoc: QtDocument) -> None:
        problems = qdoc.doc.problems
        errors = sum(1 for p in problems if severity_of(p) == "error")
        self.tabs.setTabIcon(index, icon("error" if errors else "warning" if problems else "file"))
        tip = qdoc.doc.path or ""
        if problems:
            warnings = len(problems) - errors
            tip += f"\n{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}"
        self.tabs.setTabToolTip(index, tip)

    def _make_room_for_problems(self) -> None:
        problems = self.docks["problems"]
        qdoc = self.active
        if qdoc is not None and any(severity_of(p) == "error" for p in qdoc.doc.problems) \
                and problems.isVisible() and not problems.isFloating() and problems.height() < 180:
            # a damaged file: make room for the list of what is wrong with it
            self.resizeDocks([problems], [240], Qt.Orientation.Vertical)

    def _open_failed(self, path: str, exc: BaseException) -> None:
        self._opening.pop(path, None)
        if isinstance(exc, Cancelled):
            self.show_message(f"Opening {Path(path).name} cancelled")
            return
        reason = with_compile_hint(path, exc.message if isinstance(exc, NacFormatError) else str(exc))
        self.show_message(f"Could not open {path}: {reason}", 10000)
        self.welcome.show_failure(f"Could not open {path}:\n{reason}")
        self.openFailed.emit(path, reason)

    def reload_active(self) -> None:
        """Read the active file again. The old version stays on screen while the new one is
        parsed in the background, then the new document takes its tab in one swap (closing
        first cleared every view and showed the welcome page in between: two full rounds of
        view updates and a window relayout); a file that no longer reads keeps the old one."""
        old = self.active
        if old is None or not old.doc.path:
            return
        path = os.path.abspath(old.doc.path)
        if path in self._opening:
            return
        started = time.perf_counter()
        task = self.tasks.submit(f"Reloading {Path(path).name}", open_document, path,
                                 on_done=lambda doc, o=old, p=path, t=started: self._reloaded(o, p, doc, t),
                                 on_error=lambda exc, p=path: self._open_failed(p, exc))
        self._opening[path] = task
        self.show_message(f"Reloading {path}…")

    def _reloaded(self, old: QtDocument, path: str, doc: Document, started: float) -> None:
        index = self.docs.index(old) if old in self.docs else None
        self._show_opened(path, doc, started)     # a new tab, made active
        if index is None:
            return                                 # the old version was closed meanwhile
        self.close_document(old)                   # not active any more: the views stay on the new one
        new = self.active
        if new is not None and new in self.docs and self.docs.index(new) != index:
            self.tabs.moveTab(self.docs.index(new), index)      # tabMoved keeps self.docs in step

    def close_active(self) -> None:
        if self.active is not None:
            self.close_document(self.active)

    def close_document(self, qdoc: QtDocument) -> None:
        if qdoc not in self.docs:
            return
        check = self._checks.pop(id(qdoc), None)
        if check is not None:
            check.cancel()
        if getattr(qdoc.doc, "debug", None) is not None:
            qdoc.doc.debug.close()      # a running debugger stops (and its kept weights go) before its file closes
        path = qdoc.doc.path
        if path and self.host.alive and not any(d is not qdoc and d.doc.path == path for d in self.docs):
            # the host's decoded copy and descriptor go too (kept, every file of the session stayed
            # open there); not while another tab shows the file (a reload closes the old version last)
            self.host.request("nac/closeFile", {"path": path}, track=False)
        self.graph.forget(qdoc)
        i = self.docs.index(qdoc)
        if qdoc is self.active:
            others = [d for d in self.docs if d is not qdoc]
            self.set_active(others[min(i, len(others) - 1)] if others else None)
        self.docs.remove(qdoc)
        self.tabs.blockSignals(True)
        self.tabs.removeTab(i)
        self._retitle_tabs()
        self.tabs.blockSignals(False)
        if self.active is not None:
            self.tabs.setCurrentIndex(self.docs.index(self.active))
        qdoc.close()
        try:
            qdoc.doc.nac.close()
        except (BufferError, ValueError):
            pass   # a background task still holds a view of the mapping; it goes with the task
        qdoc.deleteLater()
        self._update_title()
        self.commands.refresh()

    def _on_tab_changed(self, index: int) -> None:
        if 0 <= index < len(self.docs) and self.docs[index] is not self.active:
            self.set_active(self.docs[index])

    def _on_tab_moved(self, frm: int, to: int) -> None:
        self.docs.insert(to, self.docs.pop(frm))

    def cycle_tab(self, step: int) -> None:
        if self.docs:
            self.tabs.setCurrentIndex((self.tabs.currentIndex() + step) % len(self.docs))

    def set_active(self, qdoc: Optional[QtDocument]) -> None:
        """Hand every view the document (``None``: no file open)."""
        if qdoc is not self.active:
            self.statusBar().clearMessage()      # "Opened a.nac …" is about the other file
        self.active = qdoc
        from .peer_views import document_for      # NAC-only panes get no document for a peer-format file
        for name, view in self.views.items():
            view.set_document(document_for(name, qdoc))
        self.stack.setCurrentWidget(self.graph if qdoc is not None else self.welcome)
        self._make_room_for_problems()
        self.tabs.setVisible(qdoc is not None)
        self._on_selection_changed(None)
        self._update_title()
        self._update_doc_label()
        self.commands.refresh()
        self.documentChanged.emit(qdoc)

    # -- selection and navigation ---------------------------------------------------------
    def _on_selection_changed(self, _source) -> None:
        if self.active is None:
            self.selection_label.setText("")
        else:
            sel = self.active.selection
            self.selection_label.setText(self.active.doc.describe(sel) if sel is not None else "")
        self.commands.refresh()

    def go_back(self) -> None:
        if self.active is not None:
            self.active.doc.go_back(source=None)

    def go_forward(self) -> None:
        if self.active is not None:
            self.active.doc.go_forward(source=None)

    def select(self, sel: Optional[Selection]) -> None:
        if self.active is not None:
            self.active.select(sel, source=None)

    def goto_tick_dialog(self) -> None:
        if self.active is None:
            return
        n = len(self.active.nac.instructions)
        cur = self.active.tick or 0
        tick, ok = QInputDialog.getInt(self, "Go to Tick", f"Tick (0–{n - 1}):", cur, 0, max(0, n - 1))
        if ok:
            self.select(Selection("instruction", tick))

    def focus_goto(self) -> None:
        self.docks["hex"].show()
        self.docks["hex"].raise_()
        self.hex_view.focus_goto()

    def focus_search(self) -> None:
        self.docks["hex"].show()
        self.docks["hex"].raise_()
        self.hex_view.focus_search()

    def focus_graph_search(self) -> None:
        self.graph.search.setFocus()
        self.graph.search.selectAll()

    def export_graph(self, fmt: str, path: Optional[str] = None) -> Optional[str]:
        """Save the graph as PNG or SVG (asks where when ``path`` is not given)."""
        if self.graph.shown is None:
            return None
        path = path or self.graph.export_path(fmt)
        if not path:
            return None
        try:
            self.graph.export(fmt, path)
        except OSError as e:
            self.show_message(could_not_write(path, e))
            return None
        self.show_message(f"Saved {path}")
        return path

    def toggle_panel(self, name: str) -> None:
        """Hide a panel on screen, show a hidden one, bring one tabbed behind another to front."""
        dock = self.docks[name]
        if dock.isHidden():
            dock.show()
            dock.raise_()
        elif dock.visibleRegion().isEmpty() and self.isVisible():
            dock.raise_()
        else:
            dock.hide()

    def show_palette(self) -> None:
        self.commands.refresh()
        self.palette_popup.popup()

    # -- status ---------------------------------------------------------------------------
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        # a status message gets only what the permanent widgets leave: with the task title's
        # full width a 1024-px window showed "Opened gpt2_12x768.n" of the open message
        self.task_indicator.set_text_width(max(120, min(TASK_TEXT_WIDTH, (event.size().width() - 700) // 2)))
        self._fit_doc_summary()

    def show_message(self, text: str, timeout: int = 5000) -> None:
        self.statusBar().showMessage(text, timeout)

    def _update_doc_label(self) -> None:
        if self.active is None:
            self.set_doc_summary("")
            return
        nac = self.active.nac
        version = f"v{nac.header.version}" if nac.header_decoded else "unreadable header"
        self.set_doc_summary(f"NAC {version} · {len(nac.instructions):,} instructions · "
                             f"{len(nac.params):,} params · {human_bytes(nac.size)}")

    def set_doc_summary(self, text: str) -> None:
        """The status bar's line about the active file (full text in its tooltip)."""
        self._doc_summary = text
        self.doc_label.setToolTip(text)
        self._fit_doc_summary()

    def _fit_doc_summary(self) -> None:
        # Messages ("Opened x.nac in 0.4 s — 3 problems", errors) are drawn only left of the
        # permanent widgets: on a narrow window the file summary gives way to them.
        text = self._doc_summary
        room = max(160, self.width() - self.task_indicator.sizeHint().width() - 480)
        fitted = self.doc_label.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, room)
        self.doc_label.setText(f"  {fitted}  " if fitted else "")

    def _on_problem_count(self, n: int) -> None:
        dock = self.docks["problems"]
        dock.setWindowTitle(f"Problems ({n})" if n else "Problems")

    def _update_title(self) -> None:
        if self.active is None:
            self.setWindowTitle("NAC Studio")
        else:
            self.setWindowTitle(f"{Path(self.active.doc.path or 'untitled').name} — NAC Studio")

    # -- recent files ---------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        value = self.settings.value("recentFiles", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or []) if v]

    def _add_recent(self, path: str) -> None:
        if not self.persist:
            return
        files = [p for p in self.recent_files() if p != path]
        files.insert(0, path)
        self.settings.setValue("recentFiles", files[:MAX_RECENT])
        self._refresh_recent()

    def _refresh_recent(self) -> None:
        files = [p for p in self.recent_files() if os.path.exists(p)]
        for cmd in [c for c in self.commands.commands() if c.id.startswith("file.recent.")]:
            self.commands.unregister(cmd.id)
        self.recent_menu.clear()
        for i, path in enumerate(files):
            cmd = self.commands.add(f"file.recent.{i}", f"Open Recent: {Path(path).name}",
                                    lambda p=path: self.open_path(p), tip=path)
            act = self.commands.action(cmd.id)
            act.setText(f"&{(i + 1) % 10}  {Path(path).name}")
            self.recent_menu.addAction(act)
        self.recent_menu.setEnabled(bool(files))
        self.welcome.refresh(files)

    # -- settings -------------------------------------------------------------------------
    def _restore(self) -> None:
        geo = self.settings.value("geometry")
        if isinstance(geo, (QByteArray, bytes)) and geo:
            self.restoreGeometry(geo)
        state = self.settings.value("windowState")
        if isinstance(state, (QByteArray, bytes)) and state:
            self.restoreState(state, STATE_VERSION)
        theme = self.settings.value("theme", "", type=str)
        if theme in ("system", "light", "dark") and theme != self.theme:
            self.set_theme(theme)

    def save_settings(self) -> None:
        if not self.persist:
            return
        self.settings.setValue("geometry", self.saveGeometry())
        self.settings.setValue("windowState", self.saveState(STATE_VERSION))
        self.settings.setValue("theme", self.theme)
        self.settings.sync()

    def closeEvent(self, event) -> None:
        self.save_settings()
        self.tasks.cancel_all()
        self.host.shutdown()
        super().closeEvent(event)

    # -- the engine host --------------------------------------------------------------------
    def _on_engine_stopped(self, message: str) -> None:
        """The engine host died (a kernel's segfault, the memory cap, a kill): the window and every
        document stay; each document's Problems and the status bar say what happened, and the
        next request (or Restart Engine) starts a fresh host."""
        for qdoc in self.docs:
            qdoc.doc.engine_stopped(message)
        self.show_message(f"{message} — the documents stay open; Debug › Restart Engine starts it again", 15000)
        self.commands.refresh()

    def restart_engine(self) -> None:
        for qdoc in self.docs:
            if qdoc.doc.debug is not None:
                qdoc.doc.debug.forget_run()      # its values live in the host being replaced
        self.host.restart()
        for qdoc in self.docs:
            qdoc.doc.engine_restarted()
        self.show_message("Engine restarted")
        self.commands.refresh()

    # -- theme ----------------------------------------------------------------------------
    def set_theme(self, mode: str) -> None:
        self.theme = mode
        app = QApplication.instance()
        if app is not None:
            apply_theme(app, mode)
        self._retint()
        self.commands.refresh()

    def _on_scheme_changed(self, *_):
        if self.theme == "system":
            self.set_theme("system")

    def changeEvent(self, event) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._retint()
        super().changeEvent(event)

    def _retint(self) -> None:
        """Line icons are drawn in the palette's text colour: redraw them for the new one."""
        # one theme switch sends several palette-change events: re-tint once per palette
        pal = QApplication.palette()
        key = tuple(pal.color(g, r).rgba() for g in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Disabled)
                    for r in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Window, QPalette.ColorRole.Base,
                              QPalette.ColorRole.Text, QPalette.ColorRole.Highlight))
        if key == getattr(self, "_retint_key", None):
            return
        self._retint_key = key
        icons.clear_cache()
        self.commands.refresh_icons()
        self.setWindowIcon(icon("app"))
        self.cancel_button.setIcon(icon("cancel"))
        for i, qd in enumerate(self.docs):
            self._decorate_tab(i, qd)
            button = self.tabs.tabButton(i, QTabBar.ButtonPosition.RightSide)
            if isinstance(button, QToolButton):
                button.setIcon(icon("close"))
        for view in self.views.values():
            if hasattr(view, "retint"):
                view.retint()

    # -- drag and drop --------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.open_path(url.toLocalFile())
        event.acceptProposedAction()

    # -- dialogs --------------------------------------------------------------------------
    def screenshot_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save Window Screenshot", "nac-studio.png", "PNG (*.png)")
        if path:
            from .widgets.image_files import write_png
            try:
                write_png(self.grab(), path)
            except OSError as e:
                self.show_message(could_not_write(path, e))
                return
            self.show_message(f"Saved {path}")

    def show_shortcuts(self) -> None:
        dlg = QDialog(self)
        dlg.setWindowTitle("Keyboard Shortcuts")
        table = QTableWidget(dlg)
        rows = sorted((c for c in self.commands.commands() if c.shortcut), key=lambda c: (c.menu or "", c.title))
        table.setColumnCount(3)
        table.setRowCount(len(rows))
        table.setHorizontalHeaderLabels(["Command", "Shortcut", "Id"])
        for r, cmd in enumerate(rows):
            for col, text in enumerate((cmd.title, self.commands.shortcut_text(cmd.id), cmd.id)):
                table.setItem(r, col, QTableWidgetItem(text))
        table.resizeColumnsToContents()
        table.verticalHeader().hide()
        search = QLineEdit(dlg)
        search.setPlaceholderText("Filter by command, key or id…")
        search.setClearButtonEnabled(True)

        def filter_rows(text: str) -> None:
            q = text.strip().lower()
            for r in range(table.rowCount()):
                row_text = " ".join(table.item(r, c).text().lower() for c in range(3))
                table.setRowHidden(r, bool(q) and q not in row_text)
        search.textChanged.connect(filter_rows)
        lay = QVBoxLayout(dlg)
        lay.addWidget(search)
        lay.addWidget(table)
        dlg.resize(560, 520)
        dlg.search, dlg.table = search, table
        self.shortcuts_dialog = dlg
        dlg.show()
        search.setFocus()

    def show_about(self) -> None:
        """About, with the versions a bug report needs and a button that copies them."""
        from PySide6.QtCore import qVersion
        from PySide6.QtWidgets import QApplication
        from nac_engine.diagnostics import report
        text = report({"Qt": qVersion()})
        box = QMessageBox(QMessageBox.Icon.Information, "About NAC Studio",
                          "<b>NAC Studio</b><br>An IDE for compiled neural networks in the NAC format:"
                          " every byte explained, every instruction in context.", parent=self)
        box.setDetailedText(text)
        copy = box.addButton("Copy diagnostics", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Close)
        copy.clicked.disconnect()           # copying does not close the box
        copy.clicked.connect(lambda: QApplication.clipboard().setText(text))
        self.about_dialog = box
        box.open()

    # -- waiting (screenshots, tests, benchmarks) ------------------------------------------
    def is_idle(self) -> bool:
        return not self._opening and not self.tasks.active

    async def wait_idle(self, timeout: float = 120.0, settle: float = 0.15) -> bool:
        """Wait until no file is opening and no task runs (for ``settle`` seconds: a view may
        start its background layout right after a document arrives)."""
        deadline = time.monotonic() + timeout
        quiet_since = None
        while time.monotonic() < deadline:
            if self.is_idle():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle:
                    return True
            else:
                quiet_since = None
            await asyncio.sleep(0.02)
        return False

