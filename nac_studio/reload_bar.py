"""Noticing that an open file changed on disk, and offering to reload it.

Another program may rewrite (or truncate) a file the Studio has open. Views keep showing what
was read; weights touched after a truncation are refused with a ``FileChangedError`` instead of
killing the process (``nac_engine.format.mapped``). This module watches every open document's
file and, when the active one changed, shows a slim non-modal bar above the views — "changed on
disk" with Reload and Dismiss — so the user decides when to re-read it.

It only needs the window's public surface: the ``documentOpened``/``documentChanged`` signals,
``docs`` and ``reload_active()``; ``MainWindow`` creates it and puts it in its layout.
"""
from __future__ import annotations

import os
from typing import Optional

from PySide6.QtCore import QFileSystemWatcher, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

#: Editors save by writing a temp file and renaming it over ours: the watch on the old inode ends
#: and the path reappears a moment later. Re-checks are coalesced over this many milliseconds.
SETTLE_MS = 150


def file_signature(path: str) -> Optional[tuple]:
    """What "changed" means: inode, size and modification time (``None``: the file is gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class ReloadBar(QFrame):
    """The bar, and the watcher behind it. ``changedFiles()`` lists the open files that changed."""

    reloadRequested = Signal(str)      # path

    def __init__(self, window, parent: Optional[QWidget] = None):
        super().__init__(parent or window)
        self.setObjectName("reloadBar")
        self.window = window
        self._seen: dict[str, Optional[tuple]] = {}     # path -> signature when opened / dismissed
        self._changed: set[str] = set()
        self._watcher = QFileSystemWatcher(self)
        self._watcher.fileChanged.connect(self._schedule_check)
        # a rename over the file (how editors and our own writer save) changes the directory,
        # while the watched old inode may report nothing: watch both
        self._watcher.directoryChanged.connect(self._schedule_check)
        self._pending = QTimer(self)
        self._pending.setSingleShot(True)
        self._pending.setInterval(SETTLE_MS)
        self._pending.timeout.connect(self.check_now)

        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel(self)
        self.label.setWordWrap(False)
        self.reload_button = QPushButton("Reload", self)
        self.reload_button.setObjectName("reloadBar.reload")
        self.reload_button.setToolTip("Read the file again from disk (File ▸ Reload, Ctrl+R)")
        self.dismiss_button = QPushButton("Keep this version", self)
        self.dismiss_button.setObjectName("reloadBar.dismiss")
        self.dismiss_button.setToolTip("Hide this bar; weights the changed file no longer holds stay unavailable")
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 3, 8, 3)
        row.addWidget(self.label, 1)
        row.addWidget(self.reload_button)
        row.addWidget(self.dismiss_button)
        self.reload_button.clicked.connect(self._reload)
        self.dismiss_button.clicked.connect(self.dismiss)
        self.hide()

        window.documentOpened.connect(self.watch)
        window.documentChanged.connect(lambda _qdoc: self._refresh())

    # -- watching -----------------------------------------------------------------------------
    @staticmethod
    def _path_of(qdoc) -> Optional[str]:
        path = getattr(getattr(qdoc, "doc", None), "path", None)
        return os.path.abspath(path) if path else None

    def watch(self, qdoc) -> None:
        path = self._path_of(qdoc)
        if path is None:
            return
        self._seen[path] = file_signature(path)
        self._changed.discard(path)
        if path not in self._watcher.files() and os.path.exists(path):
            self._watcher.addPath(path)
        folder = os.path.dirname(path)
        if folder not in self._watcher.directories() and os.path.isdir(folder):
            self._watcher.addPath(folder)
        self._prune()
        self._refresh()

    def _open_paths(self) -> set:
        return {p for p in (self._path_of(d) for d in self.window.docs) if p}

    def _prune(self) -> None:
        """Forget files no document holds any more (closed tabs)."""
        open_now = self._open_paths()
        for path in list(self._seen):
            if path not in open_now and path not in self._opening_paths():
                self._seen.pop(path, None)
                self._changed.discard(path)
                if path in self._watcher.files():
                    self._watcher.removePath(path)
        folders = {os.path.dirname(p) for p in self._seen}
        for folder in self._watcher.directories():
            if folder not in folders:
                self._watcher.removePath(folder)

    def _opening_paths(self) -> set:
        return set(getattr(self.window, "_opening", {}) or {})

    def _schedule_check(self, _path: str = "") -> None:
        self._pending.start()

    def check_now(self) -> None:
        """Compare every open file with what was read; re-arm watches a rename-over removed."""
        self._prune()
        for path, seen in self._seen.items():
            now = file_signature(path)
            if now is not None and path not in self._watcher.files():
                self._watcher.addPath(path)
            if now != seen:
                self._changed.add(path)
        self._refresh()

    def changedFiles(self) -> list[str]:   # noqa: N802 - Qt-style name beside the signals
        return sorted(self._changed)

    # -- the bar -------------------------------------------------------------------------------
    def _refresh(self) -> None:
        path = self._path_of(getattr(self.window, "active", None))
        if path is None or path not in self._changed:
            self.hide()
            return
        gone = file_signature(path) is None
        name = os.path.basename(path)
        self.label.setText(f"{name} was deleted on disk." if gone else
                           f"{name} changed on disk since it was opened. The views show the version read then.")
        self.reload_button.setEnabled(not gone)
        self.show()

    def _reload(self) -> None:
        path = self._path_of(self.window.active)
        if path is None:
            return
        self._changed.discard(path)
        self.hide()
        self.reloadRequested.emit(path)
        self.window.reload_active()

    def dismiss(self) -> None:
        """Keep the open version; a later change shows the bar again."""
        path = self._path_of(self.window.active)
        if path is not None:
            self._seen[path] = file_signature(path)
            self._changed.discard(path)
        self.hide()
