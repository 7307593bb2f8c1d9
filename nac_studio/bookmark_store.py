"""Hex bookmarks kept between sessions, per file, in ``QSettings``.

Each file's bookmarks live under ``hexBookmarks/<sha1 of the absolute path>`` as one JSON
string (the same in INI files, the registry and plists) that also records the path and
the file's size and modification time when the bookmarks were made. A file whose size or
mtime differs since is another version of it: its old offsets may point anywhere, so
:meth:`BookmarkStore.load` hands them back separately as *stale* instead of applying them.

The settings file is the user's to edit, so everything read back is checked: a value that
is not the expected JSON is ignored, offsets outside the file are dropped, labels are cut
short.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Optional

from PySide6.QtCore import QSettings

GROUP = "hexBookmarks"
MAX_FILES = 200            # oldest files' bookmarks are forgotten beyond this many
MAX_MARKS = 10_000         # per file
MAX_LABEL = 200

Identity = tuple[int, int]   # (size in bytes, mtime in ns)


def file_identity(path: str) -> Optional[Identity]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _key(path: str) -> str:
    return GROUP + "/" + hashlib.sha1(os.path.abspath(path).encode("utf-8", "surrogateescape")).hexdigest()


class BookmarkStore:
    def __init__(self, settings: QSettings):
        self.settings = settings

    def load(self, path: str, identity: Optional[Identity]) -> tuple[dict[int, str], dict[int, str]]:
        """``(bookmarks, stale)``: the bookmarks saved for this version of ``path``, and
        those saved for another version (size or mtime changed), not to apply silently."""
        entry = self._entry(path)
        if entry is None:
            return {}, {}
        size = identity[0] if identity is not None else None
        marks: dict[int, str] = {}
        for item in entry["marks"][:MAX_MARKS]:
            if not (isinstance(item, list) and len(item) == 2):
                continue
            off, label = item
            if isinstance(off, int) and not isinstance(off, bool) and off >= 0 and isinstance(label, str):
                if size is None or off < size:
                    marks[off] = label[:MAX_LABEL]
        same = identity is not None and (entry.get("size"), entry.get("mtime_ns")) == tuple(identity)
        return (marks, {}) if same else ({}, marks)

    def save(self, path: str, identity: Optional[Identity], marks: dict[int, str]) -> None:
        """Store ``marks`` for this version of ``path`` (none: forget the file)."""
        if identity is None or not marks:
            self.forget(path)
            return
        value = {"path": os.path.abspath(path), "size": int(identity[0]), "mtime_ns": int(identity[1]),
                 "saved": time.time(),
                 "marks": [[int(off), str(label)[:MAX_LABEL]] for off, label in sorted(marks.items())[:MAX_MARKS]]}
        self.settings.setValue(_key(path), json.dumps(value, separators=(",", ":")))
        self._prune()
        self.settings.sync()

    def forget(self, path: str) -> None:
        if self.settings.contains(_key(path)):
            self.settings.remove(_key(path))
            self.settings.sync()

    def _entry(self, path: str) -> Optional[dict]:
        raw = self.settings.value(_key(path))
        if not isinstance(raw, str):
            return None
        try:
            entry = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(entry, dict) or entry.get("path") != os.path.abspath(path) \
                or not isinstance(entry.get("marks"), list):
            return None
        return entry

    def _prune(self) -> None:
        self.settings.beginGroup(GROUP)
        try:
            keys = self.settings.childKeys()
            if len(keys) <= MAX_FILES:
                return
            ages = []
            for k in keys:
                try:
                    saved = float(json.loads(self.settings.value(k)).get("saved", 0))
                except (TypeError, ValueError, AttributeError):
                    saved = 0.0
                ages.append((saved, k))
            for _saved, k in sorted(ages)[:len(keys) - MAX_FILES]:
                self.settings.remove(k)
        finally:
            self.settings.endGroup()
