"""Command registry: every user action is declared once, by string id.

A :class:`Command` carries an id (``"nav.back"``), a title, a shortcut, an enabled
predicate and the function that runs it. Menus, the toolbar, keyboard shortcuts and the
command palette are all generated from the registry (the napari app-model / FreeCAD
``addCommand`` pattern), so an action never exists in one place and not another, and
tests drive the application by id (:meth:`CommandRegistry.run`).

The registry itself is plain Python; :meth:`CommandRegistry.action` makes the
``QAction`` for a command on demand and :meth:`CommandRegistry.refresh` re-evaluates
every enabled/checked predicate (the main window calls it when the document or the
selection changes).
"""
from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction, QKeySequence


@dataclass
class Command:
    id: str
    title: str
    run: Callable[[], Any]
    shortcut: Optional[str] = None          # QKeySequence text, e.g. "Ctrl+Shift+P", "Alt+Left"
    enabled: Optional[Callable[[], bool]] = None
    checked: Optional[Callable[[], bool]] = None   # makes the command a toggle
    icon: Optional[str] = None              # name of an SVG in nac_studio/icons
    menu: Optional[str] = None              # "File", "View/Panels", ... (None: palette only)
    group: str = ""                         # separators are drawn between groups within a menu
    toolbar: bool = False
    tip: str = ""
    in_palette: bool = True
    order: int = 0                          # position within its menu group

    @property
    def checkable(self) -> bool:
        return self.checked is not None

    def is_enabled(self) -> bool:
        if self.enabled is None:
            return True
        try:
            return bool(self.enabled())
        except Exception:   # a predicate over a half-loaded document must not break menus
            return False

    def is_checked(self) -> bool:
        if self.checked is None:
            return False
        try:
            return bool(self.checked())
        except Exception:
            return False


class CommandRegistry(QObject):
    """id → :class:`Command`; ``changed`` fires when commands are added or removed."""
    changed = Signal()
    ran = Signal(str)     # id of a command that just ran

    def __init__(self, parent: Optional[QObject] = None):
        super().__init__(parent)
        self._commands: dict[str, Command] = {}
        self._actions: dict[str, QAction] = {}
        self._action_parent: Optional[QObject] = None

    # -- declaring ------------------------------------------------------------------------
    def register(self, cmd: Command) -> Command:
        if cmd.id in self._commands:
            raise ValueError(f"command {cmd.id!r} is already registered")
        self._commands[cmd.id] = cmd
        self.changed.emit()
        return cmd

    def add(self, id: str, title: str, run: Callable[[], Any], **kw) -> Command:
        return self.register(Command(id, title, run, **kw))

    def unregister(self, id: str) -> None:
        self._commands.pop(id, None)
        act = self._actions.pop(id, None)
        if act is not None:
            act.deleteLater()
        self.changed.emit()

    def get(self, id: str) -> Command:
        try:
            return self._commands[id]
        except KeyError:
            raise KeyError(f"no command {id!r}") from None

    def __contains__(self, id: str) -> bool:
        return id in self._commands

    def commands(self) -> list[Command]:
        return list(self._commands.values())

    def in_menu(self, menu: str) -> list[Command]:
        cmds = [c for c in self._commands.values() if c.menu == menu]
        return sorted(cmds, key=lambda c: (c.group, c.order))

    def menus(self) -> list[str]:
        seen: list[str] = []
        for c in self._commands.values():
            if c.menu and c.menu not in seen:
                seen.append(c.menu)
        return seen

    # -- running --------------------------------------------------------------------------
    def run(self, id: str) -> Any:
        """Run a command by id; a disabled command does nothing and returns ``None``."""
        cmd = self.get(id)
        if not cmd.is_enabled():
            return None
        result = cmd.run()
        self.ran.emit(id)
        self.refresh()
        return result

    # -- Qt face --------------------------------------------------------------------------
    def set_action_parent(self, parent: QObject) -> None:
        """Actions live on the main window so their shortcuts work whatever has focus."""
        self._action_parent = parent

    def action(self, id: str) -> QAction:
        act = self._actions.get(id)
        if act is not None:
            return act
        cmd = self.get(id)
        act = QAction(cmd.title, self._action_parent)
        act.setObjectName(id)
        if cmd.shortcut:
            act.setShortcut(QKeySequence(cmd.shortcut))
        tip = cmd.tip or cmd.title
        if cmd.shortcut:
            tip += f" ({QKeySequence(cmd.shortcut).toString(QKeySequence.SequenceFormat.NativeText)})"
        act.setToolTip(tip)
        act.setStatusTip(cmd.tip or cmd.title)
        if cmd.checkable:
            act.setCheckable(True)
            act.setChecked(cmd.is_checked())
        act.setEnabled(cmd.is_enabled())
        if cmd.icon:
            from .icons import icon
            act.setIcon(icon(cmd.icon))
        act.triggered.connect(lambda _checked=False, i=id: self.run(i))
        self._actions[id] = act
        if self._action_parent is not None and hasattr(self._action_parent, "addAction"):
            self._action_parent.addAction(act)
        return act

    def refresh(self) -> None:
        """Re-evaluate enabled/checked for every action made so far."""
        for id, act in list(self._actions.items()):
            cmd = self._commands.get(id)
            if cmd is None:
                continue
            act.setEnabled(cmd.is_enabled())
            if cmd.checkable:
                act.blockSignals(True)
                act.setChecked(cmd.is_checked())
                act.blockSignals(False)

    def refresh_icons(self) -> None:
        from .icons import icon
        for id, act in self._actions.items():
            cmd = self._commands.get(id)
            if cmd is not None and cmd.icon:
                act.setIcon(icon(cmd.icon))

    def shortcut_text(self, id: str) -> str:
        cmd = self.get(id)
        if not cmd.shortcut:
            return ""
        return QKeySequence(cmd.shortcut).toString(QKeySequence.SequenceFormat.NativeText)


# --------------------------------------------------------------------------- fuzzy match
def fuzzy_score(query: str, text: str) -> Optional[int]:
    """Score ``text`` against ``query`` as a subsequence match; ``None`` if it does not match.

    Higher is better. Matches at word starts and consecutive runs score more, so
    ``"gb"`` ranks "Go Back" above "Toggle Bookmark" and "back" ranks "Go Back" first.
    """
    q = query.strip().lower()
    if not q:
        return 0
    t = text.lower()
    score = 0
    ti = 0
    prev = -2
    for ch in q:
        if ch == " ":
            continue
        found = t.find(ch, ti)
        if found < 0:
            return None
        at_word = found == 0 or not t[found - 1].isalnum()
        score += 10 if at_word else 1
        if found == prev + 1:
            score += 5
        prev = found
        ti = found + 1
    if q in t:   # a whole-substring match beats any scattered one
        score += 20 + (10 if t.startswith(q) else 0)
    return score - len(t) // 20


def filter_commands(commands: Iterable[Command], query: str) -> list[Command]:
    """Palette order: best fuzzy score first, then title."""
    scored = []
    q = query.strip().lower()
    for c in commands:
        if not c.in_palette:
            continue
        s = fuzzy_score(query, f"{c.title} {c.id}")
        if s is not None:
            if q:      # exact, then prefix, then word-start matches of the title come first
                title = c.title.lower()
                if title == q:
                    s += 1000
                elif title.startswith(q):
                    s += 300
                elif any(w.startswith(q) for w in re.split(r"[^a-z0-9]+", title)):
                    s += 100
            scored.append((-s, c.title.lower(), c))
    scored.sort(key=lambda x: (x[0], x[1]))
    return [c for _, _, c in scored]
