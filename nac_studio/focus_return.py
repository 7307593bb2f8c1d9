"""Focus goes back where it was when a dialog closes.

Without a window manager that reactivates the parent (Xvfb, some tiling WMs, the offscreen
platform), closing a modal dialog (Go to Tick, the Inputs dialog, a file dialog) leaves no window
active: the next F5 or Ctrl+F10 reaches nothing. Here the widget that last had focus in the main
window is remembered, and when the focus leaves a dialog because the dialog closed (not because
the user switched to another program: the dialog is then still open) and no window of ours took
it, the main window is activated again and that widget gets the focus back.
"""
from __future__ import annotations

from typing import Optional

import shiboken6
from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import QApplication, QWidget


class FocusReturn(QObject):
    def __init__(self, window: QWidget):
        super().__init__(window)
        self.window_ = window
        self._last: Optional[QWidget] = None         # the main window's last focused widget
        QApplication.instance().focusChanged.connect(self._focus_changed)

    def _focus_changed(self, old: Optional[QWidget], new: Optional[QWidget]) -> None:
        if new is not None:
            if shiboken6.isValid(new) and new.window() is self.window_:
                self._last = new
            return
        if old is None or not shiboken6.isValid(old) or old.window() is self.window_:
            return
        dialog = old.window()                        # focus left a dialog for nowhere: closed?
        QTimer.singleShot(0, lambda: self._restore(dialog))

    def _restore(self, dialog: QWidget) -> None:
        if shiboken6.isValid(dialog) and dialog.isVisible():
            return                                   # still open: the user went to another program
        if not shiboken6.isValid(self.window_) or not self.window_.isVisible() \
                or QApplication.activeModalWidget() is not None or QApplication.activeWindow() is not None:
            return                                   # another dialog, or a window of ours, has it
        self.window_.activateWindow()
        target = self._last
        if target is not None and shiboken6.isValid(target) and target.isVisible() \
                and target.window() is self.window_:
            target.setFocus(Qt.FocusReason.OtherFocusReason)
